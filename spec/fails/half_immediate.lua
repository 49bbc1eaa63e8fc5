-- expect: add.f16: operand 3 is the number 1, but PTX has no .f16 immediates
local pyptx = require "pyptx"
local reg, T = pyptx.reg, pyptx.types

return pyptx.kernel "half_immediate" { arch = "sm_80", function()
  local h = reg.scalar(T.f16)
  local _ = h + 1 -- here
end }
