-- Differential tests against nvcc for the extended integer and video
-- instructions: CUDA C with inline PTX (spec/fixtures/cuda/diff_intx.cu,
-- diff_video.cu, compiled by spec/fixtures/cuda/build.sh for sm_80 and
-- sm_90a) loaded with pyptx.load_ptx and run on the emulator on random
-- non-zero inputs plus edge values. The single-instruction cases are read
-- from the .cu files (C(set, "template"), in order) and each result is
-- computed here from the instruction's spelling, following the PTX ISA's
-- pseudo-code; the carry chains, lop3's predicate form, the intrinsics
-- and the stack get references from the CUDA semantics.
-- LUAPTX_DIFF_DEVICE=cuda runs the same specs on a GPU.
-- oracle: nvcc: the kernels run are nvcc's PTX of CUDA C (spec/fixtures/cuda/diff_intx.cu, diff_video.cu); references: the ISA's pseudo-code
local ffi = require "ffi"
local bit = require "bit"
local pyptx = require "pyptx"
local H = require "spec.helpers"

local types = pyptx.types
local ARCHS = { "sm80", "sm90a" }
local TWO32 = 4294967296

local device, load, input, output = H.diff_device, H.nvcc_ptx, H.diff_input, H.diff_output

-- ------------------------------------------------------------ integers

local u32 = H.u32

--- The low bits of v as a signed number.
local function sext(v, bits)
  v = v % 2 ^ bits
  return v >= 2 ^ (bits - 1) and v - 2 ^ bits or v
end

--- Element k (bits wide) of a 32-bit value, sign-extended when signed.
local function elem(v, k, bits, signed)
  local e = math.floor(u32(v) / 2 ^ (k * bits)) % 2 ^ bits
  return signed and sext(e, bits) or e
end

--- The range of a signed or unsigned field of bits.
local function range(bits, signed)
  if signed then return -2 ^ (bits - 1), 2 ^ (bits - 1) - 1 end
  return 0, 2 ^ bits - 1
end

local function clamp(v, lo, hi) return v < lo and lo or v > hi and hi or v end
local function bitset(v, k) return elem(v, k, 1, false) == 1 end

-- ------------------------------------------------------ the templates

--- The operands of input set `set` (inputs() in the .cu files).
local SETS = {
  [0] = function(a, b, c) return a, b, c end,
  [1] = function(a, b, c) return a, b % 64, c end,
  [2] = function(a, b, c) return a % 64, b % 64, c end,
  [3] = function(a, b, c) return u32(math.floor(sext(a, 32) / 2 ^ 15)), u32(math.floor(sext(b, 32) / 2 ^ 15)), c end,
  [4] = function(a, b, c) return u32(math.floor(sext(a, 32) / 2 ^ 26)), u32(math.floor(sext(b, 32) / 2 ^ 27)), c end,
  [5] = function(a, b, c) return a, b % 32, u32(math.floor(sext(c, 32) / 2 ^ 26)) end,
}

