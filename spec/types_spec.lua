local types = require "pyptx.types"
local core = require "pyptx.core"
local ffi = require "ffi"

describe("pyptx.types", function()
  it("knows every PTX type with its width and kind", function()
    assert.are.equal(32, types.f32.bits)
    assert.are.equal("f", types.f32.kind)
    assert.are.equal(16, types.bf16.bits)
    assert.are.equal("p", types.pred.kind)
    assert.are.equal(8, types.u64.bytes)
  end)

  it("tells ints from floats", function()
    assert.is_true(types.is_int(types.u32))
    assert.is_true(types.is_int(types.b64))
    assert.is_false(types.is_int(types.f16))
    assert.is_true(types.is_float(types.bf16x2))
  end)

  it("looks types up by name and rejects others", function()
    assert.are.equal(types.s32, types.get("s32"))
    assert.is_nil(types.get("s33"))
    assert.is_nil(types.get("all"))
  end)

  it("holds every type of the C table, the narrow fp8/fp6/fp4 pairs too", function()
    assert.equal(core.type_count(), #types.all)
    for id = 0, core.type_count() - 1 do
      local t = types.get(ffi.string(core.type_name(id)))
      assert.equal(id, t.id)
      assert.equal(core.type_bits(id), t.bits)
    end
    for _, name in ipairs { "e2m1x2", "e2m3x2", "e3m2x2", "ue8m0x2" } do assert.equal("h", types.get(name).kind) end
  end)
end)
