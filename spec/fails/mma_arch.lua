-- expect: mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64: mma.sync.m16n8k8 with .f64 inputs needs sm_90; this kernel targets sm_80
local pyptx = require "pyptx"
local ptx, reg, T = pyptx.ptx, pyptx.reg, pyptx.types

return pyptx.kernel "mma_arch" { arch = "sm_80", function()
  local a, b, c = reg.array(T.f64, 4), reg.array(T.f64, 2), reg.array(T.f64, 4)
  ptx.mma { shape = "m16n8k8", atype = "f64", d = c, a = a, b = b, c = c } -- here
end }
