-- expect: add.u32 takes 3 operand(s), got 2
-- A body ending in a tail call has no frame left when the error is raised;
-- the kernel's defining line is named instead of luaptx's own code.
local pyptx = require "pyptx"
local reg, ptx, T = pyptx.reg, pyptx.ptx, pyptx.types

return pyptx.kernel "tail_call_body" { arch = "sm_80", function() -- here
  local a = reg.scalar(T.u32)
  return ptx.inst.add.u32(a, a)
end }
