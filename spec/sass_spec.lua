-- pyptx.runtime.sass, `luaptx sass`, k:sass{} and the REPL's :sass: the
-- SASS of a kernel under the Lua lines it came from, and the instruction
-- counts by class per Lua line. The tests that disassemble go pending
-- without nvdisasm (its wheel: `make sass-tools`) or a PTX compiler.
local pyptx = require "pyptx"
local sass = require "pyptx.runtime.sass"
local compile = require "pyptx.runtime.compile"
local H = require "spec.helpers"
local kernel, reg, ptx, Tile = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.Tile
local u32, f32 = pyptx.types.u32, pyptx.types.f32

--- nvdisasm and a PTX compiler, or the test goes pending with the reason.
local function need_sass()
  H.need_tool("nvdisasm")
  local ok, err = pcall(compile.compiler)
  if not ok then H.pending(tostring(err)) return end
end

--- The line of this file that ends with the marker comment "-- @name".
local function marked(name)
  local n = 0
  for l in H.read("spec/sass_spec.lua"):gmatch("([^\n]*)\n") do
    n = n + 1
    if l:match(("%%-%%- @%s$"):format(name)) then return n end
  end
  error("no line marked @" .. name)
end

--- A kernel whose load, FMA and store are on lines of their own.
local function probe(line_info)
  return kernel "sass_probe" {
    arch = "sm_80", in_specs = { Tile(256, f32) }, out_specs = { Tile(256, f32) }, block = { 256 },
    line_info = line_info,
    function(X, Y)
      local px, py = ptx.global_ptrs(X, Y)
      local off = reg.from(ptx.special.tid.x(), u32):mul_wide(4)
      local x = reg.scalar(f32)
      ptx.ld.global(x, ptx.addr(px + off))                          -- @load
      ptx.inst.fma.rn.f32(x, x, x, x)                               -- @fma
      ptx.st.global(ptx.addr(py + off), x)                          -- @store
      ptx.ret()
    end,
  }
end

