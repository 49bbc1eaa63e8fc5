-- pyptx.hopper: wgmma.mma_async and its fence/commit/wait, shared-memory
-- matrix descriptors and smem.wgmma_tile's canonical layouts, the
-- accumulator and A register fragment layouts, elect.sync and setmaxnreg:
-- the PTX, ptxas acceptance for sm_90a, the forms PTX does not define
-- refused at the caller's line, emulator numerics for every sm_90a wgmma
-- form built from the documented layouts (and on nvcc output whose
-- layouts are written in CUDA), the matrix base offset (tiles whose
-- pattern starts at the tile, TMA tiles off a 1024-byte boundary), the
-- swizzle/descriptor mismatch reports, and the Hopper GEMM example
-- against its CPU reference.
local bit = require "bit"
local ffi = require "ffi"
local pyptx = require "pyptx"
local floats = require "pyptx.runtime.floats"
local hopper = require "pyptx.hopper"
local runtime = require "pyptx.runtime"
local H = require "spec.helpers"
local tensor = require "pyptx.runtime.tensor"
local kernel, reg, ptx, smem, Tile = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.smem, pyptx.Tile
local T = pyptx.types
local f32, u32, bf16, f16 = T.f32, T.u32, T.bf16, T.f16

local assert_ptxas = H.assert_ptxas       -- for sm_90a; pending without ptxas, so last in a test

describe("pyptx.hopper wrappers", function()
  local k = kernel "wg" { arch = "sm_90a", block = { 128 },
    function()
      local sA = smem.wgmma_tile(bf16, { 64, 64 })
      local sB = smem.wgmma_tile(bf16, { 128, 64 })
      local acc = ptx.wgmma.fragments(128, true)
      local da, db = ptx.wgmma.desc(sA), ptx.wgmma.desc(sB)
      ptx.wgmma.fence()
      ptx.wgmma.mma_async { shape = { 64, 128, 16 }, d = acc, a = da, b = db, scale_d = 0 }
      ptx.wgmma.mma_async { shape = "m64n128k16", d = acc, a = da + 2, b = db + 2, atype = bf16, scale_a = -1 }
      ptx.wgmma.commit_group()
      ptx.wgmma.wait_group(0)
      ptx.elect.sync()
      ptx.setmaxnreg.dec(40)
      ptx.ret()
    end }

  it("append the documented PTX", function()
    local text = k:ptx()
    for _, want in ipairs {
      "wgmma.fence.sync.aligned;", "wgmma.commit_group.sync.aligned;", "wgmma.wait_group.sync.aligned \t0;",
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 \t{%f1, %f2,",
      "%f64}, %rd1, %rd2, 0, 1, 1, 0, 0;", "%f64}, %rd3, %rd4, 1, -1, 1, 0, 0;",
      "elect.sync \t_|%p1, 4294967295;", "setmaxnreg.dec.sync.aligned.u32 \t40;",
      "cvt.u64.u32 \t%rd1, %r1;", "shr.u64 \t%rd1, %rd1, 4;", "and.b64 \t%rd1, %rd1, 16383;",
    } do
      assert.truthy(text:find(want, 1, true), want .. "\n---\n" .. text)
    end
  end)

  it("assemble with ptxas for sm_90a", function()
    assert_ptxas(k)
  end)

  it("choose the canonical layout from the K extent and fill the descriptor fields", function()
    assert.are.same({ "128B", 128 }, { hopper.choose_layout(128) })
    assert.are.same({ "64B", 64 }, { hopper.choose_layout(64) })
    assert.are.same({ "32B", 32 }, { hopper.choose_layout(96) })
    assert.are.same({ "interleave", 0 }, { hopper.choose_layout(16) })
    -- bits 16-29 LBO >> 4, 32-45 SBO >> 4, 62-63 layout (1 = 128B)
    local d = hopper.desc_bits("128B", 16, 1024)
    assert.are.equal(1ULL, bit.band(bit.rshift(d, 16), 0x3fff))
    assert.are.equal(64ULL, bit.band(bit.rshift(d, 32), 0x3fff))
    assert.are.equal(1ULL, bit.rshift(d, 62))
    assert.are.equal(2ULL, bit.rshift(hopper.desc_bits("64B", 16, 512), 62))
    assert.are.equal(3ULL, bit.rshift(hopper.desc_bits("32B", 16, 256), 62))
  end)

  it("give every tile element to exactly one (thread, register) in the fragment layout", function()
    for _, n in ipairs { 8, 64, 256 } do
      local seen = {}
      for t = 0, 127 do
        for i = 0, n / 2 - 1 do
          local r, c = ptx.wgmma.coord(t, i)
          local key = r * n + c
          assert.is_nil(seen[key])
          seen[key] = true
          assert.truthy(r >= 0 and r < 64 and c >= 0 and c < n)
        end
      end
    end
    assert.are.same({ 0, 0 }, { ptx.wgmma.coord(0, 0) })
    assert.are.same({ 0, 1 }, { ptx.wgmma.coord(0, 1) })
    assert.are.same({ 8, 0 }, { ptx.wgmma.coord(0, 2) })
    assert.are.same({ 1, 10 }, { ptx.wgmma.coord(5, 4) })
    assert.are.same({ 16, 0 }, { ptx.wgmma.coord(32, 0) })
  end)

  it("cover every input family: f16 (f16 accumulators), tf32 k8, fp8 k32, s8/u8 k32", function()
    local k2 = kernel "fams" { arch = "sm_90a", block = { 128 },
      function()
        local d = reg.scalar(T.u64, 0)
        local f32acc, f16acc, s32acc = reg.array(f32, 32), reg.array(T.b32, 16), reg.array(T.s32, 32)
        local ar = reg.array(T.b32, 4)
        for i = 0, 3 do ptx.mov(ar[i], 0) end
        for i = 0, 31 do ptx.mov(f32acc[i], ptx.imm(f32, 0)); ptx.mov(s32acc[i], 0) end
        for i = 0, 15 do ptx.mov(f16acc[i], 0) end
        ptx.wgmma.fence()
        ptx.wgmma.mma_async { shape = { 64, 64, 16 }, d = f16acc, a = d, b = d, atype = f16, dtype = f16 }
        ptx.wgmma.mma_async { shape = { 64, 64 }, d = f32acc, a = d, b = d, atype = T.tf32 }
        ptx.wgmma.mma_async { shape = { 64, 64 }, d = f32acc, a = ar, b = d, atype = T.tf32 }
        ptx.wgmma.mma_async { shape = { 64, 64 }, d = f32acc, a = d, b = d, atype = T.e4m3, btype = T.e5m2 }
        ptx.wgmma.mma_async { shape = { 64, 64 }, d = f16acc, a = d, b = d, atype = T.e5m2, dtype = f16 }
        ptx.wgmma.mma_async { shape = { 64, 64 }, d = s32acc, a = d, b = d, atype = T.s8 }
        ptx.wgmma.mma_async { shape = { 64, 64 }, d = s32acc, a = ar, b = d, atype = T.u8, satfinite = true }
        ptx.wgmma.commit_group()
        ptx.wgmma.wait_group(0)
        ptx.ret()
      end }
    local text = k2:ptx()
    for _, want in ipairs {
      "m64n64k16.f16.f16.f16", "m64n64k8.f32.tf32.tf32", "m64n64k32.f32.e4m3.e5m2", "m64n64k32.f16.e5m2.e5m2",
      "m64n64k32.s32.s8.s8", "m64n64k32.satfinite.s32.u8.u8",
    } do assert.truthy(text:find("wgmma.mma_async.sync.aligned." .. want, 1, true), want) end
    local ok, err = pcall(function()
      kernel "bad_acc" { arch = "sm_90a", block = { 128 }, function()
        ptx.wgmma.mma_async { shape = { 64, 8 }, d = reg.array(T.b32, 2), a = 0, b = 0, atype = bf16, dtype = f16 }
      end }:ptx()
    end)
    assert.is_false(ok)
    assert.matches("wgmma.mma_async.sync.aligned.m64n8k16.f16.bf16.bf16: .bf16 inputs accumulate in .f32, not .f16", err, 1, true)
    ok, err = pcall(function()
      kernel "mixed" { arch = "sm_90a", block = { 128 }, function()
        ptx.wgmma.mma_async { shape = { 64, 8 }, d = reg.array(T.s32, 4), a = 0, b = 0, atype = T.s8, btype = T.u8 }
      end }:ptx()
    end)
    assert.is_false(ok)
    assert.matches('wgmma.mma_async.sync.aligned.m64n8k32.s32.s8.u8: mixed integer inputs (.s8.u8) need PTX ISA 8.4; '
      .. 'this kernel uses 8.0 (version = "8.4")', err, 1, true)
    local k3 = kernel "mixed84" { arch = "sm_90a", version = "8.4", block = { 128 }, function()
      local acc = reg.array(T.s32, 4)
      for i = 0, 3 do ptx.mov(acc[i], 0) end
      ptx.wgmma.mma_async { shape = { 64, 8 }, d = acc, a = reg.scalar(T.u64, 0), b = reg.scalar(T.u64, 0), atype = T.s8, btype = T.u8 }
      ptx.ret()
    end }
    assert_ptxas(k3)
    assert_ptxas(k2)
  end)

  it("give the ISA's A register fragment for every input width (a_coord)", function()
    -- { type, thread, register, element, row, k }: entries of the ISA's figures
    for _, c in ipairs {
      { "f16", 0, 0, 1, 0, 1 }, { "bf16", 0, 1, 0, 8, 0 }, { "f16", 1, 2, 0, 0, 10 }, { "f16", 37, 3, 1, 25, 11 },
      { "tf32", 0, 1, 0, 8, 0 }, { "tf32", 2, 2, 0, 0, 6 }, { "tf32", 70, 3, 0, 41, 6 },
      { "e4m3", 0, 0, 3, 0, 3 }, { "s8", 1, 1, 2, 8, 6 }, { "u8", 3, 2, 0, 0, 28 }, { "e5m2", 127, 3, 3, 63, 31 },
      { "b1", 0, 0, 31, 0, 31 }, { "b1", 1, 1, 0, 8, 32 }, { "b1", 2, 2, 5, 0, 197 }, { "b1", 7, 3, 31, 9, 255 },
    } do
      local row, kk = ptx.wgmma.a_coord(c[2], c[3], c[4], c[1])
      assert.are.same({ c[5], c[6] }, { row, kk }, c[1] .. " thread " .. c[2] .. " reg " .. c[3] .. " elem " .. c[4])
    end
  end)

  it("emit b1 .and.popc, f16 accumulators with the f16 fragments, and transposes for f16/bf16", function()
    local km = kernel "more" { arch = "sm_90a", block = { 128 }, function()
      local d = reg.scalar(T.u64, 0)
      local s32acc, f16acc = ptx.wgmma.fragments(256, true, T.s32), ptx.wgmma.fragments(64, true, f16)
      ptx.wgmma.fence()
      ptx.wgmma.mma_async { shape = { 64, 256 }, d = s32acc, a = d, b = d, atype = "b1" }
      ptx.wgmma.mma_async { shape = { 64, 64 }, d = f16acc, a = d, b = d, atype = f16, dtype = f16, trans_a = 1, trans_b = 1 }
      ptx.wgmma.commit_group()
      ptx.wgmma.wait_group(0)
      ptx.ret()
    end }
    local text = km:ptx()
    assert.truthy(text:find("wgmma.mma_async.sync.aligned.m64n256k256.s32.b1.b1.and.popc \t{%r", 1, true), text)
    local regs = text:match("m64n64k16%.f16%.f16%.f16 \t{(.-)}, %%rd1, %%rd1, 1, 1, 1, 1, 1;")
    assert.equal(16, select(2, regs:gsub("%%r%d+", "")))
    assert_ptxas(km)
  end)

  it("refuse at the caller's line what PTX does not define: transposed non-16-bit types, N steps, .satfinite", function()
    local function err_of(body)
      local ok, err = pcall(function() kernel "bad" { arch = "sm_90a", version = "8.4", block = { 128 }, body }:ptx() end)
      assert.is_false(ok)
      return err
    end
    local line
    local e = err_of(function()
      line = H.here(); ptx.wgmma.mma_async { shape = { 64, 8 }, d = reg.array(f32, 4), a = 0, b = 0, atype = T.e4m3, trans_b = 1 }
    end)
    assert.matches("hopper_spec.lua:" .. line .. ": wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 takes 6 operands: "
      .. "{d}, a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b; got 8; imm-trans-a/imm-trans-b (MN-major operands) are for "
      .. ".f16 and .bf16 only, not .e4m3", e, 1, true)
    e = err_of(function()
      line = H.here(); ptx.wgmma.mma_async { shape = { 64, 40 }, d = reg.array(T.s32, 20), a = 0, b = 0, atype = T.s8 }
    end)
    assert.matches("hopper_spec.lua:" .. line .. ": wgmma.mma_async.sync.aligned.m64n40k32.s32.s8.s8: .s8 wgmma takes the shape "
      .. ".m64nNk32 with N = 8, 16, 24, 32, then a multiple of 16 up to 256; got .m64n40k32", e, 1, true)
    e = err_of(function()
      line = H.here(); ptx.wgmma.mma_async { shape = { 64, 8 }, d = reg.array(T.s32, 4), a = 0, b = 0, atype = "b1", satfinite = true }
    end)
    assert.matches("hopper_spec.lua:" .. line .. ": wgmma.mma_async.sync.aligned.m64n8k256.satfinite.s32.b1.b1.and.popc: "
      .. ".satfinite applies to .s8/.u8 wgmma only, not .b1", e, 1, true)
    e = err_of(function()
      local acc, dsc = reg.array(f32, 4), reg.scalar(T.u64, 0)
      line = H.here(); ptx.inst("wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32", { acc[0], acc[1], acc[2], acc[3] }, dsc, dsc, 1, 1, 1, 0, 1)
    end)
    assert.matches("hopper_spec.lua:" .. line .. ": wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32 takes 6 operands", e, 1, true)
    e = err_of(function()
      local acc, dsc = reg.array(T.s32, 4), reg.scalar(T.u64, 0)
      line = H.here(); ptx.inst("wgmma.mma_async.sync.aligned.m64n8k256.s32.b1.b1.xor.popc", { acc[0], acc[1], acc[2], acc[3] }, dsc, dsc, 1)
    end)
    assert.matches("hopper_spec.lua:" .. line .. ": wgmma.mma_async.sync.aligned.m64n8k256.s32.b1.b1.xor.popc: "
      .. "wgmma.mma_async takes .dtype.atype.btype", e, 1, true)
    e = err_of(function() line = H.here(); smem.wgmma_tile(T.e4m3, { 64, 64 }, "MN") end)
    assert.matches("hopper_spec.lua:" .. line .. ": smem.wgmma_tile: MN-major tiles are f16/bf16 only", e, 1, true)
  end)

  it("sparse = { meta, sel } emits wgmma.mma_async.sp (K doubled) and refuses at the caller's line what PTX does not define", function()
    local ks = kernel "wgsp" { arch = "sm_90a", version = "8.2", block = { 128 }, function()
      local d, meta = reg.scalar(T.u64, 0), reg.scalar(T.b32, 0)
      ptx.wgmma.mma_async { shape = { 64, 16 }, d = ptx.wgmma.fragments(16), a = d, b = d, atype = f16, sparse = { meta = meta, sel = 1 },
        trans_a = 1 }
      ptx.wgmma.mma_async { d = ptx.wgmma.fragments(64), a = d, b = d, atype = T.e4m3, sparse = { meta = meta } }
    end }
    local text = ks:ptx()
    assert.truthy(text:find("wgmma.mma_async.sp.sync.aligned.m64n16k32.f32.f16.f16 \t{%%f[^}]*}, %%rd1, %%rd1, %%r1, 1, 1, 1, 1, 1, 0;"), text)
    assert.truthy(text:find("wgmma.mma_async.sp.sync.aligned.m64n64k64.f32.e4m3.e4m3 \t{%%f[^}]*}, %%rd1, %%rd1, %%r1, 0, 1, 1, 1;"), text)
    local function err_of(body, version)
      local ok, err = pcall(function() kernel "bad" { arch = "sm_90a", version = version or "8.4", block = { 128 }, body }:ptx() end)
      assert.is_false(ok)
      return err
    end
    local line
    local meta = function() return reg.scalar(T.b32, 0) end
    local e = err_of(function()
      line = H.here(); ptx.wgmma.mma_async { shape = { 64, 8 }, d = reg.array(f32, 4), a = 0, b = 0, atype = f16, sparse = { meta = meta() } }
    end, "8.1")
    assert.matches("hopper_spec.lua:" .. line .. ": wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.f16.f16: sparse wgmma (.sp) needs "
      .. 'PTX ISA 8.2; this kernel uses 8.1 (version = "8.2")', e, 1, true)
    e = err_of(function()
      local acc, dsc = reg.array(f32, 4), reg.scalar(T.u64, 0)
      line = H.here(); ptx.inst("wgmma.mma_async.sp.sync.aligned.m64n8k16.f32.tf32.tf32", { acc[0], acc[1], acc[2], acc[3] }, dsc, dsc,
        meta(), 0, 1, 1, 1)
    end, "8.0")
    assert.matches("hopper_spec.lua:" .. line .. ": wgmma.mma_async.sp.sync.aligned.m64n8k16.f32.tf32.tf32: sparse wgmma (.sp) needs "
      .. "PTX ISA 8.2; this kernel uses 8.0", e, 1, true)
    e = err_of(function()
      line = H.here(); ptx.wgmma.mma_async { shape = { 64, 8 }, d = reg.array(f32, 4), a = 0, b = 0, atype = T.e4m3, sparse = { meta = meta(), sel = 1 } }
    end)
    assert.matches("hopper_spec.lua:" .. line .. ": wgmma.mma_async.sp.sync.aligned.m64n8k64.f32.e4m3.e4m3: operand 5 (sparsity "
      .. "selector) must be the immediate 0 for .e4m3 inputs (8-bit inputs: all four threads of a group hold the metadata)", e, 1, true)
    e = err_of(function()
      line = H.here(); ptx.wgmma.mma_async { shape = { 64, 8 }, d = reg.array(f32, 4), a = 0, b = 0, atype = T.tf32, sparse = { meta = meta(), sel = 2 } }
    end)
    assert.matches("hopper_spec.lua:" .. line .. ": wgmma.mma_async.sp.sync.aligned.m64n8k16.f32.tf32.tf32: operand 5 (sparsity "
      .. "selector) must be the immediate 0 or 1 for .tf32 inputs", e, 1, true)
    e = err_of(function()
      line = H.here(); ptx.wgmma.mma_async { shape = { 64, 8 }, d = reg.array(T.s32, 4), a = 0, b = 0, atype = "b1", sparse = { meta = meta() } }
    end)
    assert.matches("hopper_spec.lua:" .. line .. ": wgmma.mma_async.sp.sync.aligned.m64n8k512.s32.b1.b1.and.popc: .b1 wgmma has no "
      .. "sparse (.sp) form; sparse wgmma takes .f16 .bf16 .tf32 .e4m3/.e5m2 .s8/.u8", e, 1, true)
    e = err_of(function()
      line = H.here(); ptx.wgmma.mma_async { shape = { 64, 8, 16 }, d = reg.array(f32, 4), a = 0, b = 0, atype = f16, sparse = { meta = meta() } }
    end)
    assert.matches("hopper_spec.lua:" .. line .. ": wgmma.mma_async.sp.sync.aligned.m64n8k16.f32.f16.f16: .f16 sparse (.sp) wgmma "
      .. "takes the shape .m64nNk32 with N = 8..256 in steps of 8; got .m64n8k16", e, 1, true)
    e = err_of(function()
      line = H.here(); ptx.wgmma.mma_async { shape = { 64, 8 }, d = reg.array(f32, 4), a = 0, b = 0, atype = f16, sparse = { sel = 0 } }
    end)
    assert.matches("hopper_spec.lua:" .. line .. ": wgmma.mma_async: sparse must be { meta = <.b32 register>, sel = 0|1 }", e, 1, true)
    e = err_of(function()
      local acc, dsc = reg.array(f32, 4), reg.scalar(T.u64, 0)
      line = H.here(); ptx.inst("wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.bf16.bf16", { acc[0], acc[1], acc[2], acc[3] }, dsc, dsc,
        dsc, 0, 1, 1, 1, 0, 0)
    end)
    assert.matches("hopper_spec.lua:" .. line .. ": wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.bf16.bf16: operand 4 "
      .. "(sparsity metadata) must be a 32-bit register", e, 1, true)
    e = err_of(function()
      local acc, dsc = reg.array(T.s32, 4), reg.scalar(T.u64, 0)
      line = H.here(); ptx.inst("wgmma.mma_async.sp.sync.aligned.m64n8k64.s32.u8.u8", { acc[0], acc[1], acc[2], acc[3] }, dsc, dsc, meta(), 1, 1)
    end)
    assert.matches("hopper_spec.lua:" .. line .. ": wgmma.mma_async.sp.sync.aligned.m64n8k64.s32.u8.u8: operand 5 "
      .. "(sparsity selector) must be the immediate 0 for .u8 inputs (8-bit inputs: all four threads of a group hold the metadata)",
      e, 1, true)
    e = err_of(function()
      local acc, dsc = reg.array(f32, 4), reg.scalar(T.u64, 0)
      line = H.here(); ptx.inst("wgmma.mma_async.sp.sync.aligned.m64n8k16.f32.tf32.tf32", { acc[0], acc[1], acc[2], acc[3] }, dsc, dsc, 1, 1, 1)
    end)
    assert.matches("hopper_spec.lua:" .. line .. ": wgmma.mma_async.sp.sync.aligned.m64n8k16.f32.tf32.tf32 takes 8 operands: "
      .. "{d}, a-desc, b-desc, sp-meta, sp-sel, scale-d, imm-scale-a, imm-scale-b; got 6", e, 1, true)
    assert_ptxas(ks)
  end)

  it("are validated when written raw: accumulator count, immediates, tensor coordinates", function()
    local function err_of(body)
      local ok, err = pcall(function() kernel "raw" { arch = "sm_90a", block = { 128 }, body }:ptx() end)
      assert.is_false(ok)
      return err
    end
    local line
    local e = err_of(function()
      local acc, d = reg.array(f32, 8), reg.scalar(T.u64, 0)
      line = H.here(); ptx.inst("wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16", { acc[0], acc[1], acc[2], acc[3],
        acc[4], acc[5], acc[6], acc[7] }, d, d, 1, 1, 1, 0, 0)
    end)
    assert.matches("hopper_spec.lua:" .. line .. ": wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16: operand 1 (d) "
      .. "must be a vector of 16 registers, got 8", e, 1, true)
    e = err_of(function()
      local acc, d = reg.array(f32, 4), reg.scalar(T.u64, 0)
      ptx.inst("wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16", { acc[0], acc[1], acc[2], acc[3] }, d, d, 1, 2, 1, 0, 0)
    end)
    assert.matches("operand 5 (imm-scale) must be the immediate 1 or -1", e, 1, true)
    e = err_of(function()
      local s, bar, c, d = smem.alloc(f32, 256, { align = 128 }), smem.mbarrier(1), reg.scalar(u32, 0), reg.scalar(T.u64, 0)
      ptx.inst("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes", s[0],
        setmetatable({ base = d, list = { c, c } }, require("pyptx.async").Bracket), bar[0])
    end)
    assert.matches("the tensor coordinates list 2 value(s); .3d takes 3", e, 1, true)
  end)

  it("refuse through ptx.inst and ptx.raw what the wrapper refuses, with the same message", function()
    local want = "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 takes 6 operands: {d}, a-desc, b-desc, scale-d, "
      .. "imm-scale-a, imm-scale-b; got 8; imm-trans-a/imm-trans-b (MN-major operands) are for .f16 and .bf16 only, not .e4m3"
    for _, body in ipairs {
      function()
        local acc, d = reg.array(f32, 4), reg.scalar(T.u64, 0)
        ptx.inst("wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3", { acc[0], acc[1], acc[2], acc[3] }, d, d, 1, 1, 1, 0, 1)
      end,
      function()
        ptx.raw [[
          .reg .f32 %a<4>;
          .reg .b64 %dd;
          wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%a0, %a1, %a2, %a3}, %dd, %dd, 1, 1, 1, 0, 1;
        ]]
      end,
    } do
      local ok, err = pcall(function() kernel "raw" { arch = "sm_90a", block = { 128 }, body }:ptx() end)
      assert.is_false(ok)
      assert.matches(want, err, 1, true)
    end
  end)

  it("report bad shapes at the caller's line", function()
    local line
    local ok, err = pcall(function()
      kernel "bad" { arch = "sm_90a", block = { 128 }, function()
        local acc = ptx.wgmma.fragments(64, true)
        line = H.here(); ptx.wgmma.mma_async { shape = { 64, 60, 16 }, d = acc, a = 0, b = 0 }
      end }:ptx()
    end)
    assert.is_false(ok)
    assert.matches("hopper_spec.lua:" .. line .. ": wgmma.mma_async.sync.aligned.m64n60k16.f32.bf16.bf16: .bf16 wgmma takes the "
      .. "shape .m64nNk16 with N = 8..256 in steps of 8; got .m64n60k16", err, 1, true)
  end)
end)

