-- expect: add.fast.u32: unknown or repeated modifier .fast for add; valid modifiers: .rn .rz
local pyptx = require "pyptx"
local reg, ptx, T = pyptx.reg, pyptx.ptx, pyptx.types

return pyptx.kernel "unknown_modifier" { arch = "sm_80", function()
  local a = reg.scalar(T.u32, 1)
  ptx.inst.add.fast.u32(a, a, 1) -- here
end }
