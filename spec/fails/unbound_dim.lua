-- expect: kernel "unbound_dim": dimension K of in spec 1 is not bound; pass it, e.g. k:ptx{K = 1024} (luaptx ptx/check/sass/compile/profile: -D K=1024)
local pyptx = require "pyptx"
local T = pyptx.types

return pyptx.kernel "unbound_dim" { -- here
  arch = "sm_80", in_specs = { pyptx.Tile("M", "K", T.f32) }, params = { M = 64 },
  function() end,
}
