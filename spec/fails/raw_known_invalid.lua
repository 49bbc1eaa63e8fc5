-- expect: ld.global.nc.f32: operand 1 is a u32 register (%r1); expected a f32 (or b32) register
local pyptx = require "pyptx"
local reg, ptx, T = pyptx.reg, pyptx.ptx, pyptx.types

return pyptx.kernel "raw_known_invalid" { arch = "sm_80", in_specs = { pyptx.Tile(4, T.f32) }, function(X)
  local p = ptx.global_ptrs(X)
  ptx.inst("ld.global.nc.f32", reg.scalar(T.u32), ptx.addr(p)) -- here
end }
