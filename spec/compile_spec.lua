local compile = require "pyptx.compile"
local toolkit = require "pyptx.toolkit"

local BIN = os.getenv("LUAPTX_BIN") or "./build/luaptx"

--- A valid PTX module whose kernel stores a constant c.
local function ptx_storing(c, arch)
  return (".version 8.0\n.target %s\n.address_size 64\n.visible .entry k(.param .u64 p)\n{\n"
    .. "\t.reg .b64 %%rd<3>;\n\tld.param.u64 %%rd1, [p];\n\tcvta.to.global.u64 %%rd2, %%rd1;\n"
    .. "\tst.global.u32 [%%rd2], %d;\n\tret;\n}\n"):format(arch or "sm_80", c)
end

--- Run a shell command; returns its output.
local function sh(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("*a")
  p:close()
  return out
end

local has_compiler = pcall(compile.compiler)
local nonce = 0

--- A PTX text no earlier run has compiled (so the first compile is a miss).
local function fresh_ptx()
  nonce = nonce + 1
  return ptx_storing(nonce) .. ("// %d %d %s\n"):format(os.time(), nonce, tostring({}))
end

--- Run a Lua chunk in a fresh luaptx process with the given cache dir.
local function run_lua(dir, chunk)
  local path = dir .. "/chunk.lua"
  local f = assert(io.open(path, "w"))
  f:write(chunk)
  f:close()
  return sh(("LUAPTX_CACHE_DIR=%s %s %s"):format(dir, BIN, path))
end

describe("pyptx.compile", function()
  if not has_compiler then
    pending("needs nvJitLink or ptxas (the CUDA toolkit): " .. toolkit.missing_message("ptxas"))
    return
  end

  local dir
  before_each(function()
    dir = os.tmpname()
    os.remove(dir)
    os.execute("mkdir -p " .. dir)
  end)
  after_each(function() os.execute("rm -rf " .. dir) end)

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
    local script = dir .. "/worker.lua"
    local f = assert(io.open(script, "w"))
    f:write(([[
      local compile = require "pyptx.compile"
      local which = tonumber(arg[1])
      local ptx = (%q):gsub("CONST", tostring(which %% 3))
      local c = compile.cubin(ptx, "sm_80")
      assert(c.data:sub(1, 4) == "\127ELF")
    ]]):format(ptx_storing(0):gsub("st.global.u32 %[%%rd2%], 0", "st.global.u32 [%%rd2], CONST")))
    f:close()
    local cmd = {}
    for i = 1, 8 do cmd[#cmd + 1] = ("LUAPTX_CACHE_DIR=%s %s %s %d &"):format(dir, BIN, script, i) end
    local out = sh(table.concat(cmd, " ") .. " wait")
    assert.are.equal("", out)
    local entries = 0
    for line in sh("ls " .. dir):gmatch("[^\n]+") do
      if line:match("%.cubin$") then entries = entries + 1 end
      assert.is_nil(line:match("%.tmp%."), "a temporary file was left behind: " .. line)
    end
    assert.are.equal(3, entries)
    -- every entry loads as a hit in a fresh process
    local check = sh(("LUAPTX_CACHE_DIR=%s %s %s 1"):format(dir, BIN, script))
    assert.is_nil(check:match("corrupt"))
  end)

  it("detects a truncated entry, says so once and rebuilds it", function()
    local chunk = ("print(require('pyptx.compile').cubin(%q, 'sm_80').cache_hit)"):format(ptx_storing(7))
    assert.matches("false", run_lua(dir, chunk))
    assert.matches("true", run_lua(dir, chunk))
    local entry = sh("ls " .. dir .. "/*.cubin"):gsub("%s+$", "")
    os.execute(("truncate -s 100 %s"):format(entry))
    local out = run_lua(dir, chunk)
    assert.matches("corrupt", out)
    assert.matches("false", out)
    local _, count = out:gsub("corrupt", "")
    assert.are.equal(1, count)
    assert.matches("true", run_lua(dir, chunk))
  end)

  it("lists, measures and clears the cache from the command line", function()
    local env = "LUAPTX_CACHE_DIR=" .. dir .. " "
    run_lua(dir, ("require('pyptx.compile').cubin(%q, 'sm_80')"):format(ptx_storing(11)))
    assert.matches("entries=k", sh(env .. BIN .. " cache ls"))
    assert.matches("1 entries", sh(env .. BIN .. " cache stats"))
    assert.matches("removed 1 entries", sh(env .. BIN .. " cache clear"))
    assert.matches("0 entries", sh(env .. BIN .. " cache stats"))
  end)
end)
