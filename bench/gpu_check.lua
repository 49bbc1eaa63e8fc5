--- `make gpu-check`: hardware truth on a machine with an NVIDIA GPU. Runs
-- the #gpu specs, every example on the cuda device against its CPU
-- reference, the nvcc differential (spec/diff_spec.lua) with
-- LUAPTX_DIFF_DEVICE=cuda, and the GEMM benchmark beside cuBLAS (a small
-- helper, bench/cublas_gemm.cu, built with nvcc). Prints one summary with
-- the date and the GPU, for docs/emulator.md, and writes it to
-- build/gpu-check.txt. Exit status: 0 all passed, 1 a step failed, 2 no GPU.
-- usage: luaptx bench/gpu_check.lua [reps]   (from the repository root)
local sys = require "pyptx.core.sys"
local runtime = require "pyptx.runtime"
local toolkit = require "pyptx.runtime.toolkit"
local now = require("bench.common").now

local reps = tonumber(arg and arg[1]) or 20
local BIN = os.getenv("LUAPTX_BIN") or "build/luaptx"

local ok_dev, dev = pcall(runtime.open, "cuda")
if not ok_dev then
  io.stderr:write("make gpu-check needs an NVIDIA GPU and its driver: ",
    tostring(dev):gsub("^[^:\n]+:%d+: ", ""), "\n",
    "  (without one, `make test` runs everything the emulator can check)\n")
  os.exit(2, true)   -- close the Lua state: nothing left for the leak checker
end

local steps, lines = {}, {}

--- Print a line now and keep it for the summary file.
local function say(fmt, ...)
  local s = fmt:format(...)
  print(s)
  lines[#lines + 1] = s
end

--- Run argv as one step named title (env: edits); record and report it.
local function step(title, argv, env)
  local t0 = now()
  local res, err = sys.run(argv, { env = env, merge = true })
  local ok = res and res.status == 0
  io.write(res and res.stdout or (err .. "\n"))
  steps[#steps + 1] = { title = title, ok = ok, s = now() - t0 }
  return ok, res and res.stdout or ""
end

--- The example scripts this GPU can run, each "path [args...]": Blackwell
-- ones need sm_100 or newer.
local function examples()
  local cc = tonumber((dev.arch or "sm_0"):match("%d+"))
  local list = {}
  for _, dir in ipairs { "ampere", "hopper", "blackwell" } do
    if dir ~= "blackwell" or cc >= 100 then
      for _, name in ipairs { "rms_norm", "layer_norm", "softmax", "swiglu" } do
        list[#list + 1] = ("examples/%s/%s.lua"):format(dir, name)
      end
    end
  end
  for _, n in ipairs { "gemm", "gemm_pipelined", "gemm_2stage", "gemm_fast" } do list[#list + 1] = "examples/ampere/" .. n .. ".lua" end
  if cc >= 90 then
    for _, n in ipairs { "gemm", "gemm_fast", "grouped_gemm", "grouped_gemm_uniform", "flash_attention" } do
      list[#list + 1] = "examples/hopper/" .. n .. ".lua"
    end
    list[#list + 1] = "examples/hopper/flash_attention.lua 2 256 2 causal 2"    -- split-KV and its combine
  end
  if cc >= 100 then
    for _, n in ipairs { "gemm", "gemm_persistent", "gemm_no_tma", "grouped_gemm", "tcgen05_suite", "tcgen05_probes" } do
      list[#list + 1] = "examples/blackwell/" .. n .. ".lua"
    end
  end
  return list
end

--- Build the cuBLAS helper with nvcc and time it at n; returns its line or nil.
local function cublas(n)
  local nvcc = toolkit.find("nvcc")
  if not nvcc then return nil, toolkit.missing_message("nvcc") end
  local exe = "build/cublas_gemm"
  if sys.kind(exe) ~= "file" then
    local res = sys.run({ nvcc, "-O2", "-arch=compute_80", "-o", exe, "bench/cublas_gemm.cu", "-lcublas" }, { merge = true })
    if not res or res.status ~= 0 then return nil, "nvcc failed: " .. (res and res.stdout or "") end
  end
  local res = sys.run({ exe, tostring(n), tostring(reps) }, { merge = true })
  if not res or res.status ~= 0 then return nil, res and res.stdout or "cannot start " .. exe end
  return res.stdout
end

say("luaptx gpu-check, %s, on %s", os.date("!%Y-%m-%d"), dev.name)
step("#gpu specs", { BIN, "/usr/bin/busted", "--tags=gpu", "spec" }, { LUAPTX_BIN = BIN })
for _, f in ipairs(examples()) do        -- "path [args...]"
  local argv = { BIN, "run" }
  for word in f:gmatch("%S+") do argv[#argv + 1] = word end
  step("example " .. f, argv, { LUAPTX_DEVICE = "cuda" })
end
step("nvcc differential on the GPU", { BIN, "/usr/bin/busted", "spec/diff_spec.lua", "spec/diff_scalar_spec.lua" },
  { LUAPTX_BIN = BIN, LUAPTX_DIFF_DEVICE = "cuda" })
local gemm_ok, gemm_out = step("GEMM benchmark", { BIN, "bench/gemm.lua", tostring(reps) }, { LUAPTX_DEVICE = "cuda" })

say("")
say("%-44s %6s %8s", "step", "result", "seconds")
for _, s in ipairs(steps) do say("%-44s %6s %8.1f", s.title, s.ok and "ok" or "FAIL", s.s) end
say("")
say("GEMM, bf16 in, f32 accumulate (median of %d launches, device events):", reps)
say("%-10s %14s %14s %14s", "size", "gemm TFLOP/s", "gemm_fast", "cuBLAS TFLOP/s")
--- bench/gemm.lua's TFLOP/s for examples/hopper/<name>.lua at n^3, or "-".
local function ours(name, n)
  return gemm_ok and gemm_out:match("\n" .. name .. "%s+" .. n .. "%^3%s+[%d.]+%s+([%d.]+)") or "-"
end
for _, n in ipairs { 4096, 8192 } do
  local line, why = cublas(n)
  local theirs = line and line:match("^cublas %d+ [%d.]+ ([%d.]+)") or "-"
  if not line then say("  cuBLAS: %s", why) end
  say("%-10s %14s %14s %14s", n .. "^3", ours("gemm", n), ours("gemm_fast", n), theirs)
end

local failed = 0
for _, s in ipairs(steps) do if not s.ok then failed = failed + 1 end end
say("%d of %d steps passed", #steps - failed, #steps)
sys.write_file("build/gpu-check.txt", table.concat(lines, "\n") .. "\n")
os.exit(failed == 0 and 0 or 1, true)
