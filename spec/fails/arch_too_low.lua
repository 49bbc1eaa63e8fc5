-- expect: add.bf16 needs sm_90 or newer; this kernel targets sm_80
local pyptx = require "pyptx"
local reg, T = pyptx.reg, pyptx.types

return pyptx.kernel "arch_too_low" { arch = "sm_80", function()
  local h = reg.scalar(T.bf16)
  local _ = h + h -- here
end }
