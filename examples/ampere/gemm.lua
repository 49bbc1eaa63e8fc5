--- GEMM on Ampere tensor cores with one warp per CTA: C = A * B, A (M x K)
-- and B (K x N) row-major bf16 (or f16), C (M x N) row-major f32.
--
-- The simplest mma.sync kernel: each CTA is one warp that owns a 32x32
-- tile of C as 2 x 4 m16n8k16 accumulators (32 f32 registers per lane).
-- Every k-step of 16 loads the A fragments straight from global memory
-- (each register is two consecutive bf16 of one row: one ld.global.b32)
-- and the B fragments as two ld.global.b16 packed with mov.b32 (the two
-- elements of a B register are consecutive in k, i.e. a column of B), then
-- issues 8 mma.sync. No shared memory: the point is the fragment layouts
-- (pyptx.ampere.layout), not speed; gemm_pipelined.lua is the fast one.
--
-- Shape constraints (build() raises an error naming the violated one):
--  * M % 32 == 0, N % 32 == 0   whole 32x32 warp tiles;
--  * K % 16 == 0                whole m16n8k16 steps.
local pyptx = require "pyptx"
local kernel, reg, ptx, Tile = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.Tile
local T = pyptx.types

local M = {}

M.TM, M.TN = 32, 32   -- warp tile

