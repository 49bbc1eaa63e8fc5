-- expect: label 'top' is placed twice
local pyptx = require "pyptx"
local ptx = pyptx.ptx

return pyptx.kernel "label_twice" { arch = "sm_80", function()
  ptx.label("top")
  ptx.label("top") -- here
end }
