--- Occupancy by the CUDA occupancy rules (the CUDA Occupancy Calculator,
-- cuda_occupancy.h): resident CTAs and warps per SM for a launch shape and
-- the resources ptxas reports, per compute capability, and which resource
-- limits it. The limits are data (ARCHS), one row per compute capability.
local M = {}

--- Per compute capability: warps, CTAs, registers and shared memory per SM
-- (the largest carve-out), the most registers per thread, the largest
-- shared memory per CTA (opt-in), the register allocation unit (registers
-- per warp), the shared-memory allocation unit, and the shared memory the
-- system reserves per CTA. Source: CUDA C++ Programming Guide, "Technical
-- Specifications per Compute Capability" and the occupancy calculator.
M.ARCHS = {
  [80]  = { warps = 64, ctas = 32, regs = 65536, max_regs = 255, smem = 167936, smem_cta = 166912, reg_unit = 256, smem_unit = 128, reserved = 1024 },
  [86]  = { warps = 48, ctas = 16, regs = 65536, max_regs = 255, smem = 102400, smem_cta = 101376, reg_unit = 256, smem_unit = 128, reserved = 1024 },
  [89]  = { warps = 48, ctas = 24, regs = 65536, max_regs = 255, smem = 102400, smem_cta = 101376, reg_unit = 256, smem_unit = 128, reserved = 1024 },
  [90]  = { warps = 64, ctas = 32, regs = 65536, max_regs = 255, smem = 233472, smem_cta = 232448, reg_unit = 256, smem_unit = 128, reserved = 1024 },
  [100] = { warps = 64, ctas = 32, regs = 65536, max_regs = 255, smem = 233472, smem_cta = 232448, reg_unit = 256, smem_unit = 128, reserved = 1024 },
  [120] = { warps = 48, ctas = 32, regs = 65536, max_regs = 255, smem = 102400, smem_cta = 101376, reg_unit = 256, smem_unit = 128, reserved = 1024 },
}

--- The row for an arch ("sm_90a", "sm_100", 90); nil and the valid list when unknown.
function M.arch_row(arch)
  local sm = type(arch) == "number" and arch or tonumber(tostring(arch):match("^sm_(%d+)"))
  if sm and M.ARCHS[sm] then return M.ARCHS[sm], sm end
  local list = {}
  for k in pairs(M.ARCHS) do list[#list + 1] = "sm_" .. k end
  table.sort(list)
  return nil, ("no occupancy rules for %s; known: %s"):format(tostring(arch), table.concat(list, ", "))
end

--- Why ptxas ignores `.minnctapersm n` on arch for CTAs of at most
-- threads threads (nil: neither .maxntid nor .reqntid), or nil when an SM
-- can hold n such CTAs: ptxas's three warnings, checked against this
-- table's CTAs and warps per SM (an arch without a row: nil).
function M.minnctapersm_ignored(arch, n, threads)
  if not threads then return "neither .maxntid nor .reqntid is given" end
  local a = M.arch_row(arch)
  if not a then return nil end
  if n > a.ctas then return ("an SM of %s holds at most %d CTAs"):format(arch, a.ctas) end
  local warps = n * math.ceil(threads / 32)
  if warps > a.warps then
    return ("%d CTAs of %d threads are %d warps, and an SM of %s holds %d"):format(n, threads, warps, arch, a.warps)
  end
  return nil
end

--- The warning for `.minnctapersm n` that ptxas ignores (see
-- minnctapersm_ignored), naming kernel name; nil when it is honoured.
function M.minnctapersm_warning(name, arch, n, threads)
  local why = M.minnctapersm_ignored(arch, n, threads)
  if not why then return nil end
  return ("kernel %s: .minnctapersm %d is ignored, as ptxas ignores it: %s (it is a register-budget hint, "
    .. "never a launch condition)"):format(name, n, why)
end

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
