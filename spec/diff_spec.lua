-- Differential tests against nvcc: CUDA C kernels written for the purpose
-- (spec/fixtures/cuda/diff_*.cu, compiled by spec/fixtures/cuda/build.sh
-- for sm_80 and sm_90a) are loaded with pyptx.load_ptx, run on the
-- emulator on random non-zero inputs plus edge values, and every output is
-- compared with a result computed here from the CUDA semantics.
-- LUAPTX_DIFF_DEVICE=cuda runs the same specs on a GPU (to check the
-- references themselves against the hardware).
-- oracle: nvcc: the kernels run are nvcc's PTX of CUDA C (spec/fixtures/cuda/diff_*.cu); the references follow the CUDA semantics
local ffi = require "ffi"
local bit = require "bit"
local pyptx = require "pyptx"
local tensor = require "pyptx.runtime.tensor"
local H = require "spec.helpers"

local types = pyptx.types
local ARCHS = { "sm80", "sm90a" }

local emu, load = H.diff_device, H.nvcc_ptx

local rng, rand_s32, rand_f32, rand_f64 = H.rng, H.rand_s32, H.rand_f32, H.rand_f64

local input, output = H.diff_input, H.diff_output

local u32 = H.u32
local s32 = bit.tobit

--- Compare got[k * n + t] with want(k, t) for k in 0..K-1, t in 0..n-1;
-- eq(got, want) decides equality (default ==); fails with the first
-- mismatch, naming the kernel, the output index and the thread.
local function compare(what, got, K, n, want, eq, show)
  local bad, msgs, seen = 0, {}, {}
  for k = 0, K - 1 do
    for t = 0, n - 1 do
      local g, w = got[k * n + t], want(k, t)
      local ok
      if eq then ok = eq(g, w, k, t) else ok = g == w end
      if not ok then
        bad = bad + 1
        if not seen[k] and #msgs < 6 then
          seen[k] = true
          msgs[#msgs + 1] = ("%s: output %d, thread %d: got %s, expected %s%s"):format(what, k, t, tostring(g), tostring(w),
            show and (" (" .. show(t) .. ")") or "")
        end
      end
    end
  end
  assert(bad == 0, table.concat(msgs, "\n") .. (" [%d mismatches]"):format(bad))
end

-- ---------------------------------------------------------------- warps

--- Source lane of a CUDA shuffle with a width (or nil: own value).
local function shfl_src(mode, lane, b, width)
  local seg = lane - lane % width
  if mode == "idx" then return seg + b % width end
  if mode == "up" then return lane - b >= seg and lane - b or nil end
  if mode == "down" then return lane + b < seg + width and lane + b or nil end
  local j = bit.bxor(lane, b)
  return j < seg + width and j or nil
end

for _, arch in ipairs(ARCHS) do
  describe("nvcc " .. arch .. " warp intrinsics", function()
    local n = 256
    local edges = { 12345, -1, 0x7fffffff, -0x80000000, 1, 4, 12, 8 }
    local vals = rand_s32(n, 11, nil)
    for i = 1, #edges do vals[32 + i * 3] = edges[i] end
    --- vals of the lane l of thread t's warp.
    local function at(t, l) return vals[t - t % 32 + l + 1] end

    it("shuffles with widths (idx, up, down, xor, 64-bit, partial mask)", function()
      local mod = load("diff_warp", arch)
      local out = output(17 * n, types.s32)
      mod.shfl_widths { grid = 2, block = 128, args = { input(vals, types.s32), out, n }, device = emu() }
      local cases = {
        { "idx", function() return 3 end, 8 }, { "idx", function(v) return bit.band(v, 63) end, 16 },
        { "idx", function() return 37 end, 32 }, { "up", 3, 8 }, { "up", 1, 32 }, { "up", 5, 4 },
        { "down", 2, 4 }, { "down", 5, 16 }, { "down", 31, 32 }, { "bfly", 1, 2 }, { "bfly", 6, 8 },
        { "bfly", 16, 16 }, { "bfly", 12, 8 }, { "down", 1, 2 },
      }
      compare("shfl_widths", out:to_host(), 17, n, function(k, t)
        local lane, v = t % 32, vals[t + 1]
        local c = cases[k + 1]
        if c then
          local b = type(c[2]) == "function" and c[2](v) or c[2]
          local src = shfl_src(c[1], lane, b, c[3])
          return src and at(t, src) or v
        end
        local src = bit.bxor(lane, 9)
        if k == 14 then return s32(at(t, src) * 3) end
        if k == 15 then return at(t, src) end
        return lane % 2 == 1 and at(t, bit.bxor(lane, 2)) or 0
      end)
    end)

    it("votes, activemask and match in divergent code", function()
      local mod = load("diff_warp", arch)
      local out = output(13 * n, types.s32)
      mod.votes { grid = 2, block = 128, args = { input(vals, types.s32), out, n }, device = emu() }
      compare("votes", out:to_host(), 13, n, function(k, t)
        local v = vals[t + 1]
        local function mask(pred)
          local m = 0
          for l = 0, 31 do if pred(at(t, l)) then m = m + 2 ^ l end end
          return s32(m)
        end
        local function b(x) return x and 1 or 0 end
        local active = mask(function(w) return bit.band(w, 4) ~= 0 end)
        local inside = bit.band(v, 4) ~= 0
        local eq1 = mask(function(w) return bit.band(w, 1) == bit.band(v, 1) end) == -1
        local want = {
          mask(function(w) return w > 0 end),
          b(mask(function(w) return w ~= 12345 end) == -1),
          b(mask(function(w) return w > 0 end) == -1),
          b(mask(function(w) return w > 0 end) ~= 0),
          b(mask(function(w) return w == 12345 end) ~= 0),
          inside and mask(function(w) return bit.band(w, 4) ~= 0 and bit.band(w, 8) ~= 0 end) or 0,
          inside and active or 0,
          inside and mask(function(w) return bit.band(w, 4) ~= 0 and bit.band(w, 3) == bit.band(v, 3) end) or 0,
          mask(function(w) return bit.band(w, 7) == bit.band(v, 7) end),
          -1, 1,
          eq1 and -1 or 0, b(eq1),
        }
        return want[k + 1]
      end, nil, function(t) return ("in %d"):format(vals[t + 1]) end)
    end)

    it("redux.sync (add, min, max signed and unsigned, and, or, xor, partial masks)", function()
      local mod = load("diff_warp", arch)
      local out = output(10 * n, types.s32)
      mod.reduxes { grid = 2, block = 128, args = { input(vals, types.s32), out, n }, device = emu() }
      compare("reduxes", out:to_host(), 10, n, function(k, t)
        local lane = t % 32
        local function fold(f, init, lo, hi)
          local acc = init
          for l = lo or 0, hi or 31 do acc = f(acc, at(t, l)) end
          return acc
        end
        local add = function(a, x) return (a + u32(x)) % 4294967296 end
        local umin = function(a, x) return math.min(a, u32(x)) end
        local umax = function(a, x) return math.max(a, u32(x)) end
        local want = {
          s32(fold(add, 0)), s32(fold(umin, 2 ^ 32)), s32(fold(umax, 0)),
          fold(math.min, 2 ^ 31), fold(math.max, -2 ^ 31),
          fold(function(a, x) return bit.band(a, bit.bor(x, 0x01010101)) end, -1),
          fold(function(a, x) return bit.bor(a, bit.band(x, 0x0f0f0f0f)) end, 0),
          fold(bit.bxor, 0),
          lane < 20 and s32(fold(add, 0, 0, 19)) or 0,
          lane >= 7 and fold(math.min, 2 ^ 31, 7, 31) or 0,
        }
        return want[k + 1]
      end)
    end)
  end)
end

-- ---------------------------------------------------------------- atomics

--- Sorted copy of a list.
local function sorted(t)
  local c = {}
  for i, v in ipairs(t) do c[i] = v end
  table.sort(c)
  return c
end

--- The returns of a chain of atomic updates are consistent: the multiset
-- {init} + {step(r_i, v_i)} equals {r_i} + {final}.
local function chain_ok(init, final, rets, vals, step)
  local a, b = { init }, { final }
  for i = 1, #rets do a[#a + 1], b[#b + 1] = step(rets[i], vals[i]), rets[i] end
  a, b = sorted(a), sorted(b)
  for i = 1, #a do if a[i] ~= b[i] then return false, ("at sorted index %d: %s vs %s"):format(i, tostring(a[i]), tostring(b[i])) end end
  return true
