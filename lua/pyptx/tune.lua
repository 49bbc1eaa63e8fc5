--- Autotuning sweeps: enumerate a space of template values, compile every
-- variant in parallel (C worker threads), check each against a reference,
-- time it with device events, record failures with their reason and go on,
-- cache results per config on disk, and return the best.
--
--   local best = pyptx.tune {
--     name = "rms", build = function(cfg) return kernel end,
--     space = { BM = {64, 128}, WARPS = {4, 8} }, prune = function(cfg) return true end,
--     inputs = function(seed) return x, w end, reference = function(x, w) return y end,
--     warmup = 3, reps = 20, tolerance = { atol = 1e-4, rtol = 1e-4 },
--   }
local ffi = require "ffi"
local core = require "pyptx.core"
local compile = require "pyptx.compile"
local toolkit = require "pyptx.toolkit"
local json = require "pyptx.json"
local sys = require "pyptx.sys"

local M = {}

pcall(ffi.cdef, "int isatty(int fd);")

-- --------------------------------------------------------------- configs

--- Every combination of the space, in a deterministic order (keys sorted,
-- values in the order given), filtered by prune.
function M.configs(space, prune)
  local keys = {}
  for k in pairs(space) do keys[#keys + 1] = k end
  table.sort(keys)
  local out = {}
  local function walk(i, cfg)
    if i > #keys then
      local c = {}
      for k, v in pairs(cfg) do c[k] = v end
      if not prune or prune(c) then out[#out + 1] = c end
      return
    end
    local vals = space[keys[i]]
    if type(vals) ~= "table" or #vals == 0 then error(("tune: space.%s must be a non-empty list"):format(keys[i]), 0) end
    for _, v in ipairs(vals) do
      cfg[keys[i]] = v
      walk(i + 1, cfg)
    end
    cfg[keys[i]] = nil
  end
  walk(1, {})
  return out
end

--- "BM=128,BN=64": a config's stable name.
function M.config_key(cfg)
  local keys = {}
  for k in pairs(cfg) do keys[#keys + 1] = k end
  table.sort(keys)
  local parts = {}
  for i, k in ipairs(keys) do parts[i] = k .. "=" .. tostring(cfg[k]) end
  return table.concat(parts, ",")
end

--- The configs of shard i of n (1-based i): every n-th, deterministically.
function M.shard(list, i, n)
  if not (i >= 1 and i <= n) then error(("tune: shard %d/%d; the shard index runs from 1 to n"):format(i, n), 0) end
  local out = {}
  for j, c in ipairs(list) do if (j - 1) % n == i - 1 then out[#out + 1] = c end end
  return out
end

-- ------------------------------------------------------------ disk cache

--- The result cache file of a sweep.
local function cache_path(name)
  local dir = compile.cache_dir() .. "/tune"
  sys.mkdirs(dir)
  return dir .. "/" .. name:gsub("[^%w_.-]", "_") .. ".json"
end

--- Load a sweep's cached results ({} when none or unreadable).
local function load_cache(path)
  local f = io.open(path, "r")
  if not f then return {} end
  local ok, t = pcall(json.decode, f:read("*a"))
  f:close()
  return ok and type(t) == "table" and t or {}
end

--- Write the cache atomically (temp file + rename).
local function save_cache(path, t)
  local tmp = path .. ".tmp" .. tostring(os.time()) .. math.random(1e6)
  local f = assert(io.open(tmp, "w"))
  f:write(json.encode(t, " "))
  f:close()
  os.rename(tmp, path)
end

-- ------------------------------------------------------------- the sweep

--- Input shapes as a string (part of the cache key).
local function shapes_of(inputs)
  local parts = {}
  for i, t in ipairs(inputs) do
    parts[i] = type(t) == "table" and t.shape and (table.concat(t.shape, "x") .. ":" .. t.dtype.name) or tostring(t)
  end
  return table.concat(parts, ";")
end

--- Build and trace one config; fills entry.spec or entry.reason.
local function build_one(spec, entry)
  local ok, k = pcall(spec.build, entry.cfg)
  if not ok then entry.status, entry.reason = "failed", "build: " .. tostring(k) return end
  local values = spec.values and spec.values(entry.cfg) or {}
  local ok2, s = pcall(k.specialize, k, values)
  if not ok2 then entry.status, entry.reason = "failed", "trace: " .. tostring(s) return end
  entry.kernel, entry.spec = k, s
end

--- Compile every traced, uncached config in parallel in C threads.
local function compile_all(entries)
  local todo = {}
  for _, e in ipairs(entries) do if e.spec and not e.cached then todo[#todo + 1] = e end end
  if #todo == 0 then return end
  local jobs = ffi.new("lpx_compile_job[?]", #todo)
  for i, e in ipairs(todo) do
    jobs[i - 1].ptx, jobs[i - 1].len, jobs[i - 1].arch = e.spec.ptx, #e.spec.ptx, e.spec.arch
  end
  local opts = ffi.new("lpx_compile_opts", { 1, -1, 0, 0, 0 })
  core.compile_many(compile.compiler(), jobs, #todo, opts, 0)
  for i, e in ipairs(todo) do
    local j = jobs[i - 1]
    if j.status ~= 0 then
      e.status = "failed"
      e.reason = "compile: " .. toolkit.map_lines(ffi.string(j.error), e.spec.ptx):match("[^\n]*:%s*[^\n]*error[^\n]*")
        or ("compile: " .. ffi.string(j.error):match("[^\n]+\n?[^\n]*"))
    end
  end
end

--- ptxas resources of a config (registers, smem, spills), when ptxas exists.
local function resources(e)
  local ok, report = toolkit.ptxas(e.spec.ptx, e.spec.arch, { keep_failed = false })
  local r = ok and report[e.kernel.name]
  if r then
    e.registers, e.smem, e.spills = r.registers, r.smem + e.spec.dynamic_smem, r.spill_stores + r.spill_loads
    if e.spills > 0 and not e.reason then e.note = "spills" end
  end
end

--- Check one config against the reference on the device.
local function check_one(e, inputs, want, tol)
  local tensor = require "pyptx.tensor"
  local ok, outs = pcall(function() return { e.kernel(unpack(inputs)) } end)
  if not ok then e.status, e.reason = "failed", "launch: " .. tostring(outs) return end
  for i, w in ipairs(want) do
    local same, report = tensor.compare(outs[i], w, tol)
    if not same then e.status, e.reason = "failed", ("wrong result (output %d): %s"):format(i, report.message) return end
  end
  e.outputs = outs
end

--- Median of a list.
local function median(xs)
  table.sort(xs)
  return xs[math.floor(#xs / 2) + 1]
end

--- Time one config with device events: warm-up, then reps launches with
-- the L2 flushed before each and the input sets rotated; median ms.
local function time_one(spec, e, input_sets, dev, flush)
  local runtime = require "pyptx.runtime"
  local launchers = {}
  for i, inputs in ipairs(input_sets) do launchers[i] = runtime.prepare(e.kernel, unpack(inputs)) end
  for i = 1, spec.warmup or 3 do launchers[(i - 1) % #launchers + 1]() end
  local ev0, ev1, ms = ffi.new("int32_t[1]"), ffi.new("int32_t[1]"), ffi.new("double[1]")
  local times = {}
  for r = 1, spec.reps or 20 do
    if flush then flush() end
    core.device_event_record(dev.handle, ev0)
    launchers[(r - 1) % #launchers + 1]()
    core.device_event_record(dev.handle, ev1)
    dev:sync()
    core.device_event_elapsed(dev.handle, ev0[0], ev1[0], ms)
    times[r] = ms[0]
  end
  e.ms = median(times)
end

--- A function that evicts L2 by writing a buffer larger than any L2.
local function l2_flusher(dev)
  local bytes = 256 * 1024 * 1024
  local ok, ptr, mem = pcall(dev.alloc, dev, bytes)
  if not ok then return nil end
  return function() local _ = mem; dev:memset(ptr, 0, bytes) end
end

--- The live progress line on a terminal.
local function progress(state, total)
  if not state.tty then return end
  local best = state.best and (" best %s%s"):format(state.best.key, state.best.ms and (" %.3f ms"):format(state.best.ms) or "") or ""
  local eta = state.done > 0 and (os.clock() - state.t0) / state.done * (total - state.done) or 0
  io.stderr:write(("\r[%d/%d] %d failed%s ETA %.0fs   "):format(state.done, total, state.failed, best, eta))
end

--- Rank: by time when timed, else by registers then instructions; ties
-- go to the smaller config key so every listing agrees.
local function better(a, b, timed)
  if timed and (a.ms or math.huge) ~= (b.ms or math.huge) then return (a.ms or math.huge) < (b.ms or math.huge) end
  if not timed then
    if (a.registers or 1e9) ~= (b.registers or 1e9) then return (a.registers or 1e9) < (b.registers or 1e9) end
    if (a.instructions or 1e9) ~= (b.instructions or 1e9) then return (a.instructions or 1e9) < (b.instructions or 1e9) end
  end
  return a.key < b.key
end
M.better = better

--- Run a sweep. opts: device, shard = "i/n", force (re-time cached configs),
-- quiet. Returns { name, device, timed, results = {...}, best }.
function M.run(spec, opts)
  opts = opts or {}
  if type(spec.build) ~= "function" or type(spec.space) ~= "table" then
    error("tune: a sweep needs build = function(cfg) ... end and space = { NAME = {values...} }", 2)
  end
  local runtime = require "pyptx.runtime"
  local dev = opts.device or runtime.device()
  local timed = dev.kind == "cuda"
  local name = spec.name or "sweep"
  local all = M.configs(spec.space, spec.prune)
  if opts.shard then
    local i, n = tostring(opts.shard):match("^(%d+)/(%d+)$")
    if not i then error("tune: --shard takes i/n, e.g. 2/8", 0) end
    all = M.shard(all, tonumber(i), tonumber(n))
  end
  local input_sets = {}
  for r = 1, math.max(spec.rotate or 1, 1) do input_sets[r] = { spec.inputs(r) } end
  local want = spec.reference and { spec.reference(unpack(input_sets[1])) } or {}
  local cpath = cache_path(name)
  local cache = load_cache(cpath)
  local shapes = shapes_of(input_sets[1])
  local entries = {}
  for i, cfg in ipairs(all) do entries[i] = { cfg = cfg, key = M.config_key(cfg), status = "ok" } end
  for _, e in ipairs(entries) do
    build_one(spec, e)
    if e.spec then
      e.instructions = e.spec.instructions
      local hash = ffi.new("char[33]")
      core.content_hash(e.spec.ptx, #e.spec.ptx, hash)
      e.cache_key = table.concat({ e.key, e.spec.arch, ffi.string(hash), dev.name, shapes }, "|")
      local hit = cache[e.cache_key]
      if hit and not opts.force then
        for k, v in pairs(hit) do e[k] = v end
        e.cached = true
      end
    end
  end
  compile_all(entries)
  local state = { done = 0, failed = 0, t0 = os.clock(), tty = not opts.quiet and ffi.C.isatty(2) == 1 }
  local flush = timed and l2_flusher(dev) or nil
  for _, e in ipairs(entries) do
    if e.spec and e.status == "ok" and not e.cached then
      resources(e)
      check_one(e, input_sets[1], want, spec.tolerance)
      if e.status == "ok" and timed then time_one(spec, e, input_sets, dev, flush) end
      cache[e.cache_key] = { status = e.status, reason = e.reason, ms = e.ms, registers = e.registers,
                             smem = e.smem, spills = e.spills, instructions = e.instructions }
    elseif e.cache_key and not e.cached then
      cache[e.cache_key] = { status = e.status, reason = e.reason, instructions = e.instructions }
    end
    state.done = state.done + 1
    if e.status ~= "ok" then state.failed = state.failed + 1
    elseif not state.best or better(e, state.best, timed) then state.best = e end
    progress(state, #entries)
  end
  if state.tty then io.stderr:write("\n") end
  save_cache(cpath, cache)
  local results = {}
  for i, e in ipairs(entries) do
    results[i] = { config = e.cfg, key = e.key, status = e.status, reason = e.reason, ms = e.ms, registers = e.registers,
                   smem = e.smem, spills = e.spills, instructions = e.instructions, cached = e.cached or false }
  end
  table.sort(results, function(a, b)
    if (a.status == "ok") ~= (b.status == "ok") then return a.status == "ok" end
    if a.status ~= "ok" then return a.key < b.key end
    return better(a, b, timed)
  end)
  local best = results[1] and results[1].status == "ok" and results[1] or nil
  return { name = name, device = dev.name, timed = timed, results = results, best = best,
           ranking = timed and "median time (device events)" or "emulator: timing is not meaningful; ranked by ptxas registers, then instructions" }
end

return M
