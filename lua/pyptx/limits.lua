--- The SM limits of each compute capability (CTAs, warps, registers and
-- shared memory per SM), which pyptx.tools.occupancy computes with, and
-- the one check the language and the PTX loader make against them: a
-- .minnctapersm that ptxas ignores.
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

return M
