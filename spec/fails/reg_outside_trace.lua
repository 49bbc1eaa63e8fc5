-- expect: reg.scalar called outside a kernel trace (use it inside a kernel body)
local pyptx = require "pyptx"
local reg, T = pyptx.reg, pyptx.types

local counter = reg.scalar(T.u32) -- here

return pyptx.kernel "reg_outside_trace" { arch = "sm_80", function() return counter end }