end

for _, arch in ipairs(ARCHS) do
  describe("nvcc " .. arch .. " atomics", function()
    local n = 256
    local vals = rand_s32(n, 23, { 1000, -1000, 77, -5 }, function(x) return x % 2001 - 1000 end)
    for i = 1, n do if vals[i] == 0 then vals[i] = 3 end end

    it("global int, unsigned, 64-bit, float and double atomics and CAS loops", function()
      local mod = load("diff_atomic", arch)
      local gi = input({ 0, 0x7fffffff, -0x80000000, 99, 0, -50, -1, -1, -1, -1, -1, -1, -1, -1 }, types.s32)
      local gu = input({ 0, 0xffffffff, 0, 0, 0, 0xffffffff, 0, 0 }, types.u32)
      local gf = input({ 0.5, 0 }, types.f32)
      local g64 = tensor.from_ffi(ffi.new("uint64_t[3]", { 0, 0x8000000000000000ULL, 0xffffffffffffffffULL }), { 3 }, types.u64, emu())
      local gd = input({ 0.25 }, types.f64)
      local ret = output(7 * n, types.s32)
      mod.atomics_global { grid = 4, block = 64, args = { input(vals, types.s32), gi, gu, gf, g64, gd, ret, n }, device = emu() }
      local r, I, U, F = ret:to_host(), gi:to_host(), gu:to_host(), gf:to_host()
      local L, D = g64:to_host(), gd:to_host()
      local function col(k) local c = {} for t = 0, n - 1 do c[t + 1] = r[k * n + t] end return c end
      local sum, mn, mx, umn, umx, band, bor, bxor, fsum, l64, lmax, lmin, dsum, cas = 0, 2 ^ 31, -2 ^ 31, 2 ^ 32, 0, -1, 0, 0, 0.5, 0ULL, nil, nil, 0.25, -50
      for _, v in ipairs(vals) do
        sum, mn, mx = sum + v, math.min(mn, v), math.max(mx, v)
        umn, umx = math.min(umn, u32(v)), math.max(umx, u32(v))
        band, bor, bxor = bit.band(band, bit.bor(v, 0xff00ff00)), bit.bor(bor, bit.band(v, 0x00f000f0)), bit.bxor(bxor, v)
        fsum = fsum + v * 0.25
        l64 = l64 + ffi.cast("uint64_t", ffi.cast("int64_t", v)) * 2 ^ 20
        local p = ffi.cast("int64_t", v) * 1000000007
        if not lmax or p > lmax then lmax = p end
        local q = ffi.cast("uint64_t", u32(v))
        if not lmin or q < lmin then lmin = q end
        dsum, cas = dsum + v * 0.5, math.max(cas, v * 7)
      end
      assert.same({ sum, mn, mx, -sum, cas }, { I[0], I[1], I[2], I[4], I[5] })
      assert.same({ s32(sum), s32(umn), s32(umx), s32(band), s32(bor), s32(bxor) },
        { s32(U[0]), s32(U[1]), s32(U[2]), s32(U[5]), s32(U[6]), s32(U[7]) })
      assert.equal(fsum, F[0])
      assert.same({ l64, ffi.cast("uint64_t", lmax), lmin }, { L[0], L[1], L[2] })
      assert.equal(dsum, D[0])
      -- returned old values form one chain of updates
      assert(chain_ok(0, I[0], col(0), vals, function(o, v) return o + v end))
      assert(chain_ok(99, I[3], col(1), vals, function(_, v) return v end))
      assert(chain_ok(0, s32(U[0]), col(2), vals, function(o, v) return s32(o + v) end))
      assert(chain_ok(0, U[3], col(3), vals, function(o) return o >= 17 and 0 or o + 1 end))
      assert.equal(n % 18, U[3])
      assert(chain_ok(0, U[4], col(4), vals, function(o) return (o == 0 or o > 13) and 13 or o - 1 end))
      local fb = ffi.new("union { float f; int32_t i; }")
      local fr = {}
      for t = 0, n - 1 do fb.i = r[5 * n + t]; fr[t + 1] = fb.f end
      assert(chain_ok(0.5, F[0], fr, vals, function(o, v) return o + v * 0.25 end))
      assert.is_true(F[1] * 4 == math.floor(F[1] * 4))
      -- atomicCAS(&gi[6 + (t & 7)], -1, t): one winner per slot
      for s = 0, 7 do
        local winner
        for t = s, n - 1, 8 do
          local o = r[6 * n + t]
          if o == -1 then assert.is_nil(winner, "two CAS winners"); winner = t else assert.equal(I[6 + s], o) end
        end
        assert.equal(winner, I[6 + s])
      end
    end)

    it("shared atomics (per CTA), float sums and CAS loops", function()
      local mod = load("diff_atomic", arch)
      local blocks, bs = 2, 128
      local out = output(3 * n + 16 * blocks, types.s32)
      local fout = output(blocks, types.f32)
      mod.atomics_shared { grid = blocks, block = bs, args = { input(vals, types.s32), out, fout, n }, device = emu() }
      local o, f = out:to_host(), fout:to_host()
      for cta = 0, blocks - 1 do
        local vs, r0, r3, r4 = {}, {}, {}, {}
        local si = { 0, 0x7fffffff, -0x80000000, 0, 0 }
        local su = { 0, 0xffffffff, 0, 0, 0, 0xffffffff, 0, 0 }
        local fs = 0
        for t = 0, bs - 1 do
          local g = cta * bs + t
          local v = vals[g + 1]
          vs[t + 1], r0[t + 1], r3[t + 1], r4[t + 1] = v, o[g], o[n + g], o[2 * n + g]
          si[1], si[2], si[3] = si[1] + v, math.min(si[2], v), math.max(si[3], v)
          si[5] = bit.bxor(si[5], v + t)
          su[1], su[2], su[3] = u32(su[1] + v), math.min(su[2], u32(v)), math.max(su[3], u32(v))
          su[5] = (su[5] == 0 or su[5] > 5) and 5 or su[5] - 1
          su[6], su[7], su[8] = u32(bit.band(su[6], bit.bor(v, 0x0ff00ff0))), u32(bit.bor(su[7], bit.band(v, 0x0f00000f))), u32(bit.bxor(su[8], v))
          fs = fs + v * 0.125
        end
        local base = 3 * n + cta * 16
        local got_si, got_su = {}, {}
        for i = 0, 7 do got_si[i + 1], got_su[i + 1] = o[base + i], u32(o[base + 8 + i]) end
        assert.same({ si[1], si[2], si[3], si[5] }, { got_si[1], got_si[2], got_si[3], got_si[5] })
        su[4] = bs % 10
        assert.same(su, got_su)
        assert.equal(fs, f[cta])
        assert(chain_ok(0, got_si[1], r0, vs, function(x, v) return x + v end))
        assert(chain_ok(0, got_si[4], r3, vs, function(_, v) return v end))
        assert(chain_ok(0, got_su[4], r4, vs, function(x) return x >= 9 and 0 or x + 1 end))
      end
    end)
  end)
end

-- ---------------------------------------------------------------- control flow

--- diff_control.cu's divergence() for one input, in Lua.
local function divergence_ref(v)
  local acc = 0
  local trips = bit.band(v, 15) + 1
  for i = 0, trips - 1 do
    if bit.band(bit.arshift(v, i), 1) == 1 then
      for j = 0, bit.band(i, 3) do
        if j ~= 2 then
          acc = u32(acc * 31 + i * 7 + j)
          if acc % 11 == 3 then break end
        end
      end
    elseif i % 3 == 0 then
      acc = u32(bit.bxor(acc, bit.lshift(v, bit.band(i, 7))))
    else
      local w = v
      while w > 3 do
        w = bit.band(w, 1) == 1 and (w - w % 3) / 3 or bit.arshift(w, 2)
        acc = u32(acc + w)
      end
    end
    if acc > 0xf0000000 then break end
  end
  local s
  local c = bit.band(v, 7)
  if c == 0 then s = v + 1
  elseif c == 1 then s = s32(v * 2) + 5
  elseif c == 2 then s = 5
  elseif c == 5 then s = -v
  else s = 9 end
  return s32(acc), s32(s)
end

