-- warn: predicate %p1 from :lt is never used as a guard, branch or operand (a Lua `if` on it is always true); use ptx.if_(p, fn) or ptx.at(p)
local pyptx = require "pyptx"
local reg, ptx, T = pyptx.reg, pyptx.ptx, pyptx.types

return pyptx.kernel "unused_predicate" { arch = "sm_80", function()
  local tid = reg.from(ptx.special.tid.x(), T.u32)
  if tid:lt(16) then -- here
    ptx.inst.add.u32(tid, tid, 1)
  end
end }
