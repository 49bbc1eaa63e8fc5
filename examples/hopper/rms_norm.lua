--- RMS norm, one CTA per row: y[b, :] = x[b, :] * rsqrt(mean(x[b, :]^2) + eps) * w.
--
-- Memory-bound, so the kernel is built around keeping bytes in flight:
-- every thread issues all of its float4 loads of x and w up front and
-- holds the row slice in registers, so x is read from DRAM exactly once.
-- The sum of squares is reduced inside each warp with shfl.sync.bfly,
-- then across warps through shared memory (one bar.sync); every thread
-- reads all warp partials back with broadcast v4 loads and adds them in
-- the same order, so no second barrier or second shuffle pass is needed.
--
-- Shape constraints (build() raises an error naming the violated one):
--  * N % 128 == 0           a warp covers whole float4 chunks;
--  * N % (4 * threads) == 0 every thread owns the same number of chunks;
--  * N / (4 * threads) <= 8 at most 8 float4 chunks (32 floats of x, 32 of
--                           w) per thread, so the row stays in registers
--                           without spilling: N <= 32768 at 1024 threads.
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
  return rowwise.shape_error("rms_norm", B, N, opts, { max_chunks = M.MAX_CHUNKS })
end

--- Sum the per-thread partial s over the CTA; every thread gets the total.
local function cta_sum(s, cta)
  return rowwise.cta_reduce(s, cta, "add")
end

--- An RMS-norm kernel for B rows of N floats. opts: arch (default
-- "sm_90a"), eps (1e-6), threads (see threads_for), name.
function M.build(B, N, opts)
  opts = opts or {}
  local err = M.shape_error(B, N, opts)
  if err then error(err, 2) end
  local threads = threads_for(N, opts)
  local name = opts.name or "rms_norm"
  local eps = opts.eps or 1e-6
  local chunks = N / (4 * threads)
  local warps = threads / 32
  local stride = threads * 16                            -- bytes between a thread's chunks
  return kernel(name) {
    arch = opts.arch or "sm_90a",
    in_specs = { Tile(B, N, f32), Tile(N, f32) },
    out_specs = { Tile(B, N, f32) },
    grid = { B, 1, 1 }, block = { threads, 1, 1 },
    function(X, W, Y)
      local px, pw, py = ptx.global_ptrs(X, W, Y)
      local tid = reg.from(ptx.special.tid.x(), u32)
      local row = reg.from(ptx.special.ctaid.x(), u32)
      local cta = cta_context(tid, warps)
      -- Chunk c of a thread starts at element (c*threads + tid)*4: a warp's
      -- 32 lanes read 512 contiguous bytes per load (fully coalesced).
      local toff = tid:mul_wide(16)
      local roff = row:mul_wide(N * 4) + toff
      local xa, ya, wa = px + roff, py + roff, pw + toff
      local x, w = reg.array(f32, 4 * chunks), reg.array(f32, 4 * chunks)
      for c = 0, chunks - 1 do ptx.ld.global(v4(x, 4 * c), ptx.addr(xa, c * stride)) end
      -- w is shared by every row: read-only path, and issued before the
      -- reduction so its latency hides behind the shuffles and barrier.
      for c = 0, chunks - 1 do ptx.ld.global.nc(v4(w, 4 * c), ptx.addr(wa, c * stride)) end
      local s = x[0] * x[0]
      for i = 1, 4 * chunks - 1 do ptx.inst.fma.rn.f32(s, x[i], x[i], s) end
      local total = cta_sum(s, cta)
      local ms = total * (1 / N)
      local rstd = reg.scalar(f32)
      ptx.inst.rsqrt.approx.f32(rstd, ms + eps)
      for i = 0, 4 * chunks - 1 do
        ptx.inst.mul.f32(x[i], x[i], rstd)
        ptx.inst.mul.f32(x[i], x[i], w[i])
      end
      for c = 0, chunks - 1 do ptx.st.global(ptx.addr(ya, c * stride), v4(x, 4 * c)) end
      ptx.ret()
    end,
  }
end

--- CPU reference in double precision on 1-based row-major Lua arrays:
-- inputs = { x = B*N values, w = N values, B = , N = , eps = (1e-6) };
-- returns y as B*N values.
function M.reference(inputs)
  local x, w, B, N = inputs.x, inputs.w, inputs.B, inputs.N
  local eps = inputs.eps or 1e-6
  local y = {}
  for b = 0, B - 1 do
    local base, ss = b * N, 0
    for i = 1, N do ss = ss + x[base + i] * x[base + i] end
    local rstd = 1 / math.sqrt(ss / N + eps)
    for i = 1, N do y[base + i] = x[base + i] * rstd * w[i] end
  end
  return y
end

--- Random inputs for reference checks (never zeros): x in [-2, 2), w in [0.5, 1.5).
function M.inputs(B, N, seed)
  math.randomseed(seed or 1)
  local x, w = {}, {}
  for i = 1, B * N do x[i] = math.random() * 4 - 2 end
  for i = 1, N do w[i] = math.random() + 0.5 end
  return { x = x, w = w, B = B, N = N }
end

-- Llama-style hidden size: 2048 tokens of 8192 features (what bench/trace.lua times too).
M.DEFAULT_SIZES = { { 2048, 8192 } }
M.kernels = {}
for i, size in ipairs(M.DEFAULT_SIZES) do M.kernels[i] = M.build(size[1], size[2], size[3]) end


--- The tensors a launch takes, in the kernel's order, from M.inputs.
function M.args(inputs)
  return { { inputs.x, { inputs.B, inputs.N } }, { inputs.w, { inputs.N } } }
end


-- check(B, N, opts) and main(args) for `luaptx run examples/hopper/rms_norm.lua [B N] [--summary]`
require("examples.lib.runner").install(M, "rms_norm", { atol = 1e-5, rtol = 1e-4 })

return M