-- ------------------------------------------------------------ emulator

local SPAN = { interleave = 0, ["32B"] = 32, ["64B"] = 64, ["128B"] = 128 }

--- Byte offset of K-major element (r, k) (2-byte elements) in the canonical
-- layout, as the PTX ISA describes it: interleave = 8x16-byte core
-- matrices (LBO along K, SBO between 8-row groups); swizzled = rows of
-- `span` bytes, 8-row atoms SBO apart, the 16-byte chunk XORed with the row.
local function canonical(layout, lbo, sbo, r, k)
  local span = SPAN[layout]
  if span == 0 then
    return math.floor(r / 8) * sbo + math.floor(k / 8) * lbo + (r % 8) * 16 + (k % 8) * 2
  end
  local o = math.floor(r / 8) * sbo + (r % 8) * span + k * 2
  return bit.bxor(o, bit.lshift(bit.band(bit.rshift(o, 7), span / 16 - 1), 4))
end

--- Copy `words` u32 from global src to shared memory at base, thread tid
-- of 128 one word of every 128 (inside a kernel).
local function copy_to_shared(src, base, tid, words)
  for i = 0, words / 128 - 1 do
    local e = tid + i * 128
    local v = reg.scalar(u32)
    ptx.inst.ld.global.u32(v, ptx.addr(src + e:mul_wide(4)))
    ptx.inst.st.shared.u32(ptx.addr(base + e * 4), v)
  end
end

