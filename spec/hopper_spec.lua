-- pyptx.hopper: wgmma.mma_async and its fence/commit/wait, shared-memory
-- matrix descriptors and smem.wgmma_tile's canonical layouts, the
-- accumulator fragment layout, elect.sync and setmaxnreg: the PTX, ptxas
-- acceptance for sm_90a, emulator numerics built from the documented
-- layouts, the swizzle/descriptor mismatch report, and the Hopper GEMM
-- example against its CPU reference.
local bit = require "bit"
local ffi = require "ffi"
local pyptx = require "pyptx"
local half = require "pyptx.half"
local hopper = require "pyptx.hopper"
local toolkit = require "pyptx.toolkit"
local tensor = require "pyptx.tensor"
local kernel, reg, ptx, smem, Tile = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.smem, pyptx.Tile
local T = pyptx.types
local f32, u32, bf16, f16 = T.f32, T.u32, T.bf16, T.f16

local have_ptxas = toolkit.find("ptxas") ~= nil

--- The current source line (to name planted bugs).
local function here() return debug.getinfo(2, "l").currentline end

--- Assert ptxas assembles the kernel for sm_90a (pending without ptxas).
local function assert_ptxas(k)
  if not have_ptxas then pending(toolkit.missing_message("ptxas")) return end
  local ok, _, log = toolkit.ptxas(k:ptx(), "sm_90a", { keep_failed = false })
  assert(ok, log)
