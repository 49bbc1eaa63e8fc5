-- Differential tests of the ISA rows no other differential runs (mad24,
-- set, slct, testp, ldu, prefetch, prefetchu, nanosleep, membar, barrier,
-- bar.warp.sync, match.sync, elect.sync, cp.async.wait_all, trap, brkpt):
-- spec/fixtures/cuda/diff_rows.cu, compiled by spec/fixtures/cuda/build.sh
-- for sm_80 and sm_90a into spec/fixtures/ptx/nvcc/diff_rows_<arch>.ptx
-- (checked in: no toolkit needed), is loaded with pyptx.load_ptx and run
-- on the emulator on random non-zero inputs plus edge values, and every
-- output is compared with a result computed here from the PTX ISA's
-- semantics. LUAPTX_DIFF_DEVICE=cuda runs the same specs on a GPU (but
-- trap, brkpt and the emulator's own bar.warp.sync reports, which stay on
-- the emulator).
-- oracle: nvcc: the kernels run are nvcc's PTX of CUDA C (spec/fixtures/cuda/diff_rows.cu); the references follow the PTX ISA's semantics
local ffi = require "ffi"
local bit = require "bit"
local pyptx = require "pyptx"
local tensor = require "pyptx.runtime.tensor"
local H = require "spec.helpers"

local types = pyptx.types
local ARCHS = { "sm80", "sm90a" }
local FULL = 0xffffffff

local dev = H.diff_device

--- The path of the nvcc output for arch.
local function ptx_path(arch) return ("spec/fixtures/ptx/nvcc/diff_rows_%s.ptx"):format(arch) end

--- The module compiled for arch.
local function load(arch) return pyptx.load_ptx(ptx_path(arch)) end

