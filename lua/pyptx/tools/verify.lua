--- Run a kernel on fresh random inputs and compare every output element
-- with a CPU reference: what every example's main and the example specs do.
--   local ok, report = verify.run { kernel = k, args = { {values, shape}, ... },
--                                  reference = flat_values, tolerance = { atol, rtol } }
local ffi = require "ffi"
local tensor = require "pyptx.runtime.tensor"
local types = require "pyptx.types"
local argcheck = require "pyptx.args"
local runtime = require "pyptx.runtime"

local M = {}

ffi.cdef [[ struct lpx_verify_ts { long s, ns; }; int clock_gettime(int, struct lpx_verify_ts *); ]]
local ts = ffi.new("struct lpx_verify_ts")

--- Wall-clock milliseconds.
local function now_ms()
  ffi.C.clock_gettime(1, ts)
  return tonumber(ts.s) * 1e3 + tonumber(ts.ns) * 1e-6
end

--- A seed that differs between runs (inputs are fresh every time).
function M.fresh_seed()
  ffi.C.clock_gettime(0, ts)
  return (tonumber(ts.s) % 100000) * 1000 + math.floor(tonumber(ts.ns) / 1e6)
end

--- Launch opts.kernel with opts.args (lists of values with shapes) on the
-- current device, outputs poisoned first (Tensor:poison); compare output 1 (or
-- opts.output) with opts.reference. Returns ok, report { max_abs, max_rel,
-- bad, count, ms, message, device }.
function M.run(opts)
  argcheck.fields("verify.run", opts, { "kernel: table", "args: table", "reference: table|function" })
  local dev = opts.device or runtime.device()
  local args = {}
  for i, a in ipairs(opts.args) do
    args[i] = tensor.from_table(a[1], a.dtype or types.f32, a[2], dev)
  end
  local t0 = now_ms()
  local outs = { opts.kernel(unpack(args)) }
  dev:sync()
  local ms = now_ms() - t0
  local tol = opts.tolerance or { atol = 1e-5, rtol = 1e-4 }
  local output = opts.output or 1
  local ok, report = tensor.compare(outs[output], opts.reference, { atol = tol.atol, rtol = tol.rtol, output = output })
  report.ms, report.device = ms, dev.name
  return ok, report
end

--- Print a one-line verdict for an example and return the exit status.
function M.report(name, ok, report)
  print(("%s: %s on %s: %s; %.1f ms"):format(name, ok and "ok" or "MISMATCH", report.device or "?",
    report.message, report.ms or 0))
  return ok and 0 or 1
end

argcheck.sign(M, "verify", {
  run = { "opts: table" },
  report = { "name: string", "ok: any", "report: table" },
})

return M
