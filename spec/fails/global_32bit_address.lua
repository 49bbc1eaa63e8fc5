-- expect: ld.global.f32: operand 2 is an address in a 32-bit register; global and generic addresses are 64-bit
local pyptx = require "pyptx"
local reg, ptx, T = pyptx.reg, pyptx.ptx, pyptx.types

return pyptx.kernel "global_32bit_address" { arch = "sm_80", function()
  local off = reg.from(ptx.special.tid.x(), T.u32)
  ptx.ld.global(reg.scalar(T.f32), ptx.addr(off)) -- here
end }