--- A device u32 tensor holding vals (numbers in 0..2^32-1).
local function input(vals) return tensor.from_table(vals, types.u32, { #vals }, dev()) end

--- A poisoned u32 output tensor of n elements (on device, default dev()).
local function output(n, device)
  local t = tensor.empty({ n }, types.u32, device or dev())
  t:fill_bytes(0xff)
  return t
end

--- Launch kernel name of mod with args, on grid x block (on device, default dev()).
local function launch(mod, name, grid, block, args, device)
  mod[name] { grid = grid, block = block, args = args, device = device or dev() }
end

local function u32(x) return x % 4294967296 end
local s32 = bit.tobit
local function band(a, b) return u32(bit.band(a, b)) end
local function bxor(a, b) return u32(bit.bxor(a, b)) end
local function shr(a, k) return u32(bit.rshift(a, k)) end

--- n random u32 values, never 0, from a seed; edges (a list) in front.
local function rand(n, seed, edges)
  local t = H.rand_s32(n, seed, edges)
  for i = 1, n do t[i] = u32(t[i]) end
  return t
end

--- Compare got[k * n + t] with want(k, t) for k in 0..K-1, t in 0..n-1;
-- fails naming the kernel, the output, the thread and its inputs (show(t)).
local function compare(what, got, K, n, want, show)
  local bad, msgs, seen = 0, {}, {}
  for k = 0, K - 1 do
    for t = 0, n - 1 do
      local g, w = got[k * n + t], want(k, t)
      if w ~= nil and g ~= w then
        bad = bad + 1
        if not seen[k] and #msgs < 8 then
          seen[k] = true
          msgs[#msgs + 1] = ("%s: output %d, thread %d: got 0x%08x, expected 0x%08x%s"):format(what, k, t, g, w,
            show and (" (" .. show(t) .. ")") or "")
        end
      end
    end
  end
  assert(bad == 0, table.concat(msgs, "\n") .. (" [%d mismatches]"):format(bad))
end

-- ------------------------------------------------------------- floats

local fbox = ffi.new("union { float f; uint32_t u; }")
--- The f32 whose bits are u as a Lua number (NaNs as Lua's own NaN: a
-- signalling NaN widened by the FFI can read as a tagged LuaJIT value).
local function f32(u)
  if band(u, 0x7f800000) == 0x7f800000 and band(u, 0x7fffff) ~= 0 then return 0 / 0 end
  fbox.u = u
  return fbox.f
end

--- u with a subnormal f32 flushed to a zero of its sign (.ftz).
local function ftz(u) return band(u, 0x7f800000) == 0 and band(u, 0x80000000) or u end

--- A float comparison by its PTX name.
local function fcmp(op, x, y)
  local nan = x ~= x or y ~= y
  if op == "num" then return not nan elseif op == "nan" then return nan end
  local base, unordered = op:match("^(%a%a)(u?)$")
  if nan then return unordered == "u" end
  if base == "eq" then return x == y elseif base == "ne" then return x ~= y elseif base == "lt" then return x < y
  elseif base == "le" then return x <= y elseif base == "gt" then return x > y else return x >= y end
end

--- A signed or unsigned integer comparison by its PTX name (lo ls hi hs: unsigned).
local function icmp(op, x, y, signed)
  if signed then x, y = s32(x), s32(y) end
  local r = { eq = x == y, ne = x ~= y, lt = x < y, le = x <= y, gt = x > y, ge = x >= y,
              lo = x < y, ls = x <= y, hi = x > y, hs = x >= y }
  return r[op]
end

-- The f32 edge values: signed zeros, subnormals, the smallest normal, one,
-- the largest finite, infinities, quiet and signalling NaNs with payloads.
local F_EDGES = { 0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007fffff, 0x807fffff, 0x00800000, 0x80800000,
                  0x3f800000, 0xbf800000, 0x7f7fffff, 0x7f800000, 0xff800000, 0x7fc00001, 0xffa12345, 0x00400000 }

--- n f32 bit patterns: every pair of edges, then random values (subnormals
-- among them) where every seventh pair is equal. Returns a, b.
local function float_pairs(n, seed)
  local a, b = {}, {}
  for i = 1, #F_EDGES do
    for j = 1, #F_EDGES do a[#a + 1], b[#b + 1] = F_EDGES[i], F_EDGES[j] end
  end
  local ra, rb = H.rand_f32(n, seed, nil, 140, 20), H.rand_f32(n, seed + 1, nil, 140, 20)
  for i = #a + 1, n do
    fbox.f = ra[i]; a[i] = fbox.u
    fbox.f = rb[i]; b[i] = i % 7 == 0 and a[i] or fbox.u
  end
  return a, b
end

local SET_CMPS = { "eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan" }
local ONE_F, ALL = 0x3f800000, 0xffffffff

-- --------------------------------------------------------------- tests

for _, arch in ipairs(ARCHS) do
  describe("nvcc " .. arch .. " rows no other differential runs", function()
    it("mad24 and mul24: .lo/.hi, s32/u32, .hi.sat.s32 at the 24-bit and 32-bit edges", function()
      local E = { 0x7fffffff, 0x80000000, 0x007fffff, 0x00800000, 0x00ffffff, 0x01000000, 0xff800000, 0xffffffff,
                  0x807fffff, 0x7f800000, 0x00000001, 0x00800001 }
      local C = { 0x7fffffff, 0x80000000, 0x00000000, 0xffffffff, 0x40000000, 0xc0000000, 0x7fffff00 }
      local n = 512
      local a, b, c = rand(n, 31), rand(n, 32), rand(n, 33)
      local i = 0
      for x = 1, #E do
        for y = 1, #E do
          i = i + 1
          a[i], b[i], c[i] = E[x], E[y], C[i % #C + 1]
        end
      end
      local function s24(v) v = v % 2 ^ 24 return v >= 2 ^ 23 and v - 2 ^ 24 or v end
      local function mad(t, signed, hi, sat, z)
        local p = signed and s24(a[t + 1]) * s24(b[t + 1]) or (a[t + 1] % 2 ^ 24) * (b[t + 1] % 2 ^ 24)   -- exact: |p| < 2^48
        local r = u32(hi and math.floor(p / 65536) or p)
        if sat then return u32(math.max(-2 ^ 31, math.min(2 ^ 31 - 1, s32(r) + s32(z)))) end
        return u32(r + z)
      end
      local out = output(11 * n)
      launch(load(arch), "mad24s", n / 128, 128, { input(a), input(b), input(c), out, n })
      compare("mad24s", out:to_host(), 11, n, function(k, t)
        local z = c[t + 1]
        local want = {
          mad(t, true, false, false, z), mad(t, true, true, false, z), mad(t, false, false, false, z),
          mad(t, false, true, false, z), mad(t, true, true, true, z),
          mad(t, true, false, false, 0), mad(t, true, true, false, 0), mad(t, false, false, false, 0), mad(t, false, true, false, 0),
          mad(t, true, false, false, z), bxor(mad(t, false, false, false, 0), z),
        }
        return want[k + 1]
      end, function(t) return ("a 0x%08x b 0x%08x c 0x%08x"):format(a[t + 1], b[t + 1], c[t + 1]) end)
    end)

    it("set: every comparison, .ftz on subnormals/NaN/±0, .u32/.s32/.f32 results, .and/.or/.xor", function()
      local n = 512
      local a, b = float_pairs(n, 41)
      local out = output(53 * n)
      launch(load(arch), "sets", n / 128, 128, { input(a), input(b), out, n })
      compare("sets", out:to_host(), 53, n, function(k, t)
        local x, y = a[t + 1], b[t + 1]
        local fx, fy, zx, zy = f32(x), f32(y), f32(ftz(x)), f32(ftz(y))
        local function v(cond, one) return cond and (one or ALL) or 0 end
        if k < 28 then
          local op = SET_CMPS[math.floor(k / 2) + 1]
          return k % 2 == 0 and v(fcmp(op, fx, fy)) or v(fcmp(op, zx, zy))
        end
        local c = band(shr(bxor(x, y), 7), 1) == 1
        local lx, ly = x % 65536, y % 65536
        local hx, hy = shr(x, 16), shr(y, 16)
        local want = {
          [28] = v(fcmp("lt", fx, fy), ONE_F), [29] = v(fcmp("geu", zx, zy), ONE_F), [30] = v(fcmp("gt", fx, fy)),
          [31] = v(x == y), [32] = v(x ~= y), [33] = v(icmp("lt", x, y, true)), [34] = v(icmp("le", x, y, true), ONE_F),
          [35] = v(icmp("gt", x, y, true)), [36] = v(icmp("ge", x, y, true)), [37] = v(x < y), [38] = v(x >= y),
          [39] = v(x < y), [40] = v(x <= y), [41] = v(x > y), [42] = v(x >= y, ONE_F),
          -- x:y against y:x as 64-bit values: the high words decide unless equal (then all is)
          [43] = v(s32(x) < s32(y)), [44] = v(x > y),
          [45] = v((lx >= 32768 and lx - 65536 or lx) < (ly >= 32768 and ly - 65536 or ly)), [46] = v(hx >= hy),
          [47] = v(fcmp("ltu", fx, fy)), [48] = v(fcmp("eq", fx, fy), ONE_F),
          [49] = v(icmp("lt", x, y, true) and c), [50] = v(x >= y or not c), [51] = v(fcmp("neu", fx, fy) ~= c, ONE_F),
          [52] = v(fcmp("le", zx, zy) and not c),
        }
        return want[k]
      end, function(t) return ("a 0x%08x b 0x%08x"):format(a[t + 1], b[t + 1]) end)
    end)

    it("slct: s32 and f32 selectors (.ftz, -0, subnormals, NaN) for 16/32/64-bit results", function()
      local CE = { 0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x807fffff, 0x7fc00000, 0xffc00000, 0x7f800000,
                   0xff800000, 0x7fffffff, 0xffffffff, 0x00000001, 0x3f800000, 0xbf800000, 0xffa12345, 0x00400000 }
      local n = 256
      local a, b, c = rand(n, 51, { 0x7fc00001, 0xffffffff }), rand(n, 52, { 0x00000001, 0x80000000 }), rand(n, 53, CE)
      local out = output(15 * n)
      launch(load(arch), "slcts", n / 64, 64, { input(a), input(b), input(c), out, n })
      compare("slcts", out:to_host(), 15, n, function(k, t)
        local x, y, z = a[t + 1], b[t + 1], c[t + 1]
        local si = s32(z) >= 0
        local fz, zz = f32(z), f32(ftz(z))
        local sf, sz = fz >= 0, zz >= 0   -- false for NaN
        local function pick(ge, p, q) return ge and p or q end
        local want = {
          pick(si, x, y), pick(si, x, y), pick(si, x, y), pick(si, x, y), pick(si, y, x), pick(si, x, y) % 65536,
          pick(sf, x, y), pick(sz, x, y), pick(sf, x, y), pick(sz, x, y),
          pick(sz, x, y), pick(sz, y, x), pick(sf, x, y), pick(sf, y, x), pick(sz, y, x) % 65536,
        }
        return want[k + 1]
      end, function(t) return ("a 0x%08x b 0x%08x c 0x%08x"):format(a[t + 1], b[t + 1], c[t + 1]) end)
    end)

    it("testp: every predicate on f32 and f64 (zeros, subnormals, normals, infinities, NaNs)", function()
      local HL = { { 0, 0 }, { 0x80000000, 0 }, { 0, 1 }, { 0x80000000, 1 }, { 0x000fffff, 0xffffffff }, { 0x00100000, 0 },
                   { 0x7fefffff, 0xffffffff }, { 0x7ff00000, 0 }, { 0xfff00000, 0 }, { 0x7ff00000, 1 }, { 0x7ff80000, 0 },
                   { 0xfff12345, 0 }, { 0x3ff00000, 0 }, { 0x00000001, 0 }, { 0x807fffff, 0 }, { 0x00800000, 0 },
                   { 0x7f7fffff, 0 }, { 0x7f800000, 0 }, { 0xff800000, 0 }, { 0x7fc00001, 5 }, { 0xffa12345, 0 } }
      local n = 128
      local hi, lo = rand(n, 61), rand(n, 62)
      for i, p in ipairs(HL) do hi[i], lo[i] = p[1], p[2] end
      local out = output(13 * n)
      launch(load(arch), "testps", n / 64, 64, { input(hi), input(lo), out, n })
      --- The class of a float from its exponent field and whether the fraction is non-zero.
      local function class(e, emax, frac)
        if e == emax then return frac and "nan" or "inf" end
        if e == 0 then return frac and "subnormal" or "zero" end
        return "normal"
      end
      compare("testps", out:to_host(), 13, n, function(k, t)
        local h, l = hi[t + 1], lo[t + 1]
        local c32 = class(shr(h, 23) % 256, 255, band(h, 0x7fffff) ~= 0)
        local c64 = class(shr(h, 20) % 2048, 2047, band(h, 0xfffff) ~= 0 or l ~= 0)
        local function preds(cl)
          -- the ISA counts zeros as normal (and an H100 agrees: spec/fixtures/diff_scalar_h100.delta)
          return { cl ~= "nan" and cl ~= "inf", cl == "inf", cl ~= "nan", cl == "nan", cl == "normal" or cl == "zero", cl == "subnormal" }
        end
        if k == 12 then
          return (c32 == "nan" and 1 or 0) + (c64 == "inf" and 2 or 0) + ((c32 ~= "nan" and c32 ~= "inf") and 4 or 0)
        end
        local p = k < 6 and preds(c32)[k + 1] or preds(c64)[k - 5]
        return p and 1 or 0
      end, function(t) return ("hi 0x%08x lo 0x%08x"):format(hi[t + 1], lo[t + 1]) end)
    end)

    it("match.sync (the match.sync.<mode> spelling): any/all, b32/b64, the predicate, divergent masks", function()
      local n = 256
      local x, y = rand(n, 71), rand(n, 72)
      for l = 0, 31 do
        x[l + 1] = x[l + 1] - x[l + 1] % 2                                -- warp 0: x even, y uniform
        y[l + 1] = 0x1234567
        y[32 + l + 1] = 0x89abcdef                                        -- warp 1: y uniform, x & 1 mixed
        y[64 + l + 1] = l == 5 and 0x2468ace1 or 0x2468ace0              -- warp 2: y >> 1 uniform, y not
        if band(x[96 + l + 1], 4) ~= 0 then y[96 + l + 1] = 0x13579bdf end  -- warp 3: y uniform where x & 4
      end
      local out = output(10 * n)
      launch(load(arch), "matches", n / 64, 64, { input(x), input(y), out, n })
      compare("matches", out:to_host(), 10, n, function(k, t)
        local w0 = t - t % 32
        --- The lanes of t's warp for which pred(lane index) holds.
        local function lanes(pred)
          local m = 0
          for l = 0, 31 do if pred(w0 + l + 1) then m = m + 2 ^ l end end
          return m
        end
        local me = t + 1
        local function same(key, among) return lanes(function(j) return (not among or among(j)) and key(j) == key(me) end) end
        local function all(key, among)
          local grp = among and lanes(among) or FULL
          return same(key, among) == grp and grp or 0
        end
        local kx = function(j) return band(x[j], 3) * 2 + band(y[j], 1) end
        local ky = function(j) return band(x[j], 1) * 2 ^ 32 + y[j] end
        local ykey = function(j) return y[j] end
        local in4 = function(j) return band(x[j], 4) ~= 0 end
        local want
        if k == 0 then want = same(function(j) return band(x[j], 3) end)
        elseif k == 1 or k == 2 then want = all(ykey); if k == 2 then want = want ~= 0 and 1 or 0 end
        elseif k == 3 then want = same(kx)
        elseif k == 4 or k == 5 then want = all(ky); if k == 5 then want = want ~= 0 and 1 or 0 end
        elseif k <= 8 then
          if not in4(me) then return 0 end
          if k == 6 then return same(function(j) return band(x[j], 3) end, in4) end
          want = all(ykey, in4)
          if k == 8 then want = want ~= 0 and 1 or 0 end
        else want = all(function(j) return shr(y[j], 1) end) end
        return want
      end, function(t) return ("x 0x%08x y 0x%08x"):format(x[t + 1], y[t + 1]) end)
    end)

    it("barrier: thread counts, arrive + sync producer/consumer, .aligned/.cta, .red popc/and/or", function()
      local n = 256
      local x = rand(n, 81)
      for i = 1, 128 do x[i] = u32(bit.bor(x[i], 0x101)) end   -- block 0: all odd, no zero low byte
      x[200], x[201] = 0x12345600, 0xfffffffe                  -- block 1: a zero low byte, an even value
      local out = output(6 * n)
      launch(load(arch), "barriers", 2, 128, { input(x), out, n })
      local function blk(t, f, init)
        local acc, b0 = init, t - t % 128
        for j = b0 + 1, b0 + 128 do acc = f(acc, x[j]) end
        return acc
      end
      compare("barriers", out:to_host(), 6, n, function(k, t)
        local i, b0 = t % 128, t - t % 128
        local function X(j) return x[b0 + j + 1] end
        if k == 0 then return u32(X(bit.bxor(i, 32)) * 3) end
        if k == 1 or k == 2 then
          if i < 64 then return bxor(u32(X(i) + 7), 0x5a5a) end
          return u32(X(i - 64) + 7)
        end
        if k == 3 then return blk(t, function(acc, v) return acc + band(v, 1) end, 0) end
        if k == 4 then return blk(t, function(acc, v) return acc * (band(v, 0xff) ~= 0 and 1 or 0) end, 1) end
        return blk(t, function(acc, v) return (acc == 1 or band(v, 1) == 0) and 1 or 0 end, 0)
      end)
    end)

    it("bar.warp.sync orders shared memory between lanes, converged and in divergent branches", function()
      local n = 256
      local x = rand(n, 91)
      local out = output(3 * n)
      launch(load(arch), "warpsyncs", n / 64, 64, { input(x), out, n })
      compare("warpsyncs", out:to_host(), 3, n, function(k, t)
        local lane = t % 32
        local function X(j) return x[t - lane + j + 1] end
        if k == 0 then return u32(X(bit.bxor(lane, 1)) * 5) end
        if k == 1 then
          if lane < 16 then return u32(bxor(X(lane + 16), 0xf0f0) * 3) end
          return u32(X(lane - 16) + 1 + 11)
        end
        if lane < 8 then return u32(X(lane + 8) * 9) end
        if lane < 16 then return bxor(u32(X(lane - 8) * 7), 1) end
        if lane < 24 then return u32(X(lane + 8) * 15 + 2) end
        return u32(X(lane - 8) * 13 - 3)
      end)
    end)

    it("membar.cta/gl/sys and nanosleep: one warp publishes behind a flag, another spins for it", function()
      local n = 128
      local x = rand(n, 101)
      local out = output(3 * n)
      local data, flag = output(4 * 96), tensor.from_table({ 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }, types.u32, { 12 }, dev())
      launch(load(arch), "membars", n / 32, 64, { input(x), data, flag, out, n })
      compare("membars", out:to_host(), 3, n, function(k, t)
        local v = x[t + 1]
        return ({ u32(v * 3), u32(v + 100), bxor(v, 0xabcd) })[k + 1]
      end)
    end)

    it("ldu.global (scalars, vectors, sign-extended bytes and halves) and prefetch/prefetchu leaving loads intact", function()
      local n = 128
      local x = rand(n, 111)
      local tab = rand(20, 112, { 0x80ff7f01, 0xfedc1234, 0x8001abcd, 0x7fffffff, 0x01020304, 0x3f800000, 0xffff8000 })
      local out = output(14 * n)
      launch(load(arch), "ldus", n / 64, 64, { input(x), input(tab), out, n })
      compare("ldus", out:to_host(), 14, n, function(k, t)
        local w = math.floor(t / 32) * 4
        local function T(j) return tab[w + j + 1] end
        local function sext(v, bits) return v >= 2 ^ (bits - 1) and u32(v - 2 ^ bits) or v end
        local want = { T(0), T(2), T(3), T(0), T(1), T(2), T(3), sext(shr(T(0), 24), 8), shr(T(1), 16),
                       sext(shr(T(2), 16), 16), T(2), T(3), T(1), bxor(x[t + 1], u32(x[t + 1] + math.floor(t / 4) % 4)) }
        return want[k + 1]
      end)
    end)

    it("cp.async (.ca 4/8 bytes, .cg 16 bytes, a short source zero-filled) then cp.async.wait_all", function()
      local n = 128
      local src = rand(n * 12, 121)
      local out = output(n * 12)
      launch(load(arch), "cpasyncs", n / 64, 64, { input(src), out, n })
      compare("cpasyncs", out:to_host(), 1, n * 12, function(_, e)
        local t, j = math.floor(e / 12), e % 12
        local nb = t - t % 64 + (t % 64 + 1) % 64
        local v = src[nb * 12 + j + 1]
        if j == 1 then return 0xdeadbeef end
        if j == 9 then return v % 256 end
        if j >= 10 then return 0 end
        return v
      end)
    end)

    --- The PTX lines of the kernel's text matching a Lua pattern, in order.
    local function lines_of(pattern)
      local found, i = {}, 0
      for l in H.read(ptx_path(arch)):gmatch("([^\n]*)\n") do
        i = i + 1
        if l:match(pattern) then found[#found + 1] = i end
      end
      return found
    end

    --- Launch traps/brkpts on the emulator (a GPU's context would not
    -- survive it): unreached (and guarded off in every lane) it completes;
    -- reached (plain, then guarded) it fails at its line.
    local function stops(kernel, op)
      local n = 128
      local mod, emu = load(arch), H.emu()
      local out = output(2 * n, emu)
      launch(mod, kernel, n / 64, 64, { out, n, FULL }, emu)
      compare(kernel, out:to_host(), 2, n, function(k, t) return t * (k == 0 and 3 or 5) end)
      local at = lines_of("^%s*" .. op .. ";")
      local guarded = lines_of("@p " .. op .. ";")
      assert.equal(1, #at)
      assert.equal(1, #guarded)
      for _, case in ipairs({ { 70, at[1], op, "lane 6 of warp 0, CTA (1,0,0)" },
                              { n + 37, guarded[1], "@p " .. op, "lane 5 of warp 1, CTA (0,0,0)" } }) do
        local ok, err = pcall(launch, mod, kernel, n / 64, 64, { output(2 * n, emu), n, case[1] }, emu)
        assert.is_false(ok)
        assert.matches(("%s, PTX line %d: %s: %s executed"):format(kernel, case[2], case[3], op), tostring(err), 1, true)
        assert.matches(case[4], tostring(err), 1, true)
      end
    end

    it("trap stops the launch at its PTX line when a lane reaches it, and only then", function()
      stops("traps", "trap")
    end)

    it("brkpt stops the launch like trap (ptxas compiles both to BPT.TRAP), and only when reached", function()
      stops("brkpts", "brkpt")
    end)
  end)
end

describe("nvcc sm90a elect.sync", function()
  it("elects the lowest lane of the member mask: full, sink, divergent and predicated masks", function()
    local n = 256
    local x = rand(n, 131)
    local out = output(7 * n)
    launch(load("sm90a"), "elects", n / 64, 64, { input(x), out, n })
    compare("elects", out:to_host(), 7, n, function(k, t)
      local lane, w0 = t % 32, t - t % 32
      --- The lowest lane of t's warp whose input has bit b set (or clear when set is false).
      local function lowest(b, set)
        for l = 0, 31 do if (band(x[w0 + l + 1], b) ~= 0) == set then return l end end
      end
      local me4, me8 = band(x[t + 1], 4) ~= 0, band(x[t + 1], 8) ~= 0
      if k == 0 then return 0 end
      if k == 1 or k == 2 then return lane == 0 and 1 or 0 end
      if k == 3 then return lowest(4, me4) end
      if k == 4 then return lane == lowest(4, me4) and 1 or 0 end
      if not me8 then return 99 end
      if k == 5 then return lowest(8, true) end
      return lane == lowest(8, true) and 1 or 0
    end, function(t) return ("x 0x%08x"):format(x[t + 1]) end)
  end)
end)

describe("bar.warp.sync on the emulator", function()
  -- The lower half-warp waits at a bar.warp.sync naming the whole warp;
  -- the upper half exits (mode 0), waits at a CTA barrier (mode 1) or runs
  -- a bar.warp.sync whose mask leaves it out (mode 2).
  local PTX = [[
.version 8.0
.target sm_80
.address_size 64

.visible .entry halves(.param .u64 out, .param .u32 mode)
{
	.reg .pred %p<4>;
	.reg .b32 %r<4>;
	.reg .b64 %rd<4>;
	ld.param.u64 %rd1, [out];
	ld.param.u32 %r1, [mode];
	mov.u32 %r2, %laneid;
	cvta.to.global.u64 %rd1, %rd1;
	mul.wide.u32 %rd2, %r2, 4;
	add.s64 %rd3, %rd1, %rd2;
	setp.ge.u32 %p1, %r2, 16;
	@%p1 bra UPPER;
	bar.warp.sync -1;
	st.global.u32 [%rd3], 1;
	ret;
UPPER:
	setp.eq.u32 %p2, %r1, 0;
	@%p2 ret;
	setp.eq.u32 %p3, %r1, 1;
	@%p3 bra CTA;
	bar.warp.sync 0x0000ffff;
	ret;
CTA:
	bar.sync 0;
	ret;
}
]]

  --- The line of PTX holding a Lua pattern.
  local function line_of(pattern)
    local i = 0
    for l in PTX:gmatch("([^\n]*)\n") do
      i = i + 1
      if l:match(pattern) then return i end
    end
  end

  --- Run halves with mode; returns ok, the error and the 32 outputs.
  local function run(mode)
    local mod = pyptx.load_ptx(PTX)
    local out = output(32, H.emu())
    local ok, err = pcall(launch, mod, "halves", 1, 32, { out, mode }, H.emu())
    return ok, tostring(err), out:to_host()
  end

  it("does not wait for lanes that exited", function()
    local ok, err, got = run(0)
    assert(ok, err)
    for l = 0, 31 do assert.equal(l < 16 and 1 or FULL, got[l]) end
  end)

  it("reports a deadlock with lanes that wait at a CTA barrier instead, naming its line", function()
    local ok, err = run(1)
    assert.is_false(ok)
    assert.matches(("halves, PTX line %d: bar.warp.sync"):format(line_of("bar.warp.sync %-1")), err, 1, true)
    assert.matches("-1: deadlock: bar.warp.sync (member mask 0xffffffff) waits for lane(s) 0xffff0000 of warp 0, which are "
      .. "blocked elsewhere (at a CTA barrier)", err, 1, true)
  end)

  it("refuses lanes that are not in their own member mask", function()
    local ok, err = run(2)
    assert.is_false(ok)
    assert.matches(("halves, PTX line %d: bar.warp.sync"):format(line_of("bar.warp.sync 0x0000ffff")), err, 1, true)
    assert.matches("65535: lane(s) 0xffff0000 execute bar.warp.sync but are not in its member mask 0x0000ffff; valid: a mask "
      .. "naming every lane that executes it [thread (16,0,0)", err, 1, true)
  end)
end)
