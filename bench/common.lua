--- What the bench scripts share: a wall clock and the median.
local core = require "pyptx.core"

local M = {}

local clock_ms = core.clock_ms

--- Monotonic wall-clock seconds (os.clock counts this process's CPU time
-- only, not a compiler's threads nor a child process).
function M.now()
  return clock_ms() * 1e-3
end

--- Median of a list (sorts it).
function M.median(xs)
  table.sort(xs)
  return xs[math.floor(#xs / 2) + 1]
end

return M