--- One warpgroup: copy a shared-memory image from global, build both
-- descriptors, D = A*B^T (scale_d 0, over garbage), then D += A*B^T, and
-- store every thread's registers in order.
local function mma_kernel(n, at, layout, lbo, sbo, scale_a, no_fence, lines)
  return kernel "wgmma_t" { arch = "sm_90a", block = { 128 },
    in_specs = { Tile(16384, u32) }, out_specs = { Tile(128 * n / 2, f32) },
    function(Img, Out)
      local s = smem.alloc(u32, 16384, { align = 1024 })
      local tid = reg.from(ptx.special.tid.x(), u32)
      local src = ptx.global_ptrs(Img)
      local base = s:base()
      copy_to_shared(src, base, tid, 16384)
      if not no_fence then ptx.fence.proxy_async("shared::cta") end
      ptx.bar_sync(0)
      local acc = ptx.wgmma.fragments(n, false)
      for i = 0, n / 2 - 1 do ptx.mov(acc[i], ptx.imm(f32, 1e6)) end
      local da = ptx.wgmma.desc(base, { layout = layout, lbo = lbo, sbo = sbo })
      local db = ptx.wgmma.desc(base + 16384, { layout = layout, lbo = lbo, sbo = sbo })
      ptx.wgmma.fence()
      if lines then lines.mma = H.here() end
      ptx.wgmma.mma_async { shape = { 64, n, 16 }, d = acc, a = da, b = db, atype = at, scale_d = 0, scale_a = scale_a }
      ptx.wgmma.mma_async { shape = { 64, n, 16 }, d = acc, a = da, b = db, atype = at, scale_d = 1, scale_a = scale_a }
      ptx.wgmma.commit_group()
      ptx.wgmma.wait_group(0)
      local out = ptx.global_ptrs(Out) + tid:mul_wide(n / 2 * 4)
      for i = 0, n / 2 - 1 do ptx.inst.st.global.f32(ptx.addr(out, i * 4), acc[i]) end
      ptx.ret()
    end }
end

describe("the emulator's wgmma", function()
  local cases = {
    { 64, bf16, "128B", 16, 1024 }, { 256, bf16, "128B", 16, 1024 }, { 8, bf16, "64B", 16, 512 },
    { 64, f16, "32B", 16, 256 }, { 128, bf16, "interleave", 128, 256 }, { 32, f16, "interleave", 1024, 128 },
  }
  for _, c in ipairs(cases) do
    local n, at, layout, lbo, sbo = c[1], c[2], c[3], c[4], c[5]
    it(("computes m64n%dk16 %s with the %s layout (LBO %d, SBO %d) in the fragment layout"):format(n, at.name, layout, lbo, sbo), function()
      math.randomseed(os.time() + n)
      local img = ffi.new("uint16_t[?]", 32768)
      for i = 0, 32767 do img[i] = 0x7fc0 end                     -- NaN everywhere the layout does not put data
      local a, b = {}, {}
      local enc = at == bf16 and floats.to_bf16 or floats.to_f16
      local dec = at == bf16 and floats.from_bf16 or floats.from_f16
      local function put(off, x) local h = enc(x); img[off / 2] = h; return dec(h) end
      for r = 0, 63 do for k = 0, 15 do a[r * 16 + k] = put(canonical(layout, lbo, sbo, r, k), math.random() * 2 - 1) end end
      for r = 0, n - 1 do for k = 0, 15 do b[r * 16 + k] = put(16384 + canonical(layout, lbo, sbo, r, k), math.random() * 2 - 1) end end
      local words = {}
      local w32 = ffi.cast("uint32_t*", img)
      for i = 0, 16383 do words[i + 1] = w32[i] end
      local scale_a = n == 8 and -1 or 1
      local k = mma_kernel(n, at, layout, lbo, sbo, scale_a)
      local out = k(tensor.from_table(words, u32, { 16384 })):values()
      for t = 0, 127 do
        for i = 0, n / 2 - 1 do
          local r, col = ptx.wgmma.coord(t, i)
          local s = 0
          for kk = 0, 15 do s = s + a[r * 16 + kk] * b[col * 16 + kk] end
          local want, got = 2 * scale_a * s, out[t * n / 2 + i + 1]
          if math.abs(got - want) > 1e-5 + 1e-5 * math.abs(want) then
            error(("thread %d reg %d (D[%d][%d]): got %.9g, want %.9g"):format(t, i, r, col, got, want))
          end
        end
      end
      assert_ptxas(k)
    end)
  end

  it("computes m64n128k16 bf16 bit for bit: the products summed from 0 in k order in double, then the old D, rounded once", function()
    -- Products k = 0 and k = 2 of every element are huge and cancel (A[r][2]
    -- = -A[r][0], B[c][2] = B[c][0]): the rounded result keeps the other
    -- products' low bits only when the sum runs in k order (a reordered,
    -- blocked-across-k or wider sum shows in the bits).
    local n, big = 128, 2 ^ 40
    math.randomseed(require("pyptx.tools.verify").fresh_seed())
    local function wide(e) return floats.from_bf16(floats.to_bf16((math.random() * 2 - 1) * 2 ^ (math.random(-12, 12) + (e or 0)))) end
    local img = ffi.new("uint16_t[?]", 32768)
    local a, b = {}, {}
    local function put(off, x) img[off / 2] = floats.to_bf16(x); return x end
    for r = 0, 63 do
      for k = 0, 15 do a[r * 16 + k] = put(canonical("128B", 16, 1024, r, k), k == 0 and big or k == 2 and -big or wide()) end
    end
    for c = 0, n - 1 do
      for k = 0, 15 do
        local v = k == 2 and b[c * 16] or wide(k == 0 and 20 or 0)
        b[c * 16 + k] = put(16384 + canonical("128B", 16, 1024, c, k), v)
      end
    end
    local words = {}
    local w32 = ffi.cast("uint32_t*", img)
    for i = 0, 16383 do words[i + 1] = w32[i] end
    local out = mma_kernel(n, bf16, "128B", 16, 1024, 1)(tensor.from_table(words, u32, { 16384 })):values()
    local function f32_of(x) return tonumber(ffi.new("float", x)) end
    for t = 0, 127 do
      for i = 0, n / 2 - 1 do
        local r, col = ptx.wgmma.coord(t, i)
        local sum = 0
        for kk = 0, 15 do sum = sum + a[r * 16 + kk] * b[col * 16 + kk] end
        local want = f32_of(f32_of(sum) + sum)      -- D = A*B (scale-d 0), then D += A*B
        assert.are.equal(want, out[t * n / 2 + i + 1], ("D[%d][%d] (sum %.17g)"):format(r, col, sum))
      end
    end
  end)

  it("computes m64n64k16 bf16 with A from registers (the a_coord layout) and B through a 64B descriptor", function()
    local n = 64
    math.randomseed(os.time() + 7)
    local img = ffi.new("uint16_t[?]", 32768)
    for i = 0, 32767 do img[i] = 0x7fc0 end
    local a, b, areg = {}, {}, {}
    for r = 0, 63 do for kk = 0, 15 do a[r * 16 + kk] = floats.from_bf16(floats.to_bf16(math.random() * 2 - 1)) end end
    for r = 0, n - 1 do
      for kk = 0, 15 do
        local h = floats.to_bf16(math.random() * 2 - 1)
        img[canonical("64B", 16, 512, r, kk) / 2] = h
        b[r * 16 + kk] = floats.from_bf16(h)
      end
    end
    for t = 0, 127 do
      for r = 0, 3 do
        local word = 0
        for e = 0, 1 do
          local row, kk = ptx.wgmma.a_coord(t, r, e)
          word = word + floats.to_bf16(a[row * 16 + kk]) * (e == 0 and 1 or 65536)
        end
        areg[t * 4 + r + 1] = word
      end
    end
    local words = {}
    local w32 = ffi.cast("uint32_t*", img)
    for i = 0, 16383 do words[i + 1] = w32[i] end
    local k = kernel "wgmma_ra" { arch = "sm_90a", block = { 128 },
      in_specs = { Tile(16384, u32), Tile(512, u32) }, out_specs = { Tile(128 * n / 2, f32) },
      function(Img, Areg, Out)
        local s = smem.alloc(u32, 16384, { align = 1024 })
        local tid = reg.from(ptx.special.tid.x(), u32)
        local src, pa = ptx.global_ptrs(Img, Areg)
        local base = s:base()
        copy_to_shared(src, base, tid, 16384)
        local ar = reg.array(T.b32, 4)
        ptx.inst.ld.global.v4.b32({ ar[0], ar[1], ar[2], ar[3] }, ptx.addr(pa + tid:mul_wide(16)))
        ptx.fence.proxy_async("shared::cta")
        ptx.bar_sync(0)
        local acc = ptx.wgmma.fragments(n, true)
        local db = ptx.wgmma.desc(base, { layout = "64B", lbo = 16, sbo = 512 })
        ptx.wgmma.fence()
        ptx.wgmma.mma_async { shape = { 64, n, 16 }, d = acc, a = ar, b = db, scale_d = 1 }
        ptx.wgmma.commit_group()
        ptx.wgmma.wait_group(0)
        local out = ptx.global_ptrs(Out) + tid:mul_wide(n / 2 * 4)
        for i = 0, n / 2 - 1 do ptx.inst.st.global.f32(ptx.addr(out, i * 4), acc[i]) end
        ptx.ret()
      end }
    assert.truthy(k:ptx():find("%f32}, {%r", 1, true))
    local out = k(tensor.from_table(words, u32, { 16384 }), tensor.from_table(areg, u32, { 512 })):values()
    for t = 0, 127 do
      for i = 0, n / 2 - 1 do
        local r, col = ptx.wgmma.coord(t, i)
        local s = 0
        for kk = 0, 15 do s = s + a[r * 16 + kk] * b[col * 16 + kk] end
        local got = out[t * n / 2 + i + 1]
        if math.abs(got - s) > 1e-5 + 1e-5 * math.abs(s) then
          error(("thread %d reg %d (D[%d][%d]): got %.9g, want %.9g"):format(t, i, r, col, got, s))
        end
      end
    end
    assert_ptxas(k)
  end)

  --- A wgmma with A from registers: mode "no_fence" issues no wgmma.fence,
  -- "late_write" loads A's registers after it; lines gets the lines that matter.
  local function fence_kernel(mode, lines)
    return kernel("wgmma_fence_" .. mode) { arch = "sm_90a", block = { 128 },
      in_specs = { Tile(512, u32) }, out_specs = { Tile(128 * 4, f32) },
      function(Areg, Out)
        local s = smem.alloc(u32, 4096, { align = 1024 })
        local tid = reg.from(ptx.special.tid.x(), u32)
        local pa = ptx.global_ptrs(Areg)
        local ar = reg.array(T.b32, 4)
        local function load() ptx.inst.ld.global.v4.b32({ ar[0], ar[1], ar[2], ar[3] }, ptx.addr(pa + tid:mul_wide(16))) end
        if mode ~= "late_write" then load() end
        local acc = ptx.wgmma.fragments(8, true)
        local db = ptx.wgmma.desc(s:base(), { layout = "64B", lbo = 16, sbo = 512 })
        if mode ~= "no_fence" then ptx.wgmma.fence() end
        if mode == "late_write" then load() end
        lines.mma = debug.getinfo(1, "l").currentline + 1
        ptx.wgmma.mma_async { shape = { 64, 8, 16 }, d = acc, a = ar, b = db, scale_d = 1 }
        ptx.wgmma.commit_group()
        ptx.wgmma.wait_group(0)
        local out = ptx.global_ptrs(Out) + tid:mul_wide(16)
        for i = 0, 3 do ptx.inst.st.global.f32(ptx.addr(out, i * 4), acc[i]) end
        ptx.ret()
      end }
  end

  it("reports a wgmma.mma_async with no wgmma.fence before the warp's first one", function()
    local lines = {}
    local ok, err = pcall(fence_kernel("no_fence", lines), tensor.empty({ 512 }, u32):fill(0))
    assert.is_false(ok)
    assert.matches("hopper_spec%.lua:" .. lines.mma .. ": wgmma%.mma_async.- no wgmma%.fence before it", tostring(err))
  end)

  it("reports a wgmma.mma_async reading registers written after the last wgmma.fence, naming the write", function()
    local lines = {}
    local ok, err = pcall(fence_kernel("late_write", lines), tensor.empty({ 512 }, u32):fill(0))
    assert.is_false(ok)
    assert.matches("hopper_spec%.lua:" .. lines.mma .. ": wgmma%.mma_async.- reads registers that "
      .. "spec/hopper_spec%.lua:%d+: ld%.global%.v4%.b32.- wrote after the last wgmma%.fence", tostring(err))
  end)

  it("reports wgmma reading st.shared data without fence.proxy.async", function()
    local lines = {}
    local k = mma_kernel(8, bf16, "128B", 16, 1024, 1, true, lines)
    local img = {}
    for i = 1, 16384 do img[i] = 0x3f803f80 end
    local ok, err = pcall(k, tensor.from_table(img, u32, { 16384 }))
    assert.is_false(ok)
    assert.matches("hopper_spec.lua:" .. (lines.mma + 1) .. ": wgmma.mma_async", err, 1, true)
    assert.matches("wgmma.mma_async reads shared memory at 0x%x+ through the async proxy, but spec/hopper_spec.lua:%d+: st.shared", err)
    assert.matches("st.shared.u32", err, 1, true)
  end)

  --- One warpgroup, m64n64k16 bf16 on 128B tiles (A at 0, B at 0x4000)
  -- filled with st.shared before a barrier, where thread 96 also stores
  -- into B's first chunk: mode "before" (after the barrier, fenced, before
  -- its wgmma), "between" (after its wgmma, before the wait) or "after"
  -- (after the wait). Warp 3, the last at the barrier, runs on and reads
  -- B first; the emulator keeps it decoded for the other warps
  -- (src/emu/emu_wgb.c), whose reports must be those of their own reads.
  local function b_store_kernel(mode, lines)
    return kernel("wgmma_b_store_" .. mode) { arch = "sm_90a", block = { 128 },
      in_specs = { Tile(8192, u32) }, out_specs = { Tile(128 * 32, f32) },
      function(Img, Out)
        local s = smem.alloc(u32, 8192, { align = 1024 })
        local tid = reg.from(ptx.special.tid.x(), u32)
        local src = ptx.global_ptrs(Img)
        local base = s:base()
        copy_to_shared(src, base, tid, 8192)
        ptx.fence.proxy_async("shared::cta")
        ptx.bar_sync(0)
        local function store()
          ptx.if_(tid:eq(96), function()
            lines.store = H.here(); ptx.inst.st.shared.u32(ptx.addr(base + 16384), 0x3f803f80)
          end)
        end
        if mode == "before" then store(); ptx.fence.proxy_async("shared::cta") end
        local acc = ptx.wgmma.fragments(64, false)
        local da = ptx.wgmma.desc(base, { layout = "128B", lbo = 16, sbo = 1024 })
        local db = ptx.wgmma.desc(base + 16384, { layout = "128B", lbo = 16, sbo = 1024 })
        ptx.wgmma.fence()
        lines.mma = H.here(); ptx.wgmma.mma_async { shape = { 64, 64, 16 }, d = acc, a = da, b = db, scale_d = 0 }
        if mode == "between" then store() end
        ptx.wgmma.commit_group()
        ptx.wgmma.wait_group(0)
        if mode == "after" then store() end
        local out = ptx.global_ptrs(Out) + tid:mul_wide(32 * 4)
        for i = 0, 31 do ptx.inst.st.global.f32(ptx.addr(out, i * 4), acc[i]) end
        ptx.ret()
      end }
  end

  local ones = {}
  for i = 1, 8192 do ones[i] = 0x3f803f80 end   -- bf16 1.0 pairs: every D element is 16

  it("clears a CTA's wgmma reads from the race shadows before the next CTA on the thread runs", function()
    -- Race checks only (unwritten shared memory may be read): CTA 0's four
    -- warps read A and B through descriptors (only wgmma touches those
    -- bytes), then CTA 1, on the same host thread, stores into B from warp
    -- 1 in the same epoch number. Stale reads would be a write-after-read
    -- race there.
    local k = kernel "wgmma_reuse" { arch = "sm_90a", grid = { 2, 1, 1 }, block = { 128 }, out_specs = { Tile(2, f32) },
      function(Out)
        local s = smem.alloc(u32, 8192, { align = 1024 })
        local tid = reg.from(ptx.special.tid.x(), u32)
        local cta = reg.from(ptx.special.ctaid.x(), u32)
        local base = s:base()
        ptx.if_(cta:eq(0), function()
          local acc = ptx.wgmma.fragments(64, false)
          ptx.wgmma.fence()
          ptx.wgmma.mma_async { shape = { 64, 64, 16 }, d = acc, scale_d = 0,
            a = ptx.wgmma.desc(base, { layout = "128B", lbo = 16, sbo = 1024 }),
            b = ptx.wgmma.desc(base + 16384, { layout = "128B", lbo = 16, sbo = 1024 }) }
          ptx.wgmma.commit_group()
          ptx.wgmma.wait_group(0)
          ptx.if_(tid:eq(0), function() ptx.inst.st.global.f32(ptx.addr(ptx.global_ptrs(Out)), acc[0]) end)
        end, function()
          ptx.if_(tid:eq(32), function() ptx.inst.st.shared.u32(ptx.addr(base + 16384), 1) end)
        end)
        ptx.ret()
      end }
    local previous, emu = runtime.device(), H.emu()
    local threads, checks = emu:option("threads"), emu:option("checks")
    emu:set_option("threads", 1)
    emu:set_option("checks", 2)
    runtime.use(emu)
    local ok, out = pcall(function() return k():values() end)
    runtime.use(previous)
    emu:set_option("threads", threads)
    emu:set_option("checks", checks)
    assert(ok, out)
    assert.equal(0, out[1])
  end)

  it("reports a store into B by the warp that reads it first at the next warp's wgmma (read after write)", function()
    for _, mode in ipairs { "before", "between" } do
      local lines = {}
      local ok, err = pcall(b_store_kernel(mode, lines), tensor.from_table(ones, u32, { 8192 }))
      assert.is_false(ok, mode)
      assert.matches("hopper_spec.lua:" .. lines.mma .. ": wgmma.mma_async", err, 1, true)
      assert.matches("shared-memory race (read after write): 16 bytes at shared offset 0x4000, which warp 3 wrote", err, 1, true)
      assert.matches("hopper_spec.lua:" .. lines.store .. ": st.shared.u32", err, 1, true)
    end
  end)

  it("reports a store into B after the wait against every warp's read (write after read of other warps)", function()
    local lines = {}
    local ok, err = pcall(b_store_kernel("after", lines), tensor.from_table(ones, u32, { 8192 }))
    assert.is_false(ok)
    assert.matches("hopper_spec.lua:" .. lines.store .. ": st.shared.u32", err, 1, true)
    assert.matches("shared-memory race (write after read): 4 bytes at shared offset 0x4000, which other warps read", err, 1, true)
    assert.matches("hopper_spec.lua:" .. lines.mma .. ": wgmma.mma_async", err, 1, true)
  end)

  it("computes the same B for every warp of the warpgroup (one read decoded for all)", function()
    local out = b_store_kernel("none", {})(tensor.from_table(ones, u32, { 8192 })):values()
    for i = 1, 128 * 32 do assert.equal(16, out[i]) end
  end)

  it("reports a descriptor whose swizzle disagrees with the TMA load, naming both lines", function()
    local tma_line, mma_line
    local k = kernel "mismatch" { arch = "sm_90a", block = { 128 },
      in_specs = { Tile(64, 64, bf16) }, out_specs = {},
      function(A)
        local sA = smem.wgmma_tile(bf16, { 64, 64 })
        local bar = smem.mbarrier(1)
        local tid = reg.from(ptx.special.tid.x(), u32)
        local z = reg.scalar(u32, 0)
        ptx.if_(tid:eq(0), function()
          ptx.mbarrier.init(bar[0], 1)
          local d = A:tma_desc { box = { 64, 64 }, swizzle = "128B" }
          ptx.mbarrier.arrive_expect_tx(bar[0], d.bytes)
          tma_line = H.here(); ptx.cp.async.bulk.tensor_2d { dst = sA[0], src = d, coord = { z, z }, mbar = bar[0] }
        end)
        ptx.bar_sync(0)
        ptx.mbarrier.wait(bar[0], 0)
        local acc = ptx.wgmma.fragments(64, true)
        local da = ptx.wgmma.desc(sA:base(), { layout = "64B", lbo = 16, sbo = 512 })   -- planted: TMA used 128B
        ptx.wgmma.fence()
        mma_line = H.here(); ptx.wgmma.mma_async { shape = { 64, 64, 16 }, d = acc, a = da, b = da }
        ptx.wgmma.commit_group()
        ptx.wgmma.wait_group(0)
        ptx.ret()
      end }
    local ok, err = pcall(k, tensor.rand({ 64, 64 }, bf16))
    assert.is_false(ok)
    assert.matches("hopper_spec.lua:" .. mma_line .. ": wgmma.mma_async", err, 1, true)
    assert.matches("the A descriptor reads shared memory at 0x0 with 64B swizzle, but the TMA load at ", err, 1, true)
    assert.matches("hopper_spec.lua:" .. tma_line .. ": cp.async.bulk.tensor.2d", err, 1, true)
    assert.matches("wrote it with 128B swizzle", err, 1, true)
  end)
