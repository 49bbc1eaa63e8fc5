-- expect: kernel "version_unknown_target": PTX ISA 7.8 does not know sm_90a; use version 8.0 or newer
local pyptx = require "pyptx"
local ptx = pyptx.ptx

return pyptx.kernel "version_unknown_target" { arch = "sm_90a", version = "7.8", function() -- here
  ptx.ret()
end }
