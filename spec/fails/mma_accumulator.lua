-- expect: mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32: operand 1 (d) element 1 is a f32 register (%f1); expected a 32-bit s32/u32/b32 register
local pyptx = require "pyptx"
local ptx, reg, T = pyptx.ptx, pyptx.reg, pyptx.types

return pyptx.kernel "mma_accumulator" { arch = "sm_80", function()
  local a, b, d, c = reg.array(T.b32, 4), reg.array(T.b32, 2), reg.array(T.f32, 4), reg.array(T.s32, 4)
  ptx.mma { shape = "m16n8k32", atype = "s8", d = d, a = a, b = b, c = c } -- here
end }