--- The C(set, "template") cases of a .cu file, in order.
local function templates(cu)
  local list = {}
  for set, tmpl in H.read("spec/fixtures/cuda/" .. cu):gmatch('\n%s*C%((%d+), "([^"]+)"%);') do
    list[#list + 1] = { set = tonumber(set), text = tmpl }
  end
  assert(#list > 0, cu .. ": no C(set, template) cases found")
  return list
end

--- Parse "op.mods %0.sel, -%1, ..., 31;" into the opcode's words and operands.
local function parse(text)
  local opcode, rest = text:match("^(%S+)%s+(.-);$")
  local words, ops = {}, {}
  for w in opcode:gmatch("[^.]+") do words[#words + 1] = w end
  for o in rest:gmatch("[^,]+") do
    o = o:match("^%s*(.-)%s*$")
    local neg, name, sel = o:match("^(%-?)(%%?%w+)%.?([bh]?%d*)$")
    local digits = {}
    for d in sel:sub(2):gmatch("%d") do digits[#digits + 1] = tonumber(d) end
    ops[#ops + 1] = { neg = neg == "-", reg = name:match("^%%(%d)$"), lit = tonumber(name),
                      sel = sel ~= "" and { half = sel:sub(1, 1) == "h", digits = digits } or nil }
  end
  local has = {}
  for _, w in ipairs(words) do has[w] = true end
  return { op = words[1], words = words, has = has, ops = ops }
end

--- The value of operand o given %1 %2 %3 = x y z (a literal as u32).
local function value(o, x, y, z)
  if o.reg then return ({ [0] = 0, x, y, z })[tonumber(o.reg)] end
  return u32(o.neg and -o.lit or o.lit)
end

-- ------------------------------------ extended integers (the ISA's code)

local INTX = {}

function INTX.fns(_, mask, base, off)
  off = sext(off, 32)
  if off == 0 then return bitset(mask, base) and base or 0xffffffff end
  local count, inc = math.abs(off) - 1, off > 0 and 1 or -1
  for pos = base, inc > 0 and 31 or 0, inc do
    if bitset(mask, pos) then
      if count == 0 then return pos end
      count = count - 1
    end
  end
  return 0xffffffff
end

function INTX.dp4a(f, a, b, c)
  local sa, sb = f.words[2] == "s32", f.words[3] == "s32"
  local acc = c
  for k = 0, 3 do acc = acc + elem(a, k, 8, sa) * elem(b, k, 8, sb) end
  return u32(acc)
end

function INTX.dp2a(f, a, b, c)
  local sa, sb, first = f.words[3] == "s32", f.words[4] == "s32", f.has.hi and 2 or 0
  local acc = c
  for k = 0, 1 do acc = acc + elem(a, k, 16, sa) * elem(b, first + k, 8, sb) end
  return u32(acc)
end

function INTX.bmsk(f, a, b)
  local a1, b1 = a % 32, b % 32
  local mask0 = u32(0xffffffff * 2 ^ a1)
  local sum = a1 + b1
  local mask1 = sum >= 32 and 0 or u32(0xffffffff * 2 ^ sum)
  local over = sum >= 32
  if f.has.clamp then
    if a >= 32 then mask0, over = 0, true end
    if b >= 32 then over = true end
  end
  if over then mask1 = 0 elseif b1 == 0 then mask1 = 0xffffffff end
  return u32(bit.band(mask0, bit.bnot(mask1)))
end

function INTX.szext(f, a, b)
  local b1 = b % 32
  local too_large = b >= 32 and f.has.clamp
  local mask = too_large and 0 or u32(0xffffffff * 2 ^ b1)
  local sign = not (b1 == 0 or too_large or f.words[3] ~= "s32") and bitset(a, (b1 - 1) % 32)
  return u32(bit.bor(bit.band(a, bit.bnot(mask)), sign and mask or 0))
end

local PACK_BITS = { u16 = 16, s16 = 16, u8 = 8, s8 = 8, u4 = 4, s4 = 4, u2 = 2, s2 = 2 }
INTX.cvt = function(f, a, b, c)
  local ty = f.words[4]
  local bits, signed = PACK_BITS[ty], ty:sub(1, 1) == "s"
  local lo, hi = range(bits, signed)
  local ta, tb = clamp(sext(a, 32), lo, hi) % 2 ^ bits, clamp(sext(b, 32), lo, hi) % 2 ^ bits
  local d = tb + ta * 2 ^ bits
  if bits < 16 then d = d + u32(c) * 2 ^ (2 * bits) end
  return u32(d)
end

--- add/min/max on .u16x2/.s16x2 (with .relu), and min/max.relu.s32.
local function packed(f, a, b)
  local ty = f.words[#f.words]
  local fn = ({ add = function(x, y) return x + y end, min = math.min, max = math.max })[f.op]
  if ty == "s32" then return u32(math.max(0, fn(sext(a, 32), sext(b, 32)))) end
  local signed, d = ty == "s16x2", 0
  for k = 0, 1 do
    local v = fn(elem(a, k, 16, signed), elem(b, k, 16, signed))
    if f.has.relu then v = math.max(v, 0) end
    d = d + (v % 65536) * 2 ^ (16 * k)
  end
  return d
end
INTX.add, INTX.min, INTX.max = packed, packed, packed

-- ---------------------------------------- video instructions (ISA code)

--- partSelectSignExtend: the byte/half a selector names, or the word.
local function part(v, sel, signed)
  if not sel then return signed and sext(v, 32) or u32(v) end
  return elem(v, sel.digits[1], sel.half and 16 or 8, signed)
end

local CMP = {
  eq = function(x, y) return x == y end, ne = function(x, y) return x ~= y end,
  lt = function(x, y) return x < y end, le = function(x, y) return x <= y end,
  gt = function(x, y) return x > y end, ge = function(x, y) return x >= y end,
}

--- The primary operation of a video instruction on ta, tb.
local function vop(f, op, ta, tb)
  if op == "add" then return ta + tb end
  if op == "sub" then return ta - tb end
  if op == "absdiff" then return math.abs(ta - tb) end
  if op == "min" then return math.min(ta, tb) end
  if op == "max" then return math.max(ta, tb) end
  if op == "avrg" then return ta + tb >= 0 and math.floor((ta + tb + 1) / 2) or math.floor((ta + tb) / 2) end
  if op == "shl" or op == "shr" then
    local n = f.has.clamp and math.min(tb, 32) or tb % 32
    return op == "shl" and ta * 2 ^ n or math.floor(ta / 2 ^ n)
  end
  for name, fn in pairs(CMP) do if f.has[name] then return fn(ta, tb) and 1 or 0 end end
  error("no video operation for " .. f.op)
end

--- x wrapped to 32 bits and sign-extended.
local function wrap32(x) return sext(u32(x), 32) end

--- vadd vsub vabsdiff vmin vmax vshl vshr vset as the code ptxas
-- generates for sm_70 and later computes them (what a GPU does; it
-- departs from the ISA's pseudo-code in places): the operation exact, but
-- vadd/vsub without .sat wrapped to 32 bits; .sat clamps shifts' 34-bit
-- results to the destination type's word, a merged byte/half to [0, max]
-- (negative values to max), a word signed to s32 and unsigned only below
-- (at 0); .min/.max compare in 64 bits with c extended by the
-- destination's sign; the merge puts the low byte/half in place, but
-- .h1 takes the result's bits 16-31. vset's result and c follow .atype.
local function video_scalar(f, x, y, z)
  local set = f.op == "vset"
  local dt, at, bt = f.words[2], f.words[set and 2 or 3], f.words[set and 3 or 4]
  local shift, wrap = f.op == "vshl" or f.op == "vshr", f.op == "vadd" or f.op == "vsub"
  local d, a, b = f.ops[1], f.ops[2], f.ops[3]
  local sd = dt == "s32"
  local t = vop(f, f.op:sub(2), part(value(a, x, y, z), a.sel, at == "s32"), part(value(b, x, y, z), b.sel, not shift and bt == "s32"))
  if f.op == "vshl" and t >= 2 ^ 63 then t = t - 2 ^ 64 end   -- wraps at 64 bits (exact: few significant bits)
  if wrap and not f.has.sat then t = wrap32(t) end
  if f.has.sat then
    if shift then
      t = sext(t % 2 ^ 34, 34)
      if sd then t = clamp(t, range(32, true)) else t = wrap32(clamp(t, range(32, false))) end
    elseif d.sel then
      local bits = d.sel.half and 16 or 8
      local _, mx = range(bits, sd)
      if t < 0 or t > mx then t = mx end
    elseif sd then t = clamp(t, range(32, true))
    else
      t = math.max(t, 0)
      if wrap then t = wrap32(t) end
    end
  end
  local c = f.ops[4] and value(f.ops[4], x, y, z) or 0
  local cv = sd and sext(c, 32) or u32(c)
  if #f.ops == 4 and f.has.add then return u32(t + cv) end
  if #f.ops == 4 and (f.has.min or f.has.max) then
    -- unsigned: a negative t is a 64-bit pattern above any c
    local t_less = sd and t < cv or (not sd and t >= 0 and t < cv)
    return u32((t_less == (f.has.min == true)) and t or cv)
  end
  if not d.sel then return u32(t) end
  local bits = d.sel.half and 16 or 8
  local at_bit = 2 ^ (d.sel.digits[1] * bits)
  local old = math.floor(u32(c) / at_bit) % 2 ^ bits
  local part_bits = (bits == 16 and d.sel.digits[1] == 1) and math.floor(u32(t) / at_bit) or t
  return u32(u32(c) - old * at_bit + (part_bits % 2 ^ bits) * at_bit)
end

--- An exact integer hi * 2^32 + lo (lo in [0, 2^32)) from a product of two
-- values below 2^33 in magnitude.
local function wide_mul(p, q)
  local s = (p < 0) ~= (q < 0)
  local A, B = math.abs(p), math.abs(q)
  local a1, a0, b1, b0 = math.floor(A / 65536), A % 65536, math.floor(B / 65536), B % 65536
  local X = (a1 * b0 + a0 * b1) * 65536 + a0 * b0
  local hi, lo = a1 * b1 + math.floor(X / TWO32), X % TWO32
  if s and (hi ~= 0 or lo ~= 0) then
    if lo == 0 then hi = -hi else hi, lo = -hi - 1, TWO32 - lo end
  end
  return hi, lo
end

--- hi:lo + v (v an integer below 2^40 in magnitude).
local function wide_add(hi, lo, v)
  lo = lo + v
  return hi + math.floor(lo / TWO32), lo % TWO32
end

--- vmad as ptxas's code computes it: the selected parts as 32-bit values
-- multiplied signed (a .u32 word above 2^31 counts as negative), c
-- sign-extended, the product or c negated or one added (.po); the 64-bit
-- sum shifted (.shr7/.shr15) arithmetically when any input is signed or
-- negated, else logically; .sat clamps to s32 or u32 accordingly.
local function video_mad(f, x, y, z)
  local a, b, c = f.ops[2], f.ops[3], f.ops[4]
  local sa, sb = f.words[3] == "s32", f.words[4] == "s32"
  local sfinal = sa or sb or (a.neg ~= b.neg) or c.neg
  local ta, tb = sext(part(value(a, x, y, z), a.sel, sa), 32), sext(part(value(b, x, y, z), b.sel, sb), 32)
  local hi, lo = wide_mul(ta, tb)
  local cv = sext(value(c, x, y, z), 32)
  if f.has.po then hi, lo = wide_add(hi, lo, cv + 1)
  elseif a.neg ~= b.neg then hi, lo = wide_add(-hi - 1, TWO32 - 1 - lo, cv + 1)
  elseif c.neg then hi, lo = wide_add(hi, lo, -cv)
  else hi, lo = wide_add(hi, lo, cv) end
  hi = sext(hi, 32)                                  -- the 64-bit sum
  local sh = f.has.shr7 and 7 or f.has.shr15 and 15 or 0
  if sh > 0 then
    if not sfinal then hi = hi % TWO32 end           -- a logical shift
    local q = math.floor(hi / 2 ^ sh)
    hi, lo = q, math.floor(((hi - q * 2 ^ sh) * TWO32 + lo) / 2 ^ sh)
  end
  if not f.has.sat then return lo end
  if sfinal then
    if hi == 0 then return lo <= 0x7fffffff and lo or 0x7fffffff end
    if hi == -1 then return lo >= 0x80000000 and lo or 0x80000000 end
    return hi > 0 and 0x7fffffff or 0x80000000
  end
  if hi < 0 then return 0 end
  return hi == 0 and lo or 0xffffffff
end

--- vadd2 ... vset2, vadd4 ... vset4: extractAndSignExt, the operation,
-- .sat, then the SIMD merge or the .add accumulation.
local function video_simd(f, x, y, z)
  local n = tonumber(f.op:sub(-1))
  local set, bits = f.op:sub(1, 4) == "vset", 32 / n
  local dt, at, bt = f.words[2], f.words[set and 2 or 3], f.words[set and 3 or 4]
  local d, a, b = f.ops[1], f.ops[2], f.ops[3]
  local av, bv, cv = value(a, x, y, z), value(b, x, y, z), value(f.ops[4], x, y, z)
  local function pick(sel, i, default, signed)
    local idx = sel and sel.digits[n - i] or default + i
    return elem(idx < n and av or bv, idx % n, bits, signed)
  end
  local on = {}
  for i = 0, n - 1 do on[i] = not d.sel end
  if d.sel then for _, k in ipairs(d.sel.digits) do on[k] = true end end
  local r = f.has.add and cv or 0
  for i = 0, n - 1 do
    local t = vop(f, f.op:sub(2, -2), pick(a.sel, i, 0, at == "s32"), pick(b.sel, i, n, bt == "s32"))
    if f.has.sat then t = clamp(t, range(bits, not set and dt == "s32")) end
    if f.has.add then r = r + (on[i] and t or 0)
    else r = r + ((on[i] and t or elem(cv, i, bits, false)) % 2 ^ bits) * 2 ^ (i * bits) end
  end
  return u32(r)
end

--- The reference of one template for inputs a, b, c.
local function reference(f, set, a, b, c)
  local x, y, z = SETS[set](a, b, c)
  if f.op:sub(1, 1) == "v" then
    if f.op == "vmad" then return video_mad(f, x, y, z) end
    if f.op:match("%d$") then return video_simd(f, x, y, z) end
    return video_scalar(f, x, y, z)
  end
  local fn = INTX[f.op]
  local args = {}
  for k = 2, #f.ops do args[k - 1] = value(f.ops[k], x, y, z) end
  return fn(f, args[1], args[2], args[3])
end

-- ------------------------------------------------------------- checks

--- Compare got[k * n + t] with want(k, t); fail with the first mismatches.
local function compare(what, got, K, n, want, label)
  local bad, msgs, seen = 0, {}, {}
  for k = 0, K - 1 do
    for t = 0, n - 1 do
      local g, w = tonumber(got[k * n + t]), want(k, t)
      if g ~= w then
        bad = bad + 1
        if not seen[k] and #msgs < 8 then
          seen[k] = true
          msgs[#msgs + 1] = ("%s: output %d (%s), thread %d: got 0x%08x, expected 0x%08x"):format(what, k, label(k, t), t, g, w)
        end
      end
    end
  end
  assert(bad == 0, table.concat(msgs, "\n") .. (" [%d mismatches]"):format(bad))
end

--- n inputs: the edges first, then random non-zero u32 values.
local function inputs(n, seed, edges)
  local r, v = H.rng(seed), {}
  for i = 1, n do v[i] = u32(edges[i] or r()) end
  return v
end

local EDGE_A = { 0, 1, 0xffffffff, 0x7fffffff, 0x80000000, 0xff, 0x80, 0x7f, 0x7fff, 0x8000, 0xffff, 0x10000,
                 0x7f7f7f7f, 0x80808080, 0xffff0000, 0x0000ffff, 0x00ff00ff, 0x12345678, 0xdeadbeef, 31, 32, 5, 0xff7f0180 }
local EDGE_B = { 0xffffffff, 0, 1, 0x7fffffff, 0x80000000, 0x80, 0x7f, 0xff, 0x8000, 0x7fff, 0x1, 0xffff,
                 0x80808080, 0x7f7f7f7f, 0x0000ffff, 0xffff0000, 0xff00ff00, 33, 32, 31, 64, 0x20202020, 0x01ff7f80 }
local EDGE_C = { 0, 0xffffffff, 0x80000000, 0x7fffffff, 1, 0xffffffff, 0x12345678, 0x80000000, 0, 0xfc000000,
                 0x04000000, 0x7c000000, 0x84000000, 0xffff, 0x10000, 0xff, 0x7fffffff, 0x80000001, 0, 1, 0xf8000000, 3, 0xabcdef01 }

local N = 256
local A, B, Cv = inputs(N, 71, EDGE_A), inputs(N, 73, EDGE_B), inputs(N, 79, EDGE_C)
local function show(t) return ("a = 0x%08x, b = 0x%08x, c = 0x%08x"):format(A[t + 1], B[t + 1], Cv[t + 1]) end

--- Run a C(set, template) kernel and check every template against its reference.
local function run_templates(name, cu, kernel, arch, want_count)
  local list = templates(cu)
  local mod = load(name, arch)
  local out = output(#list * N, types.u32)
  mod[kernel] { grid = 2, block = 128, args = { input(A, types.u32), input(B, types.u32), input(Cv, types.u32), out, N }, device = device() }
  local parsed = {}
  for i, c in ipairs(list) do parsed[i] = parse(c.text) end
  compare(kernel, out:to_host(), want_count(list), N, function(k, t)
    return reference(parsed[k + 1], list[k + 1].set, A[t + 1], B[t + 1], Cv[t + 1])
  end, function(k, t) return list[k + 1].text .. "; " .. show(t) end)
end

-- ----------------------------------------------- CUDA-semantics references

--- 64-bit words as uint64 cdata, and the 128-bit product of two of them.
local function u64(x) return ffi.cast("uint64_t", x) end
local function mul128(x, y)
  local M = u64(0xffffffff)
  local x0, x1, y0, y1 = bit.band(x, M), bit.rshift(x, 32), bit.band(y, M), bit.rshift(y, 32)
  local p00, p01, p10, p11 = x0 * y0, x0 * y1, x1 * y0, x1 * y1
  local mid = bit.rshift(p00, 32) + bit.band(p01, M) + bit.band(p10, M)
  local lo = bit.bor(bit.band(p00, M), bit.lshift(bit.band(mid, M), 32))
  local hi = p11 + bit.rshift(p01, 32) + bit.rshift(p10, 32) + bit.rshift(mid, 32)
  return hi, lo
end

--- The 128-bit signed product's high word (two's complement).
local function smul128_hi(x, y)
  local hi = mul128(x, y)
  if bit.rshift(x, 63) == 1 then hi = hi - y end
  if bit.rshift(y, 63) == 1 then hi = hi - x end
  return hi
end

--- The references of intx_chains for one thread: 32-bit outputs, 64-bit outputs.
local function chains_ref(a, b, c)
  local out, o64 = {}, {}
  local function w(v) out[#out + 1] = u32(tonumber(v)) end
  -- [b,a] * [c,b]: four words
  local X, Y = u64(b) * TWO32 + a, u64(c) * TWO32 + b
  local hi, lo = mul128(X, Y)
  w(bit.band(lo, 0xffffffff)); w(bit.rshift(lo, 32)); w(bit.band(hi, 0xffffffff)); w(bit.rshift(hi, 32))
  local cf = (a + b >= TWO32) and 1 or 0
  local p = u64(a) * b
  local r = tonumber(bit.band(p, 0xffffffff)) + c + cf
  w(r); w(r >= TWO32 and 1 or 0)
  local sp = ffi.cast("int64_t", sext(a, 32)) * sext(b, 32)
  r = tonumber(bit.band(bit.rshift(ffi.cast("uint64_t", sp), 32), 0xffffffff)) + c + cf
  w(r); w(r >= TWO32 and 1 or 0)
  w(tonumber(bit.band(p, 0xffffffff)) + c + cf)
  w(tonumber(bit.rshift(p, 32)) + c + cf)
  -- sub.cc leaves "no borrow" (a >= b) in the carry; madc adds it, subc subtracts its complement
  local nb = a >= b and 1 or 0
  r = tonumber(bit.band(p, 0xffffffff)) + c + nb
  local cf2 = r >= TWO32 and 1 or 0
  w(c - b - (1 - cf2)); w(-(1 - cf2))
  -- 64-bit: [a:b] * [c:a] + [b:c]; madc.hi without .cc leaves the carry of mad.lo.cc for addc
  local X64, Y64, Z64 = u64(a) * TWO32 + b, u64(c) * TWO32 + a, u64(b) * TWO32 + c
  local phi, plo = mul128(X64, Y64)
  local function add3(x, y, cin)   -- x + y + cin and its carry out
    local s1 = x + y
    local s2 = s1 + cin
    return s2, u64(((s1 < x) or (s2 < s1)) and 1 or 0)
  end
  local lo64, c1 = add3(plo, Z64, u64(0))
  o64[#o64 + 1] = lo64; o64[#o64 + 1] = phi + c1; o64[#o64 + 1] = c1
  local cf64 = (X64 + Y64 < X64) and u64(1) or u64(0)
  local d64, cout = add3(smul128_hi(X64, Y64), Z64, cf64)
  o64[#o64 + 1] = d64; o64[#o64 + 1] = cout
  d64, cout = add3(plo, Z64, cf64)
  o64[#o64 + 1] = d64; o64[#o64 + 1] = cout
  -- lop3 with a predicate
  local function lop3(x, y, z, lut)
    local d = 0
    for i = 0, 31 do
      local k = (bitset(x, i) and 4 or 0) + (bitset(y, i) and 2 or 0) + (bitset(z, i) and 1 or 0)
      if bitset(lut, k) then d = d + 2 ^ i end
    end
    return d
  end
  local q = sext(b, 32) < 0
  local d = lop3(a, b, c, 0x96)
  w(d); w((d ~= 0 or q) and 1 or 0)
  d = lop3(a, b, c, 0x80)
  w(d); w((d ~= 0 and q) and 1 or 0)
  d = lop3(b, c, u32(bit.band(a, b)), 0x28)
  w(((d ~= 0) and not q) and 1 or 0)
  return out, o64
end

--- The CUDA intrinsics of intx_intrinsics, from their definitions.
local function intrinsics_ref(a, b, c)
  local out = {}
  local function per(n, f)
    local bits, d = 32 / n, 0
    for k = 0, n - 1 do d = d + (f(k, bits) % 2 ^ bits) * 2 ^ (k * bits) end
    out[#out + 1] = d
  end
  local function dot(sa, sb, mode)
    local acc = c
    if mode then
      local first = mode == "hi" and 2 or 0
      for k = 0, 1 do acc = acc + elem(a, k, 16, sa) * elem(b, first + k, 8, sb) end
    else
      for k = 0, 3 do acc = acc + elem(a, k, 8, sa) * elem(b, k, 8, sb) end
    end
    out[#out + 1] = u32(acc)
  end
  dot(true, true); dot(false, false); dot(true, true, "lo"); dot(false, false, "hi")
  out[#out + 1] = INTX.fns(nil, a, b % 32, u32(math.floor(sext(c, 32) / 2 ^ 27)))
  per(4, function(k) return math.abs(elem(a, k, 8, false) - elem(b, k, 8, false)) end)
  per(4, function(k) return math.abs(elem(a, k, 8, true) - elem(b, k, 8, true)) end)
  per(2, function(k) return math.abs(elem(a, k, 16, false) - elem(b, k, 16, false)) end)
  local s4, s2 = 0, 0
  for k = 0, 3 do s4 = s4 + math.abs(elem(a, k, 8, false) - elem(b, k, 8, false)) end
  for k = 0, 1 do s2 = s2 + math.abs(elem(a, k, 16, false) - elem(b, k, 16, false)) end
  out[#out + 1], out[#out + 2] = s4, s2
  local function h(v, k, s) return elem(v, k, 16, s) end
  per(2, function(k) return math.max(0, h(a, k, true), h(b, k, true), h(c, k, true)) end)
  per(2, function(k) return math.max(0, math.min(h(a, k, true), h(b, k, true))) end)
  per(2, function(k) return math.max((h(a, k, false) + h(b, k, false)) % 65536, h(c, k, false)) end)
  per(2, function(k) return math.min(sext(h(a, k, true) + h(b, k, true), 16), h(c, k, true)) end)
  per(2, function(k) return math.max(h(a, k, false), h(b, k, false), h(c, k, false)) end)
  return out
end

--- intx_stack for thread t: the alloca'd sums and the stack depths.
local function stack_ref(src, t, n)
  local m, s = t % 13 + 1, 0
  for i = m - 1, 0, -1 do s = bit.tobit(s + bit.bxor(bit.tobit(src[(t + i) % n + 1] * 3), i)) end
  local depth = 0
  for r = 1, 3 do
    local v0, v1 = bit.tobit(src[t + 1] + r), bit.tobit(src[t + 1] * r)
    depth = depth + r * 48 + bit.bxor(v0, v1)
  end
  return s, bit.tobit(depth)
end

-- ---------------------------------------------------------------- specs

for _, arch in ipairs(ARCHS) do
  describe("nvcc " .. arch .. " extended integer instructions", function()
    it("fns, dp4a and dp2a (every signedness), bmsk, szext, cvt.pack.sat (every type), 16x2 add/min/max", function()
      run_templates("diff_intx", "diff_intx.cu", "intx_ops", arch, function(list)
        local count = 0
        for _, c in ipairs(list) do if arch == "sm90a" or not c.text:match("16x2") and not c.text:match("relu") then count = count + 1 end end
        return count
      end)
    end)

    it("carry chains: the multi-word multiply with mad.cc/madc, madc.lo/.hi(.cc) 32 and 64-bit with addc/subc; lop3 d|p", function()
      local mod = load("diff_intx", arch)
      local out, out64 = output(17 * N, types.u32), output(7 * N, types.u64)
      mod.intx_chains { grid = 2, block = 128, args = { input(A, types.u32), input(B, types.u32), input(Cv, types.u32), out, out64, N }, device = device() }
      local refs, refs64 = {}, {}
      for t = 0, N - 1 do refs[t], refs64[t] = chains_ref(A[t + 1], B[t + 1], Cv[t + 1]) end
      local function label(k) return ("output %d"):format(k) end
      compare("intx_chains", out:to_host(), 17, N, function(k, t) return u32(refs[t][k + 1]) end, function(k, t) return label(k) .. "; " .. show(t) end)
      local got = out64:to_host()
      for k = 0, 6 do
        for t = 0, N - 1 do
          local g, w = got[k * N + t], refs64[t][k + 1]
          assert(g == w, ("intx_chains 64-bit output %d, thread %d: got 0x%016x, expected 0x%016x (%s)"):format(k, t, g, w, show(t)))
        end
      end
    end)

    it("the CUDA intrinsics: __dp4a __dp2a_lo/hi __fns __vabsdiff* __vsad* __vimax3/__vimin/__viaddmax/__viaddmin 16x2", function()
      local mod = load("diff_intx", arch)
      local K = 15
      local out = output(K * N, types.u32)
      mod.intx_intrinsics { grid = 2, block = 128, args = { input(A, types.u32), input(B, types.u32), input(Cv, types.u32), out, N }, device = device() }
      local refs = {}
      for t = 0, N - 1 do refs[t] = intrinsics_ref(A[t + 1], B[t + 1], Cv[t + 1]) end
      compare("intx_intrinsics", out:to_host(), K, N, function(k, t) return refs[t][k + 1] end, function(_, t) return show(t) end)
    end)

    it("alloca from C, and stacksave / alloca / stackrestore in a loop", function()
      local mod = load("diff_intx", arch)
      local src = H.rand_s32(N, 83)
      local out = output(2 * N, types.s32)
      mod.intx_stack { grid = 2, block = 128, args = { input(src, types.s32), out, N }, device = device() }
      local got = out:to_host()
      for t = 0, N - 1 do
        local s, depth = stack_ref(src, t, N)
        assert(got[t] == s and got[N + t] == depth, ("intx_stack thread %d: got %d, %d; expected %d, %d"):format(t, got[t], got[N + t], s, depth))
      end
    end)
  end)

  describe("nvcc " .. arch .. " video instructions", function()
    it("scalar vadd vsub vabsdiff vmin vmax vshl vshr vmad vset and SIMD vadd2 ... vset2, vadd4 ... vset4", function()
      run_templates("diff_video", "diff_video.cu", "video_ops", arch, function(list) return #list end)
    end)
  end)
end
