--- Occupancy by the CUDA occupancy rules (the CUDA Occupancy Calculator,
-- cuda_occupancy.h): resident CTAs and warps per SM for a launch shape and
-- the resources ptxas reports, per compute capability, and which resource
-- limits it. The limits are data (ARCHS), one row per compute capability.
local sm_limits = require "pyptx.limits"

local M = {}

--- Per compute capability: the SM limits (pyptx.limits, which the
-- language and the loader share), and the row of an arch.
M.ARCHS = sm_limits.ARCHS
M.arch_row = sm_limits.arch_row

--- Round x up to a multiple of unit.
local function round_up(x, unit) return math.ceil(x / unit) * unit end

--- Occupancy of a launch: t = { arch, threads (per CTA), registers (per thread),
-- smem (static + dynamic bytes per CTA) }. Returns { ctas, warps, occupancy
-- (0..1), limits = { warps, ctas, registers, smem } (CTAs each allows),
-- limiter (the names of the smallest, joined by +) } or nil and why.
function M.compute(t)
  local a, err = M.arch_row(t.arch)
  if not a then return nil, err end
  local wpc = math.ceil(t.threads / 32)
  if wpc < 1 or t.threads > 1024 then return nil, ("%d threads per CTA: valid 1..1024"):format(t.threads) end
  local regs = t.registers or 0
  if regs > a.max_regs then return nil, ("%d registers per thread: the most is %d"):format(regs, a.max_regs) end
  local limits = { warps = math.floor(a.warps / wpc), ctas = a.ctas }
  -- registers: allocated per warp in units, from each of the 4 SM sub-partitions
  if regs > 0 then
    local per_warp = round_up(regs * 32, a.reg_unit)
    limits.registers = math.floor(math.floor(a.regs / 4 / per_warp) * 4 / wpc)
  else
    limits.registers = limits.ctas
  end
  local smem = t.smem or 0
  if smem > a.smem_cta then
    return nil, ("%d bytes of shared memory per CTA: the most is %d"):format(smem, a.smem_cta)
  end
  if smem > 0 then
    limits.smem = math.floor(a.smem / round_up(smem + a.reserved, a.smem_unit))
  else
    limits.smem = limits.ctas
  end
  local ctas, names = math.huge, {}
  for _, k in ipairs { "warps", "registers", "smem", "ctas" } do ctas = math.min(ctas, limits[k]) end
  local used = { warps = true, registers = regs > 0, smem = smem > 0, ctas = true }   -- an unused resource limits nothing
  for _, k in ipairs { "warps", "registers", "smem", "ctas" } do
    if limits[k] == ctas and used[k] then names[#names + 1] = k end
  end
  local limiter = table.concat(names, "+")
  return { ctas = ctas, warps = ctas * wpc, occupancy = ctas * wpc / a.warps, limits = limits, limiter = limiter,
           max_warps = a.warps }
end

return M
