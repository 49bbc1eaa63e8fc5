local compile = require "pyptx.runtime.compile"
local sys = require "pyptx.core.sys"
local H = require "spec.helpers"

--- A valid PTX module whose kernel stores a constant c.
local function ptx_storing(c, arch)
  return (".version 8.0\n.target %s\n.address_size 64\n.visible .entry k(.param .u64 p)\n{\n"
    .. "\t.reg .b64 %%rd<3>;\n\tld.param.u64 %%rd1, [p];\n\tcvta.to.global.u64 %%rd2, %%rd1;\n"
    .. "\tst.global.u32 [%%rd2], %d;\n\tret;\n}\n"):format(arch or "sm_80", c)
end

--- A PTX module ptxas and nvJitLink reject (an undeclared register).
local BAD_PTX = ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\n"
  .. "\t.reg .b32 %r<2>;\n\tadd.u32 %r1, %r9, 1;\n\tret;\n}\n"

local has_compiler, no_compiler = pcall(compile.compiler)
local nonce = 0

--- A PTX text no earlier run has compiled (so the first compile is a miss).
local function fresh_ptx()
  nonce = nonce + 1
  return ptx_storing(nonce) .. ("// %d %d %s\n"):format(os.time(), nonce, tostring({}))
end

--- Run a Lua chunk in a fresh luaptx process with env edits (a string env
-- is the cache dir); a time-out so a hang fails the test instead of the run.
-- Returns stdout and stderr merged, and the exit status.
local function run_lua(env, chunk)
  if type(env) == "string" then env = { LUAPTX_CACHE_DIR = env } end
  local path = H.temp_file(chunk, ".lua")
  local res = H.run({ H.BIN, path }, { env = env, merge = true, timeout = 20 })
  assert(not res.timed_out, "luaptx did not finish in 20 s (a blocking open?): " .. res.stdout)
  return res.stdout, res.status
end

--- A chunk that compiles ptx and prints "key hit size".
local function compiling(ptx)
  return ("local c = require('pyptx.runtime.compile').cubin(%q, 'sm_80')\n"
    .. "print(c.key, c.cache_hit, c.size, c.data:sub(1, 4) == '\\127ELF')\n"):format(ptx)
end

--- The permission bits of path as octal digits ("600"), not following links.
local function mode(path)
  return H.run({ "stat", "-c", "%a", path }).stdout:gsub("%s+$", "")
end

describe("the PTX compiler search", function()
  it("finds no compiler when CUDA_HOME names an empty directory (nvJitLink is not taken from the loader path)", function()
    local empty = H.temp_dir()
    local out = H.luaptx({ "-e", "print(pcall(require('pyptx.runtime.compile').compiler))" },
      { env = { CUDA_HOME = empty, CUDA_PATH = false, PATH = empty }, merge = true })
    assert.matches("^false\tno PTX compiler: neither libnvJitLink nor ptxas was found", out)
  end)
end)