--- The shape rules the Ampere GEMM examples share, checked in one order:
-- M, N and K positive integers; with rules.stages, opts.stages (default 3)
-- an integer in [2, 6]; M, N, K multiples of rules.tile = { BM, BN, BK };
-- with rules.stages, at least stages - 1 k-tiles; a bf16 or f16 dtype;
-- with rules.mutants (a list), opts.mutant, if given, one of them.
-- Returns the first broken rule's message, named opts.name or name, or nil.
function M.check_shape(name, Md, N, K, opts, rules)
  name = (opts and opts.name) or name
  for _, p in ipairs { { "M", Md }, { "N", N }, { "K", K } } do
    local v = p[2]
    if type(v) ~= "number" or v < 1 or v ~= math.floor(v) then
      return ("%s: %s must be a positive integer, got %s"):format(name, p[1], tostring(v))
    end
  end
  local stages = (opts and opts.stages) or 3
  if rules.stages and (type(stages) ~= "number" or stages < 2 or stages > 6 or stages ~= math.floor(stages)) then
    return ("%s: stages must be an integer in [2, 6], got %s"):format(name, tostring(stages))
  end
  local bm, bn, bk = rules.tile[1], rules.tile[2], rules.tile[3]
  if Md % bm ~= 0 then return ("%s: M %% %d == 0 is required, got M = %d"):format(name, bm, Md) end
  if N % bn ~= 0 then return ("%s: N %% %d == 0 is required, got N = %d"):format(name, bn, N) end
  if K % bk ~= 0 then return ("%s: K %% %d == 0 is required, got K = %d"):format(name, bk, K) end
  if rules.stages and K / bk < stages - 1 then
    return ("%s: K / %d >= stages - 1 is required, got K = %d, stages = %d"):format(name, bk, K, stages)
  end
  local dt = opts and opts.dtype
  if dt and dt ~= T.bf16 and dt ~= T.f16 then return name .. ": dtype must be bf16 or f16" end
  local mu, list = opts and opts.mutant, rules.mutants
  if mu ~= nil and list then
    for _, m in ipairs(list) do if m == mu then return nil end end
    return ("%s: mutant must be %s or %s, got %s"):format(name, table.concat(list, ", ", 1, #list - 1), list[#list],
      tostring(mu))
  end
  return nil
end

--- Why (Mdim, N, K, opts) breaks the shape rules, or nil.
function M.shape_error(Md, N, K, opts)
  return M.check_shape("gemm", Md, N, K, opts, { tile = { 32, 32, 16 } })
end

--- A single-warp mma.sync GEMM kernel for (M, N, K). opts: dtype (bf16,
-- default, or f16), arch ("sm_80"), name.
function M.build(Md, N, K, opts)
  opts = opts or {}
  local err = M.shape_error(Md, N, K, opts)
  if err then error(err, 2) end
  local dt = opts.dtype or T.bf16
  local mi_n, nj_n = M.TM / 16, M.TN / 8
  return kernel(opts.name or "gemm") {
    arch = opts.arch or "sm_80",
    in_specs = { Tile(Md, K, dt), Tile(K, N, dt) },
    out_specs = { Tile(Md, N, T.f32) },
    grid = { N / M.TN, Md / M.TM, 1 }, block = { 32, 1, 1 },
    function(A, B, C)
      local pa, pb, pc = ptx.global_ptrs(A, B, C)
      local lane = reg.from(ptx.special.tid.x(), T.u32)
      local g, t = lane:shr(2), lane:band(3)
      local row0 = reg.from(ptx.special.ctaid.y(), T.u32) * M.TM + g      -- this lane's first row
      local col0 = reg.from(ptx.special.ctaid.x(), T.u32) * M.TN + g      -- this lane's B column
      local t2 = t:shl(1)
      -- A register r of m-tile mi: row row0 + 16mi + 8(r%2), k = kk + 2t + 8(r/2).
      local a_ptr = pa + (row0 * K + t2):mul_wide(2)
      -- B register r, element e of n-tile nj: k = kk + 2t + e + 8r, column col0 + 8nj.
      local b_ptr = pb + (t2 * N + col0):mul_wide(2)
      local acc = {}
      for i = 0, mi_n * nj_n - 1 do acc[i] = reg.fragments(T.f32, 4, true) end
      local fa, fb = {}, {}
      for mi = 0, mi_n - 1 do fa[mi] = reg.array(T.b32, 4) end
      for nj = 0, nj_n - 1 do fb[nj] = reg.array(T.b32, 2) end
      local h = reg.array(T.b16, 2)
      ptx.range(0, K / 16, 1, function()
        for mi = 0, mi_n - 1 do
          for r = 0, 3 do
            local off = ((16 * mi + 8 * (r % 2)) * K + 8 * math.floor(r / 2)) * 2
            ptx.inst.ld.global.b32(fa[mi][r], ptx.addr(a_ptr, off))
          end
        end
        for nj = 0, nj_n - 1 do
          for r = 0, 1 do
            for e = 0, 1 do
              ptx.inst.ld.global.b16(h[e], ptx.addr(b_ptr, ((e + 8 * r) * N + 8 * nj) * 2))
            end
            ptx.inst.mov.b32(fb[nj][r], { h[0], h[1] })
          end
        end
        for mi = 0, mi_n - 1 do
          for nj = 0, nj_n - 1 do
            local c = acc[mi * nj_n + nj]
            ptx.mma { shape = "m16n8k16", atype = dt, d = c, a = fa[mi], b = fb[nj], c = c }
          end
        end
        ptx.inst.add.u64(a_ptr, a_ptr, 32)          -- 16 k of bf16
        ptx.inst.add.u64(b_ptr, b_ptr, 16 * N * 2)  -- 16 rows of B
      end)
      -- D register r of (mi, nj): row row0 + 16mi + 8(r/2), columns 2t, 2t+1 of the n-tile.
      local c_ptr = pc + (row0 * N + (col0 - g) + t2):mul_wide(4)
      for mi = 0, mi_n - 1 do
        for nj = 0, nj_n - 1 do
          local c = acc[mi * nj_n + nj]
          for half = 0, 1 do
            local off = ((16 * mi + 8 * half) * N + 8 * nj) * 4
            ptx.st.global(ptx.addr(c_ptr, off), { c[2 * half], c[2 * half + 1] })
          end
        end
      end
      ptx.ret()
    end,
  }
end

--- The value a half-precision input holds after rounding (what the GPU sees).
local function rounder(dt)
  local half = require "pyptx.floats"
  return dt == T.f16 and half.round_f16 or half.round_bf16
end
M.rounder = rounder

--- CPU reference in double on 1-based row-major arrays: inputs = { a, b, M,
-- N, K, dtype }; a and b are rounded to the input type first. Returns C.
function M.reference(inputs)
  local rnd = rounder(inputs.dtype or T.bf16)
  local Md, N, K = inputs.M, inputs.N, inputs.K
  local a, b = {}, {}
  for i = 1, Md * K do a[i] = rnd(inputs.a[i]) end
  for i = 1, K * N do b[i] = rnd(inputs.b[i]) end
  local c = {}
  for i = 0, Md - 1 do
    local row = {}
    for j = 1, N do row[j] = 0 end
    for k = 0, K - 1 do
      local av, bo = a[i * K + k + 1], k * N
      if av ~= 0 then for j = 1, N do row[j] = row[j] + av * b[bo + j] end end
    end
    for j = 1, N do c[i * N + j] = row[j] end
  end
  return c
end

--- Random inputs in [-1, 1): { a, b, M, N, K, dtype }.
function M.inputs(Md, N, K, seed, dtype)
  math.randomseed(seed or 1)
  local a, b = {}, {}
  for i = 1, Md * K do a[i] = math.random() * 2 - 1 end
  for i = 1, K * N do b[i] = math.random() * 2 - 1 end
  return { a = a, b = b, M = Md, N = N, K = K, dtype = dtype or T.bf16 }
end

--- The tensors a launch takes, from M.inputs.
function M.args(inputs)
  local dt = inputs.dtype or T.bf16
  return { { inputs.a, { inputs.M, inputs.K }, dtype = dt }, { inputs.b, { inputs.K, inputs.N }, dtype = dt } }
end

--- The per-element tolerance: inputs are exact in bf16/f16, products exact,
-- so only the f32 accumulation differs from the double reference.
function M.tolerance(K)
  return { atol = 1e-5 * K, rtol = 1e-3 }
end

M.kernels = { M.build(4096, 4096, 4096) }

-- check(M, N, K, opts) and main for `luaptx run examples/ampere/gemm.lua [M N K] [f16] [--summary]`
require("examples.lib.runner").install_gemm(M, "gemm")

return M
