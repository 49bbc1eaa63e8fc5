-- The Lua library's layers (docs/architecture.md): lua/pyptx/core/ (the
-- FFI binding and OS helpers), lua/pyptx/ (the kernel language),
-- lua/pyptx/runtime/ (devices, tensors, launches) and lua/pyptx/tools/
-- (tuning, verification, transpile support), with the public entry
-- `pyptx` (init.lua) on top. Every module's requires point down or
-- sideways, and none is made inside a function (no cycle dodged by a late
-- require): read from the modules' source and their bytecode.
local H = require "spec.helpers"
local bit = require "bit"
local jutil = require "jit.util"
local vmdef = require "jit.vmdef"

-- Layers, lowest first; the entry module may require any of them.
local RANK = { core = 1, language = 2, runtime = 3, tools = 4, entry = 5 }
local ORDER = "tools -> runtime -> language -> core"

--- The module name of a file under lua/ (a/init.lua is module a).
local function module_of(path)
  return (path:match("^lua/(.-)%.lua$"):gsub("/init$", ""):gsub("/", "."))
end

--- The modules that are old names kept for a release (their file calls
-- pyptx.deprecated's warn): entries like pyptx itself, since the module
-- each one forwards to may be in any layer.
local ALIASES = {}
for _, path in ipairs(H.find(H.ROOT .. "/lua/pyptx", "%.lua$")) do
  if H.read(path):match('require%("pyptx%.deprecated"%)%.warn%(') then
    ALIASES[(path:match("/lua/(.-)%.lua$"):gsub("/", "."))] = true
  end
end

--- The layer of a pyptx module, or nil for a directory no layer names.
local function layer_of(name)
  if name == "pyptx" or ALIASES[name] then return "entry" end
  local sub = name:match("^pyptx%.([%w_]+)%.") or name:match("^pyptx%.([%w_]+)$")
  if sub == "core" or sub == "runtime" or sub == "tools" then return sub end
  if name:match("^pyptx%.[%w_]+$") then return "language" end
  return nil
end

--- Every Lua file of the library, relative to the repository root.
local function modules()
  local out = {}
  for _, p in ipairs(H.find(H.ROOT .. "/lua/pyptx", "%.lua$")) do out[#out + 1] = p:sub(#H.ROOT + 2) end
  return out
end

--- The modules a file requires (any quoting, also through pcall), with lines.
local function requires_of(text)
  local out, n = {}, 0
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    local code = line:gsub("%-%-.*$", "")
    for name in code:gmatch("require%s*%(?%s*[\"']([%w_.]+)[\"']") do out[#out + 1] = { name = name, line = n } end
    for name in code:gmatch("require%s*,%s*[\"']([%w_.]+)[\"']") do out[#out + 1] = { name = name, line = n } end
  end
  return out
end

-- The GGET opcode: how a function reads the global `require`.
local GGET
for op = 0, #vmdef.bcnames / 6 - 1 do
  if vmdef.bcnames:sub(op * 6 + 1, op * 6 + 6) == "GGET  " then GGET = op end
end

--- The lines where a function nested in chunk fn reads the global
-- `require` (the main chunk's own reads are its top-level requires).
local function nested_requires(fn, nested, out)
  local info = jutil.funcinfo(fn)
  for pc = 1, info.bytecodes - 1 do
    local ins = jutil.funcbc(fn, pc)
    if nested and bit.band(ins, 0xff) == GGET and jutil.funck(fn, -bit.rshift(ins, 16) - 1) == "require" then
      out[#out + 1] = jutil.funcinfo(fn, pc).currentline
    end
  end
  for i = 1, info.gcconsts do
    local k = jutil.funck(fn, -i)
    if type(k) == "proto" then nested_requires(k, true, out) end
  end
  return out
end

describe("the Lua library's layers", function()
  local files = modules()

  it("finds the library's modules in every layer", function()
    local seen = {}
    for _, path in ipairs(files) do seen[layer_of(module_of(path)) or "?"] = true end
    assert.same({ core = true, language = true, runtime = true, tools = true, entry = true }, seen)
  end)

  it("puts every module in a layer", function()
    local bad = {}
    for _, path in ipairs(files) do
      if not layer_of(module_of(path)) then bad[#bad + 1] = path .. ": in no layer (core/, runtime/, tools/ or lua/pyptx/)" end
    end
    assert.same({}, bad)
  end)

  it("has no require inside a function", function()
    local bad = {}
    for _, path in ipairs(files) do
      for _, line in ipairs(nested_requires(assert(loadfile(H.ROOT .. "/" .. path)), false, {})) do
        bad[#bad + 1] = ("%s:%d: require inside a function; require at the top of the module"):format(path, line)
      end
    end
    assert.same({}, bad)
  end)

  it("has every require point down a layer or within one", function()
    local bad = {}
    for _, path in ipairs(files) do
      local from = module_of(path)
      for _, r in ipairs(requires_of(H.read(H.ROOT .. "/" .. path))) do
        local to = layer_of(r.name)
        if to and r.name:match("^pyptx") and RANK[to] > RANK[layer_of(from)] then
          bad[#bad + 1] = ("%s:%d: %s (%s) requires %s (%s), a layer above it; dependencies point %s")
            :format(path, r.line, from, layer_of(from), r.name, to, ORDER)
        end
      end
    end
    assert.same({}, bad)
  end)

  --- The chunk name each module loads under, from luaptx's own searcher
  -- (the bundle, or LUAPTX_LUA_DIR in development mode when env sets it).
  local function chunk_names(env)
    local names = {}
    for i, path in ipairs(files) do names[i] = module_of(path) end
    local script = H.write(H.temp_dir() .. "/chunks.lua", [[
for _, name in ipairs(arg) do
  local found = "not found"
  for i = 2, #package.loaders do
    local f = package.loaders[i](name)
    if type(f) == "function" then found = debug.getinfo(f, "S").source break end
  end
  print(name, found)
end
]])
    local argv = { script }
    for _, n in ipairs(names) do argv[#argv + 1] = n end
    local out, err, rc = H.luaptx(argv, { env = env })
    assert.equal(0, rc, err)
    local got = {}
    for name, src in out:gmatch("([%w_.]+)\t([^\n]*)") do got[name] = src end
    return got
  end

  it("bundles every module into the binary under its name", function()
    local got = chunk_names { LUAPTX_LUA_DIR = false }
    for _, path in ipairs(files) do assert.equal("@" .. path, got[module_of(path)]) end
  end)

  it("loads every module from LUAPTX_LUA_DIR in development mode", function()
    local got = chunk_names { LUAPTX_LUA_DIR = H.ROOT .. "/lua" }
    for _, path in ipairs(files) do assert.equal("@" .. H.ROOT .. "/" .. path, got[module_of(path)]) end
  end)

  it("locates an error raised in a runtime/ or tools/ module at the user's line, also from LUAPTX_LUA_DIR", function()
    local script = H.write(H.temp_dir() .. "/user.lua", [[
local ok, err = pcall(function()
  require("pyptx.tools.verify").run { kernel = 1 }
end)
print(err)
]])
    for _, dir in ipairs { false, H.ROOT .. "/lua" } do
      local out = H.luaptx({ script }, { env = { LUAPTX_LUA_DIR = dir } })
      assert.equal(script .. ":2: verify.run: field kernel must be a table; got 1\n", out)
    end
  end)

  it("matches the layer map in docs/architecture.md, module for module", function()
    local documented, actual = {}, {}
    for layer, names in H.read(H.ROOT .. "/docs/architecture.md"):gmatch("\n| (%l+) | `pyptx/[%l/]*` | ([^\n]*) |") do
      for name in names:gsub("%b()", ""):gmatch("`([%w_]+)`") do documented[#documented + 1] = layer .. " " .. name end
    end
    for _, path in ipairs(files) do
      local layer = layer_of(module_of(path))
      if layer ~= "entry" then actual[#actual + 1] = layer .. " " .. path:match("([%w_]+)%.lua$") end
    end
    table.sort(documented)
    table.sort(actual)
    assert.same(actual, documented)
  end)

  it("loads from the bundle alone: no Lua module need be installed where the library runs", function()
    local out, err, rc = H.luaptx({ "-e", 'local pyptx = require "pyptx"; require "pyptx.tools.tune"; '
      .. 'print(type(pyptx.kernel), type(package.loaded.dkjson))' },
      { env = { LUA_PATH = "/nonexistent/?.lua", LUA_CPATH = "/nonexistent/?.so", LUAPTX_LUA_DIR = false } })
    assert.are.equal(0, rc, err)
    assert.are.equal("function\ttable\n", out)
  end)

  it("tells a nested require and an upward one from sound code", function()
    local dir = H.temp_dir()
    local sound = H.write(dir .. "/sound.lua", 'local trace = require "pyptx.trace"\nreturn function() return trace end\n')
    local late = H.write(dir .. "/late.lua", "return function()\n  return pcall(require, \"pyptx.runtime\")\nend\n")
    assert.same({}, nested_requires(assert(loadfile(sound)), false, {}))
    assert.same({ 2 }, nested_requires(assert(loadfile(late)), false, {}))
    assert.same({ { name = "pyptx.runtime", line = 2 } }, requires_of(H.read(late)))
    assert.equal("runtime", layer_of("pyptx.runtime"))
    assert.equal("runtime", layer_of("pyptx.runtime.tensor"))
    assert.equal("language", layer_of("pyptx.kernel"))
    assert.equal("core", layer_of("pyptx.core"))
    assert.equal("entry", layer_of("pyptx.check"))
    assert.equal("pyptx.runtime", module_of("lua/pyptx/runtime/init.lua"))
  end)
end)
