-- pyptx.tile: Tile(dims..., dtype[, layout]), Layout, and the TensorSpec
-- placeholders a kernel body receives for its tensor parameters.
local pyptx = require "pyptx"
local tile = require "pyptx.tile"
local Tile, Layout, T = pyptx.Tile, pyptx.Layout, pyptx.types

describe("pyptx.tile", function()
  describe("Tile", function()
    it("keeps dims, dtype and layout (row-major by default)", function()
      local t = Tile(128, "K", T.bf16)
      assert.same({ 128, "K" }, t.dims)
      assert.equal(T.bf16, t.dtype)
      assert.equal(Layout.ROW, t.layout)
      assert.equal("Tile(128, K, bf16)", tostring(t))
      assert.equal(Layout.COL, Tile(4, 4, T.f32, Layout.COL).layout)
      assert.is_true(tile.is_tile(t))
      assert.is_false(tile.is_tile({ dims = { 1 } }))
    end)

    it("lists its symbolic dims in order", function()
      assert.same({ "M", "K" }, Tile("M", 64, "K", T.f16):symbols())
      assert.same({}, Tile(8, T.f16):symbols())
    end)

    it("resolves symbolic dims under bound values", function()
      local t = Tile("M", 64, "K", T.f16)
      assert.same({ 32, 64, 16 }, t:resolve { M = 32, K = 16 })
      local shape, missing = t:resolve { M = 32 }
      assert.is_nil(shape)
      assert.equal("K", missing)
    end)

    it("needs a dtype last, at least one dim, and positive integer dims", function()
      local ok, err = pcall(function() local t = Tile(4, 4) return t end)
      assert.is_false(ok)
      local _
      assert.matches("tile_spec.lua:%d+: Tile%(dims..., dtype%[, layout%]%): the last dim argument must be a type, got 4", err)
      _, err = pcall(function() local t = Tile(T.f32) return t end)
      assert.matches("tile_spec.lua:%d+: Tile needs at least one dimension", err)
      _, err = pcall(function() local t = Tile(4, 0, T.f32) return t end)
      assert.matches("tile_spec.lua:%d+: Tile: dimension 2 must be a positive integer or a name, got 0", err)
      _, err = pcall(function() local t = Tile(2.5, T.f32) return t end)
      assert.matches("Tile: dimension 1 must be a positive integer or a name, got 2.5", err)
    end)
  end)

  describe("TensorSpec", function()
    it("names the parameter after the kernel and position, with the resolved shape", function()
      local got = {}
      pyptx.kernel "mm" {
        arch = "sm_80", in_specs = { Tile("M", 8, T.f16), Tile(8, T.f32, Layout.COL) }, out_specs = { Tile("M", T.f32) },
        function(A, B, C, values)
          got = { A.name, A.param, B.name, C.name, A.dtype, B.layout, C.role, A.role, values.M }
          got.shape, got.numel, got.idx = A.shape, A:numel(), C.index
          got.str = tostring(B)
        end,
      }:ptx { M = 4 }
      assert.same({ "mm_param_0", "mm_param_0", "mm_param_1", "mm_param_2", T.f16, Layout.COL, "out", "in", 4 },
        { got[1], got[2], got[3], got[4], got[5], got[6], got[7], got[8], got[9] })
      assert.same({ 4, 8 }, got.shape)
      assert.equal(32, got.numel)
      assert.equal(3, got.idx)
      assert.equal("TensorSpec(mm_param_1)", got.str)
    end)
  end)
end)
