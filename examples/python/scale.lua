-- y[i] = alpha * x[i] for i < n: a kernel with runtime scalars (alpha, n:
-- raw_params passed per call, no new trace per value) and a template value
-- to autotune (PER: elements per thread). docs/python.md calls it.
local pyptx = require "pyptx"
local reg, ptx, Tile, T = pyptx.reg, pyptx.ptx, pyptx.Tile, pyptx.types

local BLOCK = 128

return pyptx.kernel "scale" {
  arch = "sm_80",
  in_specs = { Tile("N", T.f32) }, out_specs = { Tile("N", T.f32) },
  raw_params = { { "f32", "alpha" }, { "u32", "n" } },
  params = { PER = 1 },
  block = { BLOCK },
  grid = function(p) return { math.max(1, math.ceil(p.N / (BLOCK * p.PER))) } end,
  function(X, Y, p)
    if p.PER < 1 or p.PER > 8 then error(("PER = %s; valid: 1..8"):format(tostring(p.PER)), 0) end
    local px, py = ptx.global_ptrs(X, Y)
    local alpha, n = ptx.param("alpha", T.f32), ptx.param("n", T.u32)
    local base = reg.from(ptx.special.ctaid.x(), T.u32) * (BLOCK * p.PER) + reg.from(ptx.special.tid.x(), T.u32)
    for j = 0, p.PER - 1 do
      local i = base + j * BLOCK
      ptx.if_(i:lt(n), function()
        local off, x = i:mul_wide(4), reg.scalar(T.f32)
        ptx.ld.global(x, ptx.addr(px + off))
        ptx.st.global(ptx.addr(py + off), x * alpha)
      end)
    end
    ptx.ret()
  end,
}
