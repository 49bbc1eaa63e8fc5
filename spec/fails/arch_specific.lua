-- expect: wgmma.fence.sync.aligned needs target sm_90a; this kernel targets sm_80
local pyptx = require "pyptx"
local ptx = pyptx.ptx

return pyptx.kernel "arch_specific" { arch = "sm_80", function()
  ptx.inst.wgmma.fence.sync.aligned() -- here
end }
