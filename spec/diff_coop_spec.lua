-- Differential tests against nvcc for warp collectives whose lanes pass
-- different member masks in one instruction: the tiles of
-- cooperative_groups::tiled_partition<4/8/16> (spec/fixtures/cuda/diff_coop.cu,
-- compiled for sm_80 and sm_90a) each reduce, shuffle, vote and match among
-- their own lanes. References from the cooperative groups' definitions.
-- oracle: nvcc: the kernels run are nvcc's PTX of cooperative_groups code (spec/fixtures/cuda/diff_coop.cu); the references follow their definitions
local bit = require "bit"
local pyptx = require "pyptx"
local tensor = require "pyptx.runtime.tensor"
local H = require "spec.helpers"

local types = pyptx.types

local device = H.diff_device

local u32 = H.u32

--- The nine results of tile_ops for tile width W, for thread t.
local function tile_ref(vals, t, W)
  local lane = t % 32
  local base = t - lane % W
  local function at(i) return vals[base + i + 1] end
  local me = lane % W
  local sum, mx, ballot, any, all, match = 0, 0, 0, 0, 1, 0
  for i = 0, W - 1 do
    local v = at(i)
    sum, mx = sum + v, math.max(mx, v)
    if bit.band(v, 1) ~= 0 then ballot = ballot + 2 ^ i end
    if bit.band(v, 2) ~= 0 then any = 1 end
    if bit.band(v, 4) == 0 then all = 0 end
    if bit.band(v, 3) == bit.band(at(me), 3) then match = match + 2 ^ i end
  end
  return { u32(sum), mx, at(1), at(bit.bxor(me, W / 2)), me + 1 < W and at(me + 1) or at(me), ballot, any, all, match }
end

for _, arch in ipairs { "sm80", "sm90a" } do
  describe("nvcc " .. arch .. " cooperative groups tiles", function()
    it("reduce, shfl, shfl_xor, shfl_down, ballot, any, all and match_any in tiles of 4, 8 and 16 lanes", function()
      local n = 256
      local r, vals = H.rng(97), {}
      for i = 1, n do vals[i] = u32(r()) end
      local mod = pyptx.load_ptx(("spec/fixtures/ptx/nvcc/diff_coop_%s.ptx"):format(arch))
      local out = tensor.empty({ 27 * n }, types.u32, device())
      out:fill_bytes(0xff)
      mod.tiles { grid = 2, block = 128, args = { tensor.from_table(vals, types.u32, { n }, device()), out, n }, device = device() }
      local got = out:to_host()
      for t = 0, n - 1 do
        for s, W in ipairs { 4, 8, 16 } do
          local want = tile_ref(vals, t, W)
          for j = 1, 9 do
            local k = (s - 1) * 9 + j - 1
            local g = tonumber(got[k * n + t])
            assert(g == want[j], ("tiles of %d, result %d, thread %d: got 0x%08x, expected 0x%08x"):format(W, j, t, g, want[j]))
          end
        end
      end
    end)
  end)
end
