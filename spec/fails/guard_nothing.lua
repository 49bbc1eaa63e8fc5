-- expect: ptx.at guards nothing; call the instruction through it: ptx.at(p).inst.op(...)
local pyptx = require "pyptx"
local reg, ptx, T = pyptx.reg, pyptx.ptx, pyptx.types

return pyptx.kernel "guard_nothing" { arch = "sm_80", function()
  local done = reg.from(ptx.special.tid.x(), T.u32):ge(32)
  ptx.at(done) -- here
  ptx.ret()
end }
