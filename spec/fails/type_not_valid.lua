-- expect: add.b32: type .b32 is not valid here; valid types: .u16 .u32 .u64 .s16 .s32 .s64
local pyptx = require "pyptx"
local reg, ptx, T = pyptx.reg, pyptx.ptx, pyptx.types

return pyptx.kernel "type_not_valid" { arch = "sm_80", function()
  local a = reg.scalar(T.b32, 1)
  ptx.inst.add.b32(a, a, a) -- here
end }
