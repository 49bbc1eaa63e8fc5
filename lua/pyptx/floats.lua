--- IEEE half (f16) and bfloat16 conversions with round-to-nearest-even,
-- done on bit patterns so results match the GPU's cvt.rn exactly; and the
-- fp8 formats e4m3 / e5m2 (decoded from their definitions, encoded as the
-- nearest value with ties to even and .satfinite clamping).
local ffi = require "ffi"
local bit = require "bit"
local argcheck = require "pyptx.args"
local band, bor, rshift, lshift = bit.band, bit.bor, bit.rshift, bit.lshift

local M = {}

local f32box = ffi.new("union { float f; uint32_t u; }")

--- The f32 bit pattern of a Lua number (rounded to f32).
local function f32_bits(x)
  f32box.f = x
  return f32box.u
end

local NAN = 0 / 0

--- A Lua number from an f32 bit pattern. Every NaN comes back as Lua's own
-- NaN: a NaN float is never read through the FFI, because LuaJIT 2.1
-- without GC64 reads some NaN bit patterns as other values (0xffffffff
-- as nil, 0xfff80000 as a non-number that can crash the VM).
local function from_f32_bits(u)
  if band(u, 0x7f800000) == 0x7f800000 and band(u, 0x7fffff) ~= 0 then return NAN end
  f32box.u = u
  return f32box.f
end
M.f32_bits, M.from_f32_bits = f32_bits, from_f32_bits

local f64box = ffi.new("union { double d; uint32_t u[2]; }")

--- A Lua number from the low and high 32-bit halves of an f64 bit
-- pattern; every NaN as Lua's own NaN (see from_f32_bits).
function M.from_f64_bits(lo, hi)
  if band(hi, 0x7ff00000) == 0x7ff00000 and bor(band(hi, 0xfffff), lo) ~= 0 then return NAN end
  f64box.u[0], f64box.u[1] = lo, hi
  return f64box.d
end

--- bf16 bits of x: the top half of f32 with round-to-nearest-even.
function M.to_bf16(x)
  local u = f32_bits(x)
  if band(u, 0x7f800000) == 0x7f800000 and band(u, 0x007fffff) ~= 0 then
    return bor(rshift(u, 16), 0x40) -- quiet NaN
  end
  local lsb = band(rshift(u, 16), 1)
  return band(rshift(u + 0x7fff + lsb, 16), 0xffff)
end

--- The value of bf16 bits.
function M.from_bf16(h)
  return from_f32_bits(lshift(h, 16))
end

--- x rounded to the nearest bf16 value (what a GPU reads from bf16 memory).
function M.round_bf16(x)
  return M.from_bf16(M.to_bf16(x))
end

--- f16 bits of x with round-to-nearest-even, overflow to inf, subnormals.
function M.to_f16(x)
  local u = f32_bits(x)
  local sign = band(rshift(u, 16), 0x8000)
  local exp = band(rshift(u, 23), 0xff)
  local man = band(u, 0x7fffff)
  if exp == 0xff then return bor(sign, 0x7c00, man ~= 0 and 0x200 or 0) end
  local e = exp - 127 + 15
  if e >= 31 then return bor(sign, 0x7c00) end
  if e <= 0 then
    if e < -10 then return sign end
    man = bor(man, 0x800000)
    local shift = 14 - e
    local half_ulp = lshift(1, shift - 1)
    local rest = band(man, lshift(1, shift) - 1)
    local q = rshift(man, shift)
    if rest > half_ulp or (rest == half_ulp and band(q, 1) == 1) then q = q + 1 end
    return bor(sign, q)
  end
  local q = bor(lshift(e, 10), rshift(man, 13))
  local rest = band(man, 0x1fff)
  if rest > 0x1000 or (rest == 0x1000 and band(q, 1) == 1) then q = q + 1 end
  return bor(sign, q)
end

--- The value of f16 bits.
function M.from_f16(h)
  local sign = band(h, 0x8000) ~= 0 and -1 or 1
  local exp = band(rshift(h, 10), 0x1f)
  local man = band(h, 0x3ff)
  if exp == 0 then return sign * man * 2 ^ -24 end
  if exp == 31 then return man == 0 and sign * math.huge or 0 / 0 end
  return sign * (1 + man / 1024) * 2 ^ (exp - 15)
end

--- x rounded to the nearest f16 value.
function M.round_f16(x)
  return M.from_f16(M.to_f16(x))
end

-- fp8: sign, exponent, mantissa fields (e4m3: bias 7, no infinity, S.1111.111
-- is NaN; e5m2: bias 15, IEEE-like with Inf and NaN). The largest finite
-- magnitude codes are 0x7e (448) and 0x7b (57344).
local FP8 = { e4m3 = { m = 3, bias = 7, maxcode = 0x7e }, e5m2 = { m = 2, bias = 15, maxcode = 0x7b } }

--- The value of fp8 bits b of format f (FP8 entry).
local function fp8_value(f, b)
  local sign = band(b, 0x80) ~= 0 and -1 or 1
  local mag = band(b, 0x7f)
  if mag > f.maxcode and (f == FP8.e4m3 or band(mag, lshift(1, f.m) - 1) ~= 0) then return 0 / 0 end
  if mag > f.maxcode then return sign * math.huge end
  local e, man = rshift(mag, f.m), band(mag, lshift(1, f.m) - 1)
  if e == 0 then return sign * man * 2 ^ (1 - f.bias - f.m) end
  return sign * (1 + man / 2 ^ f.m) * 2 ^ (e - f.bias)
end

--- fp8 bits of x in format f: the nearest finite value (ties to the even
-- code), magnitudes beyond the largest clamped to it, NaN -> 0x7f.
local function fp8_bits(f, x)
  if x ~= x then return 0x7f end
  local sign = (x < 0 or 1 / x < 0) and 0x80 or 0
  local a, best, bestd = math.abs(x), 0, math.huge
  if a >= fp8_value(f, f.maxcode) then return bor(sign, f.maxcode) end
  for c = 0, f.maxcode do
    local d = math.abs(fp8_value(f, c) - a)
    if d < bestd or (d == bestd and c % 2 == 0) then best, bestd = c, d end
  end
  return bor(sign, best)
end

--- The value of e4m3 bits.
function M.from_e4m3(b) return fp8_value(FP8.e4m3, b) end

--- The value of e5m2 bits.
function M.from_e5m2(b) return fp8_value(FP8.e5m2, b) end

--- e4m3 bits of x (cvt.rn.satfinite).
function M.to_e4m3(x) return fp8_bits(FP8.e4m3, x) end

--- e5m2 bits of x (cvt.rn.satfinite).
function M.to_e5m2(x) return fp8_bits(FP8.e5m2, x) end

argcheck.sign(M, "floats", {
  f32_bits = { "x: number" }, from_f32_bits = { "u: integer|cdata" }, from_f64_bits = { "lo: integer|cdata", "hi: integer|cdata" },
  to_bf16 = { "x: number" }, from_bf16 = { "h: integer" }, round_bf16 = { "x: number" },
  to_f16 = { "x: number" }, from_f16 = { "h: integer" }, round_f16 = { "x: number" },
  to_e4m3 = { "x: number" }, from_e4m3 = { "b: integer" }, to_e5m2 = { "x: number" }, from_e5m2 = { "b: integer" },
})

return M
