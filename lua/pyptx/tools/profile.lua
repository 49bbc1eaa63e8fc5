--- Profiles from the emulator's counters (luaptx profile, docs/profile.md):
-- turn the counters on around a function, read one row per instruction
-- back through the FFI, and fold them into per-kernel totals and per-line
-- rows with the derived figures (sectors per request, bank-conflict ways,
-- SIMT efficiency).
local ffi = require "ffi"
local core = require "pyptx.core"
local runtime = require "pyptx.runtime"

local M = {}

--- The counters' names and what each counts, in the C table's order.
M.COUNTERS, M.HELP = {}, {}
for i = 0, core.prof_ncounters() - 1 do
  M.COUNTERS[i + 1] = ffi.string(core.prof_counter_name(i))
  M.HELP[M.COUNTERS[i + 1]] = ffi.string(core.prof_counter_help(i))
end
local NC = #M.COUNTERS

--- Counters that are maxima, not sums, when rows are folded together.
local MAXIMA = { shared_max_ways = true }

--- Fail with the core's message.
local function check(rc, what)
  if rc ~= 0 then error(what .. ": " .. core.error_message(), 3) end
end

--- Every counted instruction of dev's programs: { func, file, line, pc, text, c = { name = n } }.
function M.rows(dev)
  local n = ffi.new("int32_t[1]")
  check(core.device_profile_count(dev.handle, n), "profile")
  local loc, c = ffi.new("lpx_prof_loc"), ffi.new("uint64_t[?]", NC)
  local out = {}
  for r = 0, n[0] - 1 do
    check(core.device_profile_row(dev.handle, r, loc, c, NC), "profile")
    if c[0] > 0 then
      local row = { func = ffi.string(loc.func), file = ffi.string(loc.file), line = loc.line, pc = loc.pc,
                    text = ffi.string(loc.text), c = {} }
      for k = 1, NC do row.c[M.COUNTERS[k]] = tonumber(c[k - 1]) end
      out[#out + 1] = row
    end
  end
  return out
end

--- Run fn(...) with dev's counters on (from zero); returns the rows, then fn's results.
-- The emulator device is required: the counters are its own.
function M.collect(dev, fn, ...)
  dev = dev or runtime.device()
  if dev.kind ~= "emu" then
    error(("profile: the counters come from the CPU emulator, and the device is %s (set LUAPTX_DEVICE=emu)"):format(
      tostring(dev.kind)), 2)
  end
  local was = dev:option("profile")
  dev:set_option("profile", 1)
  check(core.device_profile_reset(dev.handle), "profile")
  local res = { pcall(fn, ...) }
  dev:set_option("profile", was)
  if not res[1] then error(res[2], 0) end
  return M.rows(dev), unpack(res, 2, table.maxn(res))
end

--- Add row b's counters into a.
local function fold(a, b)
  for _, k in ipairs(M.COUNTERS) do
    if MAXIMA[k] then a[k] = math.max(a[k] or 0, b[k] or 0) else a[k] = (a[k] or 0) + (b[k] or 0) end
  end
end

--- The derived figures of a counter set (nil where nothing was counted).
function M.derived(c)
  local d = {}
  if c.warps > 0 then d.simt = c.lanes / (32 * c.warps) end
  if c.gld_requests > 0 then d.ld_sectors_per_req = c.gld_sectors / c.gld_requests end
  if c.gst_requests > 0 then d.st_sectors_per_req = c.gst_sectors / c.gst_requests end
  if c.shared_ideal > 0 then
    d.conflict_ways = c.shared_wavefronts / c.shared_ideal
    d.excess_wavefronts = c.shared_wavefronts - c.shared_ideal
  end
  d.dram_bytes = 32 * (c.gld_sectors + c.gst_sectors) + c.tma_bytes + c.bulk_bytes
  return d
end

--- Rows folded per kernel (function name): { name, c, d } in first-seen order.
function M.kernels(rows)
  local out, by = {}, {}
  for _, r in ipairs(rows) do
    local k = by[r.func]
    if not k then k = { name = r.func, c = {} }; by[r.func] = k; out[#out + 1] = k end
    fold(k.c, r.c)
  end
  for _, k in ipairs(out) do k.d = M.derived(k.c) end
  return out
end

--- Rows folded per source line of one kernel (or all): { file, line, func, c, d, texts }, sorted by file, line.
function M.lines(rows, func)
  local out, by = {}, {}
  for _, r in ipairs(rows) do
    if not func or r.func == func then
      local key = r.func .. "\0" .. r.file .. "\0" .. r.line
      local l = by[key]
      if not l then l = { func = r.func, file = r.file, line = r.line, c = {}, texts = {} }; by[key] = l; out[#out + 1] = l end
      fold(l.c, r.c)
      l.texts[#l.texts + 1] = r.text
    end
  end
  for _, l in ipairs(out) do l.d = M.derived(l.c) end
  table.sort(out, function(a, b)
    if a.file ~= b.file then return a.file < b.file end
    return a.line < b.line
  end)
  return out
end

--- The worst lines by a score (a function of a line returning a number or nil), most first.
function M.worst(lines, score, n)
  local list = {}
  for _, l in ipairs(lines) do
    local s = score(l)
    if s and s > 0 then list[#list + 1] = { line = l, score = s } end
  end
  table.sort(list, function(a, b) return a.score > b.score end)
  local out = {}
  for i = 1, math.min(n or 5, #list) do out[i] = list[i] end
  return out
end

--- Scores for M.worst: extra sectors, extra wavefronts, idle lanes.
M.SCORES = {
  sectors = function(l)
    local c = l.c
    local req = c.gld_requests + c.gst_requests
    if req == 0 then return nil end
    return (c.gld_sectors + c.gst_sectors) / req
  end,
  conflicts = function(l) return l.d.excess_wavefronts end,
  divergence = function(l) return l.c.warps > 0 and (32 * l.c.warps - l.c.lanes) or nil end,
}

return M
