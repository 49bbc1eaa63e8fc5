-- expect: add.u32: operand 3 is 1.5, expected an integer for .u32
local pyptx = require "pyptx"
local reg, T = pyptx.reg, pyptx.types

return pyptx.kernel "bad_immediate" { arch = "sm_80", function()
  local a = reg.scalar(T.u32, 1)
  local _ = a + 1.5 -- here
end }
