-- The REPL, driven through stdin (a script) and through a pseudo-terminal.
local repl = require "luaptx.repl"

local BIN = os.getenv("LUAPTX_BIN") or "./build/luaptx"

--- Run the REPL with input text on stdin; returns what it printed.
local function session(input, args)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(input)
  f:close()
  local p = io.popen(("%s repl %s < %s 2>&1"):format(BIN, args or "", path))
  local out = p:read("*a")
  p:close()
  os.remove(path)
  return out
end

describe("luaptx repl", function()
  it("shows the PTX each input appends and keeps locals between inputs", function()
    local out = session("local a = reg.scalar(u32, 7)\nlocal b = reg.scalar(u32)\nptx.inst.add.u32(b, a, 3)\n")
    assert.matches("\tmov.u32 \t%r1, 7;\n\tadd.u32 \t%r2, %r1, 3;\n", out, 1, true)
  end)

  it("reports an error naming the input and keeps the session going", function()
    local out = session("local a = reg.scalar(f32)\nptx.inst.add.u32(a, a, 1)\nlocal b = reg.scalar(u32, 1)\n")
    assert.matches("error: repl-2:1: add.u32: operand 1 is a f32 register", out, 1, true)
    assert.matches("mov.u32 \t%r1, 1;", out, 1, true)
  end)

  it("leaves nothing behind from a failed input", function()
    local out = session("local a = reg.scalar(u32, 1)\nptx.inst.mov.u32(a, 2); ptx.inst.add.f32(a, a, a)\n:ptx\n")
    assert.is_nil(out:match("mov.u32 \t%%r1, 2;\n\t%.loc"), "the half-done input's mov was kept")
    local body = out:match("{\n(.-)\n}")
    assert.is_nil(body:match("%r1, 2;"))
  end)

  it("takes multi-line input for unfinished chunks", function()
    local out = session("local r = reg.scalar(u32, 0)\nfor i = 1, 3 do\n  ptx.inst.add.u32(r, r, i)\nend\n")
    assert.matches("add.u32 \t%r1, %r1, 1;\n\tadd.u32 \t%r1, %r1, 2;\n\tadd.u32 \t%r1, %r1, 3;", out, 1, true)
  end)

  it("prints the snippet as a kernel with :ptx", function()
    local out = session("local a = reg.scalar(u32, 7)\n:ptx\n")
    assert.matches(".target sm_90a", out, 1, true)
    assert.matches(".visible .entry repl()", out, 1, true)
  end)

  it("changes the target with :arch and re-checks the session", function()
    local out = session("ptx.inst.wgmma.fence.sync.aligned()\n:arch sm_80\n:reset\n:arch sm_80\nptx.inst.mov.u32(reg.scalar(u32), 1)\n:ptx\n")
    assert.matches("wgmma.fence.sync.aligned needs target sm_90a; this kernel targets sm_80", out, 1, true)
    assert.matches("arch = sm_80", out, 1, true)
    assert.matches(".target sm_80", out, 1, true)
  end)

  it("assembles the snippet with :check, good and bad", function()
    local out = session("local a = reg.scalar(u32, 7)\n:check\n")
    if out:match("ptxas not found") then pending("needs ptxas (the CUDA toolkit)") return end
    assert.matches("ok: sm_90a, %d+ registers", out)
    local bad = session("ptx.inst(\"frob.b32\", reg.scalar(u32), 1)\n:check\n")
    assert.matches("ptxas failed", bad, 1, true)
    assert.matches("from repl%-1:1", bad)
  end)

  it("saves the session as a kernel script and loads it back", function()
    local path = os.tmpname() .. ".lua"
    local out = session(("local a = reg.scalar(u32, 7)\nptx.inst.add.u32(a, a, 1)\n:save %s\n:reset\n:load %s\n:history\n"):format(path, path))
    assert.matches("saved 2 inputs", out, 1, true)
    assert.matches("  2  ptx.inst.add.u32(a, a, 1)", out, 1, true)
    local p = io.popen(BIN .. " ptx " .. path)
    local ptx = p:read("*a")
    p:close()
    os.remove(path)
    assert.matches("add.u32 \t%r1, %r1, 1;", ptx, 1, true)
  end)

  it("completes ptx, reg and smem names and opcode modifiers", function()
    local has = function(list, x) for _, v in ipairs(list) do if v == x then return true end end return false end
    assert.is_true(has(repl.complete("ptx.in"), "ptx.inst"))
    assert.is_true(has(repl.complete("reg.sc"), "reg.scalar"))
    assert.is_true(has(repl.complete("smem.mb"), "smem.mbarrier"))
    assert.is_true(has(repl.complete("ptx.inst.wgm"), "ptx.inst.wgmma"))
    assert.is_true(has(repl.complete("ptx.inst.ld.gl"), "ptx.inst.ld.global"))
    assert.is_true(has(repl.complete("ptx.inst.ld.global.v"), "ptx.inst.ld.global.v4"))
  end)

  it("runs the snippet on the emulator with :run and prints registers per lane", function()
    local out = session("local t = reg.from(ptx.special.tid.x(), u32)\nlocal p = t:lt(2)\nlocal f = (t * 3):to(f32)\n:run 4\n")
    assert.matches("ran 4 threads on", out, 1, true)
    assert.matches("%r1    u32   0: 0  1: 1  2: 2  3: 3", out, 1, true)
    assert.matches("%p1    pred  0-1: true  2-3: false", out, 1, true)
    assert.matches("%f1    f32   0: 0  1: 3  2: 6  3: 9", out, 1, true)
  end)

  it("prints NaN registers of any bit pattern as nan (f32 0xffffffff, 0xfff80000; f64 all ones)", function()
    local out = session("local d = reg.scalar(f64)\nptx.inst.mov.b64(d, 0xffffffffffffffffULL)\n"
      .. "local f = reg.scalar(f32)\nptx.inst.mov.b32(f, 0xffffffff)\nlocal g = reg.scalar(f32)\n"
      .. "ptx.inst.mov.b32(g, 0xfff80000)\n:run 1\n")
    assert.matches("%fd1   f64   nan", out, 1, true)
    assert.matches("%f1    f32   nan", out, 1, true)
    assert.matches("%f2    f32   nan", out, 1, true)
  end)

  it("prints :help and survives unknown commands", function()
    local out = session(":help\n:frobnicate\nlocal a = reg.scalar(u32, 1)\n")
    assert.matches(":check", out, 1, true)
    assert.matches("unknown command :frobnicate", out, 1, true)
    assert.matches("mov.u32", out, 1, true)
  end)

  it("edits lines and saves history on a terminal", function()
    if os.execute("command -v script >/dev/null 2>&1") ~= 0 then pending("needs script(1) for a pty") return end
    local hist = os.tmpname()
    local cmd = ("printf 'local a = reg.scalar(u32, 5)\\n' | LUAPTX_HISTORY=%s script -qec '%s repl' /dev/null 2>&1"):format(hist, BIN)
    local p = io.popen(cmd)
    local out = p:read("*a")
    p:close()
    assert.matches("repl — sm_90a", out, 1, true)
    assert.matches("mov.u32 \t%r1, 5;", out, 1, true)
    local f = io.open(hist, "r")
    local saved = f and f:read("*a") or ""
    if f then f:close() end
    os.remove(hist)
    assert.matches("reg.scalar(u32,", saved, 1, true)   -- libedit writes spaces as \040
  end)
end)
