-- cmake/bcfix.lua: the build step that puts back the table-template keys
-- LuaJIT's bytecode dump drops, so the bundled modules build tables as
-- fast as the same modules loaded from source.
local H = require "spec.helpers"
local bcfix = dofile("cmake/bcfix.lua")

--- The dump of a chunk's source (stripped or not).
local function dump_of(src, strip)
  return string.dump(assert(loadstring(src, "=bcfix")), strip)
end

describe("cmake/bcfix", function()
  it("puts back the keys a constructor stores into its template, and only once", function()
    local src = "local a, b = ... return { id = a, type = b, kind = 'x' }"
    local fixed, added = bcfix.fix(dump_of(src))
    assert.equals(2, added)   -- id and type; kind has a constant value the dump keeps
    local again, added_again = bcfix.fix(fixed)
    assert.equals(0, added_again)   -- the keys are in the template now
    assert.equals(fixed, again)
    local t = assert(loadstring(fixed))(7, "u32")
    assert.same({ id = 7, type = "u32", kind = "x" }, t)
  end)

  it("leaves a dump with nothing to add byte for byte, stripped or not", function()
    for _, strip in ipairs { false, true } do
      local dump = dump_of("local x = ... return { 1, 2, x }, 2^40, 'text', 0x1p-3", strip)
      local fixed, added = bcfix.fix(dump)
      assert.equals(0, added)
      assert.equals(dump, fixed)
    end
  end)

  it("fixes nested functions and keeps their constants, upvalues and results", function()
    local src = [[
      local scale = ...
      local function make(i, name) return { index = i * scale, name = name, big = 1e300, neg = -5 } end
      return function(n)
        local out = {}
        for i = 1, n do out[i] = make(i, "r" .. i) end
        return out, { first = out[1], last = out[n] }
      end]]
    for _, strip in ipairs { false, true } do
      local fixed, added = bcfix.fix(dump_of(src, strip))
      assert.equals(4, added)   -- index, name; first, last
      local list, ends = assert(loadstring(fixed))(3)(4)
      assert.same({ index = 12, name = "r4", big = 1e300, neg = -5 }, list[4])
      assert.equals(list[1], ends.first)
      assert.equals(list[4], ends.last)
    end
  end)

  it("loads every luaptx module after the fix", function()
    local n, added = 0, 0
    for _, dir in ipairs { "/lua/pyptx", "/bin" } do
      for _, path in ipairs(H.find(H.ROOT .. dir, "%.lua$")) do
        local fixed, k = bcfix.fix(string.dump(assert(loadfile(path))))
        assert(loadstring(fixed, "=" .. path), path)
        n, added = n + 1, added + k
      end
    end
    assert.is_true(n > 30)
    assert.is_true(added > 100)   -- the modules build tables with computed fields everywhere
  end)

  it("refuses what is not a LuaJIT dump", function()
    assert.has_error(function() bcfix.fix("return 1") end, "not a LuaJIT bytecode dump")
  end)
end)
