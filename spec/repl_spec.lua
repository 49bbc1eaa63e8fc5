-- The REPL, driven through stdin (a script) and through a pseudo-terminal.
local lfs = require "lfs"
local repl = require "luaptx.repl"
local H = require "spec.helpers"
local pty = require "spec.pty"

local BIN = H.BIN

--- Run the REPL with input text on stdin (env: edits); returns what it printed.
local function session(input, env)
  local out = H.luaptx({ "repl" }, { input = input, merge = true, timeout = 120, env = env })
  return out
end

-- `luaptx -e IN_DIR dir prog args...`: exec prog in dir (no shell).
local IN_DIR = [[
local ffi = require "ffi"
ffi.cdef "int chdir(const char *p); int execv(const char *p, char *const argv[]);"
local argv = ffi.new("char *[?]", #arg + 1)   -- argv + 1: from the program on
for i = 1, #arg do argv[i - 1] = ffi.cast("char *", arg[i]) end
assert(ffi.C.chdir(arg[1]) == 0)
ffi.C.execv(arg[2], argv + 1)
]]

--- Run argv on a fresh pseudo-terminal (env: edits), expect first (when
-- given), enter one line, leave with Ctrl-D and check it exits 0; pending
-- where no pty can be opened.
local function one_line(argv, env, first)
  local ok, p = pcall(pty.spawn, argv, env)
  if not ok then H.pending("needs a pseudo-terminal: " .. tostring(p)) end
  if first then p:expect(first) end
  p:expect("sm_90a> ")
  p:write("local a = reg.scalar(u32, 5)\r")
  p:expect("sm_90a> ")
  p:write("\4")
  assert.equal(0, p:wait(20))
  p:close()
end

--- The REPL on a fresh pseudo-terminal with history in a temporary file;
-- pending (with the reason) where no pty can be opened.
local function terminal()
  local dir = H.temp_dir()
  local hist = dir .. "/history"
  local ok, p = pcall(pty.spawn, { BIN, "repl" }, { LUAPTX_HISTORY = hist, TERM = "xterm", LUAPTX_TRACEBACK = false })
  if not ok then H.pending("needs a pseudo-terminal: " .. tostring(p)) end
  p:expect("sm_90a> ")
  return p, hist
end

--- The history file's lines (libedit writes spaces as \040).
local function history(path)
  return (H.read(path) or ""):gsub("\\040", " ")
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
    assert.matches("\tmov.u32 \t%r1, 7;", out, 1, true)
    H.need_ptxas()
    assert.matches("ok: sm_90a, %d+ registers", out)
    local tmp = H.temp_dir()                                -- where the failed PTX is kept
    local bad = session("ptx.inst(\"frob.b32\", reg.scalar(u32), 1)\n:check\n", { TMPDIR = tmp })
    assert.matches("ptxas failed", bad, 1, true)
    assert.matches("from repl%-1:1", bad)
    assert.matches("(the PTX is kept at " .. tmp .. "/", bad, 1, true)
  end)

  it("saves the session as a kernel script and loads it back", function()
    local path = H.temp_dir() .. "/saved.lua"
    local out = session(("local a = reg.scalar(u32, 7)\nptx.inst.add.u32(a, a, 1)\n:save %s\n:reset\n:load %s\n:history\n"):format(path, path))
    assert.matches("saved 2 inputs", out, 1, true)
    assert.matches("  2  ptx.inst.add.u32(a, a, 1)", out, 1, true)
    local ptx = H.luaptx { "ptx", path }
    H.cleanup()
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
    local p, hist = terminal()
    p:write("local a = reg.scalar(u32, 5)\r")
    p:expect("mov.u32 \t%r1, 5;")
    p:expect("sm_90a> ")
    p:write("\4")   -- Ctrl-D
    assert.equal(0, p:wait(20))
    p:close()
    assert.matches("repl — sm_90a", p.out, 1, true)
    assert.matches("local a = reg.scalar(u32, 5)", history(hist), 1, true)
    assert.equal("rw-------", lfs.attributes(hist, "permissions"))   -- history is private
    H.cleanup()
  end)

  it("stops a runaway input with Ctrl-C and keeps the session and its locals", function()
    local p, hist = terminal()
    p:write("local a = reg.scalar(u32, 5)\r")
    p:expect("sm_90a> ")
    p:write("local n = 0; io.write('looping\\n') io.flush() while true do n = n + 1 end\r")
    p:expect("\nlooping")            -- it runs now
    p:drain(200)
    p:write("\3")                    -- Ctrl-C, as typed
    p:expect("error: repl-2:1: interrupted", 10)
    p:expect("sm_90a> ")
    p:write("ptx.inst.add.u32(a, a, 1)\r")
    p:expect("add.u32 \t%r1, %r1, 1;")  -- the session (and a) survived
    p:expect("sm_90a> ")
    p:write(":history\r")
    p:expect("  2  ptx.inst.add.u32(a, a, 1)")   -- the interrupted input was not kept
    p:expect("sm_90a> ")
    p:write(":quit\r")
    assert.equal(0, p:wait(20))
    p:close()
    assert.matches("while true do n = n + 1 end", history(hist), 1, true)
    H.cleanup()
  end)

  it("drops the line being typed (and an unfinished chunk) on Ctrl-C at the prompt", function()
    local p = terminal()
    p:write("local zz = ")
    p:expect("local zz = ")
    p:write("\3")
    p:expect("^C")
    p:expect("sm_90a> ")
    p:write("for i = 1, 3 do\r")
    p:expect("...> ")
    p:write("\3")
    p:expect("sm_90a> ")
    -- had either partial input been kept, this line would not parse
    p:write("local b = reg.scalar(u32, 6)\r")
    p:expect("mov.u32 \t%r1, 6;")
    p:expect("sm_90a> ")
    p:write("\4")
    assert.equal(0, p:wait(20))
    p:close()
    H.cleanup()
  end)

  it("saves history when ended by SIGTERM or SIGHUP, even in a runaway input", function()
    for _, sig in ipairs { pty.SIGTERM, pty.SIGHUP } do
      local p, hist = terminal()
      p:write("local a = reg.scalar(u32, 5)\r")
      p:expect("sm_90a> ")
      p:write("io.write('looping\\n') io.flush() while true do end\r")
      p:expect("\nlooping")
      p:drain(200)
      p:signal(sig)
      assert.equal(128 + sig, p:wait(20))
      p:close()
      local saved = history(hist)
      assert.matches("local a = reg.scalar(u32, 5)", saved, 1, true)
      assert.matches("while true do end", saved, 1, true)
      H.cleanup()
    end
    H.cleanup()
  end)

  it("keeps no history without HOME (never ./.luaptx_history), on a terminal", function()
    H.with_env({ HOME = false, LUAPTX_HISTORY = false }, function() assert.is_nil(repl.history_path()) end)
    H.with_env({ HOME = "", LUAPTX_HISTORY = "" }, function() assert.is_nil(repl.history_path()) end)
    H.with_env({ HOME = "/h", LUAPTX_HISTORY = false }, function() assert.equal("/h/.luaptx_history", repl.history_path()) end)
    local dir = H.temp_dir()
    one_line({ BIN, "-e", IN_DIR, dir, BIN, "repl" }, { HOME = false, LUAPTX_HISTORY = false, TERM = "xterm" })
    assert.same({}, H.list(dir))
  end)

  it("refuses a history file that is a symbolic link, leaving what it names alone", function()
    local dir = H.temp_dir()
    local victim = H.write(dir .. "/victim", "keep\n")
    H.run { "ln", "-s", victim, dir .. "/history" }
    one_line({ BIN, "repl" }, { LUAPTX_HISTORY = dir .. "/history", TERM = "xterm" },
      "no history is kept: refusing " .. dir .. "/history: it is a symbolic link")
    assert.equal("keep\n", H.read(victim))
    assert.equal("link", require("pyptx.core.sys").kind(dir .. "/history"))
  end)

  it("checks every command's argument", function()
    local dir = H.temp_dir()
    local out = session(table.concat({
      "local a = reg.scalar(u32, 7)",
      ":run 0", ":run abc", ":run 1.5", ":run 2000",
      ":version 99.9", ":version 7.0", ":version x", ":arch sm_999", ":arch",
      ":load " .. dir, ":load " .. dir .. "/missing.lua", ":save", ":save " .. dir .. "/no/such/dir.lua",
      ":ptx extra", ":reset now", ":history",
    }, "\n") .. "\n")
    H.cleanup()
    local want = {
      "error: :run: the thread count (the block size) is an integer from 1 to 1024; got '0'",
      "error: :run: the thread count (the block size) is an integer from 1 to 1024; got 'abc'",
      "got '1.5'", "got '2000'",
      "error: :version: PTX ISA 99.9 is newer than luaptx knows; the newest is",
      "error: :version: PTX ISA 7.0 does not know sm_90a; use 8.0 or newer",
      "error: :version: the version is major.minor, e.g. 8.3; got 'x'",
      "error: :arch: unknown arch 'sm_999'; valid: sm_50 ",
      "error: :arch needs an argument: :arch sm_80",
      "error: :load: " .. dir .. ": is a directory; give a Lua file",
      "error: :load: " .. dir .. "/missing.lua: no such file",
      "error: :save needs an argument: :save file.lua",
      "error: :save: cannot write " .. dir .. "/no/such/dir.lua: its directory " .. dir .. "/no/such: No such file or directory",
      "error: :ptx takes no argument; got 'extra'",
      "error: :reset takes no argument; got 'now'",
      "  1  local a = reg.scalar(u32, 7)",   -- the session survived all of it
    }
    for _, w in ipairs(want) do assert.matches(w, out, 1, true) end
    assert.is_nil(out:find("bin/", 1, true))
  end)
end)
