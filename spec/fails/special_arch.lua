-- expect: mov.u32: operand 2 %clusterid.x needs sm_90 or newer; this kernel targets sm_80
local pyptx = require "pyptx"
local reg, ptx, T = pyptx.reg, pyptx.ptx, pyptx.types

return pyptx.kernel "special_arch" { arch = "sm_80", function()
  reg.from(ptx.special.clusterid.x(), T.u32) -- here
end }
