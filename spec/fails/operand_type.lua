-- expect: add.u32: operand 2 is a f32 register (%f1); expected a u32/s32/b32 register or an integer
local pyptx = require "pyptx"
local reg, ptx, T = pyptx.reg, pyptx.ptx, pyptx.types

return pyptx.kernel "operand_type" { arch = "sm_80", function()
  local a = reg.scalar(T.u32, 1)
  local x = reg.scalar(T.f32)
  ptx.inst.add.u32(a, x, 1) -- here
end }
