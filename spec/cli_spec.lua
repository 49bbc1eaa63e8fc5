-- The luaptx command line, run as a separate process: luajit-like modes,
-- `ptx`, `check` and `run` on kernel scripts, and their errors. Every
-- example must assemble with ptxas for the arch it targets.
local toolkit = require "pyptx.toolkit"
local H = require "spec.helpers"

local have_ptxas = toolkit.find("ptxas") ~= nil

--- Run the binary with an argument list; returns stdout, stderr, status.
local function luaptx(...)
  return H.luaptx({ ... })
end

--- Write a temporary Lua script; returns its path (removed by the caller).
local function script(text)
  return toolkit.temp_file(text, ".lua")
end

--- Read a whole file.
local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

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
      os.remove(path)
      assert.equal(0, rc)
      assert.equal("true\tone\ttwo\tone\ttwo\n", out)
    end)

    it("reports a script's error and exits with 1", function()
      local path = script("local x = 1\nerror('broken on purpose')\n")
      local _, err, rc = luaptx(path)
      os.remove(path)
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
      local path = os.tmpname()
      local out, _, rc = luaptx("ptx", "spec/fixtures/warp_sum.lua", "-o", path)
      assert.equal(0, rc)
      assert.equal("", out)
      assert.equal(read("spec/fixtures/warp_sum.ptx"), read(path))
      os.remove(path)
    end)

    it("prints every kernel of a list and of a module table, never calling main", function()
      local list = script(KERNEL_HEAD .. "return { k('first'), k('second', 'sm_90a') }\n")
      local out, _, rc = luaptx("ptx", list)
      os.remove(list)
      assert.equal(0, rc)
      assert.matches("%.entry first%(%).*%.target sm_90a.*%.entry second%(%)", out)
      local mod = script(KERNEL_HEAD .. "return { kernels = { k('only') }, main = function() error('main ran') end }\n")
      out, _, rc = luaptx("ptx", mod)
      os.remove(mod)
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
      os.remove(path)
      assert.equal(0, rc)
      assert.matches("mov%.u32 \t%%r1, 7;", out)
    end)

    it("says what a kernel script must return", function()
      local path = script("return 42\n")
      local _, err, rc = luaptx("ptx", path)
      assert.equal(1, rc)
      assert.equal("luaptx: " .. path .. ": a kernel script must return a kernel, a list of kernels, or a table with `kernels`/`main`\n", err)
      os.remove(path)
      path = script(KERNEL_HEAD .. "return { k('a'), 'b' }\n")
      _, err, rc = luaptx("ptx", path)
      assert.equal(1, rc)
      assert.equal("luaptx: " .. path .. ": item 2 of the returned list is not a kernel\n", err)
      os.remove(path)
    end)

    it("needs a script and known options", function()
      local _, err, rc = luaptx("ptx")
      assert.equal(1, rc)
      assert.equal("luaptx: usage: luaptx ptx <script.lua> [--arch A] [-o out.ptx]\n", err)
      _, err, rc = luaptx("ptx", "spec/fixtures/vec_add.lua", "--arch")
      assert.equal(1, rc)
      assert.equal("luaptx: option --arch needs a value\n", err)
    end)

    it("reports a syntax error in the script", function()
      local path = script("local = 1\n")
      local _, err, rc = luaptx("ptx", path)
      os.remove(path)
      assert.equal(1, rc)
      assert.matches(":1: '<name>' expected near '='", err)
    end)

    it("points .loc at the kernel's line when the body tail-calls its last instruction", function()
      local path = script('local pyptx = require "pyptx"\nreturn pyptx.kernel "t" { arch = "sm_80",\n  function() return pyptx.ptx.ret() end }\n')
      local out, _, rc = luaptx("ptx", path)
      os.remove(path)
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
      os.remove(path)
      assert.equal(3, rc)
      assert.equal("main\t1\thello\n", out)
    end)

    it("says when there is no main", function()
      local _, err, rc = luaptx("run", "spec/fixtures/vec_add.lua")
      assert.equal(1, rc)
      assert.matches("the script has no main%(args%) to run", err)
      _, err, rc = luaptx("run")
      assert.equal(1, rc)
      assert.equal("luaptx: usage: luaptx run <script.lua> [args]\n", err)
    end)
  end)

  describe("luaptx check", function()
    it("assembles each kernel and prints its resources", function()
      if not have_ptxas then pending(toolkit.missing_message("ptxas")) return end
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
      if not have_ptxas then pending(toolkit.missing_message("ptxas")) return end
      local path = script([[
local pyptx = require "pyptx"
return pyptx.kernel "broken" { arch = "sm_80", function()
  local a = pyptx.reg.scalar(pyptx.types.b32, 1)
  pyptx.ptx.inst("frobnicate.b32", a, a)
end }
]])
      local out, err, rc = luaptx("check", path)
      os.remove(path)
      assert.equal(1, rc)
      assert.matches("\nbroken%s+sm_80%s+FAILED\n", out)
      assert.matches("warning: frobnicate%.b32: opcode not in luaptx's instruction table", err)
      assert.matches("error[^\n]*%(from [^\n]*:4%)", err)
    end)

    it("assembles every example for the arch it targets", function()
      if not have_ptxas then pending(toolkit.missing_message("ptxas")) return end
      local p = io.popen("ls examples/*/*.lua 2>/dev/null")
      local n = 0
      for path in p:lines() do
        local dir = path:match("^examples/([^/]+)/")
        local want = ({ ampere = "sm_80", hopper = "sm_90a", blackwell = "sm_100a" })[dir]
        if want then
          local out, err, rc = luaptx("check", path)
          assert.equal(0, rc, path .. ":\n" .. out .. err)
          local rows = 0
          for arch in out:gmatch("\n[%w_]+%s+(sm_%w+)%s+%d+") do
            assert.equal(want, arch, path)
            rows = rows + 1
          end
          assert.is_true(rows > 0, path .. " defines no kernels")
          n = n + 1
        end
      end
      p:close()
      assert.is_true(n >= 3, "found only " .. n .. " examples")
    end)
  end)
end)

describe("luaptx compile -o DIR", function()
  local lfs = require "lfs"
  local compile = require "pyptx.compile"
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
    if not pcall(compile.compiler) then return end     -- the directory is made before the compiler is needed
    assert.equal(0, rc, err)
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
    if not pcall(compile.compiler) then
      H.pending("needs nvJitLink or ptxas (the CUDA toolkit): " .. toolkit.missing_message("ptxas"))
    end
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
