--- What every example script's check and main do: launch at a small size on
-- fresh random inputs, compare every element with the CPU reference, and
-- print the verdict; or print a PTX/ptxas summary of the default kernels.
local R = {}

--- Print one line per kernel: name, arch, instructions, grid/block, shared
-- memory and, when ptxas is installed, registers and spills. Shared by
-- every example's main so they all print the same table.
function R.summary(kernels)
  local toolkit = require "pyptx.runtime.toolkit"
  local have_ptxas = toolkit.find("ptxas") ~= nil
  print(("%-14s %-8s %6s %-16s %-12s %6s %6s %5s %7s"):format(
    "kernel", "arch", "insts", "grid", "block", "smem", "dyn", "regs", "spills"))
  for _, k in ipairs(kernels) do
    local s = k:specialize()
    local regs, spills = "-", "-"
    if have_ptxas then
      local ok, report, log = toolkit.ptxas(s.ptx, s.arch)
      if not ok then
        io.stderr:write(log, "\n")
        return 1
      end
      local r = report[k.name] or {}
      regs, spills = tostring(r.registers or 0), tostring((r.spill_stores or 0) + (r.spill_loads or 0))
    end
    print(("%-14s %-8s %6d %-16s %-12s %6d %6d %5s %7s"):format(k.name, s.arch, s.instructions,
      table.concat(s.grid, "x"), table.concat(s.block, "x"), s.static_smem, s.dynamic_smem, regs, spills))
  end
  if not have_ptxas then print("(" .. toolkit.missing_message("ptxas") .. "; registers not reported)") end
  return 0
end

--- M.check(...) for `luaptx run`: an error raised through this file (a
-- shape the example refuses, a launch the device refuses) is reported
-- without this file's position, which is no line of the user's.
local function run_check(M, ...)
  local res = { pcall(M.check, ...) }
  if not res[1] then error((tostring(res[2]):gsub("^[^\n]-examples/lib/runner%.lua:%d+: ", "")), 0) end
  return res[2], res[3]
end

--- Give an example module M (with build, inputs, args, reference) its
-- check(B, N, opts) and main(args, opts, kernels) for `luaptx run`.
function R.install(M, name, tolerance)
  --- Build at (B, N), launch on the current device (the emulator without a
  -- GPU) on fresh random inputs, and compare every element with M.reference.
  -- Returns ok and the comparison report (max errors, time).
  function M.check(B, N, opts)
    local check = require "pyptx.tools.verify"
    local k = M.build(B, N, opts)
    local inputs = M.inputs(B, N, check.fresh_seed(), opts and opts.fused)
    return check.run { kernel = k, args = M.args(inputs), reference = M.reference(inputs), tolerance = tolerance }
  end

  --- `luaptx run <script> [B N] [--summary]`: run at a small size and check
  -- against the CPU reference (exit status 1 on a mismatch); --summary
  -- prints the PTX/ptxas summary of the default kernels instead.
  function M.main(args, opts, kernels)
    args = args or {}
    if args[1] == "--summary" then return R.summary(kernels or M.kernels) end
    local B, N = tonumber(args[1]) or 16, tonumber(args[2]) or 1024
    local ok, report = run_check(M, B, N, opts)
    return require("pyptx.tools.verify").report(("%s(%d, %d)"):format(name, B, N), ok, report)
  end
end

--- The same for a GEMM example (build, inputs, args, reference,
-- tolerance(K)): `luaptx run <script> [M N K] [f16] [--summary]` runs at
-- 256x256x128 by default, bf16 inputs unless f16 is given.
function R.install_gemm(M, name)
  --- Build at (M, N, K), launch on fresh random inputs, compare with M.reference.
  function M.check(Md, N, K, opts)
    local check = require "pyptx.tools.verify"
    local k = M.build(Md, N, K, opts)
    local inputs = M.inputs(Md, N, K, check.fresh_seed(), opts and opts.dtype)
    return check.run { kernel = k, args = M.args(inputs), reference = M.reference(inputs), tolerance = M.tolerance(K) }
  end

  --- Run at a small size and check; --summary prints the PTX/ptxas table.
  function M.main(args)
    args = args or {}
    if args[1] == "--summary" then return R.summary(M.kernels) end
    local Md, N, K = tonumber(args[1]) or 256, tonumber(args[2]) or 256, tonumber(args[3]) or 128
    local types = require("pyptx").types
    local opts = { dtype = (args[4] == "f16") and types.f16 or types.bf16 }
    local ok, report = run_check(M, Md, N, K, opts)
    return require("pyptx.tools.verify").report(("%s(%d, %d, %d, %s)"):format(name, Md, N, K, opts.dtype.name), ok, report)
  end
end

return R
