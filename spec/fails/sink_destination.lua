-- expect: shfl.sync.bfly.b32: operand 1 is the sink _, which shfl.sync.bfly.b32 does not accept as a destination
local pyptx = require "pyptx"
local reg, ptx, T = pyptx.reg, pyptx.ptx, pyptx.types

return pyptx.kernel "sink_destination" { arch = "sm_80", function()
  local v = reg.scalar(T.b32, 0)
  ptx.inst.shfl.sync.bfly.b32(ptx.sink, v, 1, 0x1f, 0xffffffff) -- here
end }
