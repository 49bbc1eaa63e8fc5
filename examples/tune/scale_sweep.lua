--- An autotuning sweep: y = a*x + b over a vector, with the block size and
-- the number of elements each thread handles as the template values.
-- `luaptx tune examples/tune/scale_sweep.lua --csv out.csv --plot out.svg`
local pyptx = require "pyptx"
local tensor = require "pyptx.runtime.tensor"
local kernel, reg, ptx, Tile = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.Tile
local f32, u32 = pyptx.types.f32, pyptx.types.u32

local N = 8192

--- One variant: BLOCK threads per CTA, PER elements per thread (strided by
-- the block so a warp's loads stay coalesced).
local function build(cfg)
  local BLOCK, PER = cfg.BLOCK, cfg.PER
  if N % (BLOCK * PER) ~= 0 then error(("N = %d is not a multiple of BLOCK*PER = %d"):format(N, BLOCK * PER), 0) end
  return kernel "scale" {
    arch = "sm_90a", in_specs = { Tile(N, f32) }, out_specs = { Tile(N, f32) },
    grid = { N / (BLOCK * PER) }, block = { BLOCK },
    function(X, Y)
      local px, py = ptx.global_ptrs(X, Y)
      local base = reg.from(ptx.special.ctaid.x(), u32) * (BLOCK * PER) + reg.from(ptx.special.tid.x(), u32)
      local off = base:mul_wide(4)
      local ax, ay = px + off, py + off
      for j = 0, PER - 1 do
        local v = reg.scalar(f32)
        ptx.ld.global(v, ptx.addr(ax, j * BLOCK * 4))
        ptx.st.global(ptx.addr(ay, j * BLOCK * 4), v:fma(2.0, 1.0))
      end
      ptx.ret()
    end,
  }
end

return {
  name = "scale",
  build = build,
  space = { BLOCK = { 64, 128, 256, 512 }, PER = { 1, 2, 4 } },
  prune = function(cfg) return cfg.BLOCK * cfg.PER <= 2048 end,
  inputs = function(seed) return tensor.rand({ N }, f32, { seed = seed }) end,
  reference = function(x)
    local out = {}
    for i, v in ipairs(x:values()) do out[i] = v * 2 + 1 end
    return out
  end,
  tolerance = { atol = 1e-6, rtol = 1e-6 },
  warmup = 2, reps = 10, rotate = 2,
}
