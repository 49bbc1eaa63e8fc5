-- expect: cvt.f32.s32: integer-to-float cvt needs a rounding modifier: .rn .rz .rm .rp
local pyptx = require "pyptx"
local reg, ptx, T = pyptx.reg, pyptx.ptx, pyptx.types

return pyptx.kernel "cvt_rounding" { arch = "sm_80", function()
  local i, x = reg.scalar(T.s32, 3), reg.scalar(T.f32)
  ptx.cvt(x, i) -- here
end }
