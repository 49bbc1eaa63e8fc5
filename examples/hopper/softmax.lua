--- Row softmax, one CTA per row: y[b, i] = exp(x[b, i] - max) / sum_j exp(x[b, j] - max).
--
-- The row slice stays in registers (float4 loads, x read from DRAM once,
-- y written once). Two CTA reductions — the max, then the sum of
-- exponentials — each a warp butterfly plus one round through its own
-- shared buffer (separate buffers, so one bar.sync each is enough).
-- exp(x - m) is computed as ex2.approx(x*log2(e) - m*log2(e)): one fma and
-- one MUFU.EX2 per element, the same trick as CUDA's __expf. Subtracting
-- the max first keeps every exponent <= 0, so nothing overflows.
--
-- Shape constraints (build() raises an error naming the violated one):
--  * N % 128 == 0           a warp covers whole float4 chunks;
--  * N % (4 * threads) == 0 every thread owns the same number of chunks;
--  * N / (4 * threads) <= 16 at most 16 float4 chunks (64 floats) per
--                           thread live in registers;
--  * N <= 32768             the whole row lives in one CTA's registers, and
--                           a 1024-thread CTA gets at most 64 per thread.
-- threads defaults to 256 (fewer for short rows, more for long ones).
local pyptx = require "pyptx"
local kernel, reg, ptx, Tile = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.Tile
local f32, u32 = pyptx.types.f32, pyptx.types.u32

local M = {}

M.MAX_CHUNKS = 16 -- float4 chunks per thread; only x lives in registers here
M.MAX_N = 32768 -- 16 chunks at 512 threads; at 1024 threads ptxas caps registers at 64 and spills
local LOG2E = 1.4426950408889634

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
  return rowwise.shape_error("softmax", B, N, opts, { max_chunks = M.MAX_CHUNKS, max_n = M.MAX_N })
end

local cta_reduce = rowwise.cta_reduce

--- A row-softmax kernel for B rows of N floats. opts: arch (default
-- "sm_90a"), threads, name.
function M.build(B, N, opts)
  opts = opts or {}
  local err = M.shape_error(B, N, opts)
  if err then error(err, 2) end
  local threads = threads_for(N, opts)
  local name = opts.name or "softmax"
  local chunks = N / (4 * threads)
  local warps = threads / 32
  local stride = threads * 16                            -- bytes between a thread's chunks
  local n = 4 * chunks                                   -- floats per thread
  return kernel(name) {
    arch = opts.arch or "sm_90a",
    in_specs = { Tile(B, N, f32) },
    out_specs = { Tile(B, N, f32) },
    grid = { B, 1, 1 }, block = { threads, 1, 1 },
    function(X, Y)
      local px, py = ptx.global_ptrs(X, Y)
      local tid = reg.from(ptx.special.tid.x(), u32)
      local row = reg.from(ptx.special.ctaid.x(), u32)
      local cta = cta_context(tid, warps)
      -- Chunk c of a thread starts at element (c*threads + tid)*4: each
      -- warp-wide load covers 512 contiguous bytes.
      local off = row:mul_wide(N * 4) + tid:mul_wide(16)
      local xa, ya = px + off, py + off
      local x = reg.array(f32, n)
      for c = 0, chunks - 1 do ptx.ld.global(v4(x, 4 * c), ptx.addr(xa, c * stride)) end

      local m = x[0]:max(x[1])
      for i = 2, n - 1 do ptx.inst.max.f32(m, m, x[i]) end
      m = cta_reduce(m, cta, "max")

      -- x <- 2^(x*log2e - m*log2e) = e^(x - m), in place; sum as we go.
      local neg_ml = m * -LOG2E
      for i = 0, n - 1 do
        ptx.inst.fma.rn.f32(x[i], x[i], LOG2E, neg_ml)
        ptx.inst.ex2.approx.ftz.f32(x[i], x[i])
      end
      local s = x[0] + x[1]
      for i = 2, n - 1 do ptx.inst.add.f32(s, s, x[i]) end
      s = cta_reduce(s, cta, "add")

      local inv = reg.scalar(f32)
      ptx.inst.rcp.rn.f32(inv, s)                         -- once per thread: the exact one is cheap
      for i = 0, n - 1 do ptx.inst.mul.f32(x[i], x[i], inv) end
      for c = 0, chunks - 1 do ptx.st.global(ptx.addr(ya, c * stride), v4(x, 4 * c)) end
      ptx.ret()
    end,
  }
end

--- CPU reference in double precision on 1-based row-major Lua arrays:
-- inputs = { x = B*N values, B = , N = }; returns y as B*N values.
function M.reference(inputs)
  local x, B, N = inputs.x, inputs.B, inputs.N
  local y = {}
  for r = 0, B - 1 do
    local base, m = r * N, -math.huge
    for i = 1, N do m = math.max(m, x[base + i]) end
    local s = 0
    for i = 1, N do
      y[base + i] = math.exp(x[base + i] - m)
      s = s + y[base + i]
    end
    for i = 1, N do y[base + i] = y[base + i] / s end
  end
  return y
end

--- Random inputs for reference checks (never zeros): logits in [-8, 8).
function M.inputs(B, N, seed)
  math.randomseed(seed or 1)
  local x = {}
  for i = 1, B * N do x[i] = math.random() * 16 - 8 end
  return { x = x, B = B, N = N }
end

-- Attention-score-sized default: 4096 rows of 4096 logits.
M.DEFAULT_SIZES = { { 4096, 4096 } }
M.kernels = {}
for i, size in ipairs(M.DEFAULT_SIZES) do M.kernels[i] = M.build(size[1], size[2], size[3]) end

--- The tensors a launch takes, in the kernel's order, from M.inputs.
function M.args(inputs)
  return { { inputs.x, { inputs.B, inputs.N } } }
end


-- check(B, N, opts) and main(args) for `luaptx run examples/hopper/softmax.lua [B N] [--summary]`
require("examples.lib.runner").install(M, "softmax", { atol = 1e-6, rtol = 1e-4 })

return M
