-- expect: kernel "unknown_option": unknown option 'blocks'; valid options: address_size, arch, block, check_refs, cluster
local pyptx = require "pyptx"

return pyptx.kernel "unknown_option" { -- here
  arch = "sm_80",
  blocks = { 128 },
  function() end,
}
