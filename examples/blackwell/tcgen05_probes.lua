--- tcgen05 probes (sm_100a): small kernels that each check one property of
-- the tensor-memory pipeline against a CPU reference on fresh random inputs.
--
-- accumulate: a bf16 x bf16 -> f32 D (128 x N) built by `steps` rounds of
-- tcgen05.mma (K = 16 each), every round committed to the mbarrier and
-- waited on (phase s % 2) before the next one accumulates into the same D
-- (enable_d on), so D holds the whole K = 16 * steps product only if each
-- commit/wait orders the rounds. A CTA barrier between rounds keeps a slow
-- warp from missing a phase (the parity would alias two rounds later). Helpers and layouts: tcgen05_suite.lua.
--
-- `luaptx run examples/blackwell/tcgen05_probes.lua [--summary]`.
local pyptx = require "pyptx"
local bw = require "pyptx.blackwell"
local suite = require "examples.blackwell.tcgen05_suite"
local reg, ptx, smem, Tile = pyptx.reg, pyptx.ptx, pyptx.smem, pyptx.Tile
local T = pyptx.types

local M = {}
local E = suite.ELEM.bf16

--- The accumulate probe for D = 128 x n and steps MMA rounds; returns a case.
function M.accumulate(n, steps)
  local Kd, Mt = 16 * steps, 128
  local LA = suite.layout { major = "K", swizzle = "128B", strided = Mt, bytes = Kd * 2 }
  local LB = suite.layout { major = "K", swizzle = "128B", strided = n, bytes = Kd * 2 }
  local wa, wb = LA.size / 4, LB.size / 4
  local dcols = 32
  while dcols < n do dcols = dcols * 2 end
  local idesc_v = bw.idesc { kind = "f16", a = "bf16", b = "bf16", d = "f32", M = Mt, N = n }
  local kern = suite.k("tc_probe_accumulate_" .. n .. "_" .. steps, {
    in_specs = { Tile(wa, T.u32), Tile(wb, T.u32) }, out_specs = { Tile(Mt, n, T.f32) },
  }, function(A, B, D)
    local pa, pb, pd = ptx.global_ptrs(A, B, D)
    local sA = smem.alloc(T.b8, LA.size, { align = 1024 })
    local sB = smem.alloc(T.b8, LB.size, { align = 1024 })
    local bar = smem.mbarrier(1)
    local tid0 = reg.from(ptx.special.tid.x(), T.u32)
    suite.copy_words(sA:base(), pa, 0, wa, tid0)
    suite.copy_words(sB:base(), pb, 0, wb, tid0)
    ptx.fence.proxy_async("shared::cta")
    ptx.if_(tid0:eq(0), function() ptx.mbarrier.init(bar[0], 1) end)
    suite.with_tmem(dcols, 1, function(taddr, tid, warp)
      local tc = ptx.tcgen05
      local issuer = tid:eq(0)
      local idesc = reg.scalar(T.b32, idesc_v)
      local ad = bw.smem_desc_reg(sA:base(), { lbo = LA.lbo, sbo = LA.sbo, swizzle = LA.swizzle })
      local bd = bw.smem_desc_reg(sB:base(), { lbo = LB.lbo, sbo = LB.sbo, swizzle = LB.swizzle })
      for s = 0, steps - 1 do
        ptx.if_(issuer, function()
          local aoff, boff = LA.start(0, 32 * s), LB.start(0, 32 * s)
          tc.mma { d = taddr, a = aoff == 0 and ad or ad + aoff / 16, b = boff == 0 and bd or bd + boff / 16,
                   idesc = idesc, kind = "f16", enable_d = s == 0 and -issuer or issuer }
          tc.commit { mbar = bar[0] }
        end)
        ptx.mbarrier.wait(bar[0], s % 2)
        tc.fence_after_thread_sync()
        if s < steps - 1 then           -- every thread saw phase s before round s + 1 can complete it again
          tc.fence_before_thread_sync()
          ptx.bar_sync(0)
          tc.fence_after_thread_sync()
        end
      end
      local lanes = taddr + warp * bw.tmem_offset(32, 0)
      local prow = pd + (tid * n):mul_wide(4)
      suite.read_lanes(lanes, n, function(col, r) ptx.inst.st.global.b32(ptx.addr(prow, col * 4), r) end)
    end)
  end)
  local function inputs(seed)
    math.randomseed(seed or 1)
    local a, b = {}, {}
    for i = 1, Mt * Kd do a[i] = E.draw(math.random() * 2 - 1) end
    for i = 1, n * Kd do b[i] = E.draw(math.random() * 2 - 1) end
    return { a = a, b = b }
  end
  local function args(inp)
    return { { suite.operand_words(inp.a, Mt, Kd, "bf16", LA), { wa }, dtype = T.u32 },
             { suite.operand_words(inp.b, n, Kd, "bf16", LB), { wb }, dtype = T.u32 } }
  end
  local function reference(inp)
    local d = {}
    for i = 0, Mt - 1 do
      for j = 0, n - 1 do
        local s = 0
        for kk = 0, Kd - 1 do s = s + inp.a[i * Kd + kk + 1] * inp.b[j * Kd + kk + 1] end
        d[i * n + j + 1] = s
      end
    end
    return d
  end
  return { name = "accumulate_" .. n .. "_" .. steps, kernel = kern, inputs = inputs, args = args,
           reference = reference, tolerance = { atol = 1e-5 * Kd, rtol = 1e-4 } }
end

-- The example conventions (roundtrip, tools): build / inputs / args /
-- reference for the accumulate probe of D = 128 x n over `steps` rounds.
local made = {}
local function probe(n, steps)
  local key = n .. "_" .. steps
  made[key] = made[key] or M.accumulate(n, steps)
  return made[key]
end
function M.build(n, steps) return probe(n, steps).kernel end
function M.inputs(n, steps, seed)
  local inp = probe(n, steps).inputs(seed)
  inp.n, inp.steps = n, steps
  return inp
end
function M.args(inp) return probe(inp.n, inp.steps).args(inp) end
function M.reference(inp) return probe(inp.n, inp.steps).reference(inp) end

M.cases = { probe(32, 1), probe(32, 4), probe(64, 3) }
M.kernels = {}
for _, c in ipairs(M.cases) do M.kernels[#M.kernels + 1] = c.kernel end

--- Run case c on fresh inputs; returns ok, report.
function M.check(c, seed)
  local check = require "pyptx.tools.verify"
  local inp = c.inputs(seed or check.fresh_seed())
  return check.run { kernel = c.kernel, args = c.args(inp), reference = c.reference(inp), tolerance = c.tolerance }
end

--- `luaptx run examples/blackwell/tcgen05_probes.lua [--summary]`: every probe against its reference.
function M.main(args)
  args = args or {}
  if args[1] == "--summary" then return require("examples.lib.runner").summary(M.kernels) end
  local check = require "pyptx.tools.verify"
  local rc = 0
  for _, c in ipairs(M.cases) do
    local ok, report = M.check(c)
    rc = math.max(rc, check.report("tcgen05 probe " .. c.name, ok, report))
  end
  return rc
end

return M
