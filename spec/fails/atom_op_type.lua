-- expect: atom.global.and.u32: .and does not take .u32; valid types: .b32 .b64
local pyptx = require "pyptx"
local reg, ptx, T = pyptx.reg, pyptx.ptx, pyptx.types

return pyptx.kernel "atom_op_type" { arch = "sm_80", in_specs = { pyptx.Tile(4, T.u32) }, function(X)
  local p = ptx.global_ptrs(X)
  local old = reg.scalar(T.u32)
  ptx.atom("and", old, ptx.addr(p), 0xff) -- here
end }
