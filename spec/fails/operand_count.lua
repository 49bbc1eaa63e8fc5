-- expect: add.u32 takes 3 operand(s), got 2
local pyptx = require "pyptx"
local reg, ptx, T = pyptx.reg, pyptx.ptx, pyptx.types

return pyptx.kernel "operand_count" { arch = "sm_80", function()
  local a = reg.scalar(T.u32, 1)
  ptx.inst.add.u32(a, a) -- here
end }