for _, arch in ipairs(ARCHS) do
  describe("nvcc " .. arch .. " control flow", function()
    local n = 256
    local vals = rand_s32(n, 31, { 12345, -1, 0x7fffffff, -0x80000000, 7, 15, 3 })

    it("nested divergent branches, loops with break/continue, switch fallthrough", function()
      local mod = load("diff_control", arch)
      local out = output(2 * n, types.s32)
      mod.divergence { grid = 2, block = 128, args = { input(vals, types.s32), out, n }, device = emu() }
      compare("divergence", out:to_host(), 2, n, function(k, t)
        local a, s = divergence_ref(vals[t + 1])
        return k == 0 and a or s
      end, nil, function(t) return "in " .. vals[t + 1] end)
    end)

    it("__syncthreads, __syncthreads_count/and/or and named barriers", function()
      local mod = load("diff_control", arch)
      local out = output(5 * n, types.s32)
      mod.barriers { grid = 2, block = 128, args = { input(vals, types.s32), out, n }, device = emu() }
      compare("barriers", out:to_host(), 5, n, function(k, g)
        local base, t = g - g % 128, g % 128
        local function v(i) return vals[base + i + 1] end
        local function count(p) local c = 0 for i = 0, 127 do if p(v(i)) then c = c + 1 end end return c end
        if k == 0 then return v(127 - t) end
        if k == 1 then return count(function(x) return x > 0 end) end
        if k == 2 then return count(function(x) return x ~= 0 end) == 128 and 1 or 0 end
        if k == 3 then return count(function(x) return x == 12345 end) > 0 and 1 or 0 end
        -- stage[64 + i] = 3 v(i) + 3 v(63 - i) for consumer i = t - 64
        local function x(i) return s32(v(i) * 3 + v(63 - i) * 3) end
        if t < 64 then return x(t) end
        return x(191 - t - 64)
      end)
    end)
  end)
end

-- ---------------------------------------------------------------- integers

local U64, I64 = ffi.typeof("uint64_t"), ffi.typeof("int64_t")
local M32 = 0xffffffffULL

--- High 64 bits of the unsigned 128-bit product of two uint64 values.
local function umulhi64(a, b)
  a, b = U64(a), U64(b)
  local a0, a1, b0, b1 = bit.band(a, M32), bit.rshift(a, 32), bit.band(b, M32), bit.rshift(b, 32)
  local p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
  local mid = bit.rshift(p00, 32) + bit.band(p01, M32) + bit.band(p10, M32)
  return p11 + bit.rshift(p01, 32) + bit.rshift(p10, 32) + bit.rshift(mid, 32)
end

--- High 64 bits of the signed 128-bit product of two int64 values.
local function mulhi64(a, b)
  local h = umulhi64(a, b)
  if I64(a) < 0 then h = h - U64(b) end
  if I64(b) < 0 then h = h - U64(a) end
  return I64(h)
end

--- Bit reversal of a 32-bit value.
local function brev32(x)
  local r = 0
  for i = 0, 31 do if bit.band(x, bit.lshift(1, i)) ~= 0 then r = bit.bor(r, bit.lshift(1, 31 - i)) end end
  return r
end

--- Number of set bits of a 32-bit value.
local function popc32(x)
  local c = 0
  for i = 0, 31 do if bit.band(x, bit.lshift(1, i)) ~= 0 then c = c + 1 end end
  return c
end

--- Leading zeros of a 32-bit value.
local function clz32(x)
  for i = 31, 0, -1 do if bit.band(x, bit.lshift(1, i)) ~= 0 then return 31 - i end end
  return 32
end

--- 1 + index of the lowest set bit (0 when none).
local function ffs32(x)
  for i = 0, 31 do if bit.band(x, bit.lshift(1, i)) ~= 0 then return i + 1 end end
  return 0
end

--- Truncating division and C remainder of signed 32-bit values (PTX: wraps at INT_MIN / -1).
local function sdiv32(x, y)
  if y == -1 then return s32(-x), 0 end
  local q = x / y
  q = q < 0 and math.ceil(q) or math.floor(q)
  return q, x - q * y
end

--- PTX prmt (default mode) of a, b with selector c.
local function prmt(a, b, c)
  local r = 0
  for i = 0, 3 do
    local sel = bit.band(bit.rshift(c, 4 * i), 15)
    local src = bit.band(sel, 7)
    local byte = bit.band(bit.rshift(src < 4 and a or b, 8 * (src % 4)), 255)
    if sel >= 8 then byte = byte >= 128 and 255 or 0 end
    r = bit.bor(r, bit.lshift(byte, 8 * i))
  end
  return r
end

--- Funnel shifts (hi:lo) by n: left gives the high word, right the low word.
local function funnel(lo, hi, n, left, clamp)
  n = clamp and math.min(u32(n), 32) or bit.band(n, 31)
  local v = bit.bor(bit.lshift(U64(u32(hi)), 32), U64(u32(lo)))
  if left then return s32(bit.rshift(bit.lshift(v, n), 32)) end
  return s32(bit.band(bit.rshift(v, n), M32))
end

--- Sign-extend the low b bits of x.
local function sext(x, b) return bit.arshift(bit.lshift(x, 32 - b), 32 - b) end

--- Expected 32-bit int_ops results for inputs x, y.
local function int_ref(x, y)
  local ux, uy = u32(x), u32(y)
  local q, r = 0, 0
  if y ~= 0 then q, r = sdiv32(x, y) end
  local uq, ur = 0, 0
  if uy ~= 0 then uq, ur = math.floor(ux / uy), ux % uy end
  local sh, sh6 = bit.band(y, 31), bit.band(y, 63)
  local diff = math.abs(x - y)
  return {
    s32(q), s32(r), s32(uq), s32(ur),
    s32(tonumber(bit.arshift(I64(x) * y, 32))), s32(tonumber(bit.rshift(U64(ux) * uy, 32))),
    s32(tonumber(bit.band(I64(sext(x, 24)) * sext(y, 24), M32))),
    s32(tonumber(bit.band(U64(bit.band(x, 0xffffff)) * bit.band(y, 0xffffff), M32))),
    brev32(x), clz32(x), popc32(x), ffs32(x),
    prmt(x, y, bit.band(y, 0x7777)), prmt(x, y, bit.band(y, 0x7777)), -- CUDA's __byte_perm uses 3 selector bits
    funnel(x, y, x, true, false), funnel(x, y, x, true, true),
    funnel(x, y, x, false, false), funnel(x, y, x, false, true),
    bit.lshift(x, sh), bit.arshift(x, sh), s32(bit.rshift(x, sh)),
    s32(diff + 7), s32(math.abs(ux - uy) + 7),
    math.floor((x + y) / 2), math.floor((x + y + 1) / 2), s32(math.floor((ux + uy) / 2)), s32(math.floor((ux + uy + 1) / 2)),
    x == -2 ^ 31 and x or math.abs(x), math.min(x, y), s32(math.max(ux, uy)),
    s32(bit.band(bit.rshift(x, bit.band(y, 31)), bit.lshift(1, bit.band(x, 15)) - 1)),
    bit.arshift(bit.lshift(x, 8), 20),
    bit.bor(bit.band(x, bit.bnot(0xff00)), bit.lshift(bit.band(y, 0xff), 8)),
    s32(tonumber(bit.band(U64(ux) * 2654435761 + uy, M32))),
    sext(x, 16) + sext(y, 8), bit.band(x, 0xffff) * bit.band(y, 0xff),
    sh6 >= 32 and 0 or bit.lshift(x, sh6), sh6 >= 32 and (x < 0 and -1 or 0) or bit.arshift(x, sh6),
    sh6 >= 32 and 0 or s32(bit.rshift(x, sh6)),
  }
end

--- Expected 64-bit int_ops results for inputs x, y (int64 cdata).
local function int64_ref(x, y)
  local X = bit.bor(bit.lshift(I64(x), 32), I64(u32(y)))
  local Y = I64(y)
  local UX, UY = U64(X), U64(I64(x)) * 977
  local function clz64(v) for i = 63, 0, -1 do if bit.band(v, bit.lshift(1ULL, i)) ~= 0 then return 63 - i end end return 64 end
  local function ffs64(v) for i = 0, 63 do if bit.band(v, bit.lshift(1ULL, i)) ~= 0 then return i + 1 end end return 0 end
  local function popc64(v) local c = 0 for i = 0, 63 do if bit.band(v, bit.lshift(1ULL, i)) ~= 0 then c = c + 1 end end return c end
  local function brev64(v)
    local r = 0ULL
    for i = 0, 63 do if bit.band(v, bit.lshift(1ULL, i)) ~= 0 then r = bit.bor(r, bit.lshift(1ULL, 63 - i)) end end
    return r
  end
  local sh = bit.band(y, 63)
  return {
    Y ~= 0 and X / Y or 0LL, Y ~= 0 and X % Y or 0LL,
    UY ~= 0 and I64(UX / UY) or 0LL, UY ~= 0 and I64(UX % UY) or 0LL,
    mulhi64(X, Y * 12345), I64(umulhi64(UX, UY)),
    I64(x) * y, I64(U64(u32(x)) * u32(y)),
    I64(brev64(UX)), I64(clz64(UX)), I64(popc64(UX)), I64(ffs64(UX)),
    bit.arshift(X, sh), I64(bit.rshift(UX, sh)), bit.lshift(X, sh),
  }
