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

  it("counts ceil(box / element stride) elements per dimension, ignoring dimension 0's stride unless interleaved", function()
    local d = tma.validate(tma.describe(base { box = { 64, 64 }, elem_strides = { 3, 2 } }), "A")
    assert.are.equal(22 * 64 * 2, tma.box_bytes(d))
    d = tma.validate(tma.describe { address = 0x10000, shape = { 4, 8, 8 }, dtype = "f32", box = { 4, 8, 8 },
      elem_strides = { 1, 1, 2 }, interleave = "16B" }, "A")
    assert.are.equal(4 * 8 * 4 * 4, tma.box_bytes(d))
  end)
end)

--- A valid 4-D (NHWC) f16 im2col description to start each case from.
local function im2col(over)
  local t = { address = 0x10000, shape = { 2, 9, 14, 64 }, dtype = "f16", mode = "im2col", channels_per_pixel = 64,
    pixels_per_column = 128, lower_corner = { -1, -1 }, upper_corner = { -1, -1 }, swizzle = "128B" }
  for k, v in pairs(over or {}) do t[k] = v end
  return t
end

describe("pyptx.tma im2col maps (cuTensorMapEncodeIm2col)", function()
  it("accepts a valid map: corners innermost (W) first inside, pixels x channels bytes", function()
    local d = tma.validate(tma.describe(im2col()), "X")
    assert.are.equal(1, d.mode)
    assert.are.equal(-1, d.lower[0])
    assert.are.equal(64 * 128 * 2, tma.box_bytes(d))
    d = tma.describe(im2col { shape = { 2, 3, 4, 5, 8 }, lower_corner = { -3, -2, -1 }, upper_corner = { 1, 2, 3 },
      channels_per_pixel = 8, swizzle = "none" })
    assert.are.same({ -1, -2, -3 }, { d.lower[0], d.lower[1], d.lower[2] })
    assert.are.same({ 3, 2, 1 }, { d.upper[0], d.upper[1], d.upper[2] })
    assert.is_nil(err_of(im2col { shape = { 2, 14, 64 }, lower_corner = { -32768 }, upper_corner = { 32767 } }))
  end)

  it("needs rank 3 to 5", function()
    assert.matches("TMA descriptor for A: rank = 2; an im2col map has rank 3, 4 or 5", err_of(im2col { shape = { 14, 64 },
      lower_corner = {}, upper_corner = {} }), 1, true)
  end)

  it("bounds the pixel-box corners by rank: 3D 16-bit, 4D 8-bit, 5D 5-bit signed", function()
    assert.matches("lower_corner [W] = -129 must be in -128..127 for a rank-4 im2col map",
      err_of(im2col { lower_corner = { 0, -129 } }), 1, true)
    assert.matches("upper_corner [H] = 128 must be in -128..127 for a rank-4 im2col map",
      err_of(im2col { upper_corner = { 128, 0 } }), 1, true)
    assert.matches("lower_corner [D] = 16 must be in -16..15 for a rank-5 im2col map",
      err_of(im2col { shape = { 2, 3, 9, 14, 64 }, lower_corner = { 16, 0, 0 }, upper_corner = { 0, 0, 0 } }), 1, true)
    assert.matches("upper_corner [W] = 32768 must be in -32768..32767 for a rank-3 im2col map",
      err_of(im2col { shape = { 2, 14, 64 }, lower_corner = { 0 }, upper_corner = { 32768 } }), 1, true)
  end)

  it("needs a pixel box of non-zero area", function()
    local e = err_of(im2col { lower_corner = { 0, 5 }, upper_corner = { 0, -9 } })
    assert.matches("lower_corner/upper_corner [W] = 5/-9 leave a pixel box of 0 positions along W (dimension 14); it must have non-zero area",
      e, 1, true)
  end)

  it("bounds channels per pixel (1..256, within the swizzle span) and pixels per column (1..1024)", function()
    assert.matches("channels_per_pixel = 0 must be in 1..256", err_of(im2col { channels_per_pixel = 0 }), 1, true)
    assert.matches("channels_per_pixel = 257 must be in 1..256", err_of(im2col { channels_per_pixel = 257, swizzle = "none" }), 1, true)
    assert.matches("pixels_per_column = 1025 must be in 1..1024", err_of(im2col { pixels_per_column = 1025 }), 1, true)
    assert.matches("channels_per_pixel = 128 elements is 256 bytes, wider than the 128B swizzle span (128 bytes)",
      err_of(im2col { channels_per_pixel = 128 }), 1, true)
  end)

  it("names the corner count a rank takes", function()
    local ok, e = pcall(tma.describe, im2col { lower_corner = { -1 } })
    assert.is_false(ok)
    assert.matches("TMA lower_corner: a rank-4 im2col map takes 2 corner offset(s) (outermost first: H, W), got 1", e, 1, true)
    ok, e = pcall(tma.describe, im2col { mode = "col2im" })
    assert.is_false(ok)
    assert.matches("TMA mode: col2im is not valid; use one of im2col, tile, tiled", e, 1, true)
  end)
end)

