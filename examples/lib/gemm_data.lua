--- The host side every bf16 GEMM example shares (Hopper and Blackwell):
-- random inputs, the double-precision reference of D = A * B^T and the
-- launch arguments. Groups (examples/blackwell/grouped_gemm.lua) stack G
-- problems: A (G*M x K), B (G*N x K), D (G*M x N); an ungrouped problem
-- is G = 1. Each example keeps its own tolerance: it depends on what the
-- kernel rounds.
local pyptx = require "pyptx"
local floats = require "pyptx.floats"
local T = pyptx.types

local D = {}

--- Random inputs in [-1, 1): { a (G*M x K), b (G*N x K), M, N, K, G }.
function D.inputs(m, n, k, seed, g)
  g = g or 1
  math.randomseed(seed or 1)
  local a, b = {}, {}
  for i = 1, g * m * k do a[i] = math.random() * 2 - 1 end
  for i = 1, g * n * k do b[i] = math.random() * 2 - 1 end
  return { a = a, b = b, M = m, N = n, K = k, G = g }
end

--- D_g = A_g * B_g^T in double precision from the bf16 values the kernel
-- reads, for every group g, stacked: a list of G*M*N values, row-major.
function D.reference(inp)
  local m, n, k, g = inp.M, inp.N, inp.K, inp.G or 1
  local a, b, d = {}, {}, {}
  for i = 1, #inp.a do a[i] = floats.round_bf16(inp.a[i]) end
  for i = 1, #inp.b do b[i] = floats.round_bf16(inp.b[i]) end
  for grp = 0, g - 1 do
    for i = grp * m, grp * m + m - 1 do
      for j = grp * n, grp * n + n - 1 do
        local s, ai, bj = 0, i * k, j * k
        for t = 1, k do s = s + a[ai + t] * b[bj + t] end
        d[i * n + (j - grp * n) + 1] = s
      end
    end
  end
  return d
end

--- The tensors a launch takes: A (G*M x K) and B (G*N x K), bf16.
function D.args(inp)
  local g = inp.G or 1
  return { { inp.a, { g * inp.M, inp.K }, dtype = T.bf16 }, { inp.b, { g * inp.N, inp.K }, dtype = T.bf16 } }
end

return D
