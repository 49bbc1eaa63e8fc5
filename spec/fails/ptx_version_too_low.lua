-- expect: ld.global.v8.f32 needs PTX ISA 8.8; this kernel uses 8.6 (raise the kernel's version)
local pyptx = require "pyptx"
local reg, ptx, T = pyptx.reg, pyptx.ptx, pyptx.types

return pyptx.kernel "ptx_version_too_low" { arch = "sm_100a", version = "8.6", in_specs = { pyptx.Tile(8, T.f32) },
  function(X)
    local p = ptx.global_ptrs(X)
    local v = reg.array(T.f32, 8)
    ptx.ld.global({ v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7] }, ptx.addr(p)) -- here
  end,
}
