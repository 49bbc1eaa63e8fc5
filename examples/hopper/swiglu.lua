--- SwiGLU activation: out[b, i] = silu(gate[b, i]) * up[b, i],
-- silu(g) = g / (1 + exp(-g)).
--
-- Input layout (pick with opts.fused):
--  * split (default): two inputs gate [B, N] and up [B, N], in that order;
--  * fused (opts.fused = true): one input gate_up [B, 2N] whose row is
--    gate in columns [0, N) then up in [N, 2N) — what a merged gate/up
--    projection GEMM writes. Only the pointer arithmetic differs.
-- The output is [B, N] either way.
--
-- Purely elementwise, so there is no reduction (no shuffles, no shared
-- memory): the kernel is a stream of float4 loads and stores. Rows go on
-- grid.x (up to 2^31-1 tokens), column blocks on grid.y; each thread
-- handles `unroll` float4 chunks of gate and of up, all loads issued
-- before any math so 2*unroll*16 bytes per thread are in flight.
-- exp(-g) is ex2.approx(-g*log2(e)); for very negative g it is +inf and
-- rcp.approx(inf) = 0, so silu correctly goes to -0 instead of NaN.
--
-- Shape constraints (build() raises an error naming the violated one):
--  * unroll in [1, 8]                at most 64 floats of gate/up per thread;
--  * N % 128 == 0                    a warp covers whole float4 chunks;
--  * N % (4 * threads * unroll) == 0 every CTA covers whole column blocks;
--  * N / (4 * threads * unroll) <= 65535 (grid.y);
--  * N <= 2^28                       fused row offsets fit 32-bit immediates.
-- Defaults: the largest of 256/128/64/32 threads that divides the row,
-- with unroll 2 when possible (N = 14336 gets 256 x 2, N = 11008 64 x 1).
local pyptx = require "pyptx"
local kernel, reg, ptx, Tile = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.Tile
local f32, u32 = pyptx.types.f32, pyptx.types.u32

local M = {}

local LOG2E = 1.4426950408889634

--- (threads, unroll) for a row of n floats: opts' values, else the largest
-- of 256/128/64/32 threads that divides the row evenly, with unroll 2 when
-- that divides too and 1 otherwise.
local function config(n, opts)
  opts = opts or {}
  if opts.threads then
    return opts.threads, opts.unroll or (n % (8 * opts.threads) == 0 and 2 or 1)
  end
  -- Threads first: small CTAs cap occupancy (32 CTAs per SM) sooner than
  -- a smaller unroll costs bytes in flight.
  for _, t in ipairs { 256, 128, 64, 32 } do
    for _, unroll in ipairs(opts.unroll and { opts.unroll } or { 2, 1 }) do
      if n % (4 * t * unroll) == 0 then return t, unroll end
    end
  end
  return 32, opts.unroll or 1 -- no even split: shape_error names the rule
end

--- Why (B, N, opts) breaks the shape rules above, or nil when it does not.
-- build() raises it at its caller; the retargeted copies in ampere/ and
-- blackwell/ call it themselves so their errors point at their callers.
function M.shape_error(B, N, opts)
  local name = (opts and opts.name) or (opts and opts.fused and "swiglu_fused") or "swiglu"
  local function bad(msg) return name .. ": " .. msg end
  if type(B) ~= "number" or B < 1 or B ~= math.floor(B) then return bad("B must be a positive integer, got " .. tostring(B)) end
  if type(N) ~= "number" or N < 1 or N ~= math.floor(N) then return bad("N must be a positive integer, got " .. tostring(N)) end
  if B > 2147483647 then return bad("B must be at most 2^31-1 (one row per grid.x index)") end
  local threads, unroll = config(N, opts)
  if type(threads) ~= "number" or threads % 32 ~= 0 or threads < 32 or threads > 1024 then
    return bad(("threads must be a multiple of 32 in [32, 1024], got %s"):format(tostring(threads)))
  end
  if type(unroll) ~= "number" or unroll < 1 or unroll > 8 or unroll ~= math.floor(unroll) then
    return bad("unroll must be an integer in [1, 8] (2*unroll float4 chunks live in registers), got " .. tostring(unroll))
  end
  if N % 128 ~= 0 then return bad(("N %% 128 == 0 is required (whole float4 chunks per warp), got N = %d"):format(N)) end
  if N % (4 * threads * unroll) ~= 0 then
    return bad(("N %% (4 * threads * unroll) == 0 is required, got N = %d, threads = %d, unroll = %d"):format(N, threads, unroll))
  end
  if N / (4 * threads * unroll) > 65535 then
    return bad(("N / (4 * threads * unroll) <= 65535 is required (column blocks on grid.y), got %d"):format(N / (4 * threads * unroll)))
  end
  if N > 2 ^ 28 then
    return bad(("N <= 2^28 is required (a fused row's byte offsets must fit 32 bits), got N = %d"):format(N))
  end
  return nil
end

--- Four consecutive registers of an array as a v4 operand.
local function v4(a, i)
  return { a[i], a[i + 1], a[i + 2], a[i + 3] }
end

