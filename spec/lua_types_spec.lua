-- types/ (LuaLS annotations, spec/lua_types.lua) is current and covers
-- every public name: each module and class of docs/api.md with each of
-- its names, each key of the ptx namespace, each ISA row and each modifier
-- spelling ptx.inst takes; .luarc.json points the language server at it.
local H = require "spec.helpers"
local gen = require "spec.lua_types"
local ffi = require "ffi"
local core = require "pyptx.core"

local API, ISA = H.read(H.ROOT .. "/docs/api.md"), H.read(H.ROOT .. "/src/lpx_isa.def")

--- The names a generated file annotates: fields and functions, per class.
local function annotated(text)
  local out, cls = {}, nil
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    cls = line:match("^%-%-%-@class ([%w_.]+)") or cls
    local field = line:match("^%-%-%-@field ([%w_]+) ")
    local fn = line:match("^function [%w_]+[.:]([%w_]+)%(")
    if cls and (field or fn) then
      out[cls] = out[cls] or {}
      out[cls][field or fn] = true
    end
  end
  return out
end

--- Every class of every file of types/.
local function all_annotated()
  local out = {}
  for _, path in ipairs(H.list(H.ROOT .. "/types", "%.lua$")) do
    for cls, names in pairs(annotated(H.read(path))) do out[cls] = names end
  end
  return out
end

describe("types/ (LuaLS annotations)", function()
  it("is what spec/lua_types.lua writes now (make lua-types)", function()
    local want = gen.files(API, ISA)
    local have = {}
    for _, path in ipairs(H.list(H.ROOT .. "/types", "%.lua$")) do have[path:match("([^/]+)$")] = H.read(path) end
    for name, text in pairs(want) do assert.equal(text, have[name], "types/" .. name .. " is stale: run make lua-types") end
    for name in pairs(have) do assert.truthy(want[name], "types/" .. name .. " is no module of docs/api.md: run make lua-types") end
  end)

  it("annotates every name of every module and class docs/api.md lists", function()
    local got, missing = all_annotated(), {}
    for _, sec in ipairs(gen.api(API)) do
      local t = got[sec.title] or {}
      for _, r in ipairs(sec.rows) do
        if not t[r.name] then missing[#missing + 1] = sec.title .. "." .. r.name end
      end
      for _, name in ipairs(sec.internal) do
        if not t[name] then missing[#missing + 1] = sec.title .. "." .. name end
      end
    end
    assert.same({}, missing)
    assert.is_true(#gen.api(API) >= 20)
  end)

  it("annotates every key of the ptx namespace, every ISA row's builder and every modifier ptx.inst takes", function()
    local got, missing = all_annotated(), {}
    for k in pairs(require("pyptx").ptx) do
      if type(k) == "string" and not got["pyptx.ptx"][k] then missing[#missing + 1] = "ptx." .. k end
    end
    for i = 0, core.isa_row_count() - 1 do
      local row = ffi.string(core.isa_row_name(i))
      local first = gen.key_of(row:match("^[^.]+"))
      if not (first and got["pyptx.inst"][first]) then missing[#missing + 1] = "ptx.inst." .. row end
      for seg in row:gmatch("[^.]+") do
        local k = gen.key_of(seg)
        if k and not got["pyptx.inst.node"][k] then missing[#missing + 1] = "ptx.inst...." .. seg end
      end
    end
    local keyed = 0
    for _, s in ipairs(gen.spellings(ISA)) do
      local k = gen.key_of(s)
      if k then
        keyed = keyed + 1
        if not got["pyptx.inst.node"][k] then missing[#missing + 1] = "modifier ." .. s end
      end
    end
    assert.same({}, missing)
    assert.is_true(core.isa_row_count() >= 140 and keyed >= 200, ("%d rows, %d spellings"):format(core.isa_row_count(), keyed))
  end)

  it("names keys that spell back to their PTX modifier", function()
    local spell = require("pyptx.ptx").spell
    for _, s in ipairs { "shared::cta", "and", "global", "u32", "L2::cache_hint", "cta_group::2", "tensor.2d" } do
      local k = gen.key_of(s)
      assert.is_string(k, s)
      assert.equal(s, spell(k))
    end
    assert.equal("and_", gen.key_of("and"))
    assert.equal("shared_cta", gen.key_of("shared::cta"))
  end)

  it("is the library .luarc.json gives the language server", function()
    local luarc = require("dkjson").decode(H.read(H.ROOT .. "/.luarc.json"))
    assert.same({ "types" }, luarc["workspace.library"])
    assert.equal("LuaJIT", luarc["runtime.version"])
  end)
end)