end

for _, arch in ipairs(ARCHS) do
  describe("nvcc " .. arch .. " integer corner cases", function()
    local n = 256
    local xs = rand_s32(n, 41, { -0x80000000, 0x7fffffff, -7, 7, 0, 1, 1, -1, -8, 0x12345678, -0x80000000, 5, 0x7fffffff, -1, 0xff })
    local ys = rand_s32(n, 43, { -1, -1, 2, -2, 5, 31, 32, -31, 63, 0x1234, 1, 0, 0x7fffffff, -0x80000000, 33 })
    for i = 20, 60 do ys[i] = bit.band(ys[i], 0xff) - 128 end -- small divisors and shifts of all sizes

    it("int_ops: division, mulhi, mul24, bit ops, prmt, funnel shifts, sad, shifts >= 32", function()
      local mod = load("diff_int", arch)
      local K, J = 39, 15
      local out, out64 = output(K * n, types.s32), output(J * n, types.s64)
      mod.int_ops { grid = 2, block = 128, args = { input(xs, types.s32), input(ys, types.s32), out, out64, n }, device = emu() }
      local refs = {}
      for t = 0, n - 1 do refs[t] = int_ref(xs[t + 1], ys[t + 1]) end
      local show = function(t) return ("x = %d, y = %d"):format(xs[t + 1], ys[t + 1]) end
      compare("int_ops", out:to_host(), K, n, function(k, t) return refs[t][k + 1] end, nil, show)
      for t = 0, n - 1 do refs[t] = int64_ref(xs[t + 1], ys[t + 1]) end
      compare("int_ops (64-bit)", out64:to_host(), J, n, function(k, t) return refs[t][k + 1] end, nil, show)
    end)
  end)
end

-- ---------------------------------------------------------------- floats

local INF, NAN = math.huge, 0 / 0
local F32 = { p = 24, emin = -126, emax = 127 }
local FLT_MAX = (2 - 2 ^ -23) * 2 ^ 127
local fbits = ffi.new("union { float f; uint32_t u; int32_t i; }")

--- The float with bit pattern u.
local function from_bits(u) fbits.u = u; return fbits.f end

--- A Lua number rounded to f32 (nearest even).
local function f32(x) fbits.f = x; return fbits.f end

--- Round hi + lo (lo: a tiny correction, only its sign matters) to a binary
-- format with p significant bits, in mode "rn" "rz" "ru" or "rd".
local function round_to(hi, lo, mode, fmt)
  if hi ~= hi or hi == INF or hi == -INF then return hi end
  if hi == 0 then
    if lo == 0 then return hi end
    hi, lo = lo, 0
  end
  local s = hi < 0 and -1 or 1
  local ah, al = hi * s, lo * s
  local _, e = math.frexp(ah)
  e = e - 1
  if al < 0 and ah == 2 ^ e then e = e - 1 end
  if e < fmt.emin then e = fmt.emin end
  local q = 2 ^ (e - fmt.p + 1)
  local nq = ah / q
  local L = math.floor(nq)
  local rem, class = nq - L
  if rem == 0 then
    if al == 0 then class = "exact" elseif al > 0 then class = "lt" else L, class = L - 1, "gt" end
  elseif rem < 0.5 then class = "lt"
  elseif rem > 0.5 then class = "gt"
  else class = al > 0 and "gt" or al < 0 and "lt" or "eq" end
  local R = L
  if class ~= "exact" then
    if mode == "rn" then
      if class == "gt" or (class == "eq" and L % 2 == 1) then R = L + 1 end
    elseif (mode == "ru" and s > 0) or (mode == "rd" and s < 0) then
      R = L + 1
    end
  end
  local v = R * q
  local maxf = (2 - 2 ^ (1 - fmt.p)) * 2 ^ fmt.emax
  if v > maxf then
    local to_inf = mode == "rn" or (mode == "ru" and s > 0) or (mode == "rd" and s < 0)
    v = to_inf and INF or maxf
  end
  return s * v
end

--- Error-free sum: a + b = s + e exactly.
local function two_sum(a, b)
  local s = a + b
  local bb = s - a
  return s, (a - (s - bb)) + (b - bb)
end

--- Split a double into a 26-bit high part and the rest.
local function split(a)
  local c = 134217729 * a
  local h = c - (c - a)
  return h, a - h
end

--- x / y in double plus the sign of its error.
local function div_parts(x, y)
  local q = x / y
  if q ~= q or q == INF or q == -INF or q == 0 or y == INF or y == -INF then return q, 0 end
  local qh, ql = split(q)
  local r = (x - qh * y) - ql * y
  return q, r / y
end

--- sqrt(x) in double plus the sign of its error.
local function sqrt_parts(x)
  local q = math.sqrt(x)
  if q ~= q or q == INF or q == 0 then return q, 0 end
  local qh, ql = split(q)
  return q, (((x - qh * qh) - 2 * qh * ql) - ql * ql) / (2 * q)
end

--- Flush an f32 subnormal to a signed zero.
local function flush(x)
  if x ~= 0 and x == x and math.abs(x) < 2 ^ -126 then return x < 0 and -0.0 or 0.0 end
  return x
end

--- Round to an integer: mode "rn" (nearest even), "rz", "ru", "rd".
local function round_int(x, mode)
  if mode == "rz" then return x < 0 and math.ceil(x) or math.floor(x) end
  if mode == "ru" then return math.ceil(x) end
  if mode == "rd" then return math.floor(x) end
  local f = math.floor(x)
  local d = x - f
  if d > 0.5 or (d == 0.5 and f % 2 == 1) then f = f + 1 end
  return f
end

--- round_int keeping the sign of a zero result (rintf(-0.3) is -0).
local function round_fint(x, mode)
  local r = round_int(x, mode)
  if r == 0 and (x < 0 or 1 / x < 0) then return -0.0 end
  return r
end

