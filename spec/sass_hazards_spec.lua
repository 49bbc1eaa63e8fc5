-- What costs time in a loop, read from the SASS (pyptx.runtime.sass's
-- loops, hazards and mma_loops): `luaptx sass` and `luaptx profile` name
-- the Lua line of a GPU-scope fence, local memory (spills) and a wgmma
-- drain right after the commit, inside a loop only. The tests that
-- compile and disassemble go pending without nvdisasm (`make sass-tools`)
-- or a PTX compiler; the listing tests run everywhere.
local sass = require "pyptx.runtime.sass"
local compile = require "pyptx.runtime.compile"
local H = require "spec.helpers"

--- nvdisasm and a PTX compiler, or the test goes pending with the reason.
local function need_sass()
  H.need_tool("nvdisasm")
  local ok, err = pcall(compile.compiler)
  if not ok then H.pending(tostring(err)) return end
end

-- A listing in nvdisasm's form: a loop (.L_x_1 .. the @P0 BRA back)
-- holding a GPU-scope fence, a spill, an HGMMA committing (gsb0) and a
-- wait for zero groups; an out-of-line retried wait (.L_x_9) that jumps
-- back into the loop (no loop of its own); and a fence, a spill and a
-- drain outside any loop (not hazards).
local LISTING = table.concat({
  "//--------------------- .text.k                --------------------------",
  "\t.sectioninfo\t@\"SHI_REGISTERS=90\"",
  "\t//## File \"k.lua\", line 3",
  "        /*0000*/                   MEMBAR.SC.GPU ;",
  "        /*0010*/                   STL [R1], R2 ;",
  ".L_x_1:",
  "\t//## File \"k.lua\", line 5",
  "        /*0020*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [UR4], R3 ;",
  "        /*0030*/              @!P1 BRA `(.L_x_9) ;",
  ".L_x_2:",
  "\t//## File \"k.lua\", line 6",
  "        /*0040*/                   WARPGROUP.ARRIVE ;",
  "        /*0050*/                   HGMMA.64x256x16.F32.BF16 R24, gdesc[UR8], R24 ;",
  "        /*0060*/                   HGMMA.64x256x16.F32.BF16 R24, gdesc[UR12], R24, gsb0 ;",
  "\t//## File \"k.lua\", line 7",
  "        /*0070*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;",
  "\t//## File \"k.lua\", line 8",
  "        /*0080*/              @!P3 MEMBAR.ALL.CTA ;",
  "        /*0090*/              @!P3 MEMBAR.ALL.GPU ;",
  "        /*00a0*/              @!P3 ERRBAR;",
  "\t//## File \"k.lua\", line 9",
  "        /*00b0*/                   LDL R5, [R1+0x4] ;",
  "        /*00c0*/               @P0 BRA `(.L_x_1) ;",
  "\t//## File \"k.lua\", line 11",
  "        /*00d0*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;",
  "        /*00e0*/                   EXIT ;",
  ".L_x_9:",
  "\t//## File \"k.lua\", line 5",
  "        /*00f0*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [UR4], R3 ;",
  "        /*0100*/              @!P1 BRA `(.L_x_9) ;",
  "        /*0110*/                   BRA `(.L_x_2) ;",
  ".L_x_3:",
  "        /*0120*/                   BRA `(.L_x_3);",
}, "\n")