end)

-- ------------------------------------------- every sm_90a form, emulated

-- Input types as the host generates them: element bits, K of the shape and
-- a random non-zero element (its bits and its value).
local band, bor, lshift, rshift = bit.band, bit.bor, bit.lshift, bit.rshift
local function nonzero() local x = math.random() * 1.9 - 0.95 return math.abs(x) < 0.05 and 0.5 or x end
local function f32r(x) return floats.from_f32_bits(floats.f32_bits(x)) end
local INPUT = {
  f16 = { bits = 16, k = 16, gen = function() local h = floats.to_f16(nonzero()) return h, floats.from_f16(h) end },
  bf16 = { bits = 16, k = 16, gen = function() local h = floats.to_bf16(nonzero()) return h, floats.from_bf16(h) end },
  tf32 = { bits = 32, k = 8, gen = function()     -- tf32 values: f32 bits with the low 13 bits clear
    local u = band(floats.f32_bits(nonzero()), 0xffffe000) % 4294967296
    return u, floats.from_f32_bits(u)
  end },
  e4m3 = { bits = 8, k = 32, gen = function()   -- every finite non-zero code up to 16 (sums stay in f16 range)
    local c repeat c = math.random(0, 255) until band(c, 0x7f) ~= 0 and math.abs(floats.from_e4m3(c)) <= 16
    return c, floats.from_e4m3(c)
  end },
  e5m2 = { bits = 8, k = 32, gen = function()
    local c repeat c = math.random(0, 255) until band(c, 0x7f) ~= 0 and math.abs(floats.from_e5m2(c)) <= 16
    return c, floats.from_e5m2(c)
  end },
  s8 = { bits = 8, k = 32, gen = function() local v = math.random(-128, 127) return v % 256, v end },
  u8 = { bits = 8, k = 32, gen = function() local v = math.random(0, 255) return v, v end },
  b1 = { bits = 1, k = 256, gen = function() local v = math.random(0, 1) return v, v end },
}

--- Element (mn, k) of an operand in the PTX ISA's canonical layouts, as its
-- table writes them (units of elements, T elements per 16 bytes, W = span/16):
--   K-major  interleave ((8,m),(T,2k)):((1T,SBO),(1,LBO))   swizzled ((8,m),(T,2k)):((WT,SBO),(1,T))
--   MN-major interleave ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO)) swizzled ((T,W,m),(8,k)):((1,T,LBO),(WT,SBO))
-- then Swizzle<log2 W,4,3> on the byte address (bits 4.. ^= bits 7..).
-- Returns the byte address and the bit within the byte (b1).
local function isa_addr(L, bits, mn_major, mn, k)
  local t, W, e = 128 / bits, L.span / 16, 8 / bits          -- t: the table's T; e: elements per byte
  local lbo, sbo = L.lbo * e, L.sbo * e                      -- strides in elements
  local off
  if not mn_major and L.span == 0 then
    off = (mn % 8) * t + math.floor(mn / 8) * sbo + (k % t) + math.floor(k / t) * lbo
  elseif not mn_major then
    off = (mn % 8) * W * t + math.floor(mn / 8) * sbo + (k % t) + math.floor(k / t) * t
  elseif L.span == 0 then
    off = (mn % t) + math.floor(mn / t) * sbo + (k % 8) * t + math.floor(k / 8) * lbo
  else
    off = (mn % t) + math.floor(mn / t) % W * t + math.floor(mn / (t * W)) * lbo + (k % 8) * W * t + math.floor(k / 8) * sbo
  end
  local a = L.base + math.floor(off * bits / 8)
  if L.span > 0 then a = bit.bxor(a, lshift(band(rshift(a, 7), W - 1), 4)) end
  return a, (off * bits) % 8
end

--- Write element bits v (of `bits` bits) at byte a (bit b) of the image.
local function put_bits(img, a, b, bits, v)
  if bits == 1 then
    img[a] = bor(band(img[a], bit.bnot(lshift(1, b))), lshift(v, b))
    return
  end
  for i = 0, bits / 8 - 1 do img[a + i] = band(rshift(v, 8 * i), 0xff) end
end

--- Random matrices A (64 x K) and B (N x K): values [r][k] and element bits.
local function operands(at, bt, n)
  local A, B = { v = {}, bits = {} }, { v = {}, bits = {} }
  local K = INPUT[at].k
  for r = 0, 63 do for k = 0, K - 1 do A.bits[r * K + k], A.v[r * K + k] = INPUT[at].gen() end end
  for c = 0, n - 1 do for k = 0, K - 1 do B.bits[c * K + k], B.v[c * K + k] = INPUT[bt].gen() end end
  return A, B
end

--- The shared image (48 KB: A at 0, B at 16 KB) with every unused byte random.
local function image(c, A, B)
  local img = ffi.new("uint8_t[?]", 49152)
  for i = 0, 49151 do img[i] = math.random(0, 255) end
  local K = INPUT[c.at].k
  for r = 0, 63 do
    for k = 0, K - 1 do
      if not c.areg then
        local a, b = isa_addr(c.A, INPUT[c.at].bits, c.ta, r, k)
        put_bits(img, a, b, INPUT[c.at].bits, A.bits[r * K + k])
      end
    end
  end
  for col = 0, c.n - 1 do
    for k = 0, K - 1 do
      local a, b = isa_addr(c.B, INPUT[c.bt].bits, c.tb, col, k)
      put_bits(img, a, b, INPUT[c.bt].bits, B.bits[col * K + k])
    end
  end
  local words, w32 = {}, ffi.cast("uint32_t*", img)
  for i = 0, 12287 do words[i + 1] = w32[i] end
  return words
end