describe("pyptx.runtime.compile", function()
  if not has_compiler then pending((tostring(no_compiler):gsub("^[^:\n]+:%d+: ", ""))) return end

  local dir
  before_each(function() dir = H.temp_dir() end)
  after_each(H.cleanup)

  it("compiles PTX to an ELF cubin and hits the cache the second time", function()
    local ptx = fresh_ptx()
    local a = compile.cubin(ptx, "sm_80")
    assert.are.equal("\127ELF", a.data:sub(1, 4))
    assert.is_false(a.cache_hit)
    local b = compile.cubin(ptx, "sm_80")
    assert.is_true(b.cache_hit)
    assert.are.equal(a.data, b.data)
    assert.are.equal(a.key, b.key)
  end)

  it("keys entries on the arch and the options", function()
    local ptx = fresh_ptx()
    local a = compile.cubin(ptx, "sm_80")
    local b = compile.cubin(ptx, "sm_80", { opt_level = 0 })
    assert.are_not.equal(a.key, b.key)
    assert.is_false(b.cache_hit)
  end)

  it("reports a compile error with the kept PTX and the Lua line of the failing instruction", function()
    local ptx = ".version 8.0\n.target sm_80\n.address_size 64\n\t.file\t1 \"my_kernel.lua\"\n"
      .. ".visible .entry k()\n{\n\t.reg .b32 %r<2>;\n\t.loc\t1 42 1\n\tadd.u32 %r1, %r7, 1;\n\tret;\n}\n"
    local ok, err = pcall(compile.cubin, ptx, "sm_80")
    assert.is_false(ok)
    assert.matches("kept at", err)
    assert.matches("from my_kernel.lua:42", err, 1, true)
  end)

  it("lets 8 processes compile the same and different kernels at once without a broken entry", function()
    local script = H.temp_file(([[
      local compile = require "pyptx.runtime.compile"
      local which = tonumber(arg[1])
      local ptx = (%q):gsub("CONST", tostring(which %% 3))
      local c = compile.cubin(ptx, "sm_80")
      assert(c.data:sub(1, 4) == "\127ELF")
    ]]):format(ptx_storing(0):gsub("st.global.u32 %[%%rd2%], 0", "st.global.u32 [%%rd2], CONST")), ".lua")
    -- xargs (no shell) starts the 8 workers at once
    local res = H.run({ "xargs", "-P", "8", "-n", "1", H.BIN, script },
      { input = "1\n2\n3\n4\n5\n6\n7\n8\n", env = { LUAPTX_CACHE_DIR = dir }, merge = true, timeout = 60 })
    assert.are.equal("", res.stdout)
    assert.are.equal(0, res.status)
    assert.are.equal(3, #H.list(dir, "%.cubin$"))
    assert.are.same({}, H.list(dir, "%.tmp"), "a temporary file was left behind")
    -- every entry loads as a hit in a fresh process
    local check = H.run({ H.BIN, script, "1" }, { env = { LUAPTX_CACHE_DIR = dir }, merge = true }).stdout
    assert.is_nil(check:match("corrupt"))
  end)

  it("detects a truncated entry, says so once and rebuilds it", function()
    local chunk = compiling(ptx_storing(7))
    assert.matches("false", run_lua(dir, chunk))
    assert.matches("true", run_lua(dir, chunk))
    local entry = H.list(dir, "%.cubin$")[1]
    H.run { "truncate", "-s", "100", entry }
    local out = run_lua(dir, chunk)
    assert.matches("corrupt", out)
    assert.matches("false", out)
    local _, count = out:gsub("corrupt", "")
    assert.are.equal(1, count)
    assert.matches("true", run_lua(dir, chunk))
  end)

  it("lists, measures and clears the cache from the command line", function()
    local env = { env = { LUAPTX_CACHE_DIR = dir } }
    run_lua(dir, ("require('pyptx.runtime.compile').cubin(%q, 'sm_80')"):format(ptx_storing(11)))
    assert.matches("entries=k", H.luaptx({ "cache", "ls" }, env))
    assert.matches("1 entries", H.luaptx({ "cache", "stats" }, env))
    run_lua(dir, compiling(BAD_PTX))                       -- kept under failed/
    H.write(dir .. "/0123.cubin.tmp-old", "a crashed writer's leftover")
    H.run { "touch", "-d", "1 hour ago", dir .. "/0123.cubin.tmp-old" }
    H.write(dir .. "/4567.cubin.tmp-new", "a writer still running")
    assert.equal("directory", sys.kind(dir .. "/failed"))
    assert.matches("removed 1 entries", H.luaptx({ "cache", "clear" }, env))
    assert.matches("0 entries", H.luaptx({ "cache", "stats" }, env))
    assert.is_nil(sys.kind(dir .. "/failed"))
    assert.is_nil(sys.kind(dir .. "/0123.cubin.tmp-old"))
    assert.equal("file", sys.kind(dir .. "/4567.cubin.tmp-new"))
  end)

  it("reads LUAPTX_CACHE_MAX_MB strictly: fractions cap the cache, junk is an error naming it", function()
    local script = H.temp_file('return require("pyptx").kernel "cc" { arch = "sm_80", function() require("pyptx").ptx.ret() end }', ".lua")
    local out, err, rc = H.luaptx({ "compile", script }, { env = { LUAPTX_CACHE_DIR = dir, LUAPTX_CACHE_MAX_MB = "abc" } })
    assert.equal(1, rc)
    assert.equal("luaptx: LUAPTX_CACHE_MAX_MB=abc: not a number; valid: a number in 0.000976562..1e+09 (MiB)\n", err)
    assert.equal("", out)
    H.luaptx({ "compile", script }, { env = { LUAPTX_CACHE_DIR = dir, LUAPTX_CACHE_MAX_MB = "0.001" } })
    assert.matches(": 0 entries", H.luaptx({ "cache", "stats" }, { env = { LUAPTX_CACHE_DIR = dir } }))
    H.luaptx({ "compile", script }, { env = { LUAPTX_CACHE_DIR = dir, LUAPTX_CACHE_MAX_MB = "0.5" } })
    assert.matches(": 1 entries", H.luaptx({ "cache", "stats" }, { env = { LUAPTX_CACHE_DIR = dir } }))
  end)

  it("loads no compiler on a warm cache, and still names it", function()
    local ptx = fresh_ptx()
    local chunk = compiling(ptx) .. [[
      print(require('pyptx.runtime.compile').identity())
      local maps = io.open('/proc/self/maps'):read('*a')
      print(maps:find('libnvJitLink', 1, true) and 'jit mapped' or 'jit not mapped')
    ]]
    local cold = run_lua(dir, chunk)
    local warm = run_lua(dir, chunk)
    local name = cold:match("\n([^\n]+)\njit")
    assert.matches("false", cold:match("^[^\n]+"))
    assert.matches("true", warm:match("^[^\n]+"))
    assert.equal(name, warm:match("\n([^\n]+)\njit"))
    assert.matches("^nvJitLink %d+%.%d+$", name)
    assert.matches("jit mapped", cold, 1, true)
    assert.matches("jit not mapped", warm, 1, true)
  end)

  it("rebuilds the compiler's name when its memo is forged for another compiler", function()
    local chunk = compiling(fresh_ptx()) .. "print(require('pyptx.runtime.compile').identity())\n"
    run_lua(dir, chunk)
    local memo = H.find(dir, "%.identity$")[1]
    assert.truthy(memo, "no memo written")
    local facts = assert(H.read(memo)):match("^[^\n]+")
    sys.write_file(memo, "not|" .. facts .. "\nforged 1.0\n")
    local out = run_lua(dir, chunk)
    assert.not_matches("forged", out, 1, true)
    assert.matches("nvJitLink %d", out)
  end)

  it("creates the cache directory 0700 and every file in it 0600", function()
    local cache = dir .. "/new/luaptx"
    assert.matches("false", run_lua(cache, compiling(ptx_storing(12))))
    run_lua(cache, compiling(BAD_PTX))
    assert.equal("700", mode(cache))
    assert.equal("700", mode(cache .. "/failed"))
    local files = H.find(cache)
    assert.are.equal(4, #files)          -- the entry, its PTX, the compiler's name memo, the failed PTX
    for _, f in ipairs(files) do assert.equal("600", mode(f), f) end
  end)

  it("treats a FIFO in place of an entry as a miss, says so once, and rebuilds it", function()
    local chunk = compiling(ptx_storing(13))
    local key = run_lua(dir, chunk):match("^(%x+)")
    local entry = dir .. "/" .. key .. ".cubin"
    assert(os.remove(entry))
    H.run { "mkfifo", entry }
    local out = run_lua(dir, chunk)        -- the old code blocked in open() here
    assert.matches("refusing " .. entry .. ": it is not a regular file", out, 1, true)
    local _, count = out:gsub("warning", "")
    assert.are.equal(1, count)
    assert.matches("false", out)
    assert.equal("file", sys.kind(entry))
    assert.matches("true", run_lua(dir, chunk))
  end)

  it("does not follow a link planted at failed/<key>.ptx", function()
    local victim = H.temp_file("precious")
    local out, status = run_lua(dir, compiling(BAD_PTX))
    assert.are_not.equal(0, status)
    local kept = out:match("kept at (%S+%.ptx)")
    assert.equal(dir .. "/failed/", kept:sub(1, #dir + 8))
    assert(os.remove(kept))
    H.run { "ln", "-s", victim, kept }
    out = run_lua(dir, compiling(BAD_PTX))
    assert.matches("kept at " .. kept, out, 1, true)
    assert.equal("precious", H.read(victim))
    assert.equal("file", sys.kind(kept))
    assert.equal(BAD_PTX, H.read(kept))
    assert.equal("600", mode(kept))
  end)

  it("refuses an entry whose header carries another PTX's key", function()
    local a = run_lua(dir, compiling(ptx_storing(14)))
    local b = run_lua(dir, compiling(ptx_storing(15)))
    local ka, kb = a:match("^(%x+)"), b:match("^(%x+)")
    local bsize = b:match("^%x+%s+%a+%s+(%d+)")
    H.write(dir .. "/" .. kb .. ".cubin", H.read(dir .. "/" .. ka .. ".cubin"))
    local out = run_lua(dir, compiling(ptx_storing(15)))
    assert.matches("holds the entry of key " .. ka, out, 1, true)
    assert.matches(kb .. "%s+false%s+" .. bsize .. "%s+true", out)
    assert.matches("true", run_lua(dir, compiling(ptx_storing(15))))
  end)

  it("turns the cache off, with one warning, for a directory others can write", function()
    local shared = dir .. "/shared"
    sys.mkdirs(shared)
    H.run { "chmod", "777", shared }
    local out, status = run_lua(shared, compiling(ptx_storing(16)) .. compiling(ptx_storing(17)))
    assert.equal(0, status)
    assert.matches("the cubin cache is off: refusing directory " .. shared
      .. ": it is writable by group or others", out, 1, true)
    local _, count = out:gsub("warning", "")
    assert.are.equal(1, count)
    assert.matches("%x+%s+false%s+%d+%s+true\n%x+%s+false%s+%d+%s+true\n", out)
    assert.are.same({}, H.find(shared))
    local _, err, st = H.luaptx({ "cache", "stats" }, { env = { LUAPTX_CACHE_DIR = shared } })
    assert.are_not.equal(0, st)
    assert.matches("the cubin cache is off: refusing directory", err, 1, true)
  end)

  it("turns the cache off for a directory owned by another user", function()
    local res = H.run { "id", "-u" }
    if res.stdout ~= "0\n" then H.pending("needs root to chown a directory to nobody (uid 65534)") end
    local foreign = dir .. "/foreign"
    sys.mkdirs(foreign)
    H.run { "chown", "65534:65534", foreign }
    local out = run_lua(foreign, compiling(ptx_storing(18)))
    assert.matches("refusing directory " .. foreign .. ": it is owned by another user", out, 1, true)
    assert.are.same({}, H.find(foreign))
  end)

  it("compiles without a cache when HOME is unset, warning once", function()
    local env = { HOME = false, LUAPTX_CACHE_DIR = false, XDG_CACHE_HOME = false }
    local out, status = run_lua(env, compiling(ptx_storing(19)) .. compiling(ptx_storing(19)))
    assert.equal(0, status)
    assert.matches("the cubin cache is off: HOME is unset", out, 1, true)
    local _, count = out:gsub("warning", "")
    assert.are.equal(1, count)
    assert.matches("%x+%s+false.*\n%x+%s+false", out)
    local _, err, st = H.luaptx({ "cache", "ls" }, { env = env })
    assert.are_not.equal(0, st)
    assert.matches("the cubin cache is off: HOME is unset", err, 1, true)
  end)
end)
