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
local compile = require "pyptx.runtime.compile"
local toolkit = require "pyptx.runtime.toolkit"
local dkjson = require "dkjson"
local sys = require "pyptx.core.sys"
local tensor = require "pyptx.runtime.tensor"
local runtime = require "pyptx.runtime"
local env = require "pyptx.core.env"
local trace = require "pyptx.trace"
local types = require "pyptx.types"

local M = {}

-- ------------------------------------------------------------ JSON

--- Gather every string key in a value (nested tables too) into out.
local function gather_keys(v, seen, out)
  if type(v) ~= "table" then return end
  for k, x in pairs(v) do
    if type(k) == "string" and not seen[k] then seen[k] = true out[#out + 1] = k end
    gather_keys(x, seen, out)
  end
end

--- Encode a value as indented JSON with sorted keys (NaN and inf as null):
-- every key goes into dkjson's keyorder, which would otherwise write keys
-- in table order.
function M.encode_json(v)
  local keys = {}
  gather_keys(v, {}, keys)
  table.sort(keys)
  return dkjson.encode(v, { indent = true, keyorder = keys })
end

--- Decode JSON text; raises with dkjson's message on malformed text.
function M.decode_json(text)
  local v, _, err = dkjson.decode(text)
  if err then error(err, 0) end
  return v
end

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

--- A list of configs (a sweep's `configs`, instead of a space), copied
-- in the order given and filtered by prune.
function M.config_list(list, prune)
  local out = {}
  for i, cfg in ipairs(list) do
    if type(cfg) ~= "table" then error(("tune: configs[%d] must be a table of template values"):format(i), 0) end
    local c = {}
    for k, v in pairs(cfg) do c[k] = v end
    if not prune or prune(c) then out[#out + 1] = c end
  end
  if #list == 0 then error("tune: configs must be a non-empty list", 0) end
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

--- Shard i of n from a Slurm job array: task SLURM_ARRAY_TASK_ID of
-- SLURM_ARRAY_TASK_COUNT, counted from SLURM_ARRAY_TASK_MIN (0 when unset)
-- in steps of SLURM_ARRAY_TASK_STEP (1), so --array=0-3, 1-4 and 0-6:2
-- all work. An array whose tasks are not evenly spaced (a list such as
-- --array=1,5,7: MIN + (COUNT-1) * STEP is not SLURM_ARRAY_TASK_MAX) is
-- refused by every task alike, since the check reads only array-wide
-- variables: no task runs a shard that a merge could not complete.
local function slurm_shard()
  local what = "luaptx tune --shard auto"
  local id = env.int("SLURM_ARRAY_TASK_ID", 0, 2 ^ 31, "the Slurm array task's index, set by sbatch --array")
  local n = env.int("SLURM_ARRAY_TASK_COUNT", 1, 2 ^ 31, "the number of tasks in the Slurm array")
  if not id or not n then
    error(("tune: --shard auto takes the shard from a Slurm job array, but %s is not set; " ..
           "submit with sbatch --array=0-N, or give --shard i/n"):format(id and "SLURM_ARRAY_TASK_COUNT" or "SLURM_ARRAY_TASK_ID"), 0)
  end
  local min = env.int("SLURM_ARRAY_TASK_MIN", 0, 2 ^ 31, "the lowest index of the Slurm array", 0)
  local step = env.int("SLURM_ARRAY_TASK_STEP", 1, 2 ^ 31, "the step of the Slurm array, as in --array=0-6:2", 1)
  local last = min + (n - 1) * step
  local max = env.int("SLURM_ARRAY_TASK_MAX", 0, 2 ^ 31, "the highest index of the Slurm array", last)
  if max ~= last then
    error(("tune: --shard auto: the Slurm array's %d tasks are not evenly spaced (from SLURM_ARRAY_TASK_MIN=%d in steps of " ..
           "SLURM_ARRAY_TASK_STEP=%d they would end at %d, but SLURM_ARRAY_TASK_MAX=%d: a list such as --array=1,5,7?); " ..
           "every task refuses it; %s takes a range (--array=0-%d, or stepped: --array=0-%d:2), not a list")
           :format(n, min, step, last, max, what, n - 1, 2 * (n - 1)), 0)
  end
  if id < min or id > max or (id - min) % step ~= 0 then
    error(("tune: --shard auto: SLURM_ARRAY_TASK_ID=%d is not a task of the array %d..%d step %d (SLURM_ARRAY_TASK_MIN=%d, " ..
           "SLURM_ARRAY_TASK_STEP=%d, SLURM_ARRAY_TASK_COUNT=%d); %s takes a range such as --array=0-%d"):format(id, min, max,
           step, min, step, n, what, n - 1), 0)
  end
  return (id - min) / step + 1, n
end

--- "i/n" (1 <= i <= n) or "auto" (a Slurm job array) as i, n; an error
-- saying what is valid otherwise.
function M.parse_shard(text)
  text = tostring(text)
  if text == "auto" then return slurm_shard() end
  local i, n = text:match("^(%d+)/(%d+)$")
  i, n = tonumber(i), tonumber(n)
  if not i or #text > 21 then
    error(("tune: --shard takes i/n (e.g. 2/8) or auto (from a Slurm job array); got %s"):format(text), 0)
  end
  if n < 1 or i < 1 or i > n then
    error(("tune: --shard %s: the shard index i runs from 1 to n, and n is at least 1"):format(text), 0)
  end
  return i, n
end

-- ------------------------------------------------------------ disk cache

--- The 32-hex-digit content hash of a string.
local function hash(s)
  local out = ffi.new("char[33]")
  core.content_hash(s, #s, out)
  return ffi.string(out)
end

--- A Lua error's message without luaptx's own locations ("lua/pyptx/x.lua:12: ").
local function message(err)
  return trace.strip_own(tostring(err))
end

--- The root of luaptx's caches, chosen, created and checked by the C core
-- (lpx_cache_root: opts.cache_dir, $LUAPTX_CACHE_DIR, $XDG_CACHE_HOME/luaptx,
-- $HOME/.cache/luaptx); nil and why when there is none or it is refused.
local function cache_root(opts)
  local out = ffi.new("char[4096]")
  if core.cache_root(core.ctx, opts.cache_dir, out, 4096) ~= 0 then return nil, core.error_message() end
  return ffi.string(out)
end

--- A sweep name as one directory name: letters, digits, '_' and '-' kept;
-- anything else ('/', '.') replaced, plus a hash so distinct names stay apart.
local function dir_name(name)
  local safe = name:gsub("[^%w_-]", "_")
  if safe == name and name ~= "" then return safe end
  return safe .. "-" .. hash(name):sub(1, 8)
end

--- The sweep's private result directory (every level 0700 and ours), or
-- nil and why results cannot be cached.
local function open_cache(name, opts)
  local root, why = cache_root(opts)
  if not root then return nil, why end
  local dir = root .. "/tune/" .. dir_name(name)
  for _, d in ipairs { root .. "/tune", dir } do
    local ok, err = sys.private_dir(d)
    if not ok then return nil, err end
  end
  return dir
end

--- The file holding one config's result: named by the hash of its cache key.
local function entry_file(dir, key)
  return dir .. "/" .. hash(key) .. ".json"
end

--- A config's cached result, or nil (missing, unreadable, not a regular
-- file, or written for another key).
local function load_entry(dir, key)
  local path = entry_file(dir, key)
  if sys.kind(path) ~= "file" then return nil end
  local f = io.open(path, "rb")
  if not f then return nil end
  local text = f:read("*a")
  f:close()
  local ok, t = pcall(M.decode_json, text or "")
  if ok and type(t) == "table" and t.key == key and type(t.result) == "table" then return t.result end
  return nil
end

--- Record a config's result in its own file, written atomically (0600):
-- concurrent sweeps into one cache never overwrite each other's configs.
-- Returns true, or nil and why.
local function save_entry(dir, key, result)
  local ok, err = pcall(sys.write_file, entry_file(dir, key), M.encode_json({ key = key, result = result }) .. "\n")
  if not ok then return nil, message(err) end
  return true
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

--- Mark a config failed at a stage with the error's message.
local function fail(e, stage, err)
  e.status, e.reason = "failed", stage .. ": " .. message(err)
end

--- Build and trace one config; fills entry.spec or marks it failed.
local function build_one(spec, e)
  local ok, k = pcall(spec.build, e.cfg)
  if not ok then return fail(e, "build", k) end
  if type(k) ~= "table" then return fail(e, "build", ("build returned a %s; expected a kernel"):format(type(k))) end
  local ok2, s = pcall(function()
    e.values = spec.values and spec.values(e.cfg) or nil
    return k:specialize(e.values or {})
  end)
  if not ok2 then return fail(e, "trace", s) end
  e.kernel, e.spec, e.instructions = k, s, s.instructions
end

--- The reason of a failed compile: the first error or fatal line of the
-- compiler's log (PTX lines mapped to Lua lines), else its first lines.
local function compile_reason(log, ptx)
  local mapped = toolkit.map_lines(log, ptx)
  for line in mapped:gmatch("[^\n]+") do
    local low = line:lower()
    if low:find("error", 1, true) or low:find("fatal", 1, true) then return "compile: " .. line end
  end
  local head = mapped:match("[^\n]+\n?[^\n]*")
  return "compile: " .. (head or "the compiler failed and gave no message")
end

--- Compile every traced, uncached config in parallel in C threads (a
-- config the compiler rejects is marked failed, with a reason). Without a
-- compiler the emulator runs the PTX as it is; a GPU cannot, so each
-- config fails with the reason.
local function compile_all(entries, run)
  local todo = {}
  for _, e in ipairs(entries) do if e.spec and e.status == "ok" and not e.cached then todo[#todo + 1] = e end end
  if #todo == 0 or (not run.compile and not run.timed) then return end
  if not run.compile then
    for _, e in ipairs(todo) do fail(e, "compile", run.no_compiler) end
    return
  end
  local jobs = ffi.new("lpx_compile_job[?]", #todo)
  for i, e in ipairs(todo) do
    jobs[i - 1].ptx, jobs[i - 1].len, jobs[i - 1].arch = e.spec.ptx, #e.spec.ptx, e.spec.arch
  end
  local opts = ffi.new("lpx_compile_opts", { 1, -1, 0, 0, 0 })
  core.compile_many(compile.compiler(), jobs, #todo, opts, 0)
  for i, e in ipairs(todo) do
    local j = jobs[i - 1]
    if j.status ~= 0 then
      e.status, e.reason, e.settled = "failed", compile_reason(ffi.string(j.error), e.spec.ptx), true
    end
  end
end

--- ptxas resources of a config (registers, smem, spills).
local function resources(e)
  local ok, report = toolkit.ptxas(e.spec.ptx, e.spec.arch, { keep_failed = false })
  local r = ok and report[e.kernel.name]
  if r then
    e.registers, e.smem, e.spills = r.registers, r.smem + e.spec.dynamic_smem, r.spill_stores + r.spill_loads
    if e.spills > 0 and not e.reason then e.note = "spills" end
  end
end

--- A config's launch arguments: the inputs, then its values (the options
-- table of k(x, w, opts)) when the sweep has `values`.
local function launch_args(e, inputs)
  local args = { unpack(inputs) }
  if e.values then args[#args + 1] = e.values end
  return args
end

--- Check one config against the reference on the device.
local function check_one(e, inputs, want, tol)
  local ok, outs = pcall(function() return { e.kernel(unpack(launch_args(e, inputs))) } end)
  if not ok then return fail(e, "launch", outs) end
  for i, w in ipairs(want) do
    if outs[i] == nil then
      return fail(e, "check", ("the kernel has %d output(s) but the reference returned %d"):format(#outs, #want))
    end
    local ran, same, report = pcall(tensor.compare, outs[i], w, tol)
    if not ran then return fail(e, ("check (output %d)"):format(i), same) end
    if not same then
      e.status, e.reason, e.settled = "failed", ("wrong result (output %d): %s"):format(i, report.message), true
      return
    end
  end
end

--- Median of a list.
local function median(xs)
  table.sort(xs)
  return xs[math.floor(#xs / 2) + 1]
end

--- Time one config with device events: warm-up, then reps launches with
-- the L2 flushed before each and the input sets rotated; median ms.
local function time_one(spec, e, input_sets, dev, flush)
  local launchers = {}
  for i, inputs in ipairs(input_sets) do launchers[i] = runtime.prepare(e.kernel, unpack(launch_args(e, inputs))) end
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

--- Check (and on a GPU time) one compiled config. Any error, of any kind,
-- fails this config alone, with its message: the sweep goes on.
local function evaluate(spec, e, run)
  local stage = "resources"
  local ok, err = pcall(function()
    if run.ptxas then resources(e) end
    stage = "check"
    check_one(e, run.input_sets[1], run.want, spec.tolerance)
    stage = "time"
    if e.status == "ok" and run.timed then time_one(spec, e, run.input_sets, run.dev, run.flush) end
  end)
  if not ok then fail(e, stage, err) end
end

--- Build one config and look it up in the cache (any error fails it alone).
local function prepare(spec, e, run)
  local ok, err = pcall(function()
    build_one(spec, e)
    if not e.spec then return end
    e.cache_key = table.concat({ e.key, e.spec.arch, hash(e.spec.ptx), run.dev.name, run.shapes, run.compiler }, "|")
    local hit = run.cache and not run.force and load_entry(run.cache, e.cache_key)
    if hit then
      for k, v in pairs(hit) do e[k] = v end
      e.cached = true
    end
  end)
  if not ok then fail(e, "prepare", err) end
end

--- Note a warning in the result, and print it unless quiet.
local function warn(run, text)
  run.warnings[#run.warnings + 1] = text
  if not run.quiet then io.stderr:write("luaptx: warning: ", text, "\n") end
end

--- Record a finished config in the cache: correct ones, wrong results and
-- compile failures (errors that may be passing, e.g. a launch, are re-run).
local function record(e, run)
  if not (run.cache and e.cache_key and not e.cached and (e.status == "ok" or e.settled)) then return end
  local ok, err = save_entry(run.cache, e.cache_key, { status = e.status, reason = e.reason, ms = e.ms,
    registers = e.registers, smem = e.smem, spills = e.spills, instructions = e.instructions })
  if not ok and not run.save_failed then
    run.save_failed = true
    warn(run, "tune: results are not cached: " .. err)
  end
end

--- The sweep's shared state: device, inputs, reference, cache, compiler.
local function setup(spec, opts)
  local dev = opts.device or runtime.device()
  local run = { dev = dev, timed = dev.kind == "cuda", force = opts.force, warnings = {}, quiet = opts.quiet }
  run.input_sets = {}
  for r = 1, math.max(spec.rotate or 1, 1) do run.input_sets[r] = { spec.inputs(r) } end
  run.want = spec.reference and { spec.reference(unpack(run.input_sets[1])) } or {}
  run.shapes = shapes_of(run.input_sets[1])
  local why
  run.cache, why = open_cache(spec.name or "sweep", opts)
  if not run.cache then warn(run, "tune: results are not cached: " .. why) end
  local have, err = pcall(compile.compiler)
  run.compiler = have and compile.identity() or "no compiler"
  run.compile, run.ptxas = have, have and toolkit.find("ptxas") ~= nil
  if not have then
    run.no_compiler = message(err)
    if not run.timed then
      warn(run, "tune: " .. run.no_compiler .. "; the emulator runs the configs uncompiled (compile errors are not caught, no register counts)")
    end
  end
  return run
end

--- The ranking's description for the report.
local function ranking(run)
  if run.timed then return "median time (device events)" end
  if run.ptxas then return "emulator: timing is not meaningful; ranked by ptxas registers, then instructions" end
  return "emulator: timing is not meaningful; ranked by instructions (no ptxas: no register counts)"
end

--- The configs a run covers: the space, pruned, then the shard. A config
-- whose prune raises is kept, with the error to fail it (in pruned[key]).
-- Also the shard record { i, n, configs (of the whole sweep) } a merge
-- checks completeness by.
local function configs_of(spec, opts, pruned)
  local i, n = 1, 1
  if opts.shard then i, n = M.parse_shard(opts.shard) end   -- before any work: a bad array fails at once
  local prune = spec.prune and function(cfg)
    local ok, keep = pcall(spec.prune, cfg)
    if not ok then pruned[M.config_key(cfg)] = keep end
    return not ok or keep
  end
  local all = spec.configs and M.config_list(spec.configs, prune) or M.configs(spec.space, prune)
  return M.shard(all, i, n), { i = i, n = n, configs = #all }
end

--- How many of a sweep's configs shard i of n holds.
function M.shard_size(configs, i, n)
  return configs >= i and math.floor((configs - i) / n) + 1 or 0
end

--- Sort results: correct configs first, best first; failed ones by key.
local function sort_results(results, timed)
  table.sort(results, function(a, b)
    if (a.status == "ok") ~= (b.status == "ok") then return a.status == "ok" end
    if a.status ~= "ok" then return a.key < b.key end
    return better(a, b, timed)
  end)
end
M.sort_results = sort_results

--- Run a sweep. opts: device, shard = "i/n", force (re-run cached configs),
-- quiet (no progress line, no warnings printed), cache_dir (instead of
-- $LUAPTX_CACHE_DIR ...). Returns { name, device, timed, results = {...},
-- best, ranking, cache (the result directory or false), warnings, shard =
-- { i, n, configs } (1/1 without a shard; configs: the whole sweep's) }.
function M.run(spec, opts)
  opts = opts or {}
  if type(spec) ~= "table" or type(spec.build) ~= "function" or (type(spec.space) ~= "table" and type(spec.configs) ~= "table")
     or type(spec.inputs) ~= "function" or (spec.name ~= nil and type(spec.name) ~= "string") then
    error("tune: a sweep needs build = function(cfg) ... end, space = { NAME = {values...} } (or configs = { {NAME = value, ...}, ... }), " ..
          "inputs = function(seed) ... end and optionally name = \"...\"", 0)
  end
  local pruned = {}
  local all, shard = configs_of(spec, opts, pruned)
  local run = setup(spec, opts)
  local entries = {}
  for i, cfg in ipairs(all) do
    local e = { cfg = cfg, key = M.config_key(cfg), status = "ok" }
    entries[i] = e
    if pruned[e.key] then fail(e, "prune", pruned[e.key]) else prepare(spec, e, run) end
  end
  compile_all(entries, run)
  local state = { done = 0, failed = 0, t0 = os.clock(), tty = not opts.quiet and ffi.C.isatty(2) == 1 }
  run.flush = run.timed and l2_flusher(run.dev) or nil
  for _, e in ipairs(entries) do
    if e.spec and e.status == "ok" and not e.cached then evaluate(spec, e, run) end
    record(e, run)
    state.done = state.done + 1
    if e.status ~= "ok" then state.failed = state.failed + 1
    elseif not state.best or better(e, state.best, run.timed) then state.best = e end
    progress(state, #entries)
  end
  if state.tty then io.stderr:write("\n") end
  local results = {}
  for i, e in ipairs(entries) do
    results[i] = { config = e.cfg, key = e.key, status = e.status, reason = e.reason, ms = e.ms, registers = e.registers,
                   smem = e.smem, spills = e.spills, instructions = e.instructions, cached = e.cached or false }
  end
  sort_results(results, run.timed)
  local best = results[1] and results[1].status == "ok" and results[1] or nil
  return { name = spec.name or "sweep", device = run.dev.name, timed = run.timed, results = results, best = best,
           ranking = ranking(run), cache = run.cache or false, warnings = run.warnings, shard = shard }
end

--- A copy of a, then b's entries over it.
local function merged(a, b)
  local v = {}
  for key, x in pairs(a) do v[key] = x end
  for key, x in pairs(b or {}) do v[key] = x end
  return v
end

--- Sweep one kernel over configs of its template values for a host
-- (luaptx_kernel_tune, Python's luaptx.autotune), into the same
-- per-config cache as `luaptx tune`. values: the kernel's template values;
-- dev: the device; request (JSON): name (the sweep's), configs (a list of
-- { NAME = value }), inputs (a list of { dtype, shape }: random inputs of
-- those, seeded as a sweep's), values (more template values: bound dims,
-- runtime scalars), force, cache_dir, warmup, reps. Returns the result
-- of M.run as JSON.
function M.run_request(k, values, dev, request)
  local req = M.decode_json(request)
  if type(req) ~= "table" then error("tune: the request must be a JSON object", 0) end
  local base, specs = merged(values, req.values), {}
  for i, t in ipairs(req.inputs or {}) do
    local dtype = types.get(t.dtype)
    if not dtype or type(t.shape) ~= "table" then
      error(("tune: request input %d must be { dtype = a PTX type, shape = {...} }"):format(i), 0)
    end
    specs[i] = { shape = t.shape, dtype = dtype }
  end
  local sweep = {
    name = req.name, configs = req.configs, warmup = req.warmup, reps = req.reps,
    build = function() return k end,
    values = function(cfg) return merged(base, cfg) end,
    inputs = function(seed)
      local out = {}
      for i, t in ipairs(specs) do out[i] = tensor.rand(t.shape, t.dtype, { seed = seed, device = dev }) end
      return unpack(out)
    end,
  }
  return M.encode_json(M.run(sweep, { device = dev, force = req.force, quiet = true, cache_dir = req.cache_dir }))
end

return M
