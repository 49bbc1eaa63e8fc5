--- Layer norm, one CTA per row:
--   y[b, :] = (x[b, :] - mean) * rsqrt(var + eps) * gamma + beta,
-- mean and (biased) var over the row's N features.
--
-- The row slice stays in registers (float4 loads, read from DRAM once), so
-- the variance is computed in two passes over registers — sum(x) first,
-- then sum((x - mean)^2) — which avoids the cancellation of E[x^2]-mean^2
-- at no extra memory traffic. Each pass is a warp shuffle reduction plus
-- a CTA reduction through shared memory; the two passes use separate
-- shared buffers, so one bar.sync per pass suffices (no thread can
-- overwrite partials another thread is still reading).
--
-- Shape constraints (build() raises an error naming the violated one):
--  * N % 128 == 0           a warp covers whole float4 chunks;
--  * N % (4 * threads) == 0 every thread owns the same number of chunks;
--  * N / (4 * threads) <= 8 at most 8 float4 chunks per thread (x, gamma
--                           and beta = 96 floats in registers, no spills).
-- threads defaults to 256 (fewer for short rows, more for long ones).
local pyptx = require "pyptx"
local kernel, reg, ptx, Tile = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.Tile
local f32, u32 = pyptx.types.f32, pyptx.types.u32

local M = {}

M.MAX_CHUNKS = 8 -- float4 chunks per thread; more would spill at 255 registers

local rowwise = require "examples.lib.rowwise"
local cta_context, v4 = rowwise.cta_context, rowwise.v4

--- Threads per CTA for a row of n floats (see examples/lib/rowwise.lua).
local function threads_for(n, opts)
  return rowwise.threads_for(n, opts, M.MAX_CHUNKS)
end

--- Why (B, N, opts) breaks the shape rules above, or nil when it does not.
-- build() raises it at its caller; the retargeted copies in ampere/ and
-- blackwell/ call it themselves so their errors point at their callers.
function M.shape_error(B, N, opts)
  return rowwise.shape_error("layer_norm", B, N, opts, { max_chunks = M.MAX_CHUNKS })
end

--- Sum the per-thread partial s over the CTA; every thread gets the total.
local function cta_sum(s, cta)
  return rowwise.cta_reduce(s, cta, "add")
end

--- A layer-norm kernel for B rows of N floats. opts: arch (default
-- "sm_90a"), eps (1e-5, PyTorch's default), threads, name.
function M.build(B, N, opts)
  opts = opts or {}
  local err = M.shape_error(B, N, opts)
  if err then error(err, 2) end
  local threads = threads_for(N, opts)
  local name = opts.name or "layer_norm"
  local eps = opts.eps or 1e-5
  local chunks = N / (4 * threads)
  local warps = threads / 32
  local stride = threads * 16                            -- bytes between a thread's chunks
  local n = 4 * chunks                                   -- floats per thread
  return kernel(name) {
    arch = opts.arch or "sm_90a",
    in_specs = { Tile(B, N, f32), Tile(N, f32), Tile(N, f32) },
    out_specs = { Tile(B, N, f32) },
    grid = { B, 1, 1 }, block = { threads, 1, 1 },
    function(X, G, Bt, Y)
      local px, pg, pb, py = ptx.global_ptrs(X, G, Bt, Y)
      local tid = reg.from(ptx.special.tid.x(), u32)
      local row = reg.from(ptx.special.ctaid.x(), u32)
      local cta = cta_context(tid, warps)
      -- Chunk c of a thread starts at element (c*threads + tid)*4: each
      -- warp-wide load covers 512 contiguous bytes.
      local toff = tid:mul_wide(16)
      local roff = row:mul_wide(N * 4) + toff
      local xa, ya, ga, ba = px + roff, py + roff, pg + toff, pb + toff
      local x, g, b = reg.array(f32, n), reg.array(f32, n), reg.array(f32, n)
      for c = 0, chunks - 1 do ptx.ld.global(v4(x, 4 * c), ptx.addr(xa, c * stride)) end
      -- gamma/beta are shared by all rows (read-only path); issuing them now
      -- hides their latency behind both reductions.
      for c = 0, chunks - 1 do ptx.ld.global.nc(v4(g, 4 * c), ptx.addr(ga, c * stride)) end
      for c = 0, chunks - 1 do ptx.ld.global.nc(v4(b, 4 * c), ptx.addr(ba, c * stride)) end

      local s = x[0] + x[1]
      for i = 2, n - 1 do ptx.inst.add.f32(s, s, x[i]) end
      local mean = cta_sum(s, cta) * (1 / N)

      -- Pass two: center x in place, then sum the squares.
      for i = 0, n - 1 do ptx.inst.sub.f32(x[i], x[i], mean) end
      local q = x[0] * x[0]
      for i = 1, n - 1 do ptx.inst.fma.rn.f32(q, x[i], x[i], q) end
      local var = cta_sum(q, cta) * (1 / N)
      local rstd = reg.scalar(f32)
      ptx.inst.rsqrt.approx.f32(rstd, var + eps)

      for i = 0, n - 1 do
        ptx.inst.mul.f32(x[i], x[i], rstd)
        ptx.inst.fma.rn.f32(x[i], x[i], g[i], b[i])
      end
      for c = 0, chunks - 1 do ptx.st.global(ptx.addr(ya, c * stride), v4(x, 4 * c)) end
      ptx.ret()
    end,
  }
end

--- CPU reference in double precision on 1-based row-major Lua arrays:
-- inputs = { x = B*N values, gamma = N, beta = N, B = , N = , eps = (1e-5) };
-- returns y as B*N values.
function M.reference(inputs)
  local x, gamma, beta, B, N = inputs.x, inputs.gamma, inputs.beta, inputs.B, inputs.N
  local eps = inputs.eps or 1e-5
  local y = {}
  for r = 0, B - 1 do
    local base, sum = r * N, 0
    for i = 1, N do sum = sum + x[base + i] end
    local mean, sq = sum / N, 0
    for i = 1, N do sq = sq + (x[base + i] - mean) ^ 2 end
    local rstd = 1 / math.sqrt(sq / N + eps)
    for i = 1, N do y[base + i] = (x[base + i] - mean) * rstd * gamma[i] + beta[i] end
  end
  return y
end

--- Random inputs for reference checks (never zeros): x in [-1, 3) so the
-- mean is far from 0, gamma in [0.5, 1.5), beta in [-0.5, 0.5).
function M.inputs(B, N, seed)
  math.randomseed(seed or 1)
  local x, gamma, beta = {}, {}, {}
  for i = 1, B * N do x[i] = math.random() * 4 - 1 end
  for i = 1, N do gamma[i] = math.random() + 0.5 end
  for i = 1, N do beta[i] = math.random() - 0.5 end
  return { x = x, gamma = gamma, beta = beta, B = B, N = N }
end

-- A transformer-sized default: 4096 tokens of 4096 features.
M.DEFAULT_SIZES = { { 4096, 4096 } }
M.kernels = {}
for i, size in ipairs(M.DEFAULT_SIZES) do M.kernels[i] = M.build(size[1], size[2], size[3]) end

--- The tensors a launch takes, in the kernel's order, from M.inputs.
function M.args(inputs)
  return { { inputs.x, { inputs.B, inputs.N } }, { inputs.gamma, { inputs.N } }, { inputs.beta, { inputs.N } } }
end


-- check(B, N, opts) and main(args) for `luaptx run examples/hopper/layer_norm.lua [B N] [--summary]`
require("examples.lib.runner").install(M, "layer_norm", { atol = 1e-4, rtol = 1e-4 })

return M
