--- `luaptx profile script.lua [--kernel NAME] [--gpu G] [--json F] [--html F]`:
-- run the script's main on the emulator with its counters on and print,
-- per kernel, the totals, occupancy, the roofline bound and the worst Lua
-- lines (pyptx.tools.profile; docs/profile.md).
local runtime = require "pyptx.runtime"
local script_mod = require "pyptx.runtime.script"
local sys = require "pyptx.core.sys"
local tune = require "pyptx.tools.tune"
local prof = require "pyptx.tools.profile"
local html = require "pyptx.tools.profile_html"
local sass = require "pyptx.runtime.sass"

local M = {}

--- A count with a k/M/G suffix.
local function human(n)
  if n >= 1e9 then return ("%.2fG"):format(n / 1e9) end
  if n >= 1e6 then return ("%.2fM"):format(n / 1e6) end
  if n >= 1e4 then return ("%.1fk"):format(n / 1e3) end
  return tostring(math.floor(n))
end

--- Seconds as us/ms.
local function dur(s)
  if s >= 1e-3 then return ("%.3f ms"):format(s * 1e3) end
  return ("%.2f us"):format(s * 1e6)
end

--- "file:line" shortened to the file's base name.
local function where(l) return ("%s:%d"):format(l.file:match("[^/]*$"), l.line) end

--- The lines of a kernel's summary.
local function summary(k)
  local c, d, out = k.counters, k.derived, {}
  local function add(fmt, ...) out[#out + 1] = fmt:format(...) end
  add("kernel %s  (%s, %d launch%s, grid %d,%d,%d block %d,%d,%d, dynamic smem %d)", k.name, k.arch or "?", k.launches,
      k.launches == 1 and "" or "es", k.grid[1], k.grid[2], k.grid[3], k.block[1], k.block[2], k.block[3], k.dynamic_smem)
  add("  issued %s warp-insts, %s lane-insts, SIMT efficiency %.1f%%, %d divergent branches", human(c.warps),
      human(c.lanes), 100 * (d.simt or 1), c.div_branches)
  add("  global: %s load requests (%.2f sectors/req), %s store requests (%.2f sectors/req), %s B loaded, %s B stored",
      human(c.gld_requests), d.ld_sectors_per_req or 0, human(c.gst_requests), d.st_sectors_per_req or 0,
      human(c.gld_bytes), human(c.gst_bytes))
  add("  shared: %s requests, %s wavefronts (ideal %s, %.2f-way average, worst %d-way)", human(c.shared_requests),
      human(c.shared_wavefronts), human(c.shared_ideal), d.conflict_ways or 1, c.shared_max_ways)
  add("  TMA %s B, bulk %s B, local %s B; barriers %d arrivals / %d waits; mbarrier %d tries / %d waits",
      human(c.tma_bytes), human(c.bulk_bytes), human(c.local_bytes), c.bar_arrivals, c.bar_waits, c.mbar_tries, c.mbar_fails)
  add("  tensor cores: %s ops, %s FLOP (fp8 %s); CUDA-core f32: %s FLOP; atomics: %s global, %s shared", human(c.tc_ops),
      human(c.flops), human(c.flops_fp8), human(c.fp32_flops), human(c.atom_global), human(c.atom_shared))
  if k.resources then
    local r = k.resources
    add("  resources: %d registers, %d B static smem, %d B spilled, %d B stack", r.registers, r.smem, r.spills, r.stack)
  else
    add("  resources: unknown (%s)", k.resources_note or "?")
  end
  local o = k.occupancy
  if o then
    add("  occupancy on %s: %d CTAs/SM, %d of %d warps (%.0f%%), limited by %s (CTAs allowed: warps %d, registers %d, smem %d, CTA slots %d)",
        k.gpu, o.ctas, o.warps, o.max_warps, 100 * o.occupancy, o.limiter, o.limits.warps, o.limits.registers,
        o.limits.smem, o.limits.ctas)
  elseif k.occupancy_note then
    add("  occupancy: %s", k.occupancy_note)
  end
  local r = k.roofline
  add("  roofline on %s: >= %s, %s-bound (tensor %s, f32 %s, memory %s; %s B at sector granularity, %.2f FLOP/B)",
      k.gpu, dur(r.seconds), r.bound, dur(r.tensor_s), dur(r.fp32_s), dur(r.memory_s), human(r.bytes), r.intensity)
  return out
end

--- The lines of one worst-lines list.
local function worst(k, name, title, fmt)
  local list = k.worst[name]
  if #list == 0 then return {} end
  local out = { "  worst lines by " .. title .. ":" }
  for _, e in ipairs(list) do
    local src = (e.line.source or e.line.texts[1] or ""):gsub("^%s+", "")
    out[#out + 1] = ("    %-24s %-24s %s"):format(where(e.line), fmt(e.line), src:sub(1, 70))
  end
  return out
end

local LISTS = {
  { "sectors", "wasted sector bytes (uncoalesced)", function(l)
    local c = l.c
    return ("%.1f sect/req, %.0f%% used"):format((c.gld_sectors + c.gst_sectors) / (c.gld_requests + c.gst_requests),
      100 * prof.sector_use(c))
  end },
  { "conflicts", "bank conflicts", function(l) return ("%.1f-way, +%d wf"):format(l.d.conflict_ways, l.d.excess_wavefronts) end },
  { "divergence", "idle lanes", function(l) return ("%.0f%% SIMT"):format(100 * l.d.simt) end },
}

--- The lines naming what costs time in the kernel's loops (its SASS
-- hazards, pyptx.runtime.sass), or why they are unknown.
local function hazard_lines(k)
  if not k.hazards then return { "  SASS hazards: unknown (" .. (k.hazards_note or "?") .. ")" } end
  local out = {}
  for _, l in ipairs(sass.render_hazards(k.hazards)) do out[#out + 1] = "  " .. l end
  return out
end

--- opts.input (the script), kernel, gpu, json, html. Returns the exit status.
function M.main(opts)
  local dev = runtime.open("emu")
  runtime.use(dev)
  local script = script_mod.load_file(opts.input, {})
  script_mod.default_defines(script, script_mod.defines(opts.defines), opts.input)
  if not script.main then
    error(opts.input .. ": the script has no main(args) to profile; profile a script whose main launches its kernels", 0)
  end
  local rows = prof.collect(dev, script.main, {})
  local rep, err = prof.report(rows, { kernel = opts.kernel, gpu = opts.gpu })
  if not rep then error("profile: " .. err, 0) end
  local text = {}
  for _, k in ipairs(rep.kernels) do
    for _, l in ipairs(summary(k)) do text[#text + 1] = l end
    for _, l in ipairs(hazard_lines(k)) do text[#text + 1] = l end
    for _, li in ipairs(LISTS) do
      for _, l in ipairs(worst(k, li[1], li[2], li[3])) do text[#text + 1] = l end
    end
    text[#text + 1] = ""
  end
  io.write(table.concat(text, "\n"))
  if opts.json then sys.write_output(opts.json, tune.encode_json(prof.plain(rep)) .. "\n") end
  if opts.html then sys.write_output(opts.html, html.page(rep, opts.input)) end
  return 0
end

return M
