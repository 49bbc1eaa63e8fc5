-- Differential tests against nvcc for the address-space queries: isspacep
-- (.global .shared .local .const, and .shared::cluster on sm_90) and
-- getctarank, on pointers nvcc cannot place at compile time
-- (spec/fixtures/cuda/diff_space.cu, for sm_80 and sm_90a). References from
-- the CUDA definitions of __isGlobal, __isShared, __isLocal, __isConstant,
-- __isClusterShared and __cluster_query_shared_rank.
-- oracle: nvcc: the kernels run are nvcc's PTX of CUDA C (spec/fixtures/cuda/diff_space.cu); the references follow the CUDA definitions
local pyptx = require "pyptx"
local tensor = require "pyptx.runtime.tensor"
local H = require "spec.helpers"

local types = pyptx.types

local device = H.diff_device

for _, arch in ipairs { "sm80", "sm90a" } do
  describe("nvcc " .. arch .. " address-space queries", function()
    it("__isGlobal __isShared __isLocal __isConstant (isspacep) and the cluster rank of a shared address", function()
      local n, K = 256, arch == "sm90a" and 6 or 4
      local r, xs, sel = H.rng(31), {}, {}
      for i = 1, n do xs[i], sel[i] = r(), i % 4 end
      local mod = pyptx.load_ptx(("spec/fixtures/ptx/nvcc/diff_space_%s.ptx"):format(arch))
      local out = tensor.empty({ 6 * n }, types.u32, device())
      out:fill_bytes(0xff)
      mod.spaces { grid = 2, block = 128, args = { tensor.from_table(xs, types.s32, { n }, device()),
                                                   tensor.from_table(sel, types.s32, { n }, device()), out, n }, device = device() }
      local got = out:to_host()
      for t = 0, n - 1 do
        local s = sel[t + 1] % 4
        local want = { s == 0 and 1 or 0, s == 1 and 1 or 0, s == 2 and 1 or 0, s == 3 and 1 or 0, s == 1 and 1 or 0, s == 1 and 0 or 7 }
        for k = 1, K do
          assert(tonumber(got[(k - 1) * n + t]) == want[k],
                 ("query %d, thread %d (pointer %d): got %d, expected %d"):format(k, t, s, tonumber(got[(k - 1) * n + t]), want[k]))
        end
      end
    end)
  end)
end
