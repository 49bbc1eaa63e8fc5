-- expect: setp.u32: setp needs one of .eq .ne .lt .le .gt .ge
local pyptx = require "pyptx"
local reg, ptx, T = pyptx.reg, pyptx.ptx, pyptx.types

return pyptx.kernel "missing_modifier" { arch = "sm_80", function()
  local a = reg.scalar(T.u32, 1)
  ptx.inst.setp.u32(reg.pred(), a, 0) -- here
end }
