-- expect: operator + mixes u32 and u64; convert one side first with reg.from(x, u32)
local pyptx = require "pyptx"
local reg, T = pyptx.reg, pyptx.types

return pyptx.kernel "operator_mix" { arch = "sm_80", function()
  local a, b = reg.scalar(T.u32), reg.scalar(T.u64)
  local _ = a + b -- here
end }
