-- The luaptx command line, run as a separate process: luajit-like modes,
-- `ptx`, `check` and `run` on kernel scripts, and their errors. Every
-- example must assemble with ptxas for the arch it targets.
local H = require "spec.helpers"

--- Run the binary with an argument list; returns stdout, stderr, status.
local function luaptx(...)
  return H.luaptx({ ... })
end

--- Write a temporary Lua script; returns its path (removed when the test ends).
local function script(text)
  return H.temp_file(text, ".lua")
end

local read = H.read

local KERNEL_HEAD = [[
local pyptx = require "pyptx"
local ptx = pyptx.ptx
local function k(name, arch) return pyptx.kernel(name) { arch = arch or "sm_80", function() ptx.ret() end } end
]]

describe("luaptx (the command line)", function()
  describe("luajit-like modes", function()
    it("prints its version", function()
      local out, _, rc = luaptx("--version")
      assert.equal(0, rc)
      assert.matches("^luaptx %d+%.%d+%.%d+ %(LuaJIT 2%.1[^)]*%)\n$", out)
    end)

    it("prints the usage for help, -h and no arguments", function()
      for _, a in ipairs { "help", "-h", "--help" } do
        local out, _, rc = luaptx(a)
        assert.equal(0, rc)
        assert.matches("^usage: luaptx <command> %[options%]", out)
        assert.matches("\n  ptx <script%.lua> %[%-%-arch A%]", out)
        assert.matches("\n  check <script%.lua>", out)
      end
    end)

    it("runs a chunk with -e, passing the remaining arguments", function()
      local out, _, rc = luaptx("-e", "print(#arg, arg[1], select('#', ...), require('pyptx').version ~= nil)", "x", "y")
      assert.equal(0, rc)
      assert.equal("2\tx\t2\ttrue\n", out)
    end)

    it("runs a script with its arguments like luajit", function()
      local path = script("print(arg[0] ~= nil, arg[1], arg[2], ...)\n")
      local out, _, rc = luaptx(path, "one", "two")
      assert.equal(0, rc)
      assert.equal("true\tone\ttwo\tone\ttwo\n", out)
    end)

    it("reports a script's error and exits with 1", function()
      local path = script("local x = 1\nerror('broken on purpose')\n")
      local _, err, rc = luaptx(path)
      assert.equal(1, rc)
      assert.matches(":2: broken on purpose", err)
    end)

    it("refuses an unknown option and a missing script", function()
      local _, err, rc = luaptx("--bogus")
      assert.equal(1, rc)
      assert.equal("luaptx: unknown command or option '--bogus'; see `luaptx help`\n", err)
      _, err, rc = luaptx("no/such/script.lua")
      assert.equal(1, rc)
      assert.matches("^luaptx: cannot open no/such/script%.lua", err)
      _, err, rc = luaptx("-e")
      assert.equal(1, rc)
      assert.equal("luaptx: -e needs a chunk\n", err)
    end)
  end)

  describe("luaptx ptx", function()
    it("prints the PTX of a kernel script, byte for byte the golden", function()
      local out, err, rc = luaptx("ptx", "spec/fixtures/vec_add.lua")
      assert.equal(0, rc, err)
      assert.equal(read("spec/fixtures/vec_add.ptx"), out)
    end)

    it("retargets with --arch and drops line info with --no-line-info", function()
      local out, _, rc = luaptx("ptx", "spec/fixtures/vec_add.lua", "--arch", "sm_90a", "--no-line-info")
      assert.equal(0, rc)
      assert.matches("\n%.target sm_90a\n", out)
      assert.is_nil(out:find(".loc", 1, true))
      assert.is_nil(out:find(".file", 1, true))
    end)

    it("writes to a file with -o", function()
      local path = H.temp_dir() .. "/warp_sum.ptx"
      local out, _, rc = luaptx("ptx", "spec/fixtures/warp_sum.lua", "-o", path)
      assert.equal(0, rc)
      assert.equal("", out)
      assert.equal(read("spec/fixtures/warp_sum.ptx"), read(path))
    end)

    it("prints every kernel of a list and of a module table, never calling main", function()
      local list = script(KERNEL_HEAD .. "return { k('first'), k('second', 'sm_90a') }\n")
      local out, _, rc = luaptx("ptx", list)
      assert.equal(0, rc)
      assert.matches("%.entry first%(%).*%.target sm_90a.*%.entry second%(%)", out)
      local mod = script(KERNEL_HEAD .. "return { kernels = { k('only') }, main = function() error('main ran') end }\n")
      out, _, rc = luaptx("ptx", mod)
      assert.equal(0, rc)
      assert.matches("%.entry only%(%)", out)
    end)

    it("specializes {kernel, values} entries", function()
      local path = script([[
local pyptx = require "pyptx"
local k = pyptx.kernel "tmpl" { arch = "sm_80", params = { V = 1 }, function(v) pyptx.reg.scalar(pyptx.types.u32, v.V) end }
return { kernels = { { k, { V = 7 } } } }
]])
      local out, _, rc = luaptx("ptx", path)
      assert.equal(0, rc)
      assert.matches("mov%.u32 \t%%r1, 7;", out)
    end)

    it("says what a kernel script must return", function()
      local path = script("return 42\n")
      local _, err, rc = luaptx("ptx", path)
      assert.equal(1, rc)
      assert.equal("luaptx: " .. path .. ": a kernel script must return a kernel, a list of kernels, or a table with `kernels`/`main`\n", err)
      path = script(KERNEL_HEAD .. "return { k('a'), 'b' }\n")
      _, err, rc = luaptx("ptx", path)
      assert.equal(1, rc)
      assert.equal("luaptx: " .. path .. ": item 2 of the returned list is not a kernel\n", err)
    end)

    it("needs a script and known options", function()
      local _, err, rc = luaptx("ptx")
      assert.equal(1, rc)
      assert.equal("luaptx: ptx: missing <script.lua>\nusage: luaptx ptx <script.lua> [--arch A] [-o FILE] [--no-line-info]\n", err)
      _, err, rc = luaptx("ptx", "spec/fixtures/vec_add.lua", "--arch")
      assert.equal(1, rc)
      assert.equal("luaptx: ptx: --arch needs a value (A)\n", err)
    end)

    it("reports a syntax error in the script", function()
      local path = script("local = 1\n")
      local _, err, rc = luaptx("ptx", path)
      assert.equal(1, rc)
      assert.matches(":1: '<name>' expected near '='", err)
    end)

    it("points .loc at the kernel's line when the body tail-calls its last instruction", function()
      local path = script('local pyptx = require "pyptx"\nreturn pyptx.kernel "t" { arch = "sm_80",\n  function() return pyptx.ptx.ret() end }\n')
      local out, _, rc = luaptx("ptx", path)
      assert.equal(0, rc)
      assert.matches('\t%.file\t1 "' .. path:gsub("%p", "%%%0") .. '"\n', out)
      assert.matches("\t%.loc\t1 2 1\n\tret;", out)
    end)

    it("names the user's line for a validation error, without a traceback", function()
      local _, err, rc = luaptx("ptx", "spec/fails/operand_type.lua")
      assert.equal(1, rc)
      assert.equal("luaptx: spec/fails/operand_type.lua:8: add.u32: operand 2 is a f32 register (%f1); "
        .. "expected a u32/s32/b32 register or an integer\n", err)
    end)
  end)

  describe("luaptx run", function()
    it("calls main with the remaining arguments and returns its status", function()
      local path = script(KERNEL_HEAD .. "return { kernels = { k('r') }, main = function(args) print('main', #args, args[1]) return 3 end }\n")
      local out, _, rc = luaptx("run", path, "hello")
      assert.equal(3, rc)
      assert.equal("main\t1\thello\n", out)
    end)

    it("says when there is no main", function()
      local _, err, rc = luaptx("run", "spec/fixtures/vec_add.lua")
      assert.equal(1, rc)
      assert.matches("the script has no main%(args%) to run", err)
      _, err, rc = luaptx("run")
      assert.equal(1, rc)
      assert.equal("luaptx: run: missing <script.lua>\nusage: luaptx run <script.lua> [args]\n", err)
    end)
  end)

  describe("luaptx check", function()
    it("says the toolkit is missing and exits with 2 when CUDA_HOME names an empty directory", function()
      local empty = H.temp_dir()
      local _, err, rc = H.luaptx({ "check", "spec/fixtures/smem_rows.lua" }, { env = { CUDA_HOME = empty, PATH = empty } })
      assert.equal(2, rc)
      assert.equal("luaptx: ptxas not found: install the CUDA toolkit, or point CUDA_HOME at it (searched $CUDA_HOME/bin = "
        .. empty .. "/bin, then $PATH)\n", err)
    end)

    it("assembles each kernel and prints its resources", function()
      H.need_ptxas()
      local out, err, rc = luaptx("check", "spec/fixtures/smem_rows.lua")
      assert.equal(0, rc, err)
      assert.matches("^kernel%s+arch%s+insts%s+regs%s+smem%s+dyn%.smem%s+spills%s+stack\n", out)
      local row = out:match("\n(smem_rows[^\n]*)")
      assert.is_string(row)
      local arch, insts, regs, sm = row:match("^smem_rows%s+(%S+)%s+(%d+)%s+(%d+)%s+(%d+)")
      assert.equal("sm_90a", arch)
      assert.is_true(tonumber(insts) > 10)
      assert.is_true(tonumber(regs) > 0)
      assert.is_true(tonumber(sm) >= 520)
    end)

    it("fails with ptxas's log mapped to the Lua line", function()
      local path = script([[
local pyptx = require "pyptx"
return pyptx.kernel "broken" { arch = "sm_80", function()
  local a = pyptx.reg.scalar(pyptx.types.b32, 1)
  pyptx.ptx.inst("frobnicate.b32", a, a)
end }
]])
      local out, err = luaptx("ptx", path)
      assert.matches("frobnicate.b32 \t%r1, %r1;", out, 1, true)
      assert.matches("warning: frobnicate%.b32: opcode not in luaptx's instruction table", err)
      H.need_ptxas()
      local tmp = H.temp_dir()                     -- where ptxas's failed PTX is kept
      local rc
      out, err, rc = H.luaptx({ "check", path }, { env = { TMPDIR = tmp } })
      assert.equal(1, rc)
      assert.matches("\nbroken%s+sm_80%s+FAILED\n", out)
      assert.matches("warning: frobnicate%.b32: opcode not in luaptx's instruction table", err)
      assert.matches("error[^\n]*%(from [^\n]*:4%)", err)
      assert.matches("(the PTX is kept at " .. tmp, err, 1, true)
    end)

    it("assembles every example for the arch it targets", function()
      local ARCH = { ampere = "sm_80", hopper = "sm_90a", blackwell = "sm_100a" }
      local examples = {}
      for _, path in ipairs(H.find("examples", "%.lua$")) do
        local dir = path:match("^examples/([^/]+)/[^/]+$")
        if ARCH[dir] then examples[#examples + 1] = { path = path, arch = ARCH[dir] } end
      end
      assert.is_true(#examples >= 3, "found only " .. #examples .. " examples")
      --- Run cmd on every example; each arch its output names (pattern) is the example's.
      local function every_arch(cmd, pattern)
        for _, e in ipairs(examples) do
          local out, err, rc = luaptx(cmd, e.path)
          assert.equal(0, rc, e.path .. ":\n" .. out .. err)
          local kernels = 0
          for arch in out:gmatch(pattern) do
            assert.equal(e.arch, arch, e.path)
            kernels = kernels + 1
          end
          assert.is_true(kernels > 0, e.path .. " defines no kernels")
        end
      end
      every_arch("ptx", "\n%.target (sm_%w+)")                -- the target of every kernel, without ptxas
      H.need_ptxas()
      every_arch("check", "\n[%w_]+%s+(sm_%w+)%s+%d+")       -- what ptxas assembled
    end)
  end)

  describe("flags", function()
    local cli = require "luaptx.cli"
    local ffi = require "ffi"
    local core = require "pyptx.core"

    --- The core's target list, as the CLI must print it.
    local function targets()
      local buf = ffi.new("char[1024]")
      return ffi.string(buf, core.arch_list(buf, 1024))
    end

    it("refuse an unknown flag anywhere, naming the valid ones and the nearest", function()
      local cases = {
        { { "ptx", "spec/fixtures/vec_add.lua", "--no-lineinfo" },
          "ptx: unknown option --no-lineinfo (did you mean --no-line-info?); valid: --arch A, -o FILE, --no-line-info" },
        { { "ptx", "spec/fixtures/vec_add.lua", "--arhc", "sm_80" }, "ptx: unknown option --arhc (did you mean --arch?)" },
        { { "check", "spec/fixtures/vec_add.lua", "--arhc", "sm_80" }, "check: unknown option --arhc (did you mean --arch?); valid: --arch A" },
        { { "compile", "--forse", "spec/fixtures/vec_add.lua" }, "compile: unknown option --forse (did you mean --force?)" },
        { { "cache", "ls", "--all" }, "cache: unknown option --all; it takes no options" },
        { { "repl", "--versoin", "8.3" }, "repl: unknown option --versoin (did you mean --version?)" },
        { { "tune", "x.lua", "--jsn", "r.json" }, "tune: unknown option --jsn (did you mean --json?)" },
        { { "transpile", "spec/fixtures/vec_add.ptx", "--sugarr" }, "transpile: unknown option --sugarr (did you mean --sugar?)" },
        { { "fmt", "spec/fixtures/vec_add.ptx", "--canon" }, "fmt: unknown option --canon" },
        { { "run", "--x", "spec/fixtures/vec_add.lua" }, "run: unknown option --x; it takes no options" },
      }
      for _, c in ipairs(cases) do
        local out, err, rc = H.luaptx(c[1])
        assert.equal(1, rc, table.concat(c[1], " "))
        assert.equal("", out)
        assert.matches("luaptx: " .. c[2], err, 1, true)
      end
    end)

    it("refuse an unknown arch with the core's list of targets", function()
      local want = ("unknown arch 'sm_999'; valid: %s (or auto)\n"):format(targets())
      for _, cmd in ipairs { "ptx", "check", "compile" } do
        local _, err, rc = H.luaptx { cmd, "spec/fixtures/vec_add.lua", "--arch", "sm_999" }
        assert.equal(1, rc)
        assert.equal("luaptx: " .. cmd .. ": --arch: " .. want, err)
      end
      local _, err, rc = H.luaptx { "repl", "--arch=sm_999" }
      assert.equal(1, rc)
      assert.equal("luaptx: repl: --arch: " .. want, err)
      _, err, rc = H.luaptx { "repl", "--version", "99.9" }
      assert.equal(1, rc)
      assert.matches("^luaptx: repl: %-%-version: PTX ISA 99%.9 is newer than luaptx knows", err)
      local out
      out, err, rc = H.luaptx { "ptx", "spec/fixtures/vec_add.lua", "--arch=sm_90a" }
      assert.equal(0, rc, err)
      assert.matches("\n%.target sm_90a\n", out)
    end)

    it("refuse a stray argument, a missing value and an unknown cache subcommand", function()
      local _, err, rc = H.luaptx { "ptx", "spec/fixtures/vec_add.lua", "extra.lua" }
      assert.equal(1, rc)
      assert.matches("^luaptx: ptx: unexpected argument 'extra.lua' %(it takes <script.lua>%)\nusage: luaptx ptx ", err)
      _, err, rc = H.luaptx { "transpile", "spec/fixtures/vec_add.ptx", "--name" }
      assert.equal(1, rc)
      assert.equal("luaptx: transpile: --name needs a value (N)\n", err)
      _, err, rc = H.luaptx { "cache", "purge" }
      assert.equal(1, rc)
      assert.equal("luaptx: cache: unknown subcommand 'purge'; valid: ls|clear|stats\n", err)
      _, err, rc = H.luaptx { "repl", "extra" }
      assert.equal(1, rc)
      assert.matches("^luaptx: repl: unexpected argument 'extra' %(it takes no arguments%)", err)
    end)

    it("list every flag of every subcommand in help, from the parser's own table", function()
      local out, _, rc = H.luaptx { "help" }
      assert.equal(0, rc)
      assert.is_true(#cli.COMMANDS >= 9)
      for _, c in ipairs(cli.COMMANDS) do
        local syn = out:match("\n  (" .. c.name .. "[^\n]*)")
        assert.is_string(syn, c.name .. " is missing from help")
        for _, f in ipairs(c.flags or {}) do
          local spelled = f[1] .. (f[2] and " " .. f[2] or "")
          assert.matches("[" .. spelled .. "]", syn, 1, true)
          assert.matches("\n      " .. spelled:gsub("%p", "%%%0") .. " +" .. f.help:gsub("%p", "%%%0"), out)
          -- and the parser takes it: a bad value or a stray argument fails later, never "unknown option"
          local _, err = H.luaptx { c.name, f[1] }
          assert.is_nil(err:find("unknown option", 1, true), c.name .. " " .. f[1] .. ": " .. err)
        end
        local help = H.luaptx { c.name, "--help" }
        assert.equal(help, (H.luaptx { "help", c.name }))
        assert.matches("^usage: luaptx " .. c.name, help)
      end
      assert.matches("\n  transpile <in.ptx|-> [--name N] [--sugar] [-o FILE]\n", out, 1, true)
      assert.matches("Targets (--arch): " .. targets() .. ", or auto.", out, 1, true)
    end)

    it("read standard input for transpile - as for fmt -", function()
      local text = H.read("spec/fixtures/vec_add.ptx")
      local from_file = H.luaptx { "transpile", "spec/fixtures/vec_add.ptx" }
      local res = H.run({ H.BIN, "transpile", "-" }, { input = text })
      assert.equal(0, res.status, res.stderr)
      -- the same script, with the source named <stdin>
      assert.equal(from_file:gsub("spec/fixtures/vec_add%.ptx", "<stdin>"), res.stdout)
      res = H.run({ H.BIN, "fmt", "-" }, { input = text })
      assert.equal(text, res.stdout)
    end)

    it("pass everything after the script to run's main, flags included", function()
      local path = H.temp_file(KERNEL_HEAD .. "return { kernels = {}, main = function(a) print(table.concat(a, ' ')) end }\n", ".lua")
      local out, err, rc = H.luaptx { "run", path, "--arch", "x", "--", "-o" }
      H.cleanup()
      assert.equal(0, rc, err)
      assert.equal("--arch x -- -o\n", out)
    end)
  end)

  describe("errors", function()
    --- A failing command's stderr, with and without LUAPTX_TRACEBACK.
    local function fails(args, traceback)
      local _, err, rc = H.luaptx(args, { env = { LUAPTX_TRACEBACK = traceback and "1" or false } })
      assert.equal(1, rc, table.concat(args, " ") .. "\n" .. err)
      return err
    end

    it("say a PTX file is not a Lua script, and refuse to transpile text that is not a module", function()
      local dir = H.temp_dir()
      local ptx = H.write(dir .. "/k.ptx", ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k() { ret; }\n")
      for _, args in ipairs { { ptx }, { "run", ptx }, { "ptx", ptx } } do
        local err = fails(args)
        assert.matches(ptx .. " looks like PTX, not a Lua script: `luaptx transpile " .. ptx .. "` turns it into one",
          err, 1, true)
      end
      assert.equal("luaptx: /dev/null: not a PTX module: it has no .version directive "
        .. "(a module starts with .version and .target)\n", fails { "transpile", "/dev/null" })
      local half = H.write(dir .. "/v.ptx", ".version 8.0\n")
      assert.matches("v.ptx: not a PTX module: it has no .target directive", fails { "transpile", half }, 1, true)
    end)

    it("name the user's file:line or nothing, never luaptx's own files", function()
      local dir = H.temp_dir()
      local helper = H.write(dir .. "/helper.lua", [[
local pyptx = require "pyptx"
local hopper = require "pyptx.hopper"
return pyptx.kernel "k" { arch = "sm_90a", function()
  local r = pyptx.reg.scalar(pyptx.types.u32)
  hopper.swizzle_address(128, r)
end }
]])
      local inner = H.write(dir .. "/inner.lua", [[
local tensor = require "pyptx.runtime.tensor"
return { kernels = {}, main = function()
  tensor.compare(1, 2)
end }
]])
      local syntax = H.write(dir .. "/syntax.lua", "local = 1\n")
      local sweep = H.write(dir .. "/sweep.lua", "return { name = 'x' }\n")
      local cases = {
        { { "check", syntax }, "luaptx: " .. syntax .. ":1: '<name>' expected near '='\n" },
        { { "compile", syntax }, "luaptx: " .. syntax .. ":1: '<name>' expected near '='\n" },
        { { "tune", sweep }, "luaptx: tune: a sweep needs build = function(cfg) ... end" },
        { { "ptx", helper }, "luaptx: " .. helper .. ":5: hopper.swizzle_address: argument 2 (span) must be an integer; got a register\n" },
        { { "run", inner }, "luaptx: " .. inner .. ":3: " },
        { { "ptx", "spec/fixtures/vec_add.lua", "-o", dir .. "/no/such.ptx" }, "luaptx: cannot write " .. dir .. "/no/such.ptx: No such file or directory\n" },
        { { "-e", "require('pyptx.hopper').swizzle_address(nil, 128)" },
          "luaptx: (command line):1: hopper.swizzle_address: argument 1 (a) must be an integer or a register; got nil\n" },
        { { "transpile", dir .. "/missing.ptx" }, "luaptx: " },
        { { "fmt", dir .. "/missing.ptx" }, "luaptx: " },
        { { "tune", dir .. "/missing.lua" }, "luaptx: " },
        { { "cache", "purge" }, "luaptx: cache: " },
        { { "repl", "--arch", "sm_1" }, "luaptx: repl: --arch: unknown arch 'sm_1'" },
      }
      for _, c in ipairs(cases) do
        local err = fails(c[1])
        assert.equal(c[2], err:sub(1, #c[2]), table.concat(c[1], " "))
        assert.is_nil(err:find("lua/pyptx/", 1, true), err)
        assert.is_nil(err:find("bin/[%w_]+%.lua"), err)
        assert.is_nil(err:find("stack traceback", 1, true), err)
      end
      H.cleanup()
    end)

    it("come with a traceback for every subcommand under LUAPTX_TRACEBACK=1", function()
      local dir = H.temp_dir()
      local bad = H.write(dir .. "/bad.lua", "return { kernels = {}, main = function() error('boom') end }\n")
      local cases = {
        { "run", bad }, { "ptx", dir .. "/missing.lua" }, { "check", "x.lua", "--arch", "sm_1" },
        { "compile", dir .. "/missing.lua" }, { "cache", "purge" }, { "repl", "--arch", "sm_1" },
        { "tune", dir .. "/missing.lua" }, { "transpile", dir .. "/missing.ptx" }, { "fmt", dir .. "/missing.ptx" },
        { bad .. "x" }, { "-e", "error('boom')" },
      }
      for _, args in ipairs(cases) do
        local err = fails(args, true)
        assert.matches("\nstack traceback:\n", err, 1, true)
      end
      local _, err = H.luaptx({ "ptx", dir .. "/missing.lua" }, { env = { LUAPTX_TRACEBACK = "0" } })
      assert.is_nil(err:find("stack traceback", 1, true))   -- 0 means off
      H.cleanup()
    end)
  end)
end)

describe("luaptx compile -o DIR", function()
  local lfs = require "lfs"
  local compile = require "pyptx.runtime.compile"
  after_each(H.cleanup)

  --- The permission bits of a path, e.g. "rwx------".
  local function perms(path) return lfs.attributes(path, "permissions") end

  it("creates DIR and its parents at 0700 (no shell: a quote in the name is a name) before compiling", function()
    local d = H.temp_dir() .. "/a/b'c; touch x"
    local path = script(KERNEL_HEAD .. "return { k('one') }")
    local _, err, rc = luaptx("compile", path, "-o", d)
    os.remove(path)
    assert.equal("rwx------", perms(d), err)
    assert.equal("rwx------", perms(d:match("^(.*)/b'c")))
    if pcall(compile.compiler) then assert.equal(0, rc, err)
    else assert.matches("no PTX compiler", err, 1, true) end  -- the directory is made before the compiler is needed
  end)

  it("says when DIR cannot be created", function()
    local d = H.temp_dir()
    H.write(d .. "/f", "x")
    local path = script(KERNEL_HEAD .. "return { k('one') }")
    local _, err, rc = luaptx("compile", path, "-o", d .. "/f/g")
    os.remove(path)
    assert.equal(1, rc)
    assert.matches("^luaptx: cannot create directory " .. (d .. "/f"):gsub("%p", "%%%0"), err)
  end)

  it("writes one file per specialization of a kernel at 0600, none overwriting another", function()
    local has_compiler, why = pcall(compile.compiler)
    if not has_compiler then H.pending((tostring(why):gsub("^[^:\n]+:%d+: ", ""))) end
    local path = script [[
local pyptx = require "pyptx"
local ptx, reg, u32 = pyptx.ptx, pyptx.reg, pyptx.types.u32
local k = pyptx.kernel "twice" { arch = "sm_80", params = { N = 1 },
  function(v) local r = reg.scalar(u32); ptx.inst.mov.u32(r, v.N); ptx.inst.add.u32(r, r, r); ptx.ret() end }
return { kernels = { { k, { N = 1 } }, { k, { N = 2 } }, { k, { N = 1 } } } }
]]
    local d = H.temp_dir() .. "/cubins"
    local out, err, rc = luaptx("compile", path, "-o", d)
    os.remove(path)
    assert.equal(0, rc, err)
    local files = H.list(d, "^twice%.sm_80%.%x+%.cubin$")
    assert.equal(2, #files, out)                              -- N = 1 twice is one specialization
    for _, f in ipairs(files) do
      assert.matches(f, out, 1, true)
      assert.equal("\127ELF", read(f):sub(1, 4))
      assert.equal("rw-------", perms(f))
    end
    assert.equal("rwx------", perms(d))
  end)
end)
