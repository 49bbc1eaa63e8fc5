-- pyptx.smem: allocations carved from one per-kernel buffer, mbarrier
-- slots, base addresses, swizzles, and the static/dynamic declaration.
local H = require "spec.helpers"
local pyptx = require "pyptx"
local runtime = require "pyptx.runtime"
local hopper = require "pyptx.hopper"
local reg, ptx, smem, T = pyptx.reg, pyptx.ptx, pyptx.smem, pyptx.types

--- Trace a kernel with body fn and the given options; returns its specialization.
local function traced(fn, opts)
  local o = { arch = "sm_90a", fn }
  for k, v in pairs(opts or {}) do if k ~= "name" then o[k] = v end end
  return pyptx.kernel(opts and opts.name or "t")(o):specialize()
end

--- The declaration line of the kernel's shared buffer.
local function decl(s)
  return s.ptx:match("\n([^\n]*%.shared[^\n]*)\n")
end

describe("pyptx.smem", function()
  it("carves aligned allocations from one buffer", function()
    local a, b, c, d
    local s = traced(function()
      a = smem.alloc(T.u8, 3)
      b = smem.alloc(T.f32, { 2, 4 })
      c = smem.mbarrier(2)
      d = smem.alloc(T.f16, 1, { align = 128 })
    end)
    assert.same({ 0, 4, 40, 128 }, { a.offset, b.offset, c.offset, d.offset })
    assert.same({ 32, 8, T.f32 }, { b.bytes, b.count, b.type })
    assert.equal("smem t_smem+4 (32 bytes)", tostring(b))
    assert.equal(".shared .align 128 .b8 t_smem[130];", decl(s))
    assert.same({ 130, 0 }, { s.static_smem, s.dynamic_smem })
  end)

  it("addresses element i as [sym+offset+i*size]", function()
    local s = traced(function()
      local buf = smem.alloc(T.f32, 8)
      local bars = smem.mbarrier(2)
      local v = reg.scalar(T.f32)
      ptx.ld.shared(v, buf[3])
      ptx.st.shared(buf[0], v)
      ptx.inst.mbarrier.init.shared.b64(bars[1], 32)
      assert.equal("[t_smem+12]", tostring(buf[3]))
    end)
    assert.matches("ld.shared.f32 \t%%f1, %[t_smem%+12%];", s.ptx)
    assert.matches("st.shared.f32 \t%[t_smem%], %%f1;", s.ptx)
    assert.matches("mbarrier.init.shared.b64 \t%[t_smem%+40%], 32;", s.ptx)
  end)

  it("gives an allocation's base address in a u32 register with one mov", function()
    local s = traced(function()
      smem.alloc(T.u8, 4)
      local r = smem.alloc(T.f32, 4):base()
      assert.equal(T.u32, r.type)
    end)
    assert.matches("mov.u32 \t%%r1, t_smem%+4;", s.ptx)
  end)

  it("declares nothing when nothing is allocated", function()
    local s = traced(function() end)
    assert.is_nil(decl(s))
    assert.same({ 0, 0 }, { s.static_smem, s.dynamic_smem })
  end)

  it("switches to dynamic shared memory above 48 KB", function()
    local s = traced(function() smem.alloc(T.f32, 12288) end, { name = "at" })
    assert.equal(".shared .align 16 .b8 at_smem[49152];", decl(s))
    s = traced(function() smem.alloc(T.f32, 12289) end, { name = "above" })
    assert.equal(".extern .shared .align 16 .b8 above_smem[];", decl(s))
    assert.same({ 0, 49156 }, { s.static_smem, s.dynamic_smem })
  end)

  it("makes the buffer dynamic with extern_smem, sized by the smem option", function()
    local s = traced(function() smem.alloc(T.f32, 4) end, { extern_smem = true })
    assert.equal(".extern .shared .align 16 .b8 t_smem[];", decl(s))
    assert.equal(16, s.dynamic_smem)
    s = traced(function() smem.alloc(T.f32, 4) end, { smem = 100000 })
    assert.equal(100000, s.dynamic_smem)
    s = traced(function() end, { smem = 100000 })
    assert.equal(".extern .shared .align 16 .b8 t_smem[];", decl(s))
    assert.equal(100000, s.dynamic_smem)
  end)

  it("refuses a bad type, shape or alignment", function()
    local function err(fn)
      local ok, e = pcall(traced, fn)
      assert.is_false(ok)
      return e
    end
    assert.matches("smem_spec.lua:%d+: smem.alloc: argument 1 %(ty%) must be a pyptx type %(u32, f32, ...%); got a string %(\"f32\"%)",
      err(function() smem.alloc("f32", 4) end))
    assert.matches("smem_spec.lua:%d+: smem.alloc: the shape must hold a positive integer count", err(function() smem.alloc(T.f32, 0) end))
    assert.matches("smem_spec.lua:%d+: smem.alloc: align must be a power of two, got 24",
      err(function() smem.alloc(T.f32, 4, { align = 24 }) end))
  end)

  it("refuses to allocate outside a kernel trace", function()
    local ok, e = pcall(smem.alloc, T.f32, 4)
    assert.is_false(ok)
    assert.matches("smem_spec.lua:%d+: smem.alloc called outside a kernel trace", e)
  end)

  describe("swizzle", function()
    it("XORs the 16-byte column with the 128-byte row bits", function()
      -- B32: bit 4 ^= bit 7; B64: bits 4-5 ^= bits 7-8; B128: bits 4-6 ^= bits 7-9
      assert.same({ 0, 16, 144, 128, 256, 1328 }, {
        smem.swizzle(0, smem.B32), smem.swizzle(16, smem.B32), smem.swizzle(128, smem.B32),
        smem.swizzle(144, smem.B32), smem.swizzle(256, smem.B32), smem.swizzle(1328, smem.B32) })
      assert.same({ 288, 1296, 144 }, { smem.swizzle(256, smem.B64), smem.swizzle(1328, smem.B64), smem.swizzle(128, smem.B64) })
      assert.same({ 288, 1296, 896 },
        { smem.swizzle(256, smem.B128), smem.swizzle(1328, smem.B128), smem.swizzle(7 * 128 + 112, smem.B128) })
    end)

    it("is a permutation of each 1024-byte atom for B128", function()
      local seen = {}
      for off = 0, 1023, 16 do seen[smem.swizzle(off, smem.B128)] = true end
      local n = 0
      for off = 0, 1023, 16 do if seen[off] then n = n + 1 end end
      assert.equal(64, n)
    end)

    it("keeps the byte within a 16-byte chunk", function()
      assert.equal(128 + 16 + 5, smem.swizzle(128 + 5, smem.B32))
    end)

    it("refuses other modes", function()
      local ok, e = pcall(traced, function() smem.swizzle(0, 16) end)
      assert.is_false(ok)
      assert.matches("smem_spec.lua:%d+: smem.swizzle: mode must be smem.B32, smem.B64 or smem.B128, got 16", e)
    end)
  end)

  describe("swizzles of registers", function()
    -- Per thread: an offset with bits everywhere, and the 9 swizzles of it.
    local CASES = {
      function(o) return smem.swizzle(o, smem.B32) end, function(o) return smem.swizzle(o, smem.B64) end,
      function(o) return smem.swizzle(o, smem.B128) end,
      function(o) return hopper.swizzle_address(o, 32) end, function(o) return hopper.swizzle_address(o, 64) end,
      function(o) return hopper.swizzle_address(o, 128) end, function(o) return hopper.swizzle_address(o, 128, 3) end,
      function(o) return hopper.swizzle_address(o, 64, 7) end, function(o) return hopper.swizzle_address(o, 0) end,
    }
    local N = 256

    --- The offset thread t swizzles (Lua number and register form agree).
    local function offset_of(t) return (t * 1237 + 16 * (t % 13)) % 65536 end

    it("emit the XOR sequence whose values equal the trace-time swizzle for every offset, on the emulator", function()
      local k = pyptx.kernel "swz" {
        arch = "sm_90a", out_specs = { pyptx.Tile(N * #CASES, T.u32) }, block = { N }, grid = { 1 },
        function(Out)
          local tid = reg.from(ptx.special.tid.x(), T.u32)
          local off = (tid * 1237 + (tid % 13) * 16) % 65536
          local po = ptx.global_ptrs(Out) + tid:mul_wide(4 * #CASES)
          for i, f in ipairs(CASES) do ptx.st.global(ptx.addr(po, 4 * (i - 1)), f(off)) end
          ptx.ret()
        end,
      }
      local text = k:ptx()
      assert.matches("shr.u32[^\n]*7;\n[^\n]*and.b32[^\n]*7;\n[^\n]*shl.b32[^\n]*4;\n[^\n]*xor.b32", text)
      local previous = runtime.device()
      runtime.use(H.emu())
      local ok, out = pcall(function() return k():values() end)
      runtime.use(previous)
      assert(ok, out)
      for t = 0, N - 1 do
        for i, f in ipairs(CASES) do
          assert.equal(f(offset_of(t)), out[t * #CASES + i], ("thread %d, case %d"):format(t, i))
        end
      end
      H.assert_ptxas(text, "sm_90a")
    end)

    it("swizzle 64-bit registers in their own type and refuse narrow or float ones at the user's line", function()
      local s = traced(function() smem.swizzle(reg.scalar(T.u64), smem.B128) end)
      assert.matches("and.b64", s.ptx, 1, true)
      local ok, e = pcall(traced, function() smem.swizzle(reg.scalar(T.u16), smem.B64) end)
      assert.is_false(ok)
      assert.matches("^spec/smem_spec.lua:%d+: smem.swizzle: the offset register must be a 32%- or 64%-bit integer, got u16", e)
      ok, e = pcall(traced, function() hopper.swizzle_address(reg.scalar(T.f32), 128) end)
      assert.is_false(ok)
      assert.matches("^spec/smem_spec.lua:%d+: hopper.swizzle_address: the address register must be a 32%- or 64%-bit integer, got f32", e)
    end)
  end)
end)

describe("smem.wgmma_tile with stages and tile:stage", function()
  --- The caller's line.

  --- The error of tracing body in an sm_90a kernel.
  local function err_of(body)
    local ok, err = pcall(traced, body)
    assert.is_false(ok)
    return tostring(err)
  end

  it("reserves the stages back to back; a number stage and row is [sym+offset] with one stage's layout", function()
    local t, v, w
    local s = traced(function()
      smem.alloc(T.u8, 1)
      t = smem.wgmma_tile(T.bf16, { 128, 64 }, { stages = 3 })
      v, w = t:stage(2), t:stage(1, 64)
    end)
    assert.same({ 1024, 3, 128 * 64 * 2, 3 * 128 * 64 * 2 }, { t.offset, t.stages, t.stage_bytes, t.bytes })
    assert.same({ 1024 + 2 * 16384, 16384, 1 }, { v.offset, v.bytes, v.stages })
    assert.equal(1024 + 16384 + 64 * 128, w.offset)          -- 64 rows of 128 bytes on
    assert.same({ "128B", 128, { 128, 64 } }, { v.layout, v.rows, v.tma_box })
    assert.equal(t:k_offset(32), v:k_offset(32))
    assert.is_nil(s.ptx:find("mad.lo", 1, true))              -- numbers emit nothing
  end)

  it("puts a register stage's address in one register that wgmma descriptors and TMA copies take", function()
    local v
    local s = traced(function(A)
      local t = smem.wgmma_tile(T.bf16, { 64, 64 }, { stages = 2 })
      local st = reg.scalar(T.u32, 1)
      v = t:stage(st, reg.scalar(T.u32, 8))
      local acc = ptx.wgmma.fragments(64, true)
      ptx.wgmma.mma_async { shape = { 64, 64, 16 }, d = acc, atype = T.bf16, a = v, b = v, k = 16 }
      local bar = smem.mbarrier(1)
      ptx.cp.async.bulk.tensor_2d { dst = v, src = A:tma_desc { tile = t }, coord = { 0, 0 }, mbar = bar[0] }
    end, { in_specs = { pyptx.Tile(64, 64, T.bf16) }, block = { 128 } })
    local r = tostring(v:base()):gsub("%%", "%%%%")   -- %rN as a pattern
    assert.equal(v.reg, v:base())
    assert.matches("mad%.lo%.u32%s+%%r%d+, %%r%d+, 8192, %%r%d+;", s.ptx)   -- stage * stage bytes + base
    assert.matches("mad%.lo%.u32%s+" .. r .. ", %%r%d+, 128, %%r%d+;", s.ptx) -- + row * 128 bytes
    assert.matches("add%.u32%s+(%%r%d+), " .. r .. ", 32;", s.ptx)          -- K element 16: byte 32
    assert.matches("cp%.async%.bulk%.tensor%.2d[^\n]*%[" .. r .. "%]", s.ptx)
  end)

  it("refuses a stage outside the tile, a row off the 8-row atoms and a bad stages, at the user's line", function()
    local line
    local e = err_of(function() local t = smem.wgmma_tile(T.bf16, { 64, 64 }, { stages = 2 }); line = H.here(); t:stage(2) end)
    assert.matches("smem_spec.lua:" .. line .. ": tile:stage: stage 2 is outside the tile's stages 0..1", e, 1, true)
    e = err_of(function() local t = smem.wgmma_tile(T.bf16, { 64, 64 }); line = H.here(); t:stage(0, 12) end)
    assert.matches("smem_spec.lua:" .. line .. ": tile:stage: row 12 must be a multiple of 8 in 0..56", e, 1, true)
    e = err_of(function() local t = smem.wgmma_tile(T.bf16, { 64, 64 }, "MN"); line = H.here(); t:stage(0, 8) end)
    assert.matches("smem_spec.lua:" .. line .. ": tile:stage: a row offset needs a K-major swizzled tile", e, 1, true)
    e = err_of(function() local t = smem.wgmma_tile(T.bf16, { 64, 64 }); line = H.here(); t:stage(reg.scalar(T.f32, 0)) end)
    assert.matches("smem_spec.lua:" .. line .. ": tile:stage: the stage must be an integer 0..0 or a u32 register", e, 1, true)
    e = err_of(function() line = H.here(); smem.wgmma_tile(T.bf16, { 64, 64 }, { stages = 0 }) end)
    assert.matches("smem_spec.lua:" .. line .. ": smem.wgmma_tile: stages must be a positive integer, got 0", e, 1, true)
  end)
end)
