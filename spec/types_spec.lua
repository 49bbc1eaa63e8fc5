local types = require "pyptx.types"

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
end)
