--- Run a kernel on fresh random inputs and compare every output element
-- with a CPU reference: what every example's main and the example specs do.
--   local ok, report = verify.run { kernel = k, args = { {values, shape}, ... },
--                                  reference = flat_values, tolerance = { atol, rtol } }
local core = require "pyptx.core"
local tensor = require "pyptx.runtime.tensor"
local types = require "pyptx.types"
local argcheck = require "pyptx.args"
local runtime = require "pyptx.runtime"
local kernel = require "pyptx.kernel"

local M = {}

-- Monotonic wall-clock milliseconds (from the core: a cdef of
-- clock_gettime here would clash with any other script's own).
local now_ms = core.clock_ms

--- A seed that differs between runs (inputs are fresh every time).
function M.fresh_seed()
  return (os.time() % 100000) * 1000 + math.floor(now_ms() % 1000)
end

--- Launch opts.kernel with opts.args (lists of values with shapes) on the
-- current device, outputs poisoned first (Tensor:poison); compare output 1 (or
-- opts.output) with opts.reference. Returns ok, report { max_abs, max_rel,
-- bad, count, message, device, ms, before, total_ms }: ms is the launch
-- itself (until the device is idle again); before what preceded it (ms
-- each: trace, load = compiling or decoding for the device, pack =
-- binding shapes, allocating outputs, packing parameters); total_ms both.
function M.run(opts)
  argcheck.fields("verify.run", opts, { "kernel: table", "args: table", "reference: table|function" })
  local dev = opts.device or runtime.device()
  local args = {}
  for i, a in ipairs(opts.args) do
    args[i] = tensor.from_table(a[1], a.dtype or types.f32, a[2], dev)
  end
  local t0 = now_ms()
  local outs, before, t1
  if kernel.is(opts.kernel) then
    local launch = runtime.prepare(opts.kernel, unpack(args))
    t1 = now_ms()
    launch()
    outs = launch.outputs
    local t = launch.times
    before = { trace = t.trace, load = t.load, pack = (t1 - t0) - t.trace - t.load }
  else   -- any other callable: only the whole call can be timed
    outs = { opts.kernel(unpack(args)) }
  end
  dev:sync()
  local t2 = now_ms()
  local tol = opts.tolerance or { atol = 1e-5, rtol = 1e-4 }
  local output = opts.output or 1
  local ok, report = tensor.compare(outs[output], opts.reference, { atol = tol.atol, rtol = tol.rtol, output = output })
  report.ms, report.before, report.total_ms = t2 - (t1 or t0), before, t2 - t0
  report.device, report.load_name = dev.name, dev.kind == "cuda" and "compile" or "decode"
  return ok, report
end

--- Milliseconds with three decimals below 1 ms (a GPU launch takes
-- microseconds, which "%.1f" would print as 0.0), one above.
local function ms_text(ms)
  return ((ms or 0) < 1 and "%.3f" or "%.1f"):format(ms or 0)
end

--- The times part of a verdict: "launch 2.1 ms (before it: trace 0.25,
-- decode 0.03, bind and pack 0.10 ms)".
local function times_text(report)
  local b = report.before
  if not b then return ms_text(report.ms) .. " ms (trace, load and launch)" end
  return ("launch %s ms (before it: trace %.2f, %s %.2f, bind and pack %.2f ms)"):format(ms_text(report.ms), b.trace,
    report.load_name or "load", b.load, b.pack)
end

--- Print a one-line verdict for an example and return the exit status.
function M.report(name, ok, report)
  print(("%s: %s on %s: %s; %s"):format(name, ok and "ok" or "MISMATCH", report.device or "?", report.message,
    times_text(report)))
  return ok and 0 or 1
end

argcheck.sign(M, "verify", {
  run = { "opts: table" },
  report = { "name: string", "ok: any", "report: table" },
})

return M