--- Read `luaptx sass` output: { insts = { { text, where, source } },
-- rows = { { where, counts = {...}, total } }, total, header_total }.
local function read_output(out)
  local r, cur, cur_src, in_table = { insts = {}, rows = {} }, nil, nil, false
  local names = sass.class_names()
  for l in out:gmatch("[^\n]+") do
    local w, src = l:match("^%-%- (%S+)  (.*)$")
    if l == "-- (no Lua line)" then cur, cur_src = "(no Lua line)", nil
    elseif w then cur, cur_src = w, src end
    local inst = l:match("^    /%*%x+%*/  (.*)$")
    if inst then r.insts[#r.insts + 1] = { text = inst, where = cur, source = cur_src } end
    r.header_total = r.header_total or tonumber(l:match("^// kernel %S+ %S+ (%d+) SASS instructions"))
    if l:match("^Lua line ") then in_table = true
    elseif in_table then
      local cells = { l:match("^(.-)" .. ("%s+(%d+)"):rep(#names + 1)) }
      local row = { where = cells[1], counts = {}, total = tonumber(cells[#names + 2]) }
      for i, n in ipairs(names) do row.counts[n] = tonumber(cells[i + 1]) end
      if row.where == "total" then r.total = row elseif row.where then r.rows[#r.rows + 1] = row end
    end
  end
  return r
end

-- Real nvdisasm -g -gp output (a two-line REPL kernel, trimmed).
local LISTING = table.concat({
  "//--------------------- .text.repl                --------------------------",
  "\t.section\t.text.repl,\"ax\",@progbits",
  "\t.sectioninfo\t@\"SHI_REGISTERS=4\"",
  "repl:",
  ".text.repl:",
  "\t//## File \"repl-1\", line 1",
  "\t//## File \".nv_debug_ptx_txt\", line 13",
  "        /*0000*/                   MOV R1, c[0x0][0x28] ;",
  "\t//## File \".nv_debug_ptx_txt\", line 15",
  "        /*0010*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;",
  ".L_x_1:",
  "\t//## File \"./repl-2\", line 2",
  "\t//## File \".nv_debug_ptx_txt\", line 17",
  "        /*0020*/              @!P0 EXIT ;",
  ".L_x_0:",
  "        /*0030*/                   BRA `(.L_x_0);",
  "        /*0040*/                   NOP;",
  "        /*0050*/                   NOP;",
  ".L_x_2:",
}, "\n")

describe("pyptx.runtime.sass", function()
  it("reads nvdisasm's listing: functions, registers, Lua and PTX line comments, labels; trailing NOPs are padding", function()
    local l = sass.parse(LISTING)
    assert.equal(1, #l.functions)
    local fn = l.functions[1]
    assert.same({ "repl", 4, 2 }, { fn.name, fn.registers, fn.padding })
    local got = {}
    for _, it in ipairs(fn.items) do
      got[#got + 1] = it.label or table.concat({ it.opcode, it.class, tostring(it.file), tostring(it.line),
                                                 tostring(it.ptx_line) }, " ")
    end
    assert.same({ "MOV other repl-1 1 13", "BAR control repl-1 1 15", ".L_x_1", "EXIT control repl-2 2 17",
                  ".L_x_0", "BRA control repl-2 2 17" }, got)
  end)

  it("gives each SASS opcode one class at most (the rest are 'other'), past the guard predicate", function()
    local seen = {}
    for _, c in ipairs(sass.CLASSES) do
      for op in c.ops:gmatch("%S+") do
        assert.is_nil(seen[op], op .. " is in " .. tostring(seen[op]) .. " and in " .. c.name)
        seen[op] = c.name
      end
    end
    assert.same({ "memory", "fma/tensor", "control", "conversion", "other" }, sass.class_names())
    assert.equal("LDG", sass.opcode("@!P0 LDG.E.128 R4, [R2.64] ;"))
    assert.equal("UTMALDG", sass.opcode("@UP0 UTMALDG.2D [UR8], [UR4] ;"))
    assert.same({ "memory", "fma/tensor", "control", "conversion", "other" },
      { sass.classify("LDG"), sass.classify("HGMMA"), sass.classify("BRA"), sass.classify("F2FP"), sass.classify("IADD3") })
  end)

  it("maps each PTX line to the Lua line of the .loc in force, none before a function's first .loc", function()
    local locs = sass.ptx_locations(table.concat({
      '.file 1 "./a.lua"', ".visible .entry k()", "{", ".loc 1 7 1", "mov.u32 %r1, 1;",
      ".func f()", "{", "ret;", ".loc 1 9 1", "ret;" }, "\n"))
    assert.same({ false, false, false, { file = "a.lua", line = 7 }, { file = "a.lua", line = 7 },
                  false, false, false, { file = "a.lua", line = 9 }, { file = "a.lua", line = 9 } }, locs)
  end)

  it("k:sass{} puts the spec kernel's LDG, FFMA and STG under their own Lua lines", function()
    need_sass()
    local text, listing = probe():sass {}
    local lines = {}
    for _, fn in ipairs(listing.functions) do
      for _, it in ipairs(fn.items) do
        if it.opcode == "LDG" or it.opcode == "STG" or it.opcode == "FFMA" then
          assert.matches("sass_spec%.lua$", it.file)
          lines[it.opcode] = it.line
        end
      end
    end
    assert.same({ LDG = marked("load"), FFMA = marked("fma"), STG = marked("store") }, lines)
    local shown = {}
    for _, it in ipairs(read_output(text).insts) do shown[sass.opcode(it.text)] = it.where .. "  " .. (it.source or ""):gsub("%s+", " ") end
    assert.equal(("spec/sass_spec.lua:%d  ptx.ld.global(x, ptx.addr(px + off)) -- @load"):format(marked("load")), shown.LDG)
  end)

  it("disassembles a kernel traced without .loc: every instruction under (no Lua line)", function()
    need_sass()
    local k = probe(false)
    assert.is_nil(k:ptx():find(".loc", 1, true))
    local text, listing = k:sass {}
    assert.equal(1, #listing.summary.rows)
    assert.equal("(no Lua line)", listing.summary.rows[1].where)
    assert.is_true(listing.summary.totals.total >= 4)
    assert.equal(listing.summary.totals.counts.memory >= 2, true)
    assert.matches("\n%-%- %(no Lua line%)\n    /%*0000%*/  ", text)
  end)
end)

describe("luaptx sass", function()
  local EXAMPLE = "examples/hopper/rms_norm.lua"

  it("prints the example's LDG under its ld.global lines and STG under its st.global line", function()
    need_sass()
    local out, err, status = H.luaptx({ "sass", EXAMPLE }, { timeout = 120 })
    assert.equal(0, status, err)
    local r = read_output(out)
    local under = { LDG = {}, STG = {} }
    for _, it in ipairs(r.insts) do
      local op = sass.opcode(it.text)
      if under[op] then
        assert.matches("^examples/hopper/rms_norm%.lua:%d+$", it.where)
        assert.matches(op == "LDG" and "ld%.global" or "st%.global", it.source)
        under[op][tonumber(it.where:match(":(%d+)$"))] = true
      end
    end
    local n = 0
    for l in H.read(EXAMPLE):gmatch("([^\n]*)\n") do
      n = n + 1
      if l:match("ptx%.ld%.global") then assert.is_true(under.LDG[n] == true, "no LDG under line " .. n) end
      if l:match("ptx%.st%.global") then assert.is_true(under.STG[n] == true, "no STG under line " .. n) end
    end
  end)

  it("counts each Lua line's instructions by class, the rows adding up to the total and the listing", function()
    need_sass()
    local out, err, status = H.luaptx({ "sass", EXAMPLE }, { timeout = 120 })
    assert.equal(0, status, err)
    local r = read_output(out)
    assert.is_table(r.total, "no total row in:\n" .. out)
    local sums = { total = 0 }
    for _, row in ipairs(r.rows) do
      local s = 0
      for name, c in pairs(row.counts) do s = s + c; sums[name] = (sums[name] or 0) + c end
      assert.equal(row.total, s, row.where)
      sums.total = sums.total + row.total
    end
    for name, c in pairs(r.total.counts) do assert.equal(c, sums[name], name) end
    assert.equal(r.total.total, sums.total)
    assert.equal(#r.insts, r.total.total)
    assert.equal(r.header_total, r.total.total)
    assert.is_true(r.total.counts.memory >= 24 and r.total.counts["fma/tensor"] >= 64, out)
    local summary = H.luaptx({ "sass", EXAMPLE, "--summary" }, { timeout = 120 })
    local s = read_output(summary)
    assert.same({ 0, r.total }, { #s.insts, s.total })
  end)

  it("says how to get nvdisasm when none is found, and exits 2", function()
    local empty = H.temp_dir()
    H.run { "cp", H.BIN, empty .. "/luaptx" }       -- no build/venv beside this copy
    local res = H.run({ empty .. "/luaptx", "sass", EXAMPLE }, {
      env = { CUDA_HOME = empty, CUDA_PATH = false, PATH = empty, VIRTUAL_ENV = false, PYTHONUSERBASE = false,
              HOME = empty, LUAPTX_LUA_DIR = false }, timeout = 120 })
    assert.equal(2, res.status, res.stdout .. res.stderr)
    assert.equal("", res.stdout)
    assert.equal(("luaptx: nvdisasm not found: the CUDA 13 toolkit does not ship it; install its Python wheel with "
      .. "`pip install nvidia-cuda-nvdisasm` (into a virtual environment or the user's site-packages), or run "
      .. "`make sass-tools` in a luaptx checkout (build/venv) (searched $CUDA_HOME/bin = %s/bin, then $PATH, then "
      .. "nvidia/cu13/bin and nvidia/cuda_nvdisasm/bin under lib/python3.*/site-packages of %s/venv, %s/.local)\n")
      :format(empty, empty, empty), res.stderr)
  end)
end)

describe("the REPL's :sass", function()
  it("shows each input's machine code under it", function()
    need_sass()
    local out = H.luaptx({ "repl", "--arch", "sm_80" }, {
      input = "local t = reg.from(ptx.special.tid.x(), u32)\nptx.bar_sync(0)\n:sass\n", merge = true, timeout = 120 })
    assert.matches("\n%-%- repl%-2:1  ptx%.bar_sync%(0%)\n    /%*%x+%*/  BAR%.SYNC", out)
    assert.matches("\nrepl%-2:1 +0 +0 +%d+ +0 +%d+ +%d+  ptx%.bar_sync%(0%)\n", out)
  end)
end)