--- A SwiGLU kernel for B rows of N outputs. opts: arch (default "sm_90a"),
-- fused (false: gate and up are two [B, N] inputs; true: one [B, 2N]),
-- threads, unroll, name.
function M.build(B, N, opts)
  opts = opts or {}
  local err = M.shape_error(B, N, opts)
  if err then error(err, 2) end
  local fused = opts.fused and true or false
  local threads, unroll = config(N, opts)
  local name = opts.name or (fused and "swiglu_fused" or "swiglu")
  local cols = 4 * threads * unroll                      -- floats per CTA
  local stride = threads * 16                            -- bytes between a thread's chunks
  local n = 4 * unroll                                   -- floats per thread per input
  local in_specs = fused and { Tile(B, 2 * N, f32) } or { Tile(B, N, f32), Tile(B, N, f32) }
  return kernel(name) {
    arch = opts.arch or "sm_90a",
    in_specs = in_specs,
    out_specs = { Tile(B, N, f32) },
    grid = { B, N / cols, 1 }, block = { threads, 1, 1 },
    function(...)
      local tensors = { ... }
      local pg, pu, po
      if fused then
        local gu
        gu, po = ptx.global_ptrs(tensors[1], tensors[2])
        pg, pu = gu, gu                                   -- up is the same row, N floats further
      else
        pg, pu, po = ptx.global_ptrs(tensors[1], tensors[2], tensors[3])
      end
      local tid = reg.from(ptx.special.tid.x(), u32)
      local row = reg.from(ptx.special.ctaid.x(), u32)
      local blk = reg.from(ptx.special.ctaid.y(), u32)
      -- Chunk c of a thread is column (blk*cols/4 + c*threads + tid)*4.
      local col = blk:fma(cols / 4, tid):mul_wide(16)    -- mad.lo.u32, then bytes as u64
      local out_off = row:mul_wide(N * 4) + col
      local in_off = fused and (row:mul_wide(2 * N * 4) + col) or out_off
      local ga, ua, oa = pg + in_off, pu + in_off, po + out_off
      local up_base = fused and N * 4 or 0                -- byte offset of up within a fused row
      local g, u = reg.array(f32, n), reg.array(f32, n)
      for c = 0, unroll - 1 do ptx.ld.global(v4(g, 4 * c), ptx.addr(ga, c * stride)) end
      for c = 0, unroll - 1 do ptx.ld.global(v4(u, 4 * c), ptx.addr(ua, up_base + c * stride)) end
      local e = reg.scalar(f32)
      for i = 0, n - 1 do
        ptx.inst.mul.f32(e, g[i], -LOG2E)
        ptx.inst.ex2.approx.ftz.f32(e, e)                 -- exp(-g)
        ptx.inst.add.f32(e, e, 1)
        ptx.inst.rcp.approx.ftz.f32(e, e)                 -- sigmoid(g)
        ptx.inst.mul.f32(g[i], g[i], e)                   -- silu(g)
        ptx.inst.mul.f32(g[i], g[i], u[i])
      end
      for c = 0, unroll - 1 do ptx.st.global(ptx.addr(oa, c * stride), v4(g, 4 * c)) end
      ptx.ret()
    end,
  }
end

--- CPU reference in double precision on 1-based row-major Lua arrays:
-- inputs = { gate = B*N, up = B*N, B = , N = } or, fused,
-- { gate_up = B*2N, B = , N = }; returns out as B*N values.
function M.reference(inputs)
  local B, N = inputs.B, inputs.N
  local out = {}
  for r = 0, B - 1 do
    for i = 1, N do
      local g, u
      if inputs.gate_up then
        g, u = inputs.gate_up[r * 2 * N + i], inputs.gate_up[r * 2 * N + N + i]
      else
        g, u = inputs.gate[r * N + i], inputs.up[r * N + i]
      end
      out[r * N + i] = g / (1 + math.exp(-g)) * u
    end
  end
  return out
end

--- Random inputs for reference checks (never zeros): values in [-6, 6);
-- fused gives one gate_up array, otherwise gate and up.
function M.inputs(B, N, seed, fused)
  math.randomseed(seed or 1)
  local function fill(n)
    local a = {}
    for i = 1, n do a[i] = math.random() * 12 - 6 end
    return a
  end
  if fused then return { gate_up = fill(2 * B * N), B = B, N = N } end
  return { gate = fill(B * N), up = fill(B * N), B = B, N = N }
end

-- Llama-3-8B MLP: 4096 tokens, intermediate size 14336; both layouts.
M.DEFAULT_SIZES = { { 4096, 14336 }, { 4096, 14336, { fused = true } } }
M.kernels = {}
for i, size in ipairs(M.DEFAULT_SIZES) do M.kernels[i] = M.build(size[1], size[2], size[3]) end

--- The tensors a launch takes, in the kernel's order, from M.inputs.
function M.args(inputs)
  local B, N = inputs.B, inputs.N
  if inputs.gate_up then return { { inputs.gate_up, { B, 2 * N } } } end
  return { { inputs.gate, { B, N } }, { inputs.up, { B, N } } }
end


-- check(B, N, opts) and main(args) for `luaptx run examples/hopper/swiglu.lua [B N] [--summary]`
require("examples.lib.runner").install(M, "swiglu", { atol = 1e-4, rtol = 1e-4 })

return M
