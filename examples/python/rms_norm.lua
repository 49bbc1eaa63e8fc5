--- RMS norm for the Python examples and tests, forward and backward, on
-- any batch B and width N (symbolic dims bound from the tensors):
--
--   y[b, j]  = x[b, j] * r[b] * w[j],   r[b] = (mean_j x[b, j]^2 + eps)^-1/2
--   dx[b, j] = r[b] w[j] dy[b, j] - x[b, j] r[b]^3 / N * sum_k dy[b, k] w[k] x[b, k]
--   dw[j]    = sum_b dy[b, j] x[b, j] r[b]
--
-- rms_norm_fwd (f32) and rms_norm_fwd_f64 return y and r (r is saved for
-- the backward); rms_norm_bwd and rms_norm_bwd_f64 take x, w, r, dy and
-- return dx, dw. One thread per row keeps them simple rather than fast
-- (examples/hopper/rms_norm.lua is the fast forward); the backward's
-- thread i computes row i of dx and column i of dw. `noop` does no work:
-- bench/python_overhead.py times the call path with it.
local pyptx = require "pyptx"
local reg, ptx, Tile, T = pyptx.reg, pyptx.ptx, pyptx.Tile, pyptx.types

local THREADS = 32

--- Blocks of THREADS threads covering n items.
local function blocks(n) return { math.max(1, math.ceil(n / THREADS)), 1, 1 } end

--- This thread's global index (u32).
local function global_index()
  local tid = reg.from(ptx.special.tid.x(), T.u32)
  local cta = reg.from(ptx.special.ctaid.x(), T.u32)
  return cta:fma(THREADS, tid)
end

--- Load one element of type ty at base + i * size.
local function load(ty, base, i)
  local v = reg.scalar(ty)
  ptx.ld.global(v, ptx.addr(base + i:mul_wide(ty.bits / 8)))
  return v
end

--- r = 1 / sqrt(sum / N + eps), rounded (not approximate) for gradcheck.
local function rstd_of(ty, ss, n, eps)
  local ms, r = reg.scalar(ty), reg.scalar(ty)
  ptx.inst.fma.rn[ty.name](ms, ss, 1 / n, eps)
  ptx.inst.sqrt.rn[ty.name](ms, ms)
  ptx.inst.div.rn[ty.name](r, 1.0, ms)
  return r
end

--- The forward kernel for element type ty.
local function forward(name, ty)
  return pyptx.kernel(name) {
    arch = "auto",
    in_specs = { Tile("B", "N", ty), Tile("N", ty) },
    out_specs = { Tile("B", "N", ty), Tile("B", ty) },
    params = { eps = 1e-6 }, block = { THREADS, 1, 1 },
    grid = function(v) return blocks(v.B) end,
    function(X, W, Y, R, v)
      local px, pw, py, pr = ptx.global_ptrs(X, W, Y, R)
      local row = global_index()
      ptx.if_(row:lt(v.B), function()
        local first = row:mul_wide(v.N * ty.bits / 8)
        local xa, ya = px + first, py + first
        local ss = reg.scalar(ty, 0)
        ptx.range(0, v.N, function(j)
          local x = load(ty, xa, j)
          ptx.inst.fma.rn[ty.name](ss, x, x, ss)
        end)
        local r = rstd_of(ty, ss, v.N, v.eps)
        ptx.st.global(ptx.addr(pr + row:mul_wide(ty.bits / 8)), r)
        ptx.range(0, v.N, function(j)
          local y = load(ty, xa, j) * r * load(ty, pw, j)
          ptx.st.global(ptx.addr(ya + j:mul_wide(ty.bits / 8)), y)
        end)
      end)
      ptx.ret()
    end,
  }
end

--- The backward kernel for element type ty: thread i does row i of dx
-- and column i of dw.
local function backward(name, ty)
  local size = ty.bits / 8
  return pyptx.kernel(name) {
    arch = "auto",
    in_specs = { Tile("B", "N", ty), Tile("N", ty), Tile("B", ty), Tile("B", "N", ty) },
    out_specs = { Tile("B", "N", ty), Tile("N", ty) },
    block = { THREADS, 1, 1 },
    grid = function(v) return blocks(math.max(v.B, v.N)) end,
    function(X, W, R, DY, DX, DW, v)
      local px, pw, pr, pdy, pdx, pdw = ptx.global_ptrs(X, W, R, DY, DX, DW)
      local i = global_index()
      ptx.if_(i:lt(v.B), function()
        local first = i:mul_wide(v.N * size)
        local xa, dya, dxa = px + first, pdy + first, pdx + first
        local r = load(ty, pr, i)
        local dot = reg.scalar(ty, 0)
        ptx.range(0, v.N, function(j)
          ptx.inst.fma.rn[ty.name](dot, load(ty, dya, j) * load(ty, pw, j), load(ty, xa, j), dot)
        end)
        local c = dot * r * r * r * (1 / v.N)
        ptx.range(0, v.N, function(j)
          local x, g = load(ty, xa, j), load(ty, dya, j) * load(ty, pw, j) * r
          ptx.st.global(ptx.addr(dxa + j:mul_wide(size)), g - x * c)
        end)
      end)
      ptx.if_(i:lt(v.N), function()
        local acc = reg.scalar(ty, 0)
        ptx.range(0, v.B, function(b)
          local at = b:mul_wide(v.N * size) + i:mul_wide(size)
          local x, dy = reg.scalar(ty), reg.scalar(ty)
          ptx.ld.global(x, ptx.addr(px + at))
          ptx.ld.global(dy, ptx.addr(pdy + at))
          ptx.inst.fma.rn[ty.name](acc, dy * x, load(ty, pr, b), acc)
        end)
        ptx.st.global(ptx.addr(pdw + i:mul_wide(size)), acc)
      end)
      ptx.ret()
    end,
  }
end

return {
  forward("rms_norm_fwd", T.f32), forward("rms_norm_fwd_f64", T.f64),
  backward("rms_norm_bwd", T.f32), backward("rms_norm_bwd_f64", T.f64),
  pyptx.kernel "noop" {
    arch = "sm_80", in_specs = { Tile("N", T.f32) }, out_specs = { Tile("N", T.f32) },
    function() ptx.ret() end,
  },
}
