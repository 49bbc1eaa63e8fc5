-- expect: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32: operand 2 (a) must be a vector of 4 registers, got 2
local pyptx = require "pyptx"
local ptx, reg, T = pyptx.ptx, pyptx.reg, pyptx.types

return pyptx.kernel "mma_fragment_count" { arch = "sm_80", function()
  local a, b, c = reg.array(T.b32, 4), reg.array(T.b32, 2), reg.array(T.f32, 4)
  local acc = { c[0], c[1], c[2], c[3] }
  ptx.inst.mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32(acc, { a[0], a[1] }, { b[0], b[1] }, acc) -- here
end }
