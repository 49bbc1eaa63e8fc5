-- expect: ld.param.u64: 'no_such_param' names no parameter, variable, label or function of this kernel
local pyptx = require "pyptx"
local ptx, reg = pyptx.ptx, pyptx.reg

return pyptx.kernel "k" {
  arch = "sm_80",
  function()
    local r = reg.scalar(pyptx.types.u64)
    ptx.inst.ld.param.u64(r, ptx.addr("no_such_param")) -- here
    ptx.ret()
  end,
}
