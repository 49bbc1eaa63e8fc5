-- docs/api.md, the public surface, against the code both ways: every name
-- it lists exists (a rename or removal fails here), every public name of a
-- listed module, class, the C header and the command line is listed, and
-- every old module name still works, saying once what to use instead.
local H = require "spec.helpers"

local API = H.ROOT .. "/docs/api.md"

--- The sections of api.md: { title, names = { [name] = line }, internal = set, order }.
local function sections(text)
  local out, cur, n = {}, nil, 0
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    local title = line:match("^#+ `([^`]+)`%s*$")
    if title then
      cur = { title = title, names = {}, internal = {} }
      out[#out + 1] = cur
    elseif line:match("^## ") then
      cur = { title = line:match("^## (.-)%s*$"), names = {}, internal = {} }
      out[#out + 1] = cur
    elseif cur then
      local name = line:match("^| `([%w_.]+)")
      if name and name ~= "name" then cur.names[name] = n end
      local internal = line:match("^Internal[^:]*: (.*)$")
      if internal then for k in internal:gmatch("`([%w_]+)`") do cur.internal[k] = n end end
    end
  end
  return out
end

local DOC = sections(H.read(API))

--- The section called title.
local function section(title)
  for _, s in ipairs(DOC) do if s.title == title then return s end end
  error("docs/api.md has no section " .. title)
end

local resolve = require("spec.lua_types").resolve   -- a section's module or class

--- The module sections: titles that are pyptx module or class names.
local function module_sections()
  local out = {}
  for _, s in ipairs(DOC) do
    if s.title:match("^pyptx[%w_.]*$") then out[#out + 1] = s end
  end
  return out
end

--- The sorted keys of a table that hold names.
local function sorted(set)
  local out = {}
  for k in pairs(set) do out[#out + 1] = k end
  table.sort(out)
  return out
end

describe("docs/api.md", function()
  require "pyptx"

  it("lists modules and classes", function()
    assert.is_true(#module_sections() >= 20)
  end)

  it("names only what exists, and every public name of what it lists", function()
    local missing, undocumented = {}, {}
    for _, s in ipairs(module_sections()) do
      local t = resolve(s.title)
      if type(t) ~= "table" then
        missing[#missing + 1] = ("docs/api.md: %s: no such module or class"):format(s.title)
      else
        for name, line in pairs(s.names) do
          if t[name] == nil then missing[#missing + 1] = ("docs/api.md:%d: %s.%s does not exist"):format(line, s.title, name) end
        end
        for name, line in pairs(s.internal) do
          if t[name] == nil then missing[#missing + 1] = ("docs/api.md:%d: %s.%s (internal) does not exist"):format(line, s.title, name) end
        end
        for k in pairs(t) do
          if type(k) == "string" and not k:match("^_") and not s.names[k] and not s.internal[k] then
            undocumented[#undocumented + 1] = ("%s.%s is public but not in docs/api.md: add it to its table or its Internal line"):format(s.title, k)
          end
        end
      end
    end
    table.sort(missing)
    table.sort(undocumented)
    assert.same({}, missing)
    assert.same({}, undocumented)
  end)

  it("lists every module the docs and examples require", function()
    local listed = {}
    for _, s in ipairs(module_sections()) do listed[s.title] = true end
    local files = H.find(H.ROOT .. "/docs", "%.md$")
    for _, f in ipairs(H.find(H.ROOT .. "/examples", "%.lua$")) do files[#files + 1] = f end
    files[#files + 1] = H.ROOT .. "/README.md"
    local bad = {}
    for _, path in ipairs(files) do
      local n = 0
      for line in (H.read(path) .. "\n"):gmatch("([^\n]*)\n") do
        n = n + 1
        for name in line:gmatch("require%s*%(?%s*[\"'](pyptx[%w_.]*)[\"']") do
          if not listed[name] then bad[#bad + 1] = ("%s:%d: requires %s, which docs/api.md does not list"):format(path:sub(#H.ROOT + 2), n, name) end
        end
      end
    end
    assert.same({}, bad)
  end)

  it("lists the C API of luaptx.h, function for function", function()
    local declared = {}
    for name in H.read(H.ROOT .. "/src/luaptx.h"):gmatch("[%w_*]%s*%*?(luaptx_[%w_]+)%s*%(") do declared[name] = true end
    assert.same(sorted(declared), sorted(section("C API").names))
  end)

  it("lists every command of `luaptx help`", function()
    local out, err, rc = H.luaptx { "help" }
    assert.equal(0, rc, err)
    local commands = {}
    for name in out:gmatch("\n  ([%l]+)") do commands[name] = true end
    assert.same(sorted(commands), sorted(section("Command line").names))
  end)

  it("the check finds a missing name and an unlisted one", function()
    local s = sections("### `pyptx.floats`\n| name | what |\n|---|---|\n| `to_f16(x)` | f16 |\n| `gone(x)` | was here |\n")[1]
    assert.equal("pyptx.floats", s.title)
    assert.same({ "gone", "to_f16" }, sorted(s.names))
    assert.is_nil(require("pyptx.floats").gone)
    assert.is_function(require("pyptx.floats").to_bf16)
    assert.is_nil(s.names.to_bf16)
  end)
end)

describe("deprecated module names", function()
  local renames = {}
  for name in pairs(section("Deprecated names").names) do
    local row = H.read(API):match("\n| `" .. name:gsub("%.", "%%.") .. "` | `([%w_.]+)` |")
    if name:match("^pyptx%.") then renames[name] = row end
  end

  it("lists every old name the library keeps, and each forwards to the module it names", function()
    local shims = {}
    for _, path in ipairs(H.find(H.ROOT .. "/lua/pyptx", "%.lua$")) do
      local old, new = H.read(path):match('require%("pyptx%.deprecated"%)%.warn%("([%w_.]+)", "([%w_.]+)"%)')
      if old then shims[old] = new end
    end
    assert.is_true(next(renames) ~= nil)
    assert.same(renames, shims)
  end)

  it("keeps working and says once, on stderr at the user's line, what to use instead", function()
    local lines = {}
    for old, new in pairs(renames) do
      lines[#lines + 1] = ("assert(require(%q) == require(%q), %q)"):format(old, new, old)
      lines[#lines + 1] = ("assert(require(%q) == require(%q))"):format(old, new)
    end
    local script = H.write(H.temp_dir() .. "/old.lua", table.concat(lines, "\n") .. "\nprint('ok')\n")
    local out, err, rc = H.luaptx({ script }, { env = { LUAPTX_LUA_DIR = false } })
    assert.equal(0, rc, err)
    assert.equal("ok\n", out)
    local n = 0
    for old, new in pairs(renames) do
      n = n + 1
      local want = ("luaptx: %s:%d: module '%s' is deprecated: use require \"%s\" (the old name goes in %s)\n")
        :format(script, 2 * n - 1, old, new, require("pyptx.deprecated").REMOVED_IN)
      local _, count = err:gsub(want:gsub("%p", "%%%0"), "")
      assert.equal(1, count, want .. "\nnot once in:\n" .. err)
    end
    assert.equal(n, select(2, err:gsub("\n", "")))
  end)

  it("includes the renames the issue names", function()
    assert.equal("pyptx.tools.verify", renames["pyptx.check"])
    assert.equal("pyptx.floats", renames["pyptx.half"])
    assert.equal("pyptx.runtime.tensor", renames["pyptx.tensor"])
    assert.equal("pyptx.runtime.toolkit", renames["pyptx.toolkit"])
    assert.equal("pyptx.runtime.ptx_loader", renames["pyptx.foreign"])
  end)
end)
