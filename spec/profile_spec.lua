-- luaptx profile's counters on planted patterns with known answers:
-- coalesced and strided global loads (sectors per request), 2-way and
-- 32-way shared bank conflicts, a branch that splits every warp in half,
-- ldmatrix with and without conflicts, barrier waits and tensor-core FLOPs.
local pyptx = require "pyptx"
local runtime = require "pyptx.runtime"
local tensor = require "pyptx.runtime.tensor"
local prof = require "pyptx.tools.profile"
local H = require "spec.helpers"
local kernel, reg, ptx, smem, Tile = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.smem, pyptx.Tile
local T = pyptx.types
local f32, u32 = T.f32, T.u32

--- The current source line (to find a planted line's row).
local function here() return debug.getinfo(2, "l").currentline end

--- Profile one launch of k on the inputs; returns the per-line rows and the kernel's totals.
local function profile(k, ...)
  local dev = H.emu()
  local args = { ... }
  dev:set_option("uninit_check", 0)   -- the planted reads need no data
  local ok, rows = pcall(prof.collect, dev, function() k(unpack(args)) end)
  dev:set_option("uninit_check", 1)
  if not ok then error(rows, 0) end
  return prof.lines(rows, k.name), prof.kernels(rows)[1]
end

--- The folded row of source line n.
local function at(lines, n)
  for _, l in ipairs(lines) do if l.line == n then return l end end
  error("no counted instruction at line " .. n)
end

describe("the profiler's counters", function()
  runtime.use(H.emu())   -- the inputs and the launches on the one emulator
  it("count 4 sectors per request for stride-1 f32 loads and 32 for stride-32", function()
    local L1, L32
    local k = kernel "strides" {
      in_specs = { Tile(64 * 32, f32) }, out_specs = { Tile(64, f32) }, block = { 64, 1, 1 },
      function(X, O)
        local px, po = ptx.global_ptrs(X, O)
        local t = reg.from(ptx.special.tid.x(), u32)
        local a, b = reg.scalar(f32), reg.scalar(f32)
        L1 = here(); ptx.ld.global(a, ptx.addr(px + t:mul_wide(4)))
        L32 = here(); ptx.ld.global(b, ptx.addr(px + (t * 32):mul_wide(4)))
        ptx.st.global(ptx.addr(po + t:mul_wide(4)), a + b)
        ptx.ret()
      end,
    }
    local lines, total = profile(k, tensor.rand({ 64 * 32 }, f32))
    local s1, s32 = at(lines, L1), at(lines, L32)
    assert.equal(2, s1.c.gld_requests)              -- one per warp
    assert.equal(4, s1.d.ld_sectors_per_req)
    assert.equal(32, s32.d.ld_sectors_per_req)
    assert.equal(2 * 32 * 4, s1.c.gld_bytes)
    assert.equal(4, total.d.st_sectors_per_req)
    assert.equal(1, total.d.simt)
  end)

  it("count a 2-way and a 32-way shared bank conflict and none for a broadcast", function()
    local L2, L32, LB
    local k = kernel "banks" {
      in_specs = { Tile(32, u32) }, out_specs = { Tile(32, u32) }, block = { 32, 1, 1 },
      function(A, O)
        local _, po = ptx.global_ptrs(A, O)
        local s = smem.alloc(u32, 32 * 33, { align = 128 })
        local t = reg.from(ptx.special.tid.x(), u32)
        local x, y, z = reg.scalar(u32), reg.scalar(u32), reg.scalar(u32)
        L2 = here(); ptx.ld.shared(x, ptx.addr(s:base() + (t * 2):shl(2)))      -- stride 2 words: 2 lanes per bank
        L32 = here(); ptx.ld.shared(y, ptx.addr(s:base() + (t * 32):shl(2)))    -- stride 32 words: one bank
        LB = here(); ptx.ld.shared(z, ptx.addr(s:base()))                        -- one word: a broadcast
        ptx.st.global(ptx.addr(po + t:mul_wide(4)), x + y + z)
        ptx.ret()
      end,
    }
    local lines = profile(k, tensor.rand({ 32 }, u32))
    local two, all, bc = at(lines, L2), at(lines, L32), at(lines, LB)
    assert.same({ 1, 2, 1, 2 }, { two.c.shared_requests, two.c.shared_wavefronts, two.c.shared_ideal, two.c.shared_max_ways })
    assert.same({ 32, 32 }, { all.c.shared_wavefronts, all.c.shared_max_ways })
    assert.equal(32, all.d.conflict_ways)
    assert.same({ 1, 1 }, { bc.c.shared_wavefronts, bc.d.conflict_ways })
  end)

  it("count 128-bit shared accesses in quarter-warp phases (4 ideal wavefronts)", function()
    local LV
    local k = kernel "wide" {
      in_specs = { Tile(32, u32) }, out_specs = { Tile(32, u32) }, block = { 32, 1, 1 },
      function(A, O)
        local _, po = ptx.global_ptrs(A, O)
        local s = smem.alloc(u32, 32 * 4, { align = 128 })
        local t = reg.from(ptx.special.tid.x(), u32)
        local v = reg.array(u32, 4)
        LV = here(); ptx.inst.ld.shared.v4.b32({ v[0], v[1], v[2], v[3] }, ptx.addr(s:base() + t:shl(4)))
        ptx.st.global(ptx.addr(po + t:mul_wide(4)), v[0] + v[3])
        ptx.ret()
      end,
    }
    local v = at(profile(k, tensor.rand({ 32 }, u32)), LV)
    assert.same({ 4, 4, 1 }, { v.c.shared_wavefronts, v.c.shared_ideal, v.c.shared_max_ways })
  end)

  it("count a branch that splits every warp in half and the lanes it idles", function()
    local LB, LIN
    local k = kernel "diverge" {
      in_specs = { Tile(64, u32) }, out_specs = { Tile(64, u32) }, block = { 64, 1, 1 },
      function(A, O)
        local pa, po = ptx.global_ptrs(A, O)
        local t = reg.from(ptx.special.tid.x(), u32)
        local x = reg.scalar(u32)
        ptx.ld.global(x, ptx.addr(pa + t:mul_wide(4)))
        LB = here(); ptx.if_(t:band(1):eq(0), function()
          LIN = here(); ptx.inst.mul.lo.u32(x, x, 3)
        end)
        ptx.st.global(ptx.addr(po + t:mul_wide(4)), x)
        ptx.ret()
      end,
    }
    local lines, total = profile(k, tensor.rand({ 64 }, u32))
    assert.equal(2, at(lines, LB).c.div_branches)      -- each of the 2 warps splits once
    local inside = at(lines, LIN)
    assert.same({ 2, 32 }, { inside.c.warps, inside.c.lanes })
    assert.equal(0.5, inside.d.simt)
    assert.is_true(total.d.simt < 1)
  end)

  it("count an ldmatrix whose rows conflict (128 bytes apart) and one whose rows do not (16 bytes apart)", function()
    local LOK, LBAD
    local k = kernel "ldm" {
      arch = "sm_80", in_specs = { Tile(32, u32) }, out_specs = { Tile(32, u32) }, block = { 32, 1, 1 },
      function(A, O)
        local _, po = ptx.global_ptrs(A, O)
        local s = smem.alloc(T.b16, 8 * 64 * 8, { align = 128 })
        local t = reg.from(ptx.special.tid.x(), u32)
        local d, e = reg.array(T.b32, 4), reg.array(T.b32, 4)
        -- rows 16 bytes apart: each matrix's 8 rows cover all 32 banks once
        LOK = here(); ptx.ldmatrix { d = d, addr = s:base() + t:shl(4) }
        -- rows 128 bytes apart: all 8 rows of a matrix in banks 0-3 (8-way)
        LBAD = here(); ptx.ldmatrix { d = e, addr = s:base() + t:shl(7) }
        ptx.st.global(ptx.addr(po + t:mul_wide(4)), d[0] + e[3])
        ptx.ret()
      end,
    }
    local lines = profile(k, tensor.rand({ 32 }, u32))
    local ok, bad = at(lines, LOK), at(lines, LBAD)
    assert.same({ 4, 4, 1 }, { ok.c.shared_wavefronts, ok.c.shared_ideal, ok.c.shared_max_ways })
    assert.same({ 32, 4, 8 }, { bad.c.shared_wavefronts, bad.c.shared_ideal, bad.c.shared_max_ways })
  end)

  it("count barrier arrivals, the ones that waited, and mma.sync FLOPs", function()
    local LBAR, LMMA
    local ampere = require "pyptx.ampere"
    local k = kernel "tc" {
      arch = "sm_80", in_specs = { Tile(32, u32) }, out_specs = { Tile(32, u32) }, block = { 64, 1, 1 },
      function()
        LBAR = here(); ptx.inst.bar.sync(0)
        local h = ampere.fragments("m16n8k16", "f16", "f32", true)
        for i = 0, #h.a - 1 do ptx.inst.mov.b32(h.a[i], 0) end
        for i = 0, #h.b - 1 do ptx.inst.mov.b32(h.b[i], 0) end
        for i = 0, #h.c - 1 do ptx.inst.mov.f32(h.c[i], 0) end
        LMMA = here(); ptx.mma { shape = "m16n8k16", atype = "f16", ctype = "f32", d = h.c, a = h.a, b = h.b, c = h.c }
        ptx.ret()
      end,
    }
    local lines, total = profile(k, tensor.rand({ 32 }, u32))
    local b = at(lines, LBAR)
    assert.same({ 2, 1 }, { b.c.bar_arrivals, b.c.bar_waits })   -- the first warp waits for the second
    local m = at(lines, LMMA)
    assert.same({ 2, 2 * 2 * 16 * 8 * 16 }, { m.c.tc_ops, m.c.flops })
    assert.equal(2 * 2 * 16 * 8 * 16, total.c.flops)
  end)

  it("leaves the counters off by default and refuses a device that is not the emulator", function()
    local dev = H.emu()
    assert.equal(0, dev:option("profile"))
    local ok, err = pcall(prof.collect, { kind = "cuda" }, function() end)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("the counters come from the CPU emulator", 1, true))
  end)
end)
