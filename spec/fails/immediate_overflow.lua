-- expect: mov.u16: operand 2 is 70000, which does not fit in 16 bits
local pyptx = require "pyptx"
local reg, T = pyptx.reg, pyptx.types

return pyptx.kernel "immediate_overflow" { arch = "sm_80", function()
  reg.scalar(T.u16, 70000) -- here
end }
