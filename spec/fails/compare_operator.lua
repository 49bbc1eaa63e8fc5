-- expect: <, <=, >, >= on register %r1 cannot emit PTX (Lua needs a boolean now); use a:lt(b), a:le(b), a:gt(b), a:ge(b)
local pyptx = require "pyptx"
local reg, ptx, T = pyptx.reg, pyptx.ptx, pyptx.types

return pyptx.kernel "compare_operator" { arch = "sm_80", function()
  local tid, n = reg.from(ptx.special.tid.x(), T.u32), reg.scalar(T.u32, 16)
  if tid < n then -- here
    ptx.inst.add.u32(tid, tid, 1)
  end
end }
