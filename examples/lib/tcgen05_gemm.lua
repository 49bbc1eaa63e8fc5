--- What the Blackwell GEMM examples beside examples/blackwell/gemm.lua
-- share: an mbarrier spin, TMEM allocation and release, the TMEM -> global
-- epilogue of one row, and the host side (the tolerance and
-- check-and-report here; random bf16 inputs, the double-precision
-- reference of D = A * B^T and the launch arguments from
-- examples/lib/gemm_data.lua, which the Hopper GEMMs use too).
-- Groups (grouped_gemm.lua) stack G problems: A (G*M x K), B (G*N x K),
-- D (G*M x N); an ungrouped problem is G = 1.
local pyptx = require "pyptx"
local verify = require "pyptx.tools.verify"
local data = require "examples.lib.gemm_data"
local reg, ptx, T = pyptx.reg, pyptx.ptx, pyptx.types

pyptx.helper()   -- errors and lines name the example calling in

local L = {}

--- Spin on an mbarrier phase: try_wait.parity and a branch back while it
-- has not completed. bar: a shared address register; phase: 0, 1 or a
-- u32 register holding the parity.
function L.wait(bar, phase)
  ptx.mbarrier.wait(bar, phase)
end

-- ------------------------------------------------------- shape rules

--- The first checks of every example's shape_error: each of dims (name ->
-- value) a positive integer, and opts.mutant, if given, one of mutants
-- (a list). Returns the message or nil.
function L.dims_error(dims, opts, mutants)
  for name, v in pairs(dims) do
    if type(v) ~= "number" or v < 1 or v ~= math.floor(v) then return name .. " must be a positive integer" end
  end
  local mu = opts.mutant
  if mu == nil then return nil end
  for _, m in ipairs(mutants) do if m == mu then return nil end end
  return "mutant must be one of " .. table.concat(mutants, ", ") .. ", got " .. tostring(mu)
end

--- M, N and K whole tiles of 128 x bn x 64; the message or nil.
function L.tile_error(m, n, k, bn)
  if m % 128 ~= 0 then return "M % 128 == 0" end
  if n % bn ~= 0 then return ("N %% BN == 0 (BN = %d)"):format(bn) end
  if k % 64 ~= 0 then return "K % 64 == 0" end
  return nil
end

--- A TMA ring of 2, 4 or 8 stages of a 128 x 64 A tile and a bn x 64 B
-- tile (bf16) within 200 KiB of shared memory; the message or nil.
function L.ring_error(stages, bn)
  if stages ~= 2 and stages ~= 4 and stages ~= 8 then return "stages must be 2, 4 or 8" end
  local bytes = stages * (128 + bn) * 64 * 2
  if bytes > 200 * 1024 then return ("stages * (128 + BN) * 64 * 2 <= 200 KiB (got %d)"):format(bytes) end
  return nil
end

--- A barrier of every thread of the CTA (cta_group 1) or of the cluster
-- of two (cta_group 2: barrier.cluster arrive.release / wait.acquire).
function L.sync(cta_group)
  if cta_group == 2 then
    ptx.inst("barrier.cluster.arrive.release.aligned")
    ptx.inst("barrier.cluster.wait.acquire.aligned")
  else
    ptx.bar_sync(0)
  end
end

