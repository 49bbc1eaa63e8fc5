-- pyptx.core, the FFI binding: every C function the cdef headers declare
-- is reachable from Lua, through the table cmake/bundle.lua generates
-- from those headers (no hand-kept list in src/lpx_lua.c).
local core = require "pyptx.core"
local host = require "luaptx.core"

describe("pyptx.core", function()
  it("binds every function the cdef headers declare, and only those", function()
    local declared, n = {}, 0
    for name in host.cdef:gmatch("\n[%w_ ]-[%w_]+[%s%*]+(lpx_[%w_]+)%([^)]*%);") do
      declared[name] = true
      assert.is_truthy(core[name:sub(5)], name .. " is declared but not bound")
    end
    for name in pairs(host.fn) do
      n = n + 1
      assert.is_truthy(declared[name], name .. " is bound but not declared")
    end
    assert.is_true(n > 100)
    assert.is_truthy(core.fs_open_regular and core.mtype_name and core.mma_shape_at)
  end)
end)