describe("pyptx.runtime.sass hazards", function()
  it("finds the loops of a listing: backward branches, not the jump back from an out-of-line wait", function()
    local fn = sass.parse(LISTING).functions[1]
    local got = {}
    for _, lp in ipairs(sass.loops(fn)) do
      got[#got + 1] = ("%04x..%04x mma %d%s"):format(lp.from, lp.to, lp.mma, lp.inner_mma and " k-loop" or "")
    end
    assert.same({ "0120..0120 mma 0", "00f0..0100 mma 0", "0020..00c0 mma 2 k-loop" }, got)
  end)

  it("takes a BRA.U.ANY loop (ptxas's loop over a warp-uniform operand) for no k-loop: the loop around it is", function()
    local fn = sass.parse(table.concat({
      "//--------------------- .text.u                --------------------------",
      ".L_x_1:",
      "        /*0000*/                   IADD3 R2, R2, 0x1, RZ ;",
      ".L_x_2:",
      "        /*0010*/              @P0 ELECT P1, URZ, PT ;",
      "        /*0020*/                   UTCHMMA gdesc[UR16], gdesc[UR14], tmem[UR5], tmem[UR8], idesc[UR9], UPT ;",
      "        /*0030*/              @P0 BRA.U.ANY `(.L_x_2) ;",
      "        /*0040*/                   MEMBAR.SC.GPU ;",
      "        /*0050*/              @P2 BRA `(.L_x_1) ;",
      "        /*0060*/                   EXIT ;",
    }, "\n")).functions[1]
    local got = {}
    for _, lp in ipairs(sass.loops(fn)) do
      got[#got + 1] = ("%04x..%04x%s%s"):format(lp.from, lp.to, lp.uniform and " uniform" or "", lp.inner_mma and " k-loop" or "")
    end
    assert.same({ "0010..0030 uniform", "0000..0050 k-loop" }, got)
    local loops = sass.mma_loops({ functions = { fn } })
    assert.same({ 0, 0x50, 6, 1 }, { loops[1].from, loops[1].to, loops[1].instructions, loops[1].fences })
  end)

  it("names each hazard in a loop at its Lua line, and none outside a loop", function()
    local got = {}
    for _, h in ipairs(sass.hazards(sass.parse(LISTING))) do
      local ops = {}
      for i, it in ipairs(h.insts) do ops[i] = it.opcode end
      got[#got + 1] = ("%s %s %s %04x..%04x"):format(h.kind, h.where, table.concat(ops, ","), h.loop.from, h.loop.to)
    end
    assert.same({ "drain k.lua:7 WARPGROUP 0020..00c0", "fence k.lua:8 MEMBAR,ERRBAR 0020..00c0",
                  "local k.lua:9 LDL 0020..00c0" }, got)
  end)

  it("measures a k-loop: instructions, MMA shapes, groups in flight, fences, local memory, registers", function()
    local loops = sass.mma_loops(sass.parse(LISTING))
    assert.equal(1, #loops)
    local r = loops[1]
    assert.same({ "k", 90, 0x20, 0xc0, 11, { ["HGMMA.64x256x16.F32.BF16"] = 2 }, 2, 0, 2, 1, 1 },
      { r.func, r.registers, r.from, r.to, r.instructions, r.mma, r.mma_count, r.in_flight, r.fences,
        r.local_insts, r.batches })
  end)

  it("renders one line per hazard with its source and why, or says there is none", function()
    local lines = sass.render_hazards(sass.hazards(sass.parse(LISTING)), function(_, line) return "line " .. line end)
    assert.equal("// hazards in loops: 3", lines[1])
    assert.equal("hazard k.lua:8: GPU/system-scope fence: 2 instructions (MEMBAR.ALL.GPU, ERRBAR) in the loop "
      .. "/*0020*/../*00c0*/ of k  line 8", lines[4])
    assert.matches("^    waits for every earlier memory operation", lines[5])
    assert.matches("^// hazards in loops: none %(GPU/system%-scope fence, local memory", sass.render_hazards({})[1])
  end)
end)

-- Small kernels, one hazard each (lines marked "-- @name"); a trip count
-- read from memory keeps ptxas from unrolling the loops away.
local SCRIPT = [[
local pyptx = require "pyptx"
local tensor = require "pyptx.runtime.tensor"
local kernel, reg, ptx, Tile, smem = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.Tile, pyptx.smem
local u32, f32, bf16 = pyptx.types.u32, pyptx.types.f32, pyptx.types.bf16
local function trips(pn)
  local n = reg.scalar(u32)
  ptx.ld.global(n, ptx.addr(pn))
  return n
end
local fence = kernel "hz_fence" {
  arch = "sm_90a", in_specs = { Tile(256, f32), Tile(1, u32) }, out_specs = { Tile(256, f32) }, block = { 256 },
  function(X, N, Y)
    local px, pn, py = ptx.global_ptrs(X, N, Y)
    local off = reg.from(ptx.special.tid.x(), u32):mul_wide(4)
    local x = reg.scalar(f32)
    ptx.ld.global(x, ptx.addr(px + off))
    ptx.fence.sc("gpu") -- @fence_outside
    ptx.range(0, trips(pn), function()
      ptx.inst.fma.rn.f32(x, x, x, x)
      ptx.st.global(ptx.addr(py + off), x)
      ptx.fence.sc("gpu") -- @fence
    end)
    ptx.ret()
  end }
local function drain(n)
  return kernel("hz_drain" .. n) { arch = "sm_90a", block = { 128 }, in_specs = { Tile(1, u32) },
    out_specs = { Tile(128, f32) },
    function(N, Y)
      local pn, py = ptx.global_ptrs(N, Y)
      local sA = smem.wgmma_tile(bf16, { 64, 64 })
      local sB = smem.wgmma_tile(bf16, { 128, 64 })
      local acc = ptx.wgmma.fragments(128, true)
      local da, db = ptx.wgmma.desc(sA), ptx.wgmma.desc(sB)
      ptx.range(0, trips(pn), function()
        ptx.wgmma.fence()
        ptx.wgmma.mma_async { shape = { 64, 128, 16 }, d = acc, a = da, b = db }
        ptx.wgmma.commit_group()
        ptx.wgmma.wait_group(n) -- @drain
      end)
      ptx.wgmma.wait_group(0) -- @drain_after
      ptx.st.global(ptx.addr(py + reg.from(ptx.special.tid.x(), u32):mul_wide(4)), acc[1])
      ptx.ret()
    end }
end
local spill = kernel "hz_spill" {
  arch = "sm_90a", in_specs = { Tile(49 * 256, f32), Tile(1, u32) }, out_specs = { Tile(256, f32) }, block = { 256 },
  maxnreg = 24,
  function(X, N, Y)
    local px, pn, py = ptx.global_ptrs(X, N, Y)
    local off = reg.from(ptx.special.tid.x(), u32):mul_wide(4)
    local acc = {}
    for j = 1, 48 do acc[j] = reg.scalar(f32); ptx.ld.global(acc[j], ptx.addr(px + off + 1024 * j)) end
    ptx.range(0, trips(pn), function()
      for j = 1, 48 do ptx.inst.fma.rn.f32(acc[j], acc[j], acc[(j % 48) + 1], acc[j]) end -- @spill
    end)
    local s = reg.scalar(f32)
    ptx.inst.mov.f32(s, acc[1])
    for j = 2, 48 do ptx.inst.add.f32(s, s, acc[j]) end
    ptx.st.global(ptx.addr(py + off), s)
    ptx.ret()
  end }
return { kernels = { fence, drain(0), drain(1), spill },
  main = function() fence(tensor.rand({ 256 }, f32), tensor.from_table({ 3 }, u32)) end }
]]

--- The line of SCRIPT that ends with "-- @name".
local function marked(name)
  local n = 0
  for l in SCRIPT:gmatch("([^\n]*)\n") do
    n = n + 1
    if l:match(("%%-%%- @%s$"):format(name)) then return n end
  end
  error("no line marked @" .. name)
end

--- SCRIPT written to a fresh directory; its path.
local function script_file()
  local path = H.temp_dir() .. "/hz.lua"
  H.write(path, SCRIPT)
  return path
end

--- The "hazard FILE:LINE: WHAT" lines of luaptx's output, as "kernel
-- line kind-text" strings.
local function hazard_lines(out)
  local got = {}
  for line, what, fn in out:gmatch("hazard [^\n]-hz%.lua:(%d+): ([^:\n]+): [^\n]- of (%S+)") do
    got[#got + 1] = ("%s %s %s"):format(fn, line, what)
  end
  return got
end

describe("luaptx sass and profile name the hazards of a loop", function()
  it("sass: the fence and the spilling line in their loops and the drain after the commit, nothing else", function()
    need_sass()
    local out, err, status = H.luaptx({ "sass", script_file(), "--summary" }, { timeout = 120 })
    assert.equal(0, status, err)
    local got = hazard_lines(out)
    local fence_line = ("hz_fence %d GPU/system-scope fence"):format(marked("fence"))
    local drain_line = ("hz_drain0 %d wgmma drain right after the commit"):format(marked("drain"))
    local spill_line = ("hz_spill %d local memory (spill or local array)"):format(marked("spill"))
    local want = { [fence_line] = true, [drain_line] = true, [spill_line] = true }
    for _, g in ipairs(got) do
      local n = tonumber(g:match("^%S+ (%d+)"))
      assert.is_true(want[g] or (g:match("^hz_spill ") and g:match("local memory") and n < marked("spill")) or false,
        "unexpected hazard: " .. g .. "\n" .. out)
      want[g] = nil
    end
    assert.same({}, want, out)
    -- wait_group 1 keeps a group in flight: no drain, and hz_drain1 says there is none
    assert.truthy(out:find("// kernel hz_drain1, sm_90a: %d+ SASS instructions[^\n]*\n.-// hazards in loops: none"), out)
  end)

  it("profile: the kernel's report names the fence in its loop", function()
    need_sass()
    local out, err, status = H.luaptx({ "profile", script_file() }, { timeout = 120 })
    assert.equal(0, status, err)
    assert.same({ ("hz_fence %d GPU/system-scope fence"):format(marked("fence")) }, hazard_lines(out))
    assert.truthy(out:find("\n  // hazards in loops: 1\n  hazard ", 1, true), out)
  end)
end)