--- Integer conversion with PTX saturation to [lo, hi]; NaN gives nanv
-- (default 0: the ISA's value from an f32 into 32 bits or fewer).
local function to_int(x, mode, lo, hi, nanv)
  if x ~= x then return nanv or 0 end
  local r = round_int(x, mode)
  if r < lo then return lo end
  if r > hi then return hi end
  return r
end

--- Same float (NaN matches NaN, zeros must agree in sign)?
local function same_float(g, w)
  if w ~= w then return g ~= g end
  if w == 0 then return g == 0 and 1 / g == 1 / w end
  return g == w
end

--- Expected float_ops results (ftz: the -ftz=true build).
local function float_ref(x, y, z, ftz)
  local F = ftz and flush or function(v) return v end
  local fx, fy, fz = F(x), F(y), F(z)
  local function r(hi, lo, mode) return F(round_to(hi, lo, mode, F32)) end
  --- An exact zero sum a + b is -0 in round-down unless both are +0 (IEEE 754).
  local function rsum(a, b, hi, lo, mode)
    if hi == 0 and lo == 0 and mode == "rd" and not (1 / a > 0 and 1 / b > 0) then return -0.0 end
    return r(hi, lo, mode)
  end
  local sh, sl = two_sum(fx, fy)
  local dh, dl = two_sum(fx, -fy)
  local p = fx * fy
  local fh, fl = two_sum(p, fz)
  local qh, ql = div_parts(fx, fy)
  local ax = math.abs(fx)
  local rh, rl = sqrt_parts(ax)
  local ch, cl = div_parts(1, fy)
  local sat = fx ~= fx and 0 or math.min(math.max(fx, 0), 1)
  local function minmax(f)
    if fx ~= fx then return fy end
    if fy ~= fy then return fx end
    if fx == 0 and fy == 0 then return "zero" end -- the sign of min(+0, -0) is not tested
    return f(fx, fy)
  end
  fbits.f = x
  local xb = fbits.i
  fbits.f = y
  local yb = fbits.i
  local xd, yd = fx, fy
  return {
    r(sh, sl, "rn"), r(sh, sl, "rz"), r(sh, sl, "ru"), rsum(fx, fy, sh, sl, "rd"), r(dh, dl, "rz"),
    r(p, 0, "rn"), r(p, 0, "rz"), r(p, 0, "ru"), r(p, 0, "rd"),
    r(fh, fl, "rn"), r(fh, fl, "rz"), r(fh, fl, "ru"), rsum(p, fz, fh, fl, "rd"),
    r(qh, ql, "rn"), r(qh, ql, "rz"), r(qh, ql, "ru"), r(qh, ql, "rd"),
    r(rh, rl, "rn"), r(rh, rl, "rz"), r(rh, rl, "ru"), r(rh, rl, "rd"),
    r(ch, cl, "rn"), r(ch, cl, "rz"),
    F(sat), minmax(math.min), minmax(math.max),
    (y < 0 or (y == 0 and 1 / y < 0) or (y ~= y and bit.band(yb, 0x80000000) ~= 0)) and -math.abs(x) or math.abs(x),
    F(-ax), "approx",
    round_to(yb, 0, "rz", F32), round_to(yb, 0, "ru", F32), round_to(yb, 0, "rd", F32),
    round_to(u32(yb), 0, "rn", F32), round_to(xb * 12345, 0, "rn", F32),
    r(xd * yd, 0, "rz"), r(xd * yd, 0, "ru"), r(xd * yd, 0, "rd"),
    r(xd / yd, 0, "rn"),
    round_fint(x, "rn"), round_fint(x, "rz"), F(round_fint(fx, "rd")), F(round_fint(fx, "ru")),
  }
end

--- Is got within the documented __fdividef accuracy of x / y?
local function fdividef_ok(g, x, y, ftz)
  if ftz then x, y = flush(x), flush(y) end
  local ay = math.abs(y)
  if x ~= x or y ~= y then return true end
  if ay > 2 ^ 126 and ay < 2 ^ 128 then
    if x == INF or x == -INF then return g ~= g end
    return g == 0
  end
  if ay < 2 ^ -126 or ay > 2 ^ 126 or x == INF or x == -INF then return true end
  local w = x / y
  if math.abs(w) >= FLT_MAX then return true end
  if ftz and math.abs(w) < 2 ^ -126 then return g == 0 or math.abs(g - w) <= 2 ^ -125 end
  local ulp = 2 ^ (math.max(select(2, math.frexp(math.abs(w))) - 24, -149))
  return math.abs(g - w) <= 2 * ulp
end

for _, arch in ipairs(ARCHS) do
  for _, ftz in ipairs { false, true } do
    local name = ftz and "diff_float_ftz" or "diff_float"
    describe("nvcc " .. arch .. (ftz and " -ftz=true" or "") .. " float rounding and conversion", function()
      local n = 256
      local TIE = 2 ^ -24
      local xs = rand_f32(n, 51, { 1, -1, FLT_MAX, -FLT_MAX, 1e-40, 2.5, NAN, INF, 0, -2.5, 1, 1.5, 3, 2 ^ -126, -0.0,
                                   2147483520, 1e-45, -3e-39, 7, 1e30 }, 20, 20)
      local ys = rand_f32(n, 53, { 3, 3, FLT_MAX, FLT_MAX, 3e-39, 2 ^ 127, 1, -INF, -0.0, 0.5, TIE, TIE, 0, 0.5, 1e-40,
                                   4294967296, -1e-45, 2 ^ -30, -2 ^ 126 * 1.5, 1e-30 }, 20, 20)
      local zs = rand_f32(n, 57, { 0.1, -0.1, -FLT_MAX, 0, 1e-45, 1, 2, 0, -0.0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, -1e30 }, 20, 20)

      it("float_ops: directed rounding of add/mul/fma/div/sqrt/rcp, sat, min/max, int<->float", function()
        local mod = load(name, arch)
        local K = 42
        local out = output(K * n, types.f32)
        mod.float_ops { grid = 2, block = 128, device = emu(),
                        args = { input(xs, types.f32), input(ys, types.f32), input(zs, types.f32), out, n } }
        local refs = {}
        for t = 0, n - 1 do refs[t] = float_ref(xs[t + 1], ys[t + 1], zs[t + 1], ftz) end
        compare("float_ops", out:to_host(), K, n, function(k, t) return refs[t][k + 1] end, function(g, w, _, t)
          if w == "approx" then return fdividef_ok(g, xs[t + 1], ys[t + 1], ftz) end
          if w == "zero" then return g == 0 end
          return same_float(g, w)
        end, function(t) return ("x = %.9g, y = %.9g, z = %.9g"):format(xs[t + 1], ys[t + 1], zs[t + 1]) end)
      end)

      it("float_to_int: f2i/d2i/f2ll rounding modes, NaN, infinities, out of range", function()
        local mod = load(name, arch)
        local vals = rand_f32(n, 59, { NAN, INF, -INF, 2 ^ 31, -2 ^ 31, 2147483520, 2.5, -2.5, 0.5, -0.5, 1.5, 3.5, 1e-40,
                                       -1e-40, 4294967296, 4294967040, -1, 1e20, -1e20, 2 ^ 63, 2 ^ 64, 255.5, -128.5,
                                       127.5, -0.0, 715827882.5, -715827883 }, 5, 40)
        local K, J = 11, 5
        local iout, lout = output(K * n, types.s32), output(J * n, types.s64)
        mod.float_to_int { grid = 2, block = 128, args = { input(vals, types.f32), iout, lout, n }, device = emu() }
        local S32, U32 = { -2 ^ 31, 2 ^ 31 - 1 }, { 0, 2 ^ 32 - 1 }
        local show = function(t) return ("x = %.9g"):format(vals[t + 1]) end
        compare("float_to_int", iout:to_host(), K, n, function(k, t)
          local x = vals[t + 1]
          if ftz then x = flush(x) end
          local d = x * 3
          local want = {
            to_int(x, "rn", S32[1], S32[2]), to_int(x, "rz", S32[1], S32[2]), to_int(x, "ru", S32[1], S32[2]),
            to_int(x, "rd", S32[1], S32[2]), s32(to_int(x, "rn", U32[1], U32[2])), s32(to_int(x, "rz", U32[1], U32[2])),
            to_int(x, "rz", S32[1], S32[2]), s32(to_int(x, "rz", U32[1], U32[2])),
            -- from an f64, NaN gives 1 << 31 (the ISA's cvt notes; F2I.F64 without .NTZ)
            to_int(d, "rn", S32[1], S32[2], -2 ^ 31), s32(to_int(d, "rz", U32[1], U32[2], 2 ^ 31)),
            sext(to_int(x, "rz", S32[1], S32[2]), 8),
          }
          return want[k + 1]
        end, nil, show)
        compare("float_to_int (64-bit)", lout:to_host(), J, n, function(k, t)
          local x = vals[t + 1]
          if ftz then x = flush(x) end
          local d = x * 3
          -- into 64 bits, NaN gives 1 << 63 (the ISA's cvt notes; F2I.S64 without .NTZ)
          local function s64(v, mode)
            if v ~= v then return -0x7fffffffffffffffLL - 1 end
            local r = round_int(v, mode)
            if r >= 2 ^ 63 then return 0x7fffffffffffffffLL end
            if r < -2 ^ 63 then return -0x7fffffffffffffffLL - 1 end
            return I64(r)
          end
          local function u64(v, mode)
            if v ~= v then return -0x7fffffffffffffffLL - 1 end
            local r = round_int(v, mode)
            if r >= 2 ^ 64 then return -1LL end
            if r <= 0 then return 0LL end
            return I64(U64(r))
          end
          local want = { s64(x, "rn"), s64(x, "rz"), u64(x, "rd"), s64(d, "ru"), u64(d, "rn") }
          return want[k + 1]
        end, nil, show)
      end)
    end)
  end
end

-- ---------------------------------------------------------------- f16 / bf16

local F16 = { p = 11, emin = -14, emax = 15, bias = 15, mbits = 10 }
local BF16 = { p = 8, emin = -126, emax = 127, bias = 127, mbits = 7 }

--- The value of 16-bit pattern h in fmt (F16 or BF16).
local function decode16(h, fmt)
  local s = bit.band(h, 0x8000) ~= 0 and -1 or 1
  local e = bit.band(bit.rshift(h, fmt.mbits), bit.lshift(1, 15 - fmt.mbits) - 1)
  local m = bit.band(h, bit.lshift(1, fmt.mbits) - 1)
  if e == bit.lshift(1, 15 - fmt.mbits) - 1 then return m == 0 and s * INF or NAN end
  if e == 0 then return s * m * 2 ^ (fmt.emin - fmt.mbits) end
  return s * (1 + m / 2 ^ fmt.mbits) * 2 ^ (e - fmt.bias)
end

--- The float value of a 32-bit pattern.
local function decode32(u) return from_bits(u) end

for _, arch in ipairs(ARCHS) do
  describe("nvcc " .. arch .. " f16 and bf16", function()
    local n = 256
    local xs = rand_f32(n, 61, { 65504, 65520, 65519.99, 6e-8, 2 ^ -25, 1 + 2 ^ -11, NAN, INF, -0.0, 3e38, 1e-39, -1.5,
                                 2 ^ -24 * 1.5, 1 + 2 ^ -8, -65536, 0.1 }, 20, 17)
    local ys = rand_f32(n, 67, { 65504, 16, -1, 1, 2 ^ -25, 2 ^ -11, 1, -INF, 0, 2, 1e-39, 1.5, 1, 2 ^ -8, 2, 0.2 }, 20, 17)
    local zs = rand_f32(n, 71, { 0, 1, 2, -6e-8, 0, 0, 0, 0, -0.0, 1, 0, 0, 0, 0, 0, 0.3 }, 20, 17)

    it("half_ops: conversions in all modes, scalar and packed arithmetic, sat, relu, NaN min/max", function()
      local mod = load("diff_half", arch)
      local K = 31
      local out = output(K * n, types.u32)
      mod.half_ops { grid = 2, block = 128, device = emu(),
                     args = { input(xs, types.f32), input(ys, types.f32), input(zs, types.f32), out, n } }
      local function h(v, mode) return round_to(v, 0, mode or "rn", F16) end
      local function b(v, mode) return round_to(v, 0, mode or "rn", BF16) end
      local function fma16(a, c, d, fmt)
        local hi, lo = two_sum(a * c, d)
        return round_to(hi, lo, "rn", fmt)
      end
      local function mx(a, c, nan)
        if a ~= a or c ~= c then
          if nan or (a ~= a and c ~= c) then return NAN end
          return a ~= a and c or a
        end
        if a == 0 and c == 0 then return "zero" end
        return nil
      end
      local refs = {}
      for t = 0, n - 1 do
        local x, y, z = xs[t + 1], ys[t + 1], zs[t + 1]
        local hx, hy, hz = h(x), h(y), h(z)
        local bx, by, bz = b(x), b(y), b(z)
        local sat = h(hx + hy)
        sat = sat ~= sat and 0 or math.min(math.max(sat, 0), 1)
        local relu = fma16(hx, hy, hz, F16)
        if relu == relu and relu < 0 then relu = 0 end
        if relu == 0 then relu = "zero" end -- relu(-0): the sign is not tested
        local hmax = mx(hx, hy) or math.max(hx, hy)
        local hmin = mx(hx, hy, true) or math.min(hx, hy)
        local bmax = mx(bx, by) or math.max(bx, by)
        local i = bit.arshift(bit.tobit((function() fbits.f = x return fbits.u end)()), 16)
        local slo, shi = h(hx + hz), h(hy + hx)
        local blo, bhi = b(bx + bz), b(by + bx)
        refs[t] = {
          { hx, F16 }, { h(x, "rz"), F16 }, { h(x, "ru"), F16 }, { h(x, "rd"), F16 }, { hx, 32 },
          { h(hx + hy), F16 }, { h(hx - hy), F16 }, { h(hx * hy), F16 }, { fma16(hx, hy, hz, F16), F16 },
          { sat, F16 }, { relu, F16 }, { hmax, F16 }, { hmin, F16 }, { -hx, F16 },
          { (hx < hy) and 1 or 0, "int" }, { h(i), F16 }, { to_int(hx, "rz", -2 ^ 31, 2 ^ 31 - 1), "int" },
          { { hx, hy }, F16 }, { { slo, shi }, F16 }, { { h(hx * hz), h(hy * hx) }, F16 },
          { { fma16(hx, hz, slo, F16), fma16(hy, hx, shi, F16) }, F16 },
          { bx, BF16 }, { b(x, "rz"), BF16 }, { bx, 32 },
          { b(bx + by), BF16 }, { b(bx * by), BF16 }, { fma16(bx, by, bz, BF16), BF16 }, { bmax, BF16 },
          { { bx, by }, BF16 }, { { blo, bhi }, BF16 }, { { fma16(bx, bz, blo, BF16), fma16(by, bx, bhi, BF16) }, BF16 },
        }
      end
      --- Does the output word g hold the expected value(s)?
      local function eq(g, w)
        local v, fmt = w[1], w[2]
        g = tonumber(g)
        if fmt == "int" then return s32(g) == v end
        local function one(bits, want, f)
          local got = f == 32 and decode32(bits) or decode16(bits, f)
          if want == "zero" then return got == 0 end
          return same_float(got, want)
        end
        if fmt == 32 then return one(g, v, 32) end
        if type(v) == "table" then
          return one(g % 65536, v[1], fmt) and one(math.floor(g / 65536), v[2], fmt)
        end
        return g < 65536 and one(g, v, fmt)
      end
      compare("half_ops", out:to_host(), K, n, function(k, t) return refs[t][k + 1] end, eq,
        function(t) return ("x = %.9g, y = %.9g, z = %.9g"):format(xs[t + 1], ys[t + 1], zs[t + 1]) end)
    end)
  end)
end

-- ---------------------------------------------------------------- special functions

--- One f32 ulp at |w| (subnormal spacing below 2^-126).
local function ulp32(w)
  w = math.abs(w)
  if w < 2 ^ -126 then return 2 ^ -149 end
  local _, e = math.frexp(w)
  return 2 ^ (e - 24)
end

--- A check of an approximate result: exact special values, else within
-- rel (relative), abs (absolute) or ulps of the exact value.
local function near(w, tol)
  w = f32(w)
  return function(g)
    if w ~= w then return g ~= g end
    if w == INF or w == -INF or w == 0 then return g == w and (w ~= 0 or 1 / g == 1 / w) end
    if g ~= g then return false end
    local err = math.abs(g - w)
    return err <= (tol.abs or 0) + (tol.rel or 0) * math.abs(w) + (tol.ulp or 0) * ulp32(w)
  end
end

--- Expected special_ops checks for input x (ftz: the -ftz=true build).
local function special_ref(x, ftz)
  local fx = ftz and flush(x) or x
  local out = ftz and flush or function(v) return v end
  local LOG2E, LN2 = f32(1.4426950408889634), f32(0.6931471805599453)
  local function ex2(v, fl) return fl and flush(2 ^ v) or 2 ^ v end
  local function lg2(v)
    if v ~= v or v < 0 then return NAN end
    if v == 0 then return -INF end
    return math.log(v) / math.log(2)
  end
  local function trig(f, v)
    if v ~= v or v == INF or v == -INF then return function(g) return g ~= g end end
    if math.abs(v) > math.pi then return function(g) return math.abs(g) <= 1 end end
    return near(f(v), { abs = 2 ^ -20.9 })
  end
  local function rsqrt(v)
    if v ~= v or v < 0 then return NAN end
    if v == 0 then return 1 / v end
    return 1 / math.sqrt(v)
  end
  local e = ex2(fx, ftz)
  local ee = f32(fx * LOG2E)
  local lg = lg2(fx)
  local lgt = { abs = 2 ^ -22, rel = 2 ^ -22 }
  local rh, rl = div_parts(1, fx)
  local sh, sl = sqrt_parts(fx)
  return {
    near(e, { ulp = 2 }), near(ex2(ee, ftz), { ulp = 2, rel = 2 ^ -22 }),
    near(lg, lgt), near(lg == lg and math.abs(lg) ~= INF and f32(f32(lg) * LN2) or lg * LN2, { abs = 2 ^ -21, rel = 2 ^ -21 }),
    trig(math.sin, fx), trig(math.cos, fx),
    near(out(rsqrt(fx)), { rel = 2 ^ -22.9 }),
    near(out(round_to(rh, rl, "rn", F32)), { ulp = 0 }),
    near(fx < 0 and NAN or (fx == 0 and fx or out(round_to(sh, sl, "rn", F32))), { ulp = 0 }),
    near(fx == 0 and 1 / x or 1 / x, { ulp = 1 }),
    near(x < 0 and NAN or math.sqrt(x), { rel = 2 ^ -23 }),
    near(x ~= x and NAN or (x == INF and 1 or x == -INF and -1 or x == 0 and x or math.tanh(x)), { rel = 2 ^ -10.9 }),
    near(ex2(flush(x), true), { ulp = 2 }),
    near(rsqrt(flush(x)), { rel = 2 ^ -22.9 }),
  }
end

for _, arch in ipairs(ARCHS) do
  for _, ftz in ipairs { false, true } do
    describe("nvcc " .. arch .. (ftz and " -ftz=true" or "") .. " approximate special functions", function()
      it("ex2, lg2, sin, cos, rsqrt, rcp, sqrt, tanh: documented error and special values", function()
        local n = 256
        local xs = rand_f32(n, 73, { 0, -0.0, INF, -INF, NAN, 1e-40, -1e-40, 128, -126, -149, -150, 1, 0.5, math.pi,
                                     -math.pi, 100, 1e30, -1, 2 ^ 126, 3e38, 1e-38, -130, 88.7, -87.3, 20, -20, 1e-30 }, 10, 7)
        local mod = load(ftz and "diff_special_ftz" or "diff_special", arch)
        local K = 14
        local out = output(K * n, types.f32)
        mod.special_ops { grid = 2, block = 128, args = { input(xs, types.f32), out, n }, device = emu() }
        local refs = {}
        for t = 0, n - 1 do refs[t] = special_ref(xs[t + 1], ftz) end
        compare("special_ops", out:to_host(), K, n, function(k, t) return refs[t][k + 1] end,
          function(g, w) return w(g) end, function(t) return ("x = %.9g"):format(xs[t + 1]) end)
      end)
    end)
  end
end

-- ---------------------------------------------------------------- f64 and 128-bit integers

local F64 = { p = 53, emin = -1022, emax = 1023 }
local DBL_MAX = (2 - 2 ^ -52) * 2 ^ 1023

--- Error-free product: a * b = p + e exactly (no overflow or underflow).
local function two_product(a, b)
  local p = a * b
  if p ~= p or p == INF or p == -INF or p == 0 then return p, 0 end
  for _, big in ipairs { a, b } do
    if math.abs(big) > 2 ^ 900 then
      -- scale the huge operand down so the splits cannot overflow
      local sp, se = two_product(big == a and a * 2 ^ -200 or a, big == a and b or b * 2 ^ -200)
      return sp * 2 ^ 200, se * 2 ^ 200
    end
  end
  local ah, al = split(a)
  local bh, bl = split(b)
  return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl
end

--- Directed rounding of a double result hi (the RN result) + lo; an RN
-- overflow of finite operands becomes DBL_MAX where the mode says so.
local function dround(hi, lo, mode, finite)
  if finite and (hi == INF or hi == -INF) then
    local s = hi > 0 and 1 or -1
    local to_inf = mode == "rn" or (mode == "ru" and s > 0) or (mode == "rd" and s < 0)
    return to_inf and hi or s * DBL_MAX
  end
  return round_to(hi, lo, mode, F64)
end

--- Expected double_ops results.
local function double_ref(x, y)
  local fin = x == x and y == y and math.abs(x) ~= INF and math.abs(y) ~= INF
  local sh, sl = two_sum(x, y)
  if sh ~= sh or math.abs(sh) == INF then sl = 0 end
  local dh, dl = two_sum(x, -y)
  if dh ~= dh or math.abs(dh) == INF then dl = 0 end
  local ph, pl = two_product(x, y)
  local q = x / y
  local ql = 0
  if q == q and math.abs(q) ~= INF and q ~= 0 and fin then
    local sx, sy = x, y
    if math.abs(x) < 2 ^ -900 and math.abs(y) < 2 ^ -900 then sx, sy = x * 2 ^ 200, y * 2 ^ 200 end
    local p, e = two_product(q, sy)
    ql = ((sx - p) - e) / sy
  end
  local ax = math.abs(x)
  local r = math.sqrt(ax)
  local rl = 0
  if r == r and r ~= INF and r ~= 0 then
    -- the residual's sign at a scale where the splits neither overflow nor underflow
    local sc = ax > 2 ^ 900 and 2 ^ -200 or ax < 2 ^ -900 and 2 ^ 200 or 1
    local rs = r * math.sqrt(sc)
    local p, e = two_product(rs, rs)
    rl = ((ax * sc - p) - e) / (2 * rs)
  end
  --- A non-zero exact result that rounds to zero in RN: directed modes give the smallest subnormal.
  local function tiny(hi, neg, mode)
    if hi ~= 0 or not fin or x == 0 or y == 0 then return nil end
    if mode == "ru" and not neg then return 2 ^ -1074 end
    if mode == "rd" and neg then return -2 ^ -1074 end
    return neg and -0.0 or 0.0
  end
  local neg = (x < 0) ~= (y < 0)
  local function dr(hi, lo, mode)
    local t = tiny(hi, neg, mode)
    if t then return t end
    return dround(hi, lo, mode, fin)
  end
  local function rsum(a, b, hi, lo, mode)
    if hi == 0 and lo == 0 and mode == "rd" and not (1 / a > 0 and 1 / b > 0) then return -0.0 end
    return dround(hi, lo, mode, fin)
  end
  local function minmax(f)
    if x ~= x then return y end
    if y ~= y then return x end
    if x == 0 and y == 0 then return "zero" end
    return f(x, y)
  end
  local xb = ffi.cast("int64_t *", ffi.new("double[1]", x))[0]
  local yb = ffi.cast("uint64_t *", ffi.new("double[1]", y))[0]
  local function i2d(v, mode)
    -- the exact integer as hi + lo in doubles, then directed rounding
    local hi = tonumber(v)
    local lo
    if ffi.istype(U64, v) then
      lo = hi == 2 ^ 64 and tonumber(ffi.cast("int64_t", v)) or tonumber(ffi.cast("int64_t", v - U64(hi)))
    else
      lo = hi == 2 ^ 63 and tonumber((v - 0x7fffffffffffffffLL) - 1) or tonumber(v - I64(hi))
    end
    return round_to(hi, lo, mode, F64)
  end
  local mix = ffi.new("union { double d; uint32_t w[2]; }")
  local ux = ffi.new("union { double d; uint32_t w[2]; }", { x })
  local uy = ffi.new("union { double d; uint32_t w[2]; }", { y })
  mix.w[1], mix.w[0] = ux.w[0], uy.w[1] -- __hiloint2double(hi = loint(x), lo = hiint(y))
  return {
    rsum(x, y, sh, sl, "rn"), rsum(x, y, sh, sl, "rz"), rsum(x, y, sh, sl, "ru"), rsum(x, y, sh, sl, "rd"),
    rsum(x, -y, dh, dl, "ru"),
    dr(ph, pl, "rn"), dr(ph, pl, "rz"), dr(ph, pl, "ru"), dr(ph, pl, "rd"),
    y == 0 and q or dr(q, ql, "rn"), y == 0 and q or dr(q, ql, "rz"), -- x / 0 is an exact infinity
    y == 0 and q or dr(q, ql, "ru"), y == 0 and q or dr(q, ql, "rd"),
    round_to(r, rl, "rn", F64), round_to(r, rl, "rz", F64), round_to(r, rl, "ru", F64), round_to(r, rl, "rd", F64),
    minmax(math.min), minmax(math.max),
    i2d(xb, "rz"), i2d(yb, "ru"), mix.d, f32(x),
  }
end

--- Expected int128_ops results for thread t.
local function int128_ref(a, b, t, n)
  local x, y = U64(a[t + 1]), U64(b[t + 1])
  local clo, chi = U64(b[(t + 3) % n + 1]), U64(a[(t + 1) % n + 1])
  local lo, hi = x * y, umulhi64(x, y)
  local plo = lo + clo
  local phi = hi + chi + ((plo < lo) and 1ULL or 0ULL)
  local ylo, yhi = bit.lshift(y, 60), bit.rshift(y, 4)
  local slo = plo - ylo
  local shi = phi - yhi - ((plo < ylo) and 1ULL or 0ULL)
  return { plo, phi, slo, shi, U64(bit.arshift(I64(shi), 13)) }
end

for _, arch in ipairs(ARCHS) do
  describe("nvcc " .. arch .. " f64 and 128-bit integers", function()
    local n = 256

    it("double_ops: directed rounding of add/mul/div/sqrt, min/max, conversions", function()
      local mod = load("diff_double", arch)
      local xs = rand_f64(n, 81, { 1, -1, DBL_MAX, -DBL_MAX, 2 ^ -1074, 2.5, NAN, INF, 0, -2.5, 1, 1.5, 3, 2 ^ -1022,
                                   -0.0, 1e300, 2 ^ 53 + 2, -7, 0.1 }, 60, 60)
      local ys = rand_f64(n, 83, { 3, 3, DBL_MAX, DBL_MAX, 2 ^ -1074, 1e-300, 1, -INF, -0.0, 0.5, 2 ^ -53, 2 ^ -53, 0,
                                   0.5, 1e-310, 1e10, 1, 0.3, 0.7 }, 60, 60)
      local K = 23
      local out = output(K * n, types.f64)
      mod.double_ops { grid = 2, block = 128, args = { input(xs, types.f64), input(ys, types.f64), out, n }, device = emu() }
      local refs = {}
      for t = 0, n - 1 do refs[t] = double_ref(xs[t + 1], ys[t + 1]) end
      compare("double_ops", out:to_host(), K, n, function(k, t) return refs[t][k + 1] end, function(g, w)
        if w == "zero" then return g == 0 end
        return same_float(g, w)
      end, function(t) return ("x = %.17g, y = %.17g"):format(xs[t + 1], ys[t + 1]) end)
    end)

    it("int128_ops: 128-bit multiply, add and subtract carry chains, shifts", function()
      local mod = load("diff_double", arch)
      local r = rng(89)
      local a, b = {}, {}
      for i = 1, n do
        a[i] = bit.bor(bit.lshift(U64(u32(r())), 32), U64(u32(r())))
        b[i] = bit.bor(bit.lshift(U64(u32(r())), 32), U64(u32(r())))
      end
      a[1], b[1] = 0xffffffffffffffffULL, 0xffffffffffffffffULL
      a[2], b[2] = 0ULL, 1ULL
      local ta = tensor.from_ffi(ffi.new("uint64_t[?]", n, a), { n }, types.u64, emu())
      local tb = tensor.from_ffi(ffi.new("uint64_t[?]", n, b), { n }, types.u64, emu())
      local out = output(5 * n, types.u64)
      mod.int128_ops { grid = 2, block = 128, args = { ta, tb, out, n }, device = emu() }
      local refs = {}
      for t = 0, n - 1 do refs[t] = int128_ref(a, b, t, n) end
      compare("int128_ops", out:to_host(), 5, n, function(k, t) return refs[t][k + 1] end)
    end)
  end)
end

-- ---------------------------------------------------------------- wide atomics

for _, arch in ipairs(ARCHS) do
  describe("nvcc " .. arch .. " f16, bf16 and 64-bit atomics", function()
    it("f16x2 / bf16x2 / f16 adds (exact sums), 64-bit CAS loops, exch, and, or, xor", function()
      local n = 256
      local vals = rand_s32(n, 29, { 8, -8, 1, -1 }, function(x) return x % 17 - 8 end)
      for i = 1, n do if vals[i] == 0 then vals[i] = 5 end end
      local mod = load("diff_atomic", arch)
      local h2 = input({ 0, 0 }, types.u32)
      local b2 = input({ 0 }, types.u32)
      local h = input({ 0 }, types.u16)
      local init = { 7ULL, 0ULL, 0xffffffffffffffffULL, 0ULL, 0x0123456789abcdefULL }
      local u64 = tensor.from_ffi(ffi.new("uint64_t[5]", init), { 5 }, types.u64, emu())
      local ret = output(n, types.u64)
      mod.atomics_wide { grid = 2, block = 128, args = { input(vals, types.s32), h2, b2, h, u64, ret, n }, device = emu() }
      local sum, pos, acc, band, bor, bxor = 0, 0, 7ULL, 0xffffffffffffffffULL, 0ULL, 0x0123456789abcdefULL
      for t = 0, n - 1 do
        local v = vals[t + 1]
        sum, pos = sum + v, pos + (v >= 0 and 1 or -1)
        acc = acc + bit.lshift(U64(I64(v)), 40)
        band = bit.band(band, bit.bnot(bit.lshift(1ULL, t % 64)))
        bor = bit.bor(bor, bit.lshift(1ULL, (t * 7) % 64))
        bxor = bit.bxor(bxor, U64(I64(v)) * 0x9E3779B97F4A7C15ULL)
      end
      local hw, bw = tonumber(h2:to_host()[0]), tonumber(b2:to_host()[0])
      assert.same({ sum, n }, { decode16(hw % 65536, F16), decode16(math.floor(hw / 65536), F16) })
      assert.same({ pos, n }, { decode16(bw % 65536, BF16), decode16(math.floor(bw / 65536), BF16) })
      assert.equal(sum, decode16(tonumber(h:to_host()[0]), F16))
      local U = u64:to_host()
      assert.same({ acc, band, bor, bxor }, { U[0], U[2], U[3], U[4] })
      local r, rets, news = ret:to_host(), {}, {}
      for t = 0, n - 1 do rets[t + 1], news[t + 1] = r[t], bit.lshift(U64(t), 33) end
      assert(chain_ok(0ULL, U[1], rets, news, function(_, v) return v end))
    end)
  end)
end

-- ---------------------------------------------------------------- calls, local memory, small ints

--- fib as diff_misc.cu computes it.
local function fib(k) if k < 2 then return k end return fib(k - 1) + fib(k - 2) end

--- Expected misc results for input x, bytes b0 (signed) and b1 (read unsigned).
local function misc_ref(x, b0, b1)
  local sh, sy = sext(x, 16), sext(bit.arshift(x, 16), 16)
  local q = sh / bit.bor(sy, 1)
  q = q < 0 and math.ceil(q) or math.floor(q)
  local function loc(i) return bit.bxor(x, i * 0x1111) end
  local p_b = f32(f32(x) * 0.5)
  fbits.f = p_b
  local pb_bits = fbits.i
  local pc = x / 7.0
  local pairsum = s32(s32(x * 3) + pb_bits + to_int(pc * 1000.0, "rz", -2 ^ 31, 2 ^ 31 - 1)) -- cvt.rzi saturates
  local c = bit.band(x, 15)
  local sw = ({ [0] = 11, s32(x + 2), s32(x * 3), s32(x - 9), bit.bxor(x, 5), 77, bit.arshift(x, 2), bit.lshift(x, 1),
               bit.bnot(x), s32(-x), bit.bor(x, 3), bit.band(x, 12) })[c] or 1
  return {
    b0 + b1 % 256,
    s32(sext(s32(sh * sy), 16) + sext(q, 16)),
    s32(loc(bit.band(x, 15)) + loc(bit.band(bit.rshift(x, 4), 15))),
    pairsum, fib(bit.band(x, 7) + 3), sw,
  }
end

for _, arch in ipairs(ARCHS) do
  describe("nvcc " .. arch .. " calls, local arrays, byte/short arithmetic, vector memory", function()
    it("misc: struct returns, recursion, dynamic local indexing, switch, s8/u8 loads, float4 ld.nc/st", function()
      local n = 256
      local xs = rand_s32(n, 91, { 0, -1, 0x7fffffff, -0x80000000, 0x8000, -0x8000 * 65536 + 0x8000, 15, 16 })
      local bs = rand_s32(n, 93, { 127, -128, -1, 0 }, function(v) return v % 256 - 128 end)
      local v4 = rand_f32(4 * n, 95, nil, 10, 10)
      local mod = load("diff_misc", arch)
      local out, o4 = output(6 * n, types.s32), output(4 * n, types.f32)
      mod.misc { grid = 2, block = 128, device = emu(),
                 args = { input(xs, types.s32), input(bs, types.s8), input(v4, types.f32), out, o4, n } }
      local refs = {}
      for t = 0, n - 1 do refs[t] = misc_ref(xs[t + 1], bs[t + 1], bs[(t + 1) % n + 1]) end
      compare("misc", out:to_host(), 6, n, function(k, t) return refs[t][k + 1] end, nil,
        function(t) return ("x = %d"):format(xs[t + 1]) end)
      local o = o4:to_host()
      for t = 0, n - 1 do
        local q = { v4[4 * t + 1], v4[4 * t + 2], v4[4 * t + 3], v4[4 * t + 4] }
        assert.same({ q[4], f32(q[3] * 2), f32(q[2] + 1), q[1] }, { o[4 * t], o[4 * t + 1], o[4 * t + 2], o[4 * t + 3] })
      end
    end)
  end)
end
