local tma = require "pyptx.tma"

--- A valid 2-D bf16 description to start each case from.
local function base(over)
  local t = { address = 0x10000, shape = { 512, 256 }, dtype = "bf16", box = { 64, 64 }, swizzle = "128B" }
  for k, v in pairs(over or {}) do t[k] = v end
  return t
end

--- The error message of validating t, or nil when it is valid.
local function err_of(t)
  local ok, e = pcall(function() tma.validate(tma.describe(t), "A") end)
  return not ok and e or nil
end

describe("pyptx.tma", function()
  it("accepts a valid 2-D bf16 map and lays dimensions out innermost first", function()
    local d = tma.validate(tma.describe(base()), "A")
    assert.are.equal(2, d.rank)
    assert.are.equal(256, tonumber(d.dims[0]))
    assert.are.equal(512, tonumber(d.dims[1]))
    assert.are.equal(512, tonumber(d.strides[0]))   -- 256 bf16 per row
    assert.are.equal(64 * 64 * 2, tma.box_bytes(d))
  end)

  it("accepts ranks 1 to 5 and rejects 6", function()
    assert.is_nil(err_of(base { shape = { 256 }, box = { 64 } }))
    assert.is_nil(err_of(base { shape = { 2, 2, 2, 8, 256 }, box = { 1, 1, 1, 8, 64 } }))
    local e = err_of(base { shape = { 2, 2, 2, 2, 8, 256 }, box = { 1, 1, 1, 1, 8, 64 } })
    assert.matches("TMA descriptor for A: rank = 6; TMA supports ranks 1 to 5", e, 1, true)
  end)

  it("rejects a global address that is not 16-byte aligned", function()
    assert.matches("global address 0x10008 is not 16-byte aligned", err_of(base { address = 0x10008 }), 1, true)
  end)

  it("rejects strides that are not multiples of 16 bytes", function()
    local e = err_of(base { shape = { 512, 100 }, box = { 64, 32 }, swizzle = "64B" })
    assert.matches("strides [0, innermost first] = 200 bytes is not a multiple of 16", e, 1, true)
  end)

  it("rejects strides of 2^40 bytes or more", function()
    local e = err_of(base { strides = { 2 ^ 40, 2 } })
    assert.matches("must be below 2^40", e, 1, true)
  end)

  it("rejects strides smaller than the dimension they step over", function()
    local e = err_of(base { strides = { 256, 2 } })
    assert.matches("is smaller than the 512 bytes dimension 0 spans", e, 1, true)
  end)

  it("rejects boxes outside 1..256", function()
    assert.matches("box [1, innermost first] = 300 must be in 1..256", err_of(base { box = { 300, 64 } }), 1, true)
    assert.matches("box [1, innermost first] = 0 must be in 1..256", err_of(base { box = { 0, 64 } }), 1, true)
  end)

  it("rejects an inner box that is not a multiple of 16 bytes", function()
    local e = err_of(base { box = { 64, 4 }, swizzle = "none" })
    assert.matches("the inner box must be a multiple of 16 bytes", e, 1, true)
  end)

  it("rejects an inner box wider than the swizzle span", function()
    local e = err_of(base { box = { 64, 128 }, swizzle = "128B" })
    assert.matches("256 bytes, wider than the 128B swizzle span (128 bytes)", e, 1, true)
    assert.is_nil(err_of(base { box = { 64, 16 }, swizzle = "32B" }))
    assert.matches("wider than the 32B swizzle span", err_of(base { box = { 64, 32 }, swizzle = "32B" }), 1, true)
  end)

  it("requires rank 3 and a 32B swizzle for a 32B interleave", function()
    assert.matches("an interleaved layout needs rank 3", err_of(base { interleave = "32B", swizzle = "32B" }), 1, true)
    local t = base { shape = { 4, 64, 16 }, box = { 1, 8, 16 }, interleave = "32B", swizzle = "none", address = 0x10000 }
    assert.matches("a 32B interleave needs swizzle 32B", err_of(t), 1, true)
  end)

  it("rejects element strides above 8", function()
    assert.matches("elem_strides [0, innermost first] = 9 must be in 1..8", err_of(base { elem_strides = { 1, 9 } }), 1, true)
  end)

  it("rejects NaN out-of-bounds fill for integer types", function()
    local e = err_of(base { dtype = "u8", box = { 64, 128 }, oob = "nan" })
    assert.matches("oob_fill = NaN needs a floating-point dtype, not u8", e, 1, true)
  end)

  it("names the valid choices for an unknown swizzle", function()
    local ok, e = pcall(tma.describe, base { swizzle = "96B" })
    assert.is_false(ok)
    assert.matches("TMA swizzle: 96B is not valid; use one of", e, 1, true)
  end)

  it("rejects a dtype TMA cannot copy", function()
    assert.matches("dtype = -1 is not a type TMA copies", err_of(base { dtype = "e4m3" }), 1, true)
  end)
end)
