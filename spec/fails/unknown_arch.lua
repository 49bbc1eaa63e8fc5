-- expect: kernel "unknown_arch": unknown arch 'sm_9x'; use e.g. sm_80, sm_90a, sm_100a or "auto"
local pyptx = require "pyptx"

return pyptx.kernel "unknown_arch" { arch = "sm_9x", function() end } -- here
