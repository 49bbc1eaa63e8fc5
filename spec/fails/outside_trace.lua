-- expect: ptx instruction called outside a kernel trace (use it inside a kernel body)
local pyptx = require "pyptx"
local ptx = pyptx.ptx

ptx.ret() -- here

return pyptx.kernel "outside_trace" { arch = "sm_80", function() end }