end

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
    assert_ptxas(k2)
    local ok, err = pcall(function()
      kernel "bad_acc" { arch = "sm_90a", block = { 128 }, function()
        ptx.wgmma.mma_async { shape = { 64, 8 }, d = reg.array(T.b32, 2), a = 0, b = 0, atype = bf16, dtype = f16 }
      end }:ptx()
    end)
    assert.is_false(ok)
    assert.matches("bf16 inputs cannot accumulate in f16", err, 1, true)
    ok, err = pcall(function()
      kernel "mixed" { arch = "sm_90a", block = { 128 }, function()
        ptx.wgmma.mma_async { shape = { 64, 8 }, d = reg.array(T.s32, 4), a = 0, b = 0, atype = T.s8, btype = T.u8 }
      end }:ptx()
    end)
    assert.is_false(ok)
    assert.matches("mixed integer inputs (.s8.u8) need PTX ISA 8.4", err, 1, true)
    local k3 = kernel "mixed84" { arch = "sm_90a", version = "8.4", block = { 128 }, function()
      local acc = reg.array(T.s32, 4)
      for i = 0, 3 do ptx.mov(acc[i], 0) end
      ptx.wgmma.mma_async { shape = { 64, 8 }, d = acc, a = reg.scalar(T.u64, 0), b = reg.scalar(T.u64, 0), atype = T.s8, btype = T.u8 }
      ptx.ret()
    end }
    assert_ptxas(k3)
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
      line = here(); ptx.wgmma.mma_async { shape = { 64, 8 }, d = reg.array(f32, 4), a = 0, b = 0, atype = T.e4m3, trans_b = 1 }
    end)
    assert.matches("hopper_spec.lua:" .. line .. ": wgmma.mma_async: trans_a/trans_b (MN-major operands) are for f16 and bf16 only, "
      .. "not e4m3", e, 1, true)
    e = err_of(function()
      line = here(); ptx.wgmma.mma_async { shape = { 64, 40 }, d = reg.array(T.s32, 20), a = 0, b = 0, atype = T.s8 }
    end)
    assert.matches("hopper_spec.lua:" .. line .. ": wgmma.mma_async: shape must be m64nNk32 for s8 with N = 8..256, "
      .. "a multiple of 8 up to 32 and of 16 above", e, 1, true)
    e = err_of(function()
      line = here(); ptx.wgmma.mma_async { shape = { 64, 8 }, d = reg.array(T.s32, 4), a = 0, b = 0, atype = "b1", satfinite = true }
    end)
    assert.matches("hopper_spec.lua:" .. line .. ": wgmma.mma_async: satfinite is for s8/u8 inputs only, not b1", e, 1, true)
    e = err_of(function()
      local acc, dsc = reg.array(f32, 4), reg.scalar(T.u64, 0)
      line = here(); ptx.inst("wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32", { acc[0], acc[1], acc[2], acc[3] }, dsc, dsc, 1, 1, 1, 0, 1)
    end)
    assert.matches("hopper_spec.lua:" .. line .. ": wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32 takes 6 operands", e, 1, true)
    e = err_of(function()
      local acc, dsc = reg.array(T.s32, 4), reg.scalar(T.u64, 0)
      line = here(); ptx.inst("wgmma.mma_async.sync.aligned.m64n8k256.s32.b1.b1.xor.popc", { acc[0], acc[1], acc[2], acc[3] }, dsc, dsc, 1)
    end)
    assert.matches("hopper_spec.lua:" .. line .. ": wgmma.mma_async.sync.aligned.m64n8k256.s32.b1.b1.xor.popc: "
      .. "wgmma.mma_async takes .dtype.atype.btype", e, 1, true)
    e = err_of(function() line = here(); smem.wgmma_tile(T.e4m3, { 64, 64 }, "MN") end)
    assert.matches("hopper_spec.lua:" .. line .. ": smem.wgmma_tile: MN-major tiles are f16/bf16 only", e, 1, true)
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
      line = here(); ptx.inst("wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16", { acc[0], acc[1], acc[2], acc[3],
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

  it("report bad shapes at the caller's line", function()
    local line
    local ok, err = pcall(function()
      kernel "bad" { arch = "sm_90a", block = { 128 }, function()
        local acc = ptx.wgmma.fragments(64, true)
        line = here(); ptx.wgmma.mma_async { shape = { 64, 60, 16 }, d = acc, a = 0, b = 0 }
      end }:ptx()
    end)
    assert.is_false(ok)
    assert.matches("hopper_spec.lua:" .. line .. ": wgmma.mma_async: shape must be m64nNk16", err, 1, true)
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
      for i = 0, 16384 / 128 - 1 do
        local e = tid + i * 128
        local v = reg.scalar(u32)
        ptx.inst.ld.global.u32(v, ptx.addr(src + e:mul_wide(4)))
        ptx.inst.st.shared.u32(ptx.addr(base + e * 4), v)
      end
      if not no_fence then ptx.fence.proxy_async("shared::cta") end
      ptx.bar_sync(0)
      local acc = ptx.wgmma.fragments(n, false)
      for i = 0, n / 2 - 1 do ptx.mov(acc[i], ptx.imm(f32, 1e6)) end
      local da = ptx.wgmma.desc(base, { layout = layout, lbo = lbo, sbo = sbo })
      local db = ptx.wgmma.desc(base + 16384, { layout = layout, lbo = lbo, sbo = sbo })
      ptx.wgmma.fence()
      if lines then lines.mma = here() end
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
      local enc = at == bf16 and half.to_bf16 or half.to_f16
      local dec = at == bf16 and half.from_bf16 or half.from_f16
      local function put(off, x) local h = enc(x); img[off / 2] = h; return dec(h) end
      for r = 0, 63 do for k = 0, 15 do a[r * 16 + k] = put(canonical(layout, lbo, sbo, r, k), math.random() * 2 - 1) end end
      for r = 0, n - 1 do for k = 0, 15 do b[r * 16 + k] = put(16384 + canonical(layout, lbo, sbo, r, k), math.random() * 2 - 1) end end
      local words = {}
      local w32 = ffi.cast("uint32_t*", img)
      for i = 0, 16383 do words[i + 1] = w32[i] end
      local scale_a = n == 8 and -1 or 1
      local k = mma_kernel(n, at, layout, lbo, sbo, scale_a)
      assert_ptxas(k)
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
    end)
  end

  it("computes m64n64k16 bf16 with A from registers (the a_coord layout) and B through a 64B descriptor", function()
    local n = 64
    math.randomseed(os.time() + 7)
    local img = ffi.new("uint16_t[?]", 32768)
    for i = 0, 32767 do img[i] = 0x7fc0 end
    local a, b, areg = {}, {}, {}
    for r = 0, 63 do for kk = 0, 15 do a[r * 16 + kk] = half.from_bf16(half.to_bf16(math.random() * 2 - 1)) end end
    for r = 0, n - 1 do
      for kk = 0, 15 do
        local h = half.to_bf16(math.random() * 2 - 1)
        img[canonical("64B", 16, 512, r, kk) / 2] = h
        b[r * 16 + kk] = half.from_bf16(h)
      end
    end
    for t = 0, 127 do
      for r = 0, 3 do
        local word = 0
        for e = 0, 1 do
          local row, kk = ptx.wgmma.a_coord(t, r, e)
          word = word + half.to_bf16(a[row * 16 + kk]) * (e == 0 and 1 or 65536)
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
        for i = 0, 16384 / 128 - 1 do
          local e = tid + i * 128
          local v = reg.scalar(u32)
          ptx.inst.ld.global.u32(v, ptx.addr(src + e:mul_wide(4)))
          ptx.inst.st.shared.u32(ptx.addr(base + e * 4), v)
        end
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
    assert_ptxas(k)
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
          tma_line = here(); ptx.cp.async.bulk.tensor_2d { dst = sA[0], src = d, coord = { z, z }, mbar = bar[0] }
        end)
        ptx.bar_sync(0)
        ptx.mbarrier.wait(bar[0], 0)
        local acc = ptx.wgmma.fragments(64, true)
        local da = ptx.wgmma.desc(sA:base(), { layout = "64B", lbo = 16, sbo = 512 })   -- planted: TMA used 128B
        ptx.wgmma.fence()
        mma_line = here(); ptx.wgmma.mma_async { shape = { 64, 64, 16 }, d = acc, a = da, b = da }
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

describe("examples/hopper/gemm.lua", function()
  local gemm = require "examples.hopper.gemm"

  it("assembles with ptxas for sm_90a", function()
    assert_ptxas(gemm.kernels[1])
    assert_ptxas(gemm.build(256, 256, 128, { BN = 256, STAGES = 3 }))
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
    assert_ptxas(gemm.build(4096, 4096, 4096, { PERSISTENT = 132 }))
    local ok, report = gemm.check(384, 256, 192, { STAGES = 2, PERSISTENT = 4 })
    assert(ok, report.message)
  end)

  it("matches with clusters of 2 CTAs sharing A through TMA multicast and remote releases", function()
    assert_ptxas(gemm.build(4096, 4096, 4096, { CLUSTER = 2 }))
    local ok, report = gemm.check(256, 512, 384, { STAGES = 2, CLUSTER = 2 })
    assert(ok, report.message)
  end)
end)

describe("examples/hopper/gemm.lua on a CUDA GPU #gpu", function()
  local runtime = require "pyptx.runtime"
  local ok, dev = pcall(runtime.open, "cuda")
  if not ok then
    pending("no CUDA device: " .. tostring(dev):gsub("\n.*", ""))
    return
  end
  it("matches the CPU reference with driver-encoded tensor maps (cuTensorMapEncodeTiled)", function()
    local previous = runtime.device()
    runtime.use(dev)
    local passed, report = require("examples.hopper.gemm").check(256, 256, 128)
    runtime.use(previous)
    assert.is_true(passed, report.message)
  end)
end)
