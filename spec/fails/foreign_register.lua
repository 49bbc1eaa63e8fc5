-- expect: register %r1 belongs to another kernel trace
local pyptx = require "pyptx"
local reg, ptx, T = pyptx.reg, pyptx.ptx, pyptx.types

local leaked
pyptx.kernel "first" { arch = "sm_80", function() leaked = reg.scalar(T.u32, 1) end }:ptx()

return pyptx.kernel "foreign_register" { arch = "sm_80", function()
  local a = reg.scalar(T.u32)
  ptx.mov(a, leaked) -- here
end }
