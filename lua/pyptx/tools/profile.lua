--- Profiles from the emulator's counters (luaptx profile, docs/profile.md):
-- turn the counters on around a function, read one row per instruction
-- back through the FFI, and fold them into per-kernel totals and per-line
-- rows with the derived figures (sectors per request, bank-conflict ways,
-- SIMT efficiency).
local ffi = require "ffi"
local core = require "pyptx.core"
local runtime = require "pyptx.runtime"
local toolkit = require "pyptx.runtime.toolkit"
local compile = require "pyptx.runtime.compile"
local sass = require "pyptx.runtime.sass"
local occupancy = require "pyptx.tools.occupancy"
local gpus = require "pyptx.tools.gpus"

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
                    text = ffi.string(loc.text), c = {}, module = loc.module, launches = tonumber(loc.launches),
                    grid = { loc.grid[0], loc.grid[1], loc.grid[2] }, block = { loc.block[0], loc.block[1], loc.block[2] },
                    dynamic_smem = loc.dynamic_smem }
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
    if not k then
      k = { name = r.func, c = {}, module = r.module, launches = r.launches, grid = r.grid, block = r.block,
            dynamic_smem = r.dynamic_smem }
      by[r.func] = k; out[#out + 1] = k
    end
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

--- Scores for M.worst: sector bytes fetched beyond the bytes the lanes
-- used (uncoalesced access), extra shared wavefronts (bank conflicts),
-- idle lanes (divergence).
M.SCORES = {
  sectors = function(l)
    local c = l.c
    local waste = 32 * (c.gld_sectors + c.gst_sectors) - (c.gld_bytes + c.gst_bytes)
    return waste > 0 and waste or nil
  end,
  conflicts = function(l) return l.d.excess_wavefronts end,
  divergence = function(l) return l.c.warps > 0 and (32 * l.c.warps - l.c.lanes) or nil end,
}

--- The share of fetched sector bytes the lanes used (1: perfectly coalesced), or nil.
function M.sector_use(c)
  local s = c.gld_sectors + c.gst_sectors
  return s > 0 and math.min(1, (c.gld_bytes + c.gst_bytes) / (32 * s)) or nil
end

-- ------------------------------------------------------------- reports

--- The PTX of a loaded module (its .target names the arch).
local function module_ptx(m)
  local opts = ffi.new("lpx_emit_opts", { 1, 1 })
  local text, len = ffi.new("const char*[1]"), ffi.new("size_t[1]")
  if core.emit(m, opts, text, len) < 0 then return nil end
  return ffi.string(text[0], len[0])
end

--- The default GPU of a target arch (sm_90a: H100).
local BY_SM = { [80] = "A100", [86] = "A100", [89] = "RTX4090", [90] = "H100", [100] = "B200", [120] = "RTX5090" }

--- The source lines of a file, or an empty table.
local function source_lines(path, cache)
  if cache[path] then return cache[path] end
  local out, f = {}, path ~= "" and io.open(path, "rb")
  if f then
    for l in f:lines() do out[#out + 1] = l end
    f:close()
  end
  cache[path] = out
  return out
end

--- ptxas -v resources of kernel k (its module's PTX at its target): { registers, smem, spills, stack } or nil, why.
local function resources(k)
  local ptx = k.module and module_ptx(k.module)
  if not ptx then return nil, "no PTX for the kernel" end
  local arch = ptx:match("\n%s*%.target%s+(sm_%w+)")
  if not arch then return nil, "the PTX names no sm_ target" end
  if not toolkit.find("ptxas") then return nil, "ptxas not found: " .. toolkit.missing_message("ptxas"), arch end
  local ok, report = toolkit.ptxas(ptx, arch, { keep_failed = false })
  if not ok then return nil, "ptxas refused the kernel", arch end
  local r = report[k.name] or {}
  return { registers = r.registers or 0, smem = r.smem or 0, spills = (r.spill_stores or 0) + (r.spill_loads or 0),
           stack = r.stack or 0 }, nil, arch
end

--- What costs time in kernel k's loops, read from its SASS (see
-- pyptx.runtime.sass.hazards): its module's PTX compiled (through the
-- cubin cache) and disassembled. Returns the hazards of k's function, or
-- nil and why (no PTX, no nvdisasm, no compiler).
local function sass_hazards(k)
  local ptx = k.module and module_ptx(k.module)
  if not ptx then return nil, "no PTX for the kernel" end
  local arch = ptx:match("\n%s*%.target%s+(sm_%w+)")
  if not arch then return nil, "the PTX names no sm_ target" end
  if not toolkit.find("nvdisasm") then return nil, toolkit.missing_message("nvdisasm") end
  local ok, listing = pcall(function() return sass.disassemble(compile.cubin(ptx, arch).data, ptx) end)
  if not ok then return nil, tostring(listing) end
  local out = {}
  for _, h in ipairs(sass.hazards(listing)) do
    if h.func == k.name then out[#out + 1] = h end
  end
  return out
end

--- One kernel's report: totals, derived figures, resources and occupancy
-- (ptxas -v), the roofline on the GPU, the SASS hazards in its loops,
-- every line and the worst ones.
local function kernel_report(k, rows, opts, cache)
  local res, why, arch = resources(k)
  local sm = arch and tonumber(arch:match("%d+"))
  local g = opts.gpu and assert(gpus.find(opts.gpu)) or gpus.find(BY_SM[sm] or "H100")
  local threads = k.block[1] * k.block[2] * k.block[3]
  local rep = { name = k.name, arch = arch, launches = k.launches, grid = k.grid, block = k.block,
                dynamic_smem = k.dynamic_smem, counters = k.c, derived = k.d, gpu = g.name, resources = res,
                resources_note = why }
  if res then
    local occ, err = occupancy.compute { arch = g.sm, threads = threads, registers = res.registers,
                                         smem = res.smem + k.dynamic_smem }
    rep.occupancy, rep.occupancy_note = occ, err
  end
  rep.roofline = gpus.roofline(g, k.c)
  rep.hazards, rep.hazards_note = sass_hazards(k)
  local lines = M.lines(rows, k.name)
  for _, l in ipairs(lines) do l.source = source_lines(l.file, cache)[l.line] end
  rep.lines = lines
  rep.worst = {}
  for name, score in pairs(M.SCORES) do rep.worst[name] = M.worst(lines, score, opts.top or 5) end
  return rep
end

--- A copy of v for JSON: no cdata, no functions, finite numbers only.
function M.plain(v)
  if type(v) == "number" then return (v == v and v ~= math.huge and v ~= -math.huge) and v or nil end
  if type(v) ~= "table" then return (type(v) == "string" or type(v) == "boolean") and v or nil end
  local out = {}
  for k, x in pairs(v) do
    if k ~= "module" then out[k] = M.plain(x) end
  end
  return out
end

--- The report of profiled rows: opts.kernel (only that one), opts.gpu (a
-- name of pyptx.tools.gpus), opts.top (worst lines per list). Returns
-- { kernels = { report... } } or nil and why (an unknown kernel or GPU).
function M.report(rows, opts)
  opts = opts or {}
  if opts.gpu then
    local g, err = gpus.find(opts.gpu)
    if not g then return nil, err end
  end
  local out, names, cache = { kernels = {} }, {}, {}
  for _, k in ipairs(M.kernels(rows)) do
    names[#names + 1] = k.name
    if (not opts.kernel or opts.kernel == k.name) and k.launches > 0 then
      out.kernels[#out.kernels + 1] = kernel_report(k, rows, opts, cache)
    end
  end
  if #out.kernels == 0 then
    if opts.kernel then return nil, ("no kernel '%s' was launched; launched: %s"):format(opts.kernel, table.concat(names, ", ")) end
    return nil, "no kernel was launched"
  end
  return out
end

return M