--- The four A fragment registers of each thread (the ISA's A register layout).
local function a_regs(c, A)
  local words, K, bits = {}, INPUT[c.at].k, INPUT[c.at].bits
  for t = 0, 127 do
    for r = 0, 3 do
      local wd = 0
      for e = 0, 32 / bits - 1 do
        local row, k = ptx.wgmma.a_coord(t, r, e, c.at)
        wd = wd + A.bits[row * K + k] * 2 ^ (e * bits)
      end
      words[t * 4 + r + 1] = wd
    end
  end
  return words
end

--- Random starting accumulators (f32, f16 pairs, s32 near the limits so
-- that some sums overflow) as register words, and their element values.
local function d_init(c)
  local nd = c.dt == "f16" and c.n / 4 or c.n / 2
  local words, vals = {}, {}
  for t = 0, 127 do
    for i = 0, c.n / 2 - 1 do
      if c.dt == "f32" then vals[t * 256 + i] = f32r(nonzero() * 4)
      elseif c.dt == "f16" then vals[t * 256 + i] = floats.round_f16(nonzero() * 4)
      else vals[t * 256 + i] = math.random() < 0.3 and (math.random(0, 1) * 2 - 1) * (2 ^ 31 - math.random(1, 40000))
        or math.random(-100000, 100000) end
    end
    for r = 0, nd - 1 do
      local v
      if c.dt == "f16" then v = floats.to_f16(vals[t * 256 + 2 * r]) + 65536 * floats.to_f16(vals[t * 256 + 2 * r + 1])
      elseif c.dt == "f32" then v = floats.f32_bits(vals[t * 256 + r]) % 4294967296
      else v = vals[t * 256 + r] % 4294967296 end
      words[t * nd + r + 1] = v
    end
  end
  return words, vals
end

--- One warpgroup: the image to shared memory, fence.proxy.async, A from
-- descriptors or registers, D from Dinit, one wgmma (scale-d from the
-- Flag input as a predicate, negated when c.neg_d), D stored in order.
local function form_kernel(c)
  local nd = c.dt == "f16" and c.n / 4 or c.n / 2
  local dreg = ({ f32 = f32, f16 = T.b32, s32 = T.s32 })[c.dt]
  return kernel "wgmma_form" { arch = "sm_90a", version = c.version, block = { 128 },
    in_specs = { Tile(12288, u32), Tile(512, u32), Tile(128 * nd, u32), Tile(1, u32) }, out_specs = { Tile(128 * nd, u32) },
    function(Img, Areg, Dinit, Flag, Out)
      local s = smem.alloc(u32, 12288, { align = 1024 })
      local tid = reg.from(ptx.special.tid.x(), u32)
      local src, pa, pd, pf = ptx.global_ptrs(Img, Areg, Dinit, Flag)
      local base = s:base()
      for i = 0, 12288 / 128 - 1 do
        local e = tid + i * 128
        local v = reg.scalar(u32)
        ptx.inst.ld.global.u32(v, ptx.addr(src + e:mul_wide(4)))
        ptx.inst.st.shared.u32(ptx.addr(base + e * 4), v)
      end
      ptx.fence.proxy_async("shared::cta")
      ptx.bar_sync(0)
      local acc = reg.array(dreg, nd)
      local dsrc = pd + tid:mul_wide(nd * 4)
      for i = 0, nd - 1 do ptx.ld.global(acc[i], ptx.addr(dsrc, 4 * i)) end
      local a
      if c.areg then
        a = reg.array(T.b32, 4)
        ptx.inst.ld.global.v4.b32({ a[0], a[1], a[2], a[3] }, ptx.addr(pa + tid:mul_wide(16)))
      else
        a = ptx.wgmma.desc(base + c.A.base, { layout = c.A.layout, lbo = c.A.lbo, sbo = c.A.sbo })
      end
      local b = ptx.wgmma.desc(base + c.B.base, { layout = c.B.layout, lbo = c.B.lbo, sbo = c.B.sbo })
      local flag = reg.scalar(u32)
      ptx.ld.global(flag, ptx.addr(pf))
      local sd = flag:ne(0)
      ptx.wgmma.fence()
      ptx.wgmma.mma_async { shape = { 64, c.n, INPUT[c.at].k }, d = acc, a = a, b = b, atype = c.at, btype = c.bt, dtype = c.dt,
        scale_d = c.neg_d and -sd or sd, scale_a = c.sa, scale_b = c.sb, trans_a = c.ta and 1 or nil,
        trans_b = c.tb and 1 or nil, satfinite = c.sat }
      ptx.wgmma.commit_group()
      ptx.wgmma.wait_group(0)
      local out = ptx.global_ptrs(Out) + tid:mul_wide(nd * 4)
      for i = 0, nd - 1 do ptx.st.global(ptx.addr(out, 4 * i), acc[i]) end
      ptx.ret()
    end }
end

--- The f16 value of the 16-bit half h (0 low) of an output word.
local function f16_half(word, h) return floats.from_f16(h == 0 and word % 65536 or math.floor(word / 65536)) end

--- One ulp of f16 at x (normal range; 2^-24 below).
local function ulp16(x) local _, e = math.frexp(math.abs(x)) return math.max(2 ^ (e - 11), 2 ^ -24) end

--- Check every D element against the reference built from A, B and Dinit.
local function check_form(c, A, B, dvals, out, use_d)
  local K, nd = c.k or INPUT[c.at].k, c.dt == "f16" and c.n / 4 or c.n / 2
  local scale = (c.sa or 1) * (c.sb or 1)
  for t = 0, 127 do
    for i = 0, c.n / 2 - 1 do
      local row, col = ptx.wgmma.coord(t, i)
      local s, mag = 0, 0
      for k = 0, K - 1 do
        local p = A.v[row * K + k] * B.v[col * K + k]
        s, mag = s + p, mag + math.abs(p)
      end
      local old = use_d and dvals[t * 256 + i] or 0
      local want = old + scale * s
      local got
      if c.dt == "f16" then got = f16_half(tonumber(out[t * nd + math.floor(i / 2) + 1]), i % 2)
      elseif c.dt == "f32" then got = floats.from_f32_bits(tonumber(out[t * nd + i + 1]))
      else
        got = tonumber(out[t * nd + i + 1])
        got = got >= 2 ^ 31 and got - 2 ^ 32 or got
        if c.sat then want = math.max(-2 ^ 31, math.min(2 ^ 31 - 1, want))
        else want = (want + 2 ^ 31) % 2 ^ 32 - 2 ^ 31 end
      end
      local tol = c.dt == "s32" and 0 or c.dt == "f16" and ulp16(want) or 1e-6 * (math.abs(want) + mag + math.abs(old))
      if math.abs(got - want) > tol or got ~= got then
        error(("%s: thread %d element %d (D[%d][%d]): got %.9g, want %.9g"):format(c.name, t, i, row, col, got, want))
      end
    end
  end
end

--- A layout of an operand region: layout name, LBO, SBO, base offset.
local function L(layout, lbo, sbo, base)
  return { layout = layout, span = ({ interleave = 0, ["32B"] = 32, ["64B"] = 64, ["128B"] = 128 })[layout],
           lbo = lbo, sbo = sbo, base = base }
end

local A0, B0 = 0, 16384
-- name, N, A/B/D types, A and B layouts (nil A: from registers), trans, scales, scale-d use, .satfinite
local FORMS = {
  { "f16 -> f16, K-major 128B, N 256, scale-a -1", 256, "f16", "f16", "f16", L("128B", 16, 1024, A0), L("128B", 16, 1024, B0), sa = -1 },
  { "f16 -> f16, A registers, B 32B, N 24", 24, "f16", "f16", "f16", nil, L("32B", 16, 512, B0), sb = -1 },
  { "bf16, A M-major 128B (trans-a), B K-major 64B, N 64", 64, "bf16", "bf16", "f32", L("128B", 8192, 1024, A0),
    L("64B", 16, 512, B0), ta = true },
  { "f16, A K-major interleave, B N-major interleave (trans-b), N 40", 40, "f16", "f16", "f32", L("interleave", 128, 272, A0),
    L("interleave", 1024, 128, B0), tb = true },
  { "bf16, both MN-major 64B / 32B, N 144 (9 N blocks)", 144, "bf16", "bf16", "f32", L("64B", 512, 2048, A0),
    L("32B", 512, 8704, B0), ta = true, tb = true, sb = -1 },
  { "f16 -> f16, A registers, B N-major 128B, N 256 (4 LBO blocks)", 256, "f16", "f16", "f16", nil,
    L("128B", 2048, 1024, B0), tb = true },
  { "f16, A M-major interleave, B N-major 32B, scale-d false", 16, "f16", "f16", "f32", L("interleave", 1024, 128, A0),
    L("32B", 1024, 256, B0), ta = true, tb = true, use_d = false },
  { "tf32 k8, 128B, N 64, scale-b -1", 64, "tf32", "tf32", "f32", L("128B", 16, 1024, A0), L("128B", 16, 1024, B0), sb = -1 },
  { "tf32 k8, A registers, B interleave, N 8", 8, "tf32", "tf32", "f32", nil, L("interleave", 128, 256, B0) },
  { "e4m3 x e4m3 -> f32, 128B, N 128", 128, "e4m3", "e4m3", "f32", L("128B", 16, 1024, A0), L("128B", 16, 1024, B0) },
  { "e4m3 x e5m2 -> f16, 64B, N 72, scale-a -1", 72, "e4m3", "e5m2", "f16", L("64B", 16, 512, A0), L("64B", 16, 512, B0), sa = -1 },
  { "e5m2 x e4m3 -> f32, A registers, B 32B, N 16", 16, "e5m2", "e4m3", "f32", nil, L("32B", 16, 256, B0) },
  { "e5m2 x e5m2 -> f16, interleave, N 256, negated scale-d", 256, "e5m2", "e5m2", "f16", L("interleave", 128, 256, A0),
    L("interleave", 128, 256, B0), neg_d = true },
  { "s8 x s8, 128B, N 256", 256, "s8", "s8", "s32", L("128B", 16, 1024, A0), L("128B", 16, 1024, B0) },
  { "s8 x u8 .satfinite, 64B, N 48", 48, "s8", "u8", "s32", L("64B", 16, 512, A0), L("64B", 16, 1024, B0), sat = true, version = "8.4" },
  { "u8 x s8, A registers, B interleave, N 24", 24, "u8", "s8", "s32", nil, L("interleave", 128, 256, B0), version = "8.4" },
  { "u8 x u8 .satfinite, 32B, N 32, scale-d false", 32, "u8", "u8", "s32", L("32B", 16, 256, A0), L("32B", 16, 256, B0), sat = true,
    use_d = false },
  { "b1 .and.popc, 128B, N 8", 8, "b1", "b1", "s32", L("128B", 16, 1024, A0), L("128B", 16, 1024, B0) },
  { "b1 .and.popc, A registers, B 64B, N 256", 256, "b1", "b1", "s32", nil, L("64B", 16, 512, B0) },
  { "b1 .and.popc, interleave, N 144", 144, "b1", "b1", "s32", L("interleave", 256, 512, A0), L("interleave", 128, 256, B0) },
}

describe("the emulator's wgmma: every sm_90a form from the ISA's layouts", function()
  for _, f in ipairs(FORMS) do
    local c = { name = f[1], n = f[2], at = f[3], bt = f[4], dt = f[5], A = f[6], B = f[7], areg = f[6] == nil, ta = f.ta,
                tb = f.tb, sa = f.sa, sb = f.sb, sat = f.sat, version = f.version, neg_d = f.neg_d }
    it(("m64n%dk%d %s"):format(c.n, INPUT[c.at].k, c.name), function()
      math.randomseed(require("pyptx.tools.verify").fresh_seed() + c.n)
      local A, B = operands(c.at, c.bt, c.n)
      local dwords, dvals = d_init(c)
      local use_d = f.use_d ~= false
      local k = form_kernel(c)
      local flag = (use_d ~= (c.neg_d == true)) and 1 or 0
      local aw = c.areg and a_regs(c, A) or {}
      for i = #aw + 1, 512 do aw[i] = 0 end
      local out = k(tensor.from_table(image(c, A, B), u32, { 12288 }), tensor.from_table(aw, u32, { 512 }),
        tensor.from_table(dwords, u32, { #dwords }), tensor.from_table({ flag }, u32, { 1 })):values()
      check_form(c, A, B, dvals, out, use_d)
      assert_ptxas(k)
    end)
  end
end)

-- ------------------------------------------- sparse A (wgmma.mma_async.sp)

--- A random structured-sparse A (64 x 2K): in each chunk of 4 (tf32: 2) of
-- a row, 2 (tf32: 1) random positions hold random non-zero elements, the
-- rest zero. Returns the dense values A.v (64 x 2K), the stored elements
-- A.comp (64 x K, chunk by chunk in order of position) and the positions.
local function sparse_a(at)
  local kc, cw, keep = INPUT[at].k, at == "tf32" and 2 or 4, at == "tf32" and 1 or 2
  local A = { v = {}, comp = {}, pos = {}, k = 2 * kc }
  for r = 0, 63 do
    for k = 0, 2 * kc - 1 do A.v[r * 2 * kc + k] = 0 end
    for ch = 0, 2 * kc / cw - 1 do
      local p1 = math.random(0, cw - 1)
      local p2 repeat p2 = math.random(0, cw - 1) until p2 ~= p1
      local ps = keep == 1 and { p1 } or { math.min(p1, p2), math.max(p1, p2) }
      for s = 1, keep do
        local b, v repeat b, v = INPUT[at].gen() until v ~= 0
        A.comp[r * kc + ch * keep + s - 1] = b
        A.v[r * 2 * kc + ch * cw + ps[s]] = v
        A.pos[(r * 2 * kc / cw + ch) * keep + s - 1] = ps[s]
      end
    end
  end
  return A
end

--- The sp-meta word of each thread (the ISA's metadata layout, per warp
-- rows 16w..16w+15, g = lane / 4): 16-bit and tf32 inputs: the pair of
-- lanes 4g + 2sel + {0, 1} holds row g (bits 0-15) and g + 8 (16-31), the
-- first lane chunks 0-3, the second 4-7, 4 bits a chunk (two 2-bit
-- positions; tf32: 0b0100 / 0b1110); 8-bit: lane 4g + h + 2j holds row
-- g + 8h, chunks 8j..8j+7. Lanes that supply nothing hold random bits.
local function sparse_meta(at, A, sel)
  local words, kc = {}, INPUT[at].k
  for t = 0, 127 do words[t] = math.random(0, 2 ^ 32 - 1) end
  local eight, nch = INPUT[at].bits == 8, at == "tf32" and kc or kc / 2
  for t = 0, 127 do
    local q = t % 4
    if eight or math.floor(q / 2) == sel then words[t] = 0 end
  end
  for r = 0, 63 do
    local w, rr = math.floor(r / 16), r % 16
    local g, h = rr % 8, math.floor(rr / 8)
    for ch = 0, nch - 1 do
      local lane, sh
      if eight then lane, sh = 4 * g + h + 2 * math.floor(ch / 8), 4 * (ch % 8)
      else lane, sh = 4 * g + 2 * sel + math.floor(ch / 4), 16 * h + 4 * (ch % 4) end
      local f
      if at == "tf32" then f = A.pos[r * nch + ch] == 0 and 0x4 or 0xe
      else f = A.pos[(r * nch + ch) * 2] + 4 * A.pos[(r * nch + ch) * 2 + 1] end
      local t = 32 * w + lane
      words[t] = words[t] + f * 2 ^ sh
    end
  end
  local out = {}
  for t = 0, 127 do out[t + 1] = words[t] end
  return out
end

--- The shared image of a sparse case: the stored A (64 x K) and B (N x 2K).
local function sparse_image(c, A, B)
  local img = ffi.new("uint8_t[?]", 49152)
  for i = 0, 49151 do img[i] = math.random(0, 255) end
  local kc, bits = INPUT[c.at].k, INPUT[c.at].bits
  if not c.areg then
    for r = 0, 63 do
      for k = 0, kc - 1 do
        local a, b = isa_addr(c.A, bits, c.ta, r, k)
        put_bits(img, a, b, bits, A.comp[r * kc + k])
      end
    end
  end
  for col = 0, c.n - 1 do
    for k = 0, 2 * kc - 1 do
      local a, b = isa_addr(c.B, INPUT[c.bt].bits, c.tb, col, k)
      put_bits(img, a, b, INPUT[c.bt].bits, B.bits[col * 2 * kc + k])
    end
  end
  local words, w32 = {}, ffi.cast("uint32_t*", img)
  for i = 0, 12287 do words[i + 1] = w32[i] end
  return words
end

--- The four A registers of each thread: the dense A fragment of the stored 64 x K.
local function sparse_a_regs(c, A)
  local words, kc, bits = {}, INPUT[c.at].k, INPUT[c.at].bits
  for t = 0, 127 do
    for r = 0, 3 do
      local wd = 0
      for e = 0, 32 / bits - 1 do
        local row, k = ptx.wgmma.a_coord(t, r, e, c.at)
        wd = wd + A.comp[row * kc + k] * 2 ^ (e * bits)
      end
      words[t * 4 + r + 1] = wd
    end
  end
  return words
end

--- One warpgroup running one wgmma.mma_async.sp: the image to shared
-- memory, A from a descriptor or registers, sp-meta from Meta, D from
-- Dinit (scale-d 1), D stored in order. lines.mma gets the wgmma's line.
local function sparse_kernel(c, lines)
  local nd = c.dt == "f16" and c.n / 4 or c.n / 2
  local dreg = ({ f32 = f32, f16 = T.b32, s32 = T.s32 })[c.dt]
  return kernel "wgmma_sp" { arch = "sm_90a", version = "8.4", block = { 128 },
    in_specs = { Tile(12288, u32), Tile(512, u32), Tile(128 * nd, u32), Tile(128, u32) }, out_specs = { Tile(128 * nd, u32) },
    function(Img, Areg, Dinit, Meta, Out)
      local s = smem.alloc(u32, 12288, { align = 1024 })
      local tid = reg.from(ptx.special.tid.x(), u32)
      local src, pa, pd, pm = ptx.global_ptrs(Img, Areg, Dinit, Meta)
      local base = s:base()
      for i = 0, 12288 / 128 - 1 do
        local e = tid + i * 128
        local v = reg.scalar(u32)
        ptx.inst.ld.global.u32(v, ptx.addr(src + e:mul_wide(4)))
        ptx.inst.st.shared.u32(ptx.addr(base + e * 4), v)
      end
      ptx.fence.proxy_async("shared::cta")
      ptx.bar_sync(0)
      local acc = reg.array(dreg, nd)
      local dsrc = pd + tid:mul_wide(nd * 4)
      for i = 0, nd - 1 do ptx.ld.global(acc[i], ptx.addr(dsrc, 4 * i)) end
      local meta = reg.scalar(T.b32)
      ptx.ld.global(meta, ptx.addr(pm + tid:mul_wide(4)))
      local a
      if c.areg then
        a = reg.array(T.b32, 4)
        ptx.inst.ld.global.v4.b32({ a[0], a[1], a[2], a[3] }, ptx.addr(pa + tid:mul_wide(16)))
      else
        a = ptx.wgmma.desc(base + c.A.base, { layout = c.A.layout, lbo = c.A.lbo, sbo = c.A.sbo })
      end
      local b = ptx.wgmma.desc(base + c.B.base, { layout = c.B.layout, lbo = c.B.lbo, sbo = c.B.sbo })
      ptx.wgmma.fence()
      if lines then lines.mma = H.here() + 1 end
      ptx.wgmma.mma_async { shape = { 64, c.n }, d = acc, a = a, b = b, atype = c.at, btype = c.bt, dtype = c.dt,
        sparse = { meta = meta, sel = c.sel }, trans_a = c.ta and 1 or nil, trans_b = c.tb and 1 or nil, satfinite = c.sat }
      ptx.wgmma.commit_group()
      ptx.wgmma.wait_group(0)
      local out = ptx.global_ptrs(Out) + tid:mul_wide(nd * 4)
      for i = 0, nd - 1 do ptx.st.global(ptx.addr(out, 4 * i), acc[i]) end
      ptx.ret()
    end }
end

--- Random B (N x 2K) for a sparse case: values and element bits.
local function sparse_b(bt, n, k)
  local B = { v = {}, bits = {} }
  for col = 0, n - 1 do for kk = 0, k - 1 do B.bits[col * k + kk], B.v[col * k + kk] = INPUT[bt].gen() end end
  return B
end

-- name, N, A/B/D types, A and B layouts (nil A: from registers), sparsity selector, trans, .satfinite
local SPARSE_FORMS = {
  { "f16 -> f32, K-major 128B, sel 0, N 64", 64, "f16", "f16", "f32", L("128B", 16, 1024, A0), L("128B", 16, 1024, B0), 0 },
  { "f16 -> f16, A registers, B N-major 64B (trans-b), sel 1, N 32", 32, "f16", "f16", "f16", nil, L("64B", 1024, 512, B0), 1,
    tb = true },
  { "bf16, A M-major 128B (trans-a), B K-major interleave, sel 1, N 48", 48, "bf16", "bf16", "f32", L("128B", 8192, 1024, A0),
    L("interleave", 128, 512, B0), 1, ta = true },
  { "tf32 k16, 64B, sel 1, N 24", 24, "tf32", "tf32", "f32", L("64B", 16, 512, A0), L("64B", 16, 512, B0), 1 },
  { "tf32 k16, A registers, B interleave, sel 0, N 8", 8, "tf32", "tf32", "f32", nil, L("interleave", 128, 512, B0), 0 },
  { "e4m3 x e5m2 -> f16, 128B, N 128", 128, "e4m3", "e5m2", "f16", L("128B", 16, 1024, A0), L("128B", 16, 1024, B0), 0 },
  { "e5m2 x e4m3 -> f32, A registers, B 64B, N 16", 16, "e5m2", "e4m3", "f32", nil, L("64B", 16, 512, B0), 0 },
  { "s8 x u8 .satfinite, interleave, N 48", 48, "s8", "u8", "s32", L("interleave", 128, 256, A0), L("interleave", 128, 512, B0), 0,
    sat = true },
  { "u8 x u8, A registers, B 128B, N 32", 32, "u8", "u8", "s32", nil, L("128B", 16, 1024, B0), 0 },
}

describe("the emulator's sparse wgmma (wgmma.mma_async.sp) against the dense CPU reference", function()
  for _, f in ipairs(SPARSE_FORMS) do
    local c = { name = f[1], n = f[2], at = f[3], bt = f[4], dt = f[5], A = f[6], B = f[7], sel = f[8], areg = f[6] == nil,
                ta = f.ta, tb = f.tb, sat = f.sat, k = 2 * INPUT[f[3]].k }
    it(("m64n%dk%d %s"):format(c.n, c.k, c.name), function()
      math.randomseed(require("pyptx.tools.verify").fresh_seed() + c.n)
      local A, B = sparse_a(c.at), sparse_b(c.bt, c.n, c.k)
      local dwords, dvals = d_init(c)
      local k = sparse_kernel(c)
      local aw = c.areg and sparse_a_regs(c, A) or {}
      for i = #aw + 1, 512 do aw[i] = 0 end
      local out = k(tensor.from_table(sparse_image(c, A, B), u32, { 12288 }), tensor.from_table(aw, u32, { 512 }),
        tensor.from_table(dwords, u32, { #dwords }), tensor.from_table(sparse_meta(c.at, A, c.sel), u32, { 128 })):values()
      check_form(c, A, B, dvals, out, true)
      assert_ptxas(k)
    end)
  end

  it("reports a K-major sparse B in a 32B swizzle (64 bytes of K per row; the ISA does not place the second half)", function()
    local c = { name = "32B B", n = 8, at = "bf16", bt = "bf16", dt = "f32", A = L("128B", 16, 1024, A0),
                B = L("32B", 16, 256, B0), sel = 0, k = 32 }
    math.randomseed(require("pyptx.tools.verify").fresh_seed())
    local A = sparse_a("bf16")
    local lines = {}
    local k = sparse_kernel(c, lines)
    local zeros = {}
    for i = 1, 12288 do zeros[i] = 0 end
    local dwords = d_init(c)
    local ok, err = pcall(k, tensor.from_table(zeros, u32, { 12288 }), tensor.from_table({ unpack(zeros, 1, 512) }, u32, { 512 }),
      tensor.from_table(dwords, u32, { #dwords }), tensor.from_table(sparse_meta("bf16", A, 0), u32, { 128 }))
    assert.is_false(ok)
    assert.matches("hopper_spec.lua:" .. lines.mma .. ": wgmma.mma_async.sp", err, 1, true)
    assert.matches("sparse wgmma: a K-major B of 64 bytes per row in a 32B swizzle is not modelled", err, 1, true)
  end)

  it("reports metadata the ISA leaves undefined (two equal indices) at the wgmma's line", function()
    local c = { name = "bad meta", n = 8, at = "f16", bt = "f16", dt = "f32", A = L("128B", 16, 1024, A0),
                B = L("128B", 16, 1024, B0), sel = 0, k = 32 }
    math.randomseed(require("pyptx.tools.verify").fresh_seed())
    local A, B = sparse_a("f16"), sparse_b("f16", 8, 32)
    local meta = sparse_meta("f16", A, 0)
    meta[32 + 5] = bit.band(meta[32 + 5], bit.bnot(0xf0)) % 2 ^ 32 + 0x50     -- lane 5 of warp 1: chunk 1 of row 17 = 0b0101
    local lines = {}
    local k = sparse_kernel(c, lines)
    local dwords = d_init(c)
    local zeros = {}
    for i = 1, 512 do zeros[i] = 0 end
    local ok, err = pcall(k, tensor.from_table(sparse_image(c, A, B), u32, { 12288 }), tensor.from_table(zeros, u32, { 512 }),
      tensor.from_table(dwords, u32, { #dwords }), tensor.from_table(meta, u32, { 128 }))
    assert.is_false(ok)
    assert.matches("hopper_spec.lua:" .. lines.mma .. ": wgmma.mma_async.sp", err, 1, true)
    assert.matches("sparse wgmma: metadata 0x5 (bits 7-4 of sp-meta) for row 17, columns 4-7 of A is undefined in the ISA "
      .. "(the two indices must differ)", err, 1, true)
  end)
end)

describe("the emulator's wgmma on nvcc output (spec/fixtures/cuda/diff_wgmma.cu)", function()
  local emu = H.emu
  local function bits32(v) return v % 4294967296 end
  -- name, N, K, A / B element generators (bits, value), C generator, D type, layout of the
  -- host arrays (At: A given K x 64; B: given K x N; else A 64 x K and Bt N x K), scale, sat
  local f16g = function() local h = floats.to_f16(nonzero()) return h, floats.from_f16(h) end
  local bf16g = function() local h = floats.to_bf16(nonzero()) return h, floats.from_bf16(h) end
  local KERNELS = {      -- et: the host arrays' element type (b1: rows of 32-bit words)
    { "wg_f16_rega_nmajor", 32, 16, f16g, f16g, dt = "f16", et = T.u16, b_kn = true, scale = -1 },
    { "wg_bf16_mmajor", 16, 16, bf16g, bf16g, dt = "f32", et = T.u16, a_km = true },
    { "wg_tf32_rega", 8, 8, INPUT.tf32.gen, INPUT.tf32.gen, dt = "f32", et = u32 },
    { "wg_fp8_kmajor", 64, 32, INPUT.e4m3.gen, INPUT.e5m2.gen, dt = "f32", et = T.u8, scale = -1 },
    { "wg_s8u8_sat", 48, 32, INPUT.s8.gen, INPUT.u8.gen, dt = "s32", et = T.u8, sat = true },
    { "wg_b1_rega", 16, 256, INPUT.b1.gen, INPUT.b1.gen, dt = "s32", et = u32, packed = true },
  }
  local DT = { f16 = T.u16, f32 = f32, s32 = T.s32 }

  --- The host array of an operand from its element bits (rows x kk): row-major
  -- (rows of kk), transposed (kk rows), or b1 rows packed in 32-bit words.
  local function host(bits, rows, kk, how)
    local t = {}
    for r = 0, rows - 1 do
      for k = 0, kk - 1 do
        local v = bits[r * kk + k]
        if how == "packed" then
          local i = r * kk / 32 + math.floor(k / 32) + 1
          t[i] = (t[i] or 0) + v * 2 ^ (k % 32)
        else
          t[(how == "t" and k * rows + r or r * kk + k) + 1] = v
        end
      end
    end
    return t
  end

  for _, K in ipairs(KERNELS) do
    for _, sd in ipairs { 1, 0 } do
      it(("%s (scale-d %d) matches A*B(+C): layouts and fragments written in CUDA"):format(K[1], sd), function()
        math.randomseed(require("pyptx.tools.verify").fresh_seed())
        local n, kk = K[2], K[3]
        local A, B, Cv, Cw = {}, {}, {}, {}
        local abits, bbits = {}, {}
        for i = 0, 64 * kk - 1 do abits[i], A[i] = K[4]() end            -- A[m*kk + k]
        for i = 0, n * kk - 1 do bbits[i], B[i] = K[5]() end              -- B[col*kk + k]
        for i = 0, 64 * n - 1 do
          if K.dt == "s32" then Cv[i] = math.random() < 0.2 and (math.random(0, 1) * 2 - 1) * (2 ^ 31 - math.random(1, 3000))
            or math.random(-5000, 5000); Cw[i + 1] = Cv[i]
          elseif K.dt == "f16" then Cw[i + 1] = floats.to_f16(nonzero()); Cv[i] = floats.from_f16(Cw[i + 1])
          else Cv[i] = f32r(nonzero()); Cw[i + 1] = Cv[i] end
        end
        local ha = host(abits, 64, kk, K.packed and "packed" or K.a_km and "t")
        local hb = host(bbits, n, kk, K.packed and "packed" or K.b_kn and "t")
        local D = tensor.empty({ 64 * n }, DT[K.dt], emu())
        D:fill_bytes(0xff)
        local mod = pyptx.load_ptx("spec/fixtures/ptx/nvcc/diff_wgmma_sm90a.ptx")
        mod[K[1]] { grid = 1, block = 128, device = emu(), args = {
          tensor.from_table(ha, K.et, { #ha }, emu()), tensor.from_table(hb, K.et, { #hb }, emu()),
          tensor.from_table(Cw, DT[K.dt], { #Cw }, emu()), D, sd } }
        local got = D:to_host()
        for m = 0, 63 do
          for c = 0, n - 1 do
            local s, mag = 0, 0
            for k = 0, kk - 1 do local p = A[m * kk + k] * B[c * kk + k]; s, mag = s + p, mag + math.abs(p) end
            local want = sd * Cv[m * n + c] + (K.scale or 1) * s
            local g = tonumber(got[m * n + c])
            if K.dt == "f16" then g = floats.from_f16(g) end
            if K.dt == "s32" then
              want = K.sat and math.max(-2 ^ 31, math.min(2 ^ 31 - 1, want)) or (bits32(want + 2 ^ 31) - 2 ^ 31)
            end
            local tol = K.dt == "s32" and 0 or K.dt == "f16" and ulp16(want) or 1e-6 * (math.abs(want) + mag)
            if math.abs(g - want) > tol or g ~= g then
              error(("%s D[%d][%d]: got %.9g, want %.9g"):format(K[1], m, c, g, want))
            end
          end
        end
      end)
    end
  end
end)

describe("smem.wgmma_tile's canonical layouts", function()
  for _, c in ipairs {
    { f16, { 64, 64 }, "K" }, { bf16, { 128, 16 }, "K" }, { f16, { 16, 8 }, "K" }, { T.e4m3, { 64, 32 }, "K" },
    { f16, { 64, 16 }, "MN" }, { bf16, { 256, 32 }, "MN" }, { f16, { 48, 16 }, "MN" }, { bf16, { 96, 8 }, "MN" },
    { f16, { 40, 16 }, "MN" },
  } do
    local ty, shape, major = c[1], c[2], c[3]
    it(("place %s %dx%d %s-major elements where the ISA's layout table does"):format(ty.name, shape[1], shape[2], major), function()
      local tile
      kernel "tile" { arch = "sm_90a", block = { 128 }, function()
        tile = smem.wgmma_tile(ty, shape, major)
        ptx.ret()
      end }:ptx()
      local kpart = major == "K" and shape[2] or 16
      local bits = ty.bytes * 8
      for r = 0, shape[1] - 1 do
        for k = 0, shape[2] - 1 do
          -- the ISA describes one instruction's K: 32 bytes K-major, 16 K-rows MN-major; farther K is a descriptor offset
          local k0 = math.floor(k * ty.bytes / 32) * (32 / ty.bytes)
          if major == "MN" then k0 = math.floor(k / 16) * 16 end
          if major == "K" and tile.span > 0 and kpart * ty.bytes > tile.span then k0 = k - k % (32 / ty.bytes) end
          local L0 = { span = tile.span, lbo = tile.lbo, sbo = tile.sbo, base = hopper.tile_offset(tile, 0, k0) }
          local want = isa_addr(L0, bits, major == "MN", r, k - k0)
          local got = hopper.swizzle_address(hopper.tile_offset(tile, r, k), tile.span)
          assert(got == want, ("element (%d, %d): tile_offset %d, ISA layout %d"):format(r, k, got, want))
        end
      end
    end)
  end
end)

-- ------------------------------------------------ matrix base offset

--- x rounded once to f32.
local function f32_of(x) return floats.from_f32_bits(floats.f32_bits(x)) end

--- The byte offset of K-major element (r, k) of a 16-bit tile in the
-- ISA's canonical layout whose swizzle pattern starts at the tile itself
-- (the XOR taken from the line index relative to the tile start).
local function own_pattern(layout, sbo, r, k) return canonical(layout, 16, sbo, r, k) end

--- One warpgroup: copy a shared-memory image from global memory into a
-- 1024-aligned buffer, then D = A * B^T (m64n64k16 bf16, scale-d 0) with
-- A at byte offset offa and B at 16384 + offb, both descriptors carrying
-- the base offsets boa / bob; store every thread's registers in order.
local function base_offset_kernel(layout, sbo, offa, offb, boa, bob)
  return kernel "wg_boff" { arch = "sm_90a", block = { 128 },
    in_specs = { Tile(16384, u32) }, out_specs = { Tile(128 * 32, f32) },
    function(Img, Out)
      local s = smem.alloc(u32, 16384, { align = 1024 })
      local tid = reg.from(ptx.special.tid.x(), u32)
      local src, base = ptx.global_ptrs(Img), s:base()
      copy_to_shared(src, base, tid, 16384)
      ptx.fence.proxy_async("shared::cta")
      ptx.bar_sync(0)
      local acc = ptx.wgmma.fragments(64, false)
      local da = ptx.wgmma.desc(base + offa, { layout = layout, lbo = 16, sbo = sbo, base_offset = boa })
      local db = ptx.wgmma.desc(base + (16384 + offb), { layout = layout, lbo = 16, sbo = sbo, base_offset = bob })
      ptx.wgmma.fence()
      ptx.wgmma.mma_async { shape = { 64, 64, 16 }, d = acc, a = da, b = db, atype = bf16, scale_d = 0 }
      ptx.wgmma.commit_group()
      ptx.wgmma.wait_group(0)
      local out = ptx.global_ptrs(Out) + tid:mul_wide(32 * 4)
      for i = 0, 31 do ptx.inst.st.global.f32(ptx.addr(out, i * 4), acc[i]) end
      ptx.ret()
    end }
end

--- One warpgroup: TMA-load A and B (64 x 64 bf16, 128B swizzle) to byte
-- offsets offa / offb of a 1024-aligned buffer, then D = A * B^T over
-- K = 64 in four k16 steps, each descriptor 32 bytes further along K and
-- carrying base offset boff; lines.tma / lines.mma name the instructions.
local function tma_base_offset_kernel(offa, offb, boff, lines)
  return kernel "wg_tma_boff" { arch = "sm_90a", block = { 128 },
    in_specs = { Tile(64, 64, bf16), Tile(64, 64, bf16) }, out_specs = { Tile(128 * 32, f32) },
    function(A, B, Out)
      local s = smem.alloc(bf16, 16384, { align = 1024 })
      local bar = smem.mbarrier(1)
      local tid = reg.from(ptx.special.tid.x(), u32)
      local z = reg.scalar(u32, 0)
      ptx.if_(tid:eq(0), function()
        ptx.mbarrier.init(bar[0], 1)
        local ta, tb = A:tma_desc { box = { 64, 64 }, swizzle = "128B" }, B:tma_desc { box = { 64, 64 }, swizzle = "128B" }
        ptx.mbarrier.arrive_expect_tx(bar[0], ta.bytes + tb.bytes)
        lines.tma = H.here(); ptx.cp.async.bulk.tensor_2d { dst = s[offa / 2], src = ta, coord = { z, z }, mbar = bar[0] }
        ptx.cp.async.bulk.tensor_2d { dst = s[offb / 2], src = tb, coord = { z, z }, mbar = bar[0] }
      end)
      ptx.bar_sync(0)
      ptx.mbarrier.wait(bar[0], 0)
      local acc = ptx.wgmma.fragments(64, false)
      ptx.wgmma.fence()
      for kk = 0, 3 do
        local opts = { layout = "128B", lbo = 16, sbo = 1024, base_offset = boff }
        local da, db = ptx.wgmma.desc(s:base() + (offa + 32 * kk), opts), ptx.wgmma.desc(s:base() + (offb + 32 * kk), opts)
        if kk == 0 then lines.mma = H.here() + 1 end
        ptx.wgmma.mma_async { shape = { 64, 64, 16 }, d = acc, a = da, b = db, atype = bf16, scale_d = kk > 0 and 1 or 0 }
      end
      ptx.wgmma.commit_group()
      ptx.wgmma.wait_group(0)
      local out = ptx.global_ptrs(Out) + tid:mul_wide(32 * 4)
      for i = 0, 31 do ptx.inst.st.global.f32(ptx.addr(out, i * 4), acc[i]) end
      ptx.ret()
    end }
end

--- Random non-zero bf16 values (as exact Lua numbers), n of them.
local function bf16_values(n)
  local t = {}
  for i = 1, n do
    local x = math.random() * 1.9 - 0.95
    t[i] = floats.from_bf16(floats.to_bf16(math.abs(x) < 0.05 and 0.5 or x))
  end
  return t
end

--- The number of D elements of out (thread-major, 32 f32 per thread) that
-- differ from ref(r, c); the first mismatch's description.
local function d_mismatches(out, ref)
  local bad, first = 0, nil
  for t = 0, 127 do
    for i = 0, 31 do
      local r, c = ptx.wgmma.coord(t, i)
      local got, want = out[t * 32 + i + 1], ref(r, c)
      if got ~= want then
        bad = bad + 1
        first = first or ("thread %d reg %d (D[%d][%d]): got %.9g, want %.9g"):format(t, i, r, c, got, want)
      end
    end
  end
  return bad, first
end

describe("the emulator's wgmma descriptors: matrix base offset (bits 49-51)", function()
  -- { layout, SBO, lines of the pattern }: tiles start at 128 * j, off a pattern boundary
  for _, c in ipairs { { "128B", 1024, 8 }, { "64B", 512, 4 }, { "32B", 256, 2 } } do
    local layout, sbo, lines = c[1], c[2], c[3]
    it(("read %s tiles whose pattern starts at the tile, with base offset (start >> 7) & 7"):format(layout), function()
      math.randomseed(require("pyptx.tools.verify").fresh_seed())
      local function off()
        local j
        repeat j = math.random(1, 15) until j % lines ~= 0
        return 128 * j
      end
      local offa, offb = off(), off()
      local img = ffi.new("uint16_t[?]", 32768)
      for i = 0, 32767 do img[i] = 0x7fc0 end                     -- NaN where the layout puts no data
      local av, bv = bf16_values(64 * 16), bf16_values(64 * 16)
      for r = 0, 63 do
        for k = 0, 15 do
          img[(offa + own_pattern(layout, sbo, r, k)) / 2] = floats.to_bf16(av[r * 16 + k + 1])
          img[(16384 + offb + own_pattern(layout, sbo, r, k)) / 2] = floats.to_bf16(bv[r * 16 + k + 1])
        end
      end
      local words, w32 = {}, ffi.cast("uint32_t*", img)
      for i = 0, 16383 do words[i + 1] = w32[i] end
      local function ref(r, col)
        local sum = 0
        for k = 0, 15 do sum = sum + av[r * 16 + k + 1] * bv[col * 16 + k + 1] end
        return f32_of(sum)
      end
      local boa, bob = bit.band(bit.rshift(offa, 7), 7), bit.band(bit.rshift(offb, 7), 7)
      local k = base_offset_kernel(layout, sbo, offa, offb, boa, bob)
      local bad, first = d_mismatches(k(tensor.from_table(words, u32, { 16384 })):values(), ref)
      assert.are.equal(0, bad, first)
      -- A read with the pattern of the address bits alone (base offset 0) is another matrix
      local wrong = base_offset_kernel(layout, sbo, offa, offb, 0, bob)
      assert.is_true(d_mismatches(wrong(tensor.from_table(words, u32, { 16384 })):values(), ref) > 0)
      assert_ptxas(k)
    end)
  end

  it("read TMA tiles at 128-byte (not 1024-byte) aligned addresses with base offset 0; report another one at both lines", function()
    math.randomseed(require("pyptx.tools.verify").fresh_seed())
    local offa, offb = 128 * math.random(1, 7), 9216 + 128 * math.random(1, 7)
    local av, bv = bf16_values(64 * 64), bf16_values(64 * 64)
    local A, B = tensor.from_table(av, bf16, { 64, 64 }), tensor.from_table(bv, bf16, { 64, 64 })
    local lines = {}
    local k = tma_base_offset_kernel(offa, offb, 0, lines)
    local function ref(r, col)
      local d = 0
      for kk = 0, 3 do
        local sum = 0
        for k16 = 16 * kk, 16 * kk + 15 do sum = sum + av[r * 64 + k16 + 1] * bv[col * 64 + k16 + 1] end
        d = f32_of(d + sum)
      end
      return d
    end
    local bad, first = d_mismatches(k(A, B):values(), ref)
    assert.are.equal(0, bad, first)
    local boff = bit.band(bit.rshift(offa, 7), 7)
    local ok, err = pcall(tma_base_offset_kernel(offa, offb, boff, lines), A, B)
    assert.is_false(ok)
    assert.matches("hopper_spec.lua:" .. lines.mma .. ": wgmma.mma_async", err, 1, true)
    assert.matches(("the A descriptor has matrix base offset %d, but the TMA load at "):format(boff), err, 1, true)
    assert.matches("hopper_spec.lua:" .. lines.tma .. ": cp.async.bulk.tensor.2d", err, 1, true)
    assert.matches(("wrote the tile at 0x%x with its 128B swizzle pattern starting at a 1024-byte boundary: the matching "
      .. "base offset is 0"):format(offa), err, 1, true)
    assert_ptxas(k)
  end)

  it("report a base offset without a swizzle at the Lua line; the DSL refuses one, and out of range", function()
    local line
    local k = kernel "base_off" { arch = "sm_90a", block = { 128 }, in_specs = {}, out_specs = {},
      function()
        local s = smem.alloc(u32, 4096, { align = 1024 })
        local tid = reg.from(ptx.special.tid.x(), u32)
        for i = 0, 31 do ptx.inst.st.shared.u32(ptx.addr(s:base() + (tid + i * 128) * 4), tid) end
        ptx.fence.proxy_async("shared::cta")
        ptx.bar_sync(0)
        local acc = ptx.wgmma.fragments(8, true)
        local da = ptx.wgmma.desc(s:base(), { layout = "interleave", lbo = 128, sbo = 256 })
        local db = da + 2 ^ 49                                          -- base offset 1, planted past the DSL
        ptx.wgmma.fence()
        line = H.here(); ptx.wgmma.mma_async { shape = { 64, 8, 16 }, d = acc, a = da, b = db, atype = bf16 }
        ptx.wgmma.commit_group()
        ptx.wgmma.wait_group(0)
        ptx.ret()
      end }
    local ok, err = pcall(k)
    assert.is_false(ok)
    assert.matches("hopper_spec.lua:" .. line .. ": wgmma.mma_async", err, 1, true)
    assert.matches("the B descriptor has matrix base offset 1 (bits 49-51) with no swizzle; the ISA defines the base "
      .. "offset for the 32B/64B/128B swizzles only", err, 1, true)
    assert.has_error(function() hopper.desc_bits("interleave", 128, 256, 1) end)
    assert.has_error(function() hopper.desc_bits("128B", 16, 1024, 8) end)
    assert.are.equal(5ULL, bit.band(bit.rshift(hopper.desc_bits("64B", 16, 512, 5), 49), 7))
  end)

  it("swizzle_address with a base offset places a pattern that starts at a 128-byte line", function()
    for _, c in ipairs { { "128B", 128, 1024 }, { "64B", 64, 512 }, { "32B", 32, 256 } } do
      for j = 0, 7 do
        local start = 2048 + 128 * j
        for r = 0, 15 do
          for k = 0, 15 do
            local pre = math.floor(r / 8) * c[3] + (r % 8) * c[2] + k * 2    -- before the swizzle
            assert.are.equal(start + own_pattern(c[1], c[3], r, k), hopper.swizzle_address(start + pre, c[2], j))
          end
        end
      end
    end
  end)
end)

describe("examples/hopper/gemm.lua", function()
  local gemm = require "examples.hopper.gemm"

  it("assembles with ptxas for sm_90a", function()
    local ks = { gemm.kernels[1], gemm.build(256, 256, 128, { BN = 256, STAGES = 3 }) }
    for _, k in ipairs(ks) do assert.matches("\n.target sm_90a\n", k:ptx(), 1, true) end
    for _, k in ipairs(ks) do assert_ptxas(k) end
  end)

  it("matches the CPU reference at 256x256x128 on fresh random inputs (every element)", function()
    local ok, report = gemm.check(256, 256, 128)
    assert(ok, report.message)
  end)

  it("matches when the mbarrier ring wraps (2 stages, 8 k-blocks) and with BN = 64", function()
    local ok, report = gemm.check(128, 128, 512, { STAGES = 2 })
    assert(ok, report.message)
    ok, report = gemm.check(256, 128, 192, { STAGES = 3, BN = 64 })
    assert(ok, report.message)
  end)

  it("matches with a persistent grid walking the tiles (ring position carried across tiles)", function()
    local big = gemm.build(4096, 4096, 4096, { PERSISTENT = 132 })
    assert.is_string(big:ptx())
    local ok, report = gemm.check(384, 256, 192, { STAGES = 2, PERSISTENT = 4 })
    assert(ok, report.message)
    assert_ptxas(big)
  end)

  it("matches with clusters of 2 CTAs sharing A through TMA multicast and remote releases", function()
    local big = gemm.build(4096, 4096, 4096, { CLUSTER = 2 })
    assert.is_string(big:ptx())
    local ok, report = gemm.check(256, 512, 384, { STAGES = 2, CLUSTER = 2 })
    assert(ok, report.message)
    assert_ptxas(big)
  end)

  it("matches persistent with clusters (issue 24): 4 CTAs, 2 clusters over 4 cluster tiles, every schedule", function()
    local big = gemm.build(4096, 4096, 4096, { CLUSTER = 2, PERSISTENT = 132 })
    assert_ptxas(big)
    for _, dev in ipairs { H.emu(), H.adversarial(1), H.adversarial(2) } do
      local ok, msg = H.check_on(dev, gemm, 512, 512, 256, { STAGES = 2, CLUSTER = 2, PERSISTENT = 4 })
      assert(ok, msg)
    end
    local ok, err = pcall(gemm.build, 512, 512, 256, { CLUSTER = 2, PERSISTENT = 3 })
    assert.is_false(ok)
    assert.matches("PERSISTENT must be a positive multiple of CLUSTER", tostring(err), 1, true)
  end)

  it("keeps one wgmma group in flight and releases per warpgroup, with no GPU-scope fence in the k-loop", function()
    local text = gemm.build(256, 512, 256, { CLUSTER = 2 }):ptx()
    assert.is_truthy((text:find("wgmma.wait_group.sync.aligned \t1;", 1, true)))
    assert.is_nil((text:find("release.cluster.shared::cluster", 1, true)))
    assert.is_nil((text:find("membar", 1, true)))
    assert.is_truthy((text:find("mbarrier%.init%.shared::cta%.b64 \t%[[%w_]+%+%d+%], 4;")))   -- 2 warpgroups x 2 CTAs
  end)
end)

describe("examples/hopper/gemm.lua on a CUDA GPU #gpu", function()
  local dev, why = H.gpu()
  if not dev then pending(why) return end
  it("matches the CPU reference with driver-encoded tensor maps (cuTensorMapEncodeTiled)", function()
    local previous = runtime.device()
    runtime.use(dev)
    local passed, report = require("examples.hopper.gemm").check(256, 256, 128)
    runtime.use(previous)
    assert.is_true(passed, report.message)
  end)
end)

describe("wgmma tiles as TMA boxes and mma_async operands", function()
  --- The error of tracing body (A: a 64x128 bf16 tensor), and the line it names.
  local function err_of(body)
    local ok, err = pcall(function()
      return kernel "tiles" { arch = "sm_90a", in_specs = { Tile(64, 128, bf16) }, block = { 128 }, body }:ptx()
    end)
    assert.is_false(ok)
    return err
  end

  it("give one box per span-wide K block and the tile's swizzle", function()
    local wide, narrow
    local k = kernel "tiles" { arch = "sm_90a", in_specs = { Tile(64, 128, bf16) }, block = { 128 }, function(A)
      wide = smem.wgmma_tile(bf16, { 64, 128 })           -- 256 bytes of K: two 128B blocks
      narrow = smem.wgmma_tile(bf16, { 64, 16 })          -- 32 bytes of K: 32B swizzle
      A:tma_desc{ tile = wide }
      A:tma_desc{ tile = narrow, box = { 64, 16 } }       -- outermost first, as shapes are
    end }
    local text = k:ptx()
    assert.same({ 64, 64 }, wide.tma_box)
    assert.same({ 2, 128, 64 * 128 }, { wide.tma_blocks, wide.layout == "128B" and 128 or 0, wide.tma_box_bytes })
    assert.same({ 64, 16 }, narrow.tma_box)
    assert.equal("32B", narrow.tma_swizzle)
    assert.equal(2, select(2, text:gsub("_tma[_%d]*%[128%]", "")))
  end)

  it("refuse a box or swizzle that does not write the tile, and tiles TMA cannot write, at the user's line", function()
    local line
    local err = err_of(function(A) local s = smem.wgmma_tile(bf16, { 64, 64 }); line = H.here(); A:tma_desc{ tile = s, box = { 32, 64 } } end)
    assert.matches("hopper_spec.lua:" .. line .. ": X:tma_desc: box {32, 64} does not write tile's layout; the tile needs box {64, 64}", err, 1, true)
    err = err_of(function(A) local s = smem.wgmma_tile(bf16, { 64, 64 }); line = H.here(); A:tma_desc{ tile = s, swizzle = "64B" } end)
    assert.matches("hopper_spec.lua:" .. line .. ": X:tma_desc: swizzle 64B does not match the tile's 128B layout", err, 1, true)
    err = err_of(function(A) local s = smem.wgmma_tile(bf16, { 64, 64 }, "MN"); line = H.here(); A:tma_desc{ tile = s } end)
    assert.matches("hopper_spec.lua:" .. line .. ": X:tma_desc: a MN-major 128B tile has no one-box TMA layout", err, 1, true)
    err = err_of(function(A) local s = smem.wgmma_tile(f16, { 64, 64 }); line = H.here(); A:tma_desc{ tile = s } end)
    assert.matches("hopper_spec.lua:" .. line .. ": X:tma_desc: tile holds f16 but tensor tiles_param_0 is bf16", err, 1, true)
  end)

  it("take the layout a Layout preset asks for, with the box, swizzle and descriptor layout following", function()
    local tiles = {}
    kernel "tiles" { arch = "sm_90a", block = { 128 }, function()
      for _, name in ipairs { "TMA_128B", "TMA_64B", "TMA_32B", "INTERLEAVED" } do
        tiles[name] = smem.wgmma_tile(bf16, { 64, 64 }, pyptx.Layout[name])
      end
      tiles.mn = smem.wgmma_tile(bf16, { 64, 64 }, { major = "MN", layout = pyptx.Layout.TMA_32B })
    end }:ptx()
    assert.same({ "128B", { 64, 64 }, 1 }, { tiles.TMA_128B.layout, tiles.TMA_128B.tma_box, tiles.TMA_128B.tma_blocks })
    assert.same({ "64B", { 64, 32 }, 2 }, { tiles.TMA_64B.layout, tiles.TMA_64B.tma_box, tiles.TMA_64B.tma_blocks })
    assert.same({ "32B", { 64, 16 }, 4 }, { tiles.TMA_32B.layout, tiles.TMA_32B.tma_box, tiles.TMA_32B.tma_blocks })
    assert.same({ "interleave", 0 }, { tiles.INTERLEAVED.layout, tiles.INTERLEAVED.span })
    assert.is_nil(tiles.INTERLEAVED.tma_box)
    assert.same({ "MN", "32B" }, { tiles.mn.major, tiles.mn.layout })
    local line
    local err = err_of(function() line = H.here(); smem.wgmma_tile(bf16, { 64, 16 }, pyptx.Layout.TMA_64B) end)
    assert.matches("hopper_spec.lua:" .. line .. ": smem.wgmma_tile: a 64B layout needs the row's bytes (32 here) to be a multiple of 64", err, 1, true)
    err = err_of(function() line = H.here(); smem.wgmma_tile(bf16, { 64, 64 }, { layout = "16B" }) end)
    assert.matches("hopper_spec.lua:" .. line .. ": smem.wgmma_tile: layout must be Layout.TMA_128B, TMA_64B, TMA_32B or INTERLEAVED", err, 1, true)
  end)

  it("build the descriptor at K element k from a tile, or move a built one with a_tile", function()
    local k = kernel "tiles" { arch = "sm_90a", block = { 128 }, function()
      local sA, sB = smem.wgmma_tile(bf16, { 64, 128 }), smem.wgmma_tile(bf16, { 64, 128 })
      local acc = ptx.wgmma.fragments(64, true)
      local db = ptx.wgmma.desc(sB)
      ptx.wgmma.mma_async{ shape = { 64, 64, 16 }, d = acc, a = sA, b = db, b_tile = sB, k = 64 }   -- the second 128B block
    end }
    local text = k:ptx()
    assert.matches("add.u32 \t%%r%d+, %%r%d+, 8192;", text)          -- 64 rows * 128 bytes: the block after the first
    assert.matches("add.u64 \t%%rd%d+, %%rd%d+, 512;", text)          -- 8192 >> 4 into the built descriptor
    local line
    local err = err_of(function()
      local s = smem.wgmma_tile(bf16, { 64, 64 }); line = H.here()
      ptx.wgmma.mma_async{ shape = { 64, 64, 16 }, d = ptx.wgmma.fragments(64), a = s, b = s, k = 4 }
    end)
    assert.matches("hopper_spec.lua:" .. line + 1 .. ": wgmma.mma_async: K element 4 of a's tile starts at byte 8, not on a 16-byte boundary", err, 1, true)
    assert_ptxas(k)
  end)
end)
