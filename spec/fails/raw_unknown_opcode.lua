-- warn: frobnicate.sync.b32: opcode not in luaptx's instruction table; emitted unchecked
local pyptx = require "pyptx"
local reg, ptx, T = pyptx.reg, pyptx.ptx, pyptx.types

return pyptx.kernel "raw_unknown_opcode" { arch = "sm_80", function()
  local a = reg.scalar(T.b32, 1)
  ptx.inst("frobnicate.sync.b32", a, a, 0xffffffff) -- here
end }
