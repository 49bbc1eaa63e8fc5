-- expect: bra: label 'done' is never placed in this kernel
local pyptx = require "pyptx"
local ptx = pyptx.ptx

return pyptx.kernel "k" {
  arch = "sm_80",
  function()
    ptx.bra("done") -- here
    ptx.ret()
  end,
}
