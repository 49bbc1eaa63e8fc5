--- IEEE half (f16) and bfloat16 conversions with round-to-nearest-even,
-- done on bit patterns so results match the GPU's cvt.rn exactly.
local ffi = require "ffi"
local bit = require "bit"
local band, bor, rshift, lshift = bit.band, bit.bor, bit.rshift, bit.lshift

local M = {}

local f32box = ffi.new("union { float f; uint32_t u; }")

--- The f32 bit pattern of a Lua number (rounded to f32).
local function f32_bits(x)
  f32box.f = x
  return f32box.u
end

--- A Lua number from an f32 bit pattern.
local function from_f32_bits(u)
  f32box.u = u
  return f32box.f
end
M.f32_bits, M.from_f32_bits = f32_bits, from_f32_bits

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

return M
