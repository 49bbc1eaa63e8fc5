-- expect: ld.global.v4.f32: operand 1 must be a vector of 4 elements ({a, b, ...}) for .v4
local pyptx = require "pyptx"
local reg, ptx, T = pyptx.reg, pyptx.ptx, pyptx.types

return pyptx.kernel "vector_width" { arch = "sm_80", in_specs = { pyptx.Tile(4, T.f32) }, function(X)
  local p = ptx.global_ptrs(X)
  local a, b = reg.scalar(T.f32), reg.scalar(T.f32)
  ptx.inst.ld.global.v4.f32({ a, b }, ptx.addr(p)) -- here
end }