--- Allocate ncols TMEM columns in warp `owner` (the address lands in the
-- shared word slot; cta_group 2: the pair's allocation, in each CTA),
-- then hand it to every thread: before-fence, CTA (cluster) barrier,
-- after-fence, and each thread loads the address. Returns it.
function L.tmem_alloc(warp, owner, slot, ncols, cta_group)
  local tc = ptx.tcgen05
  ptx.if_(warp:eq(owner), function()
    tc.alloc { dst = slot, ncols = ncols, cta_group = cta_group }
    tc.relinquish_alloc_permit { cta_group = cta_group }
  end)
  tc.fence_before_thread_sync()
  L.sync(cta_group)
  tc.fence_after_thread_sync()
  local taddr = reg.scalar(T.b32)
  ptx.inst.ld.shared.b32(taddr, ptx.addr(slot))
  return taddr
end

--- Free the allocation once every warp is done with it: before-fence, CTA
-- (cluster, cta_group 2) barrier, and warp `owner` (the allocating warp)
-- fences and deallocates.
function L.tmem_dealloc(warp, owner, taddr, ncols, cta_group)
  local tc = ptx.tcgen05
  tc.fence_before_thread_sync()
  L.sync(cta_group)
  ptx.if_(warp:eq(owner), function()
    tc.fence_after_thread_sync()
    tc.dealloc { taddr = taddr, ncols = ncols, cta_group = cta_group }
  end)
end

--- One arrival on the mbarrier at shared address bar.
function L.arrive(bar)
  ptx.inst("mbarrier.arrive.shared::cta.b64", ptx.sink, ptx.addr(bar))
end

--- The widest tcgen05.ld.32x32b.xN for a row of bn columns: N = 128, 64
-- or 32 columns, the largest that divides bn (the ISA's widest is .x128).
function L.ld_cols(bn)
  for _, w in ipairs { 128, 64 } do if bn % w == 0 then return w end end
  return 32
end

--- The calling warp reads bn f32 accumulator columns of its 32 TMEM lanes
-- at lane_base, w columns a tcgen05.ld.32x32b.xw (w = L.ld_cols(bn) unless
-- given) then wait::ld, and calls each(v, c0): v the w registers (a list
-- from 1) of columns c0 .. c0 + w - 1. col_step (default w) is how far the
-- next load's column moves (a mutant's wrong offset).
function L.read_row(lane_base, bn, each, w, col_step)
  local tc = ptx.tcgen05
  w = w or L.ld_cols(bn)
  for c = 0, bn / w - 1 do
    local acc, v = reg.array(T.f32, w), {}
    for i = 0, w - 1 do v[i + 1] = acc[i] end
    tc.ld { dst = v, taddr = c == 0 and lane_base or lane_base + c * (col_step or w), shape = "32x32b" }
    tc.wait("ld")
    each(v, c * w)
  end
end

--- The calling warp reads bn f32 accumulator columns of its 32 TMEM lanes
-- at lane_base (L.read_row) and stores them to the row at prow (a u64
-- global address), 16 bytes a store; w and col_step as in read_row.
function L.store_row(lane_base, prow, bn, w, col_step)
  L.read_row(lane_base, bn, function(v, c0)
    for j = 0, #v / 4 - 1 do
      ptx.inst.st.global.v4.f32(ptx.addr(prow, (c0 + j * 4) * 4), { v[4 * j + 1], v[4 * j + 2], v[4 * j + 3], v[4 * j + 4] })
    end
  end, w, col_step)
end

-- Random inputs, the reference and the launch arguments: examples/lib/gemm_data.lua.
L.inputs, L.reference, L.args = data.inputs, data.reference, data.args

--- Per-element tolerance for inputs in [-1, 1). The products of bf16
-- values are exact in f32; the error is the f32 rounding of the running
-- sum, at most K/16 roundings (the emulator rounds once per K = 16 MMA; a
-- GPU rounds at least as often as that, within a few ulps each) of a
-- partial sum whose size grows like sqrt(K) for these inputs. 1e-5 * K
-- bounds that with a margin at every K used here (at K = 512: 32
-- roundings of 2^-24 * ~25 is about 5e-5, the bound 5e-3), while a
-- single wrong product (an element of magnitude up to 1) breaks it.
-- A bf16 D (out = "bf16") is that sum rounded to 8 significant bits, half
-- an ulp: rtol 2^-8 of the element, still far below a wrong product.
function L.tolerance(k, out)
  return { atol = 1e-5 * k, rtol = out == "bf16" and 2 ^ -8 or 1e-3 }
end

--- Build kernel kern's launch on fresh random inputs and compare every
-- element with the reference (out: the D type, "f32" or "bf16"); returns
-- ok, report.
function L.check(kern, m, n, k, g, out)
  local inputs = L.inputs(m, n, k, verify.fresh_seed(), g)
  return verify.run { kernel = kern, args = L.args(inputs), reference = L.reference(inputs), tolerance = L.tolerance(k, out) }
end

return L
