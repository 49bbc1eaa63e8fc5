--- What the bench scripts share: a wall clock and the median.
local ffi = require "ffi"

local M = {}

ffi.cdef [[ struct lpx_bench_timespec { long s, ns; }; int clock_gettime(int, struct lpx_bench_timespec *); ]]
local ts = ffi.new("struct lpx_bench_timespec")
local CLOCK_MONOTONIC = 1

--- Monotonic wall-clock seconds (os.clock counts this process's CPU time
-- only, not a compiler's threads nor a child process).
function M.now()
  ffi.C.clock_gettime(CLOCK_MONOTONIC, ts)
  return tonumber(ts.s) + tonumber(ts.ns) * 1e-9
end

--- Median of a list (sorts it).
function M.median(xs)
  table.sort(xs)
  return xs[math.floor(#xs / 2) + 1]
end

return M
