--- `make gpu-check` (and the kit's `./luaptx bench/gpu_check.lua`, see
-- `make gpu-kit`): hardware truth in one prepared run (docs/performance.md).
-- 1. every example on the GPU against its CPU reference (`luaptx run`);
-- 2. the performance table of bench/perf.lua: GEMMs beside cuBLAS,
--    memory-bound kernels in GB/s and % of HBM peak beside a device copy,
--    flash attention, launch latency, each checked against its reference;
-- 3. where busted is installed (not in the kit): the #gpu specs and the nvcc
--    differential on the GPU.
-- Prints each step's time and writes the dated table to --out (default
-- gpu-check-DATE.md beside the binary). --dry-run runs it all on the CPU
-- emulator at small shapes (the H100's kernels, sm_90), to test the kit and
-- its timing without a GPU. Exit status: 0 all passed, 1 a step or check
-- failed, 2 no GPU (and no --dry-run).
-- usage: luaptx bench/gpu_check.lua [--dry-run] [--out FILE] [--skip-examples]
local sys = require "pyptx.core.sys"
local runtime = require "pyptx.runtime"
local toolkit = require "pyptx.runtime.toolkit"
local now = require("bench.common").now
local perf = require "bench.perf"

local opts = { out = nil }
do
  local a, i = arg or {}, 1
  while a[i] do
    if a[i] == "--dry-run" then opts.dry = true
    elseif a[i] == "--skip-examples" then opts.skip_examples = true
    elseif a[i] == "--out" and a[i + 1] then opts.out = a[i + 1]; i = i + 1
    else io.stderr:write("usage: luaptx bench/gpu_check.lua [--dry-run] [--out FILE] [--skip-examples]\n"); os.exit(2) end
    i = i + 1
  end
end

local BIN = os.getenv("LUAPTX_BIN") or (sys.exe_dir() and sys.exe_dir() .. "/luaptx") or "build/luaptx"
local EXE_DIR = sys.exe_dir() or "build"
local T0 = now()

local dev
if opts.dry then
  dev = runtime.open("emu")
else
  local ok, d = pcall(runtime.open, "cuda")
  if not ok then
    io.stderr:write("make gpu-check needs an NVIDIA GPU and its driver: ", tostring(d):gsub("^[^:\n]+:%d+: ", ""), "\n",
      "  (without one, `make test` runs everything the emulator can check; --dry-run runs this on the emulator)\n")
    os.exit(2, true)
  end
  dev = d
end
runtime.use(dev)
local CC = opts.dry and 90 or tonumber((dev.arch or "sm_0"):match("%d+"))
local CFG = perf.SHAPES[opts.dry and "emu" or "gpu"]
local DEV_ENV = opts.dry and "emu" or "cuda"

local steps, lines = {}, {}

--- Print a line now and keep it for the report file.
local function say(fmt, ...)
  local s = fmt:format(...)
  print(s)
  lines[#lines + 1] = s
end

--- Run argv as one step named title (env: edits); record and report it.
local function step(title, argv, env)
  local t0 = now()
  local res, err = sys.run(argv, { env = env, merge = true, timeout = 600 })
  local ok = res and res.status == 0
  io.write(res and res.stdout or (err .. "\n"))
  steps[#steps + 1] = { title = title, ok = ok, s = now() - t0 }
  return ok
end

--- Run fn() as one in-process step named title; record it. Returns fn's result.
local function inproc(title, fn)
  local t0 = now()
  local ok, res = pcall(fn)
  if not ok then print(("%s failed: %s"):format(title, tostring(res))) end
  steps[#steps + 1] = { title = title, ok = ok and res ~= false, s = now() - t0, err = not ok and tostring(res) or nil }
  return ok and res or nil
end

--- The example scripts this GPU runs, each "path [args...]": Blackwell
-- ones need sm_100 or newer, Hopper ones sm_90.
local function examples()
  local list = {}
  for _, dir in ipairs { "ampere", "hopper", "blackwell" } do
    if dir ~= "blackwell" or CC >= 100 then
      for _, name in ipairs { "rms_norm", "layer_norm", "softmax", "swiglu" } do
        list[#list + 1] = ("examples/%s/%s.lua"):format(dir, name)
      end
    end
  end
  for _, n in ipairs { "gemm", "gemm_pipelined", "gemm_2stage", "gemm_fast" } do list[#list + 1] = "examples/ampere/" .. n .. ".lua" end
  if CC >= 90 then
    for _, n in ipairs { "gemm", "gemm_fast", "grouped_gemm", "grouped_gemm_uniform", "flash_attention" } do
      list[#list + 1] = "examples/hopper/" .. n .. ".lua"
    end
    list[#list + 1] = "examples/hopper/flash_attention.lua 2 256 2 causal 2"    -- split-KV and its combine
  end
  if CC >= 100 then
    for _, n in ipairs { "gemm", "gemm_persistent", "gemm_no_tma", "grouped_gemm", "tcgen05_suite", "tcgen05_probes" } do
      list[#list + 1] = "examples/blackwell/" .. n .. ".lua"
    end
  end
  return list
end

--- The cuBLAS helper: the kit's prebuilt one when it runs here, else one
-- built now with nvcc beside the binary; nil and why when neither works.
local function cublas_helper()
  local kit = EXE_DIR .. "/cublas_gemm"
  if sys.kind(kit) == "file" and perf.helper(kit, { "copy", 1, 1 }) then return kit end
  local nvcc = toolkit.find("nvcc")
  if not nvcc then return nil, "the kit's cublas_gemm does not run here and " .. toolkit.missing_message("nvcc") end
  local exe = EXE_DIR .. "/cublas_gemm.local"
  local res = sys.run({ nvcc, "-O2", "-arch=compute_80", "-o", exe, "bench/cublas_gemm.cu", "-lcublas" }, { merge = true })
  if not res or res.status ~= 0 then return nil, "nvcc failed on bench/cublas_gemm.cu: " .. (res and res.stdout or "") end
  return exe
end

--- The NVIDIA driver's version (nvidia-smi), or "-".
local function driver()
  if opts.dry then return "- (emulator)" end
  local res = sys.run({ "nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader" }, { merge = true })
  return res and res.status == 0 and res.stdout:match("[%d.]+") or "-"
end

-- ------------------------------------------------------------ the run

local date = os.date("!%Y-%m-%d %H:%M UTC")
local command = "luaptx bench/gpu_check.lua" .. (opts.dry and " --dry-run" or "")
say("# luaptx gpu-check, %s", date)
say("")
say("| date | GPU | driver | command |")
say("| --- | --- | --- | --- |")
say("| %s | %s | %s | `%s` |", date, dev.name, driver(), command)
say("")
if not opts.skip_examples then
  for _, f in ipairs(examples()) do        -- "path [args...]"
    local argv = { BIN, "run" }
    for word in f:gmatch("%S+") do argv[#argv + 1] = word end
    step("example " .. f, argv, { LUAPTX_DEVICE = DEV_ENV })
  end
end
local helper, helper_why
if opts.dry then helper_why = "no GPU: the cuBLAS and copy columns need one" else helper, helper_why = cublas_helper() end

local gemm = inproc("GEMMs", function() return perf.gemm_rows(dev, CFG, CC) end) or {}
local rows = inproc("memory-bound kernels", function() return perf.row_rows(dev, CFG, CC) end) or {}
local flash = inproc("flash attention", function() return perf.flash_row(dev, CFG) end)
local latency = inproc("launch latency", function() return perf.launch_latency(dev, opts.dry and 20 or 1000) end)
if not opts.dry and sys.kind("/usr/bin/busted") == "file" then
  step("#gpu specs", { BIN, "/usr/bin/busted", "--tags=gpu", "spec" }, { LUAPTX_BIN = BIN })
  step("nvcc differential on the GPU", { BIN, "/usr/bin/busted", "spec/diff_spec.lua", "spec/diff_scalar_spec.lua" },
    { LUAPTX_BIN = BIN, LUAPTX_DIFF_DEVICE = "cuda" })
else
  print("(#gpu specs and the nvcc differential: skipped, " .. (opts.dry and "a dry run" or "no busted here (the kit)") .. ")")
end

-- ------------------------------------------------------------ the table

--- "ok" or "FAIL" for a check.
local function verdict(ok) return ok and "ok" or "FAIL" end

--- cuBLAS's TFLOP/s at a shape, or "-".
local function cublas_at(shape)
  if not helper then return "-" end
  local out = perf.helper(helper, { shape[1], shape[2], shape[3], CFG.reps })
  return out and out:match("^cublas %S+ [%d.]+ ([%d.]+)") or "-"
end

say("")
say("## GEMM, bf16 in, f32 accumulate (median of %d launches)%s", CFG.reps, helper and "" or ("; cuBLAS: " .. helper_why))
say("")
say("| kernel | M x N x K | ms | TFLOP/s | cuBLAS TFLOP/s | ours / cuBLAS | check |")
say("| --- | --- | --- | --- | --- | --- | --- |")
local theirs = {}
for _, r in ipairs(gemm) do
  local key = table.concat(r.shape, "x", 1, 3)
  theirs[key] = theirs[key] or cublas_at(r.shape)
  local t = tonumber(theirs[key])
  if r.note then say("| %s | %s%s | - | - | %s | - | %s |", r.kernel, key, r.shape.skinny and " (skinny)" or "", theirs[key], r.note)
  else
    say("| %s | %s%s | %.3f | %.4g | %s | %s | %s: %s |", r.kernel, key, r.shape.skinny and " (skinny)" or "", r.ms, r.tflops,
      theirs[key], t and ("%.2f"):format(r.tflops / t) or "-", verdict(r.ok), r.check)
  end
end
local g = perf.gpu_of(dev.name)
local copy = helper and CFG.copy_mib > 0 and perf.helper(helper, { "copy", CFG.copy_mib, CFG.reps })
local copy_gbs = copy and tonumber(copy:match("^copy %d+ [%d.]+ ([%d.]+)"))
say("")
say("## Memory-bound kernels (median of %d launches; bytes: every input read and output written once)", CFG.reps)
say("")
say("HBM peak: %s; device-to-device copy: %s", g and ("%d GB/s (%s)"):format(g.bw, g.full) or "- (unknown GPU)",
  copy_gbs and ("%.0f GB/s (cudaMemcpy of %d MiB, read + written)"):format(copy_gbs, CFG.copy_mib) or "-")
say("")
say("| kernel | B x N | ms | GB/s | %% of peak | %% of copy | check |")
say("| --- | --- | --- | --- | --- | --- | --- |")
for _, r in ipairs(rows) do
  say("| %s | %d x %d | %.4f | %.4g | %s | %s | %s: %s |", r.kernel, r.B, r.N, r.ms, r.gbs,
    g and ("%.0f%%"):format(100 * r.gbs / g.bw) or "-", copy_gbs and ("%.0f%%"):format(100 * r.gbs / copy_gbs) or "-",
    verdict(r.ok), r.check)
end
say("")
if flash then
  say("flash attention (%s), %d heads x %d tokens, d %d: %.3f ms, %.4g TFLOP/s; check %s: %s", flash.kernel, flash.H,
    flash.L, flash.D, flash.ms, flash.tflops, verdict(flash.ok), flash.check)
end
if latency then say("launch latency (an empty kernel, launch + sync): %.1f us", latency) end
say("")
say("| step | result | seconds |")
say("| --- | --- | --- |")
local failed = 0
for _, s in ipairs(steps) do
  say("| %s | %s | %.1f |", s.title, s.ok and "ok" or "FAIL", s.s)
  if not s.ok then failed = failed + 1 end
end
for _, list in ipairs { gemm, rows, { flash or {} } } do
  for _, r in ipairs(list) do if r.ok == false then failed = failed + 1 end end
end
say("")
say("%d failed (steps and checks); %s in all", failed, ("%.0f s"):format(now() - T0))
local out = opts.out or (EXE_DIR .. "/gpu-check-" .. os.date("!%Y-%m-%d") .. (opts.dry and "-dry-run" or "") .. ".md")
sys.write_file(out, table.concat(lines, "\n") .. "\n")
print("written to " .. out)
os.exit(failed == 0 and 0 or 1, true)
