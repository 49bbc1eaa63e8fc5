--- The Lua half of the C embedding API (src/lpx_embed.c, luaptx.h): a
-- context per luaptx_state, kernel lookup by name with template values,
-- and launches from DLPack tensors or raw device addresses.
local ffi = require "ffi"
local script = require "pyptx.runtime.script"
local tensor = require "pyptx.runtime.tensor"
local core = require "pyptx.core"
local runtime = require "pyptx.runtime"
local compile = require "pyptx.runtime.compile"
local toolkit = require "pyptx.runtime.toolkit"

local M = {}

-- The limits of a launch plan (lpx_embed_plan, src/lpx_embed.h; its cdef
-- comes with the core's).
local PLAN_TENSORS, PLAN_MAPS, PLAN_NAME = tonumber(ffi.C.LPX_PLAN_TENSORS), tonumber(ffi.C.LPX_PLAN_MAPS), tonumber(ffi.C.LPX_PLAN_NAME)

local DEVICES = { auto = true, emu = true, cuda = true }

--- Open a context: the device, the cache dir, extra package.path. An
-- unknown device name is refused here, not at the first launch.
function M.open(device, cache_dir, lua_path, quiet)
  if not DEVICES[device] then
    error(("luaptx_open: unknown device '%s'; valid: auto, emu, cuda"):format(device), 0)
  end
  if lua_path ~= "" then package.path = lua_path .. ";" .. package.path end
  if cache_dir ~= "" then
    ffi.cdef "int setenv(const char *, const char *, int);"
    ffi.C.setenv("LUAPTX_CACHE_DIR", cache_dir, 1)
  end
  return { device_kind = device, quiet = quiet, kernels = {} }
end

--- The context's device, opened on first use; it becomes the state's
-- current device, so that a kernel of arch "auto" is built for it.
local function device(ctx)
  if ctx.device then return ctx.device end
  if ctx.device_kind == "auto" then
    local ok, dev = pcall(runtime.open, "cuda")
    ctx.device = ok and dev or runtime.open("emu")
    if not ctx.quiet then io.stderr:write("luaptx: device ", ctx.device.name, "\n") end
  else
    ctx.device = runtime.open(ctx.device_kind)
  end
  runtime.use(ctx.device)
  return ctx.device
end

--- The specialization of an entry; arch "auto" is the context's
-- device's (opened for it when it can be; else LUAPTX_ARCH or the default).
local function specialize(ctx, entry, values)
  if (values.arch or entry.kernel.arch) == "auto" then pcall(device, ctx) end
  local ok, s = pcall(entry.kernel.specialize, entry.kernel, values)
  if ok then return s end
  -- a C caller binds values through luaptx_kernel_get's params, not k:ptx{}
  error((tostring(s):gsub("pass it, e%.g%. k:ptx{(%S+) = (%d+)}", "pass it in luaptx_kernel_get's params, e.g. \"%1=%2\"")), 0)
end

--- The device's description.
function M.device_name(ctx) return device(ctx).name end

--- The device's kind ("emu" or "cuda"), for the C API's device checks.
function M.device_kind(ctx) return device(ctx).kind end

--- Add a script's kernels to the context.
local function add(ctx, s)
  for _, e in ipairs(script.entries(s)) do ctx.kernels[#ctx.kernels + 1] = e end
end

--- Load a script file.
function M.load_file(ctx, path) add(ctx, script.load_file(path)) end

--- Load a script from a string.
function M.load_string(ctx, chunk, name) add(ctx, script.load_string(chunk, name)) end

--- Parse "A=1,B=x" into a values table (numbers where they parse).
local function parse_params(params)
  local values = {}
  for item in params:gmatch("[^,]+") do
    local k, v = item:match("^%s*([%w_]+)%s*=%s*(.-)%s*$")
    if not k then error(("kernel parameters: '%s' is not NAME=value"):format(item), 0) end
    values[k] = tonumber(v) or v
  end
  return values
end

--- Find a kernel by name; returns an entry { kernel, values }.
function M.kernel_get(ctx, name, params)
  local names = {}
  for _, e in ipairs(ctx.kernels) do
    if e.kernel.name == name then
      local values = {}
      for k, v in pairs(e.values) do values[k] = v end
      for k, v in pairs(parse_params(params)) do values[k] = v end
      return { kernel = e.kernel, values = values }
    end
    names[#names + 1] = e.kernel.name
  end
  error(("no kernel named '%s' in the loaded scripts (they define: %s)"):format(name,
    #names > 0 and table.concat(names, ", ") or "nothing; load a script first"), 0)
end

--- PTX of an entry's specialization.
function M.kernel_ptx(ctx, entry) return specialize(ctx, entry, entry.values).ptx end

--- Cubin of an entry's specialization (through the cache).
function M.kernel_cubin(ctx, entry)
  return compile.kernel_cubin(specialize(ctx, entry, entry.values)).data
end

--- The names of the loaded kernels, comma-separated.
function M.kernel_names(ctx)
  local names = {}
  for _, e in ipairs(ctx.kernels) do names[#names + 1] = e.kernel.name end
  return table.concat(names, ",")
end

--- One line per dim list of a spec: a dim as its number, its given value
-- or its symbol name.
local function spec_line(role, spec, values)
  local dims = {}
  for i, d in ipairs(spec.dims) do dims[i] = tostring(type(d) == "string" and values[d] or d) end
  return ("%s %s %s"):format(role, spec.dtype.name, #dims > 0 and table.concat(dims, ",") or "-")
end

--- The names a kernel takes as template values, sorted and comma-
-- separated ("-" for none): its params and its raw params.
local function param_names(k)
  local names, seen = {}, {}
  for name in pairs(k.params) do seen[name] = true end
  for _, p in ipairs(k.raw_params) do seen[p[2]] = true end
  for name in pairs(seen) do names[#names + 1] = tostring(name) end
  table.sort(names)
  return #names > 0 and table.concat(names, ",") or "-"
end

--- The boundary of an entry's kernel as text for hosts that bind shapes
-- themselves (the Python package): "where FILE:LINE", "params NAMES"
-- (the template values it declares, comma-separated, "-" for none), then
-- "in DTYPE DIMS" per in_spec and "out DTYPE DIMS" per out_spec (DIMS
-- comma-separated: numbers, or symbol names not given as template values),
-- and when it has runtime scalars "scalars NAME:TYPE,..." (raw_params order).
function M.kernel_specs(_, entry)
  local k = entry.kernel
  local lines = { "where " .. k.where, "params " .. param_names(k) }
  for _, s in ipairs(k.in_specs) do lines[#lines + 1] = spec_line("in", s, entry.values) end
  for _, s in ipairs(k.out_specs) do lines[#lines + 1] = spec_line("out", s, entry.values) end
  local scalars = {}
  for _, p in ipairs(k.raw_params) do
    if runtime.runtime_scalar(p) then scalars[#scalars + 1] = ("%s:%s"):format(p[2], tostring(p[1])) end
  end
  if #scalars > 0 then lines[#lines + 1] = "scalars " .. table.concat(scalars, ",") end
  return table.concat(lines, "\n")
end

--- ptxas's resource report of an entry's specialization as "key=value"
-- lines; raises with the toolkit's message or ptxas's log on failure.
function M.kernel_check(ctx, entry)
  local s = specialize(ctx, entry, entry.values)
  if not toolkit.find("ptxas") then error(toolkit.missing_message("ptxas"), 0) end
  local ok, report, log = toolkit.ptxas(s.ptx, s.arch)
  if not ok then error(("kernel \"%s\": ptxas failed:\n%s"):format(entry.kernel.name, log), 0) end
  local r = report[entry.kernel.name] or {}
  return ("arch=%s\ninstructions=%d\nregisters=%d\nsmem=%d\ndynamic_smem=%d\nspills=%d\nstack=%d"):format(
    s.arch, s.instructions, r.registers or 0, r.smem or 0, s.dynamic_smem,
    (r.spill_stores or 0) + (r.spill_loads or 0), r.stack or 0)
end

--- Fill a kernel's boundary (lpx_bind_kernel *) for the C API's checks
-- (lpx_bind_check) and its template values that are symbolic dims
-- (int64_t *given, -1 for the others); scalar_given (int32_t *): 1 per
-- runtime scalar given a template value, else 0.
function M.kernel_bind(_, entry, bind, given, scalar_given)
  local d, syms = runtime.bind_kernel(entry.kernel)
  ffi.copy(bind, d, ffi.sizeof("lpx_bind_kernel"))
  local g = ffi.cast("int64_t *", given)
  for y = 0, tonumber(ffi.C.LPX_BIND_SYMS) - 1 do
    local v = syms[y + 1] and entry.values[syms[y + 1]]
    g[y] = type(v) == "number" and v or -1
  end
  local sg = ffi.cast("int32_t *", scalar_given)
  for j = 0, d.nscalars - 1 do sg[j] = entry.values[ffi.string(d.scalar[j].name)] ~= nil and 1 or 0 end
end

--- Launch a specialization with device addresses, on the device's stream.
local function launch_addrs(ctx, entry, values, addrs, stream)
  local dev = device(ctx)
  local s = specialize(ctx, entry, values)
  local fn = dev:function_of(s)
  -- what the runtime needs of a tensor (its address, and for TMA maps its
  -- shape, compact row-major strides, dtype and device), from the specs
  local views = {}
  for i, a in ipairs(addrs) do
    local spec = s.tensors[i]
    views[i] = { ptr = a, shape = spec.shape, dtype = spec.dtype, strides = tensor.row_major(spec.shape),
                 elem_size = ffi.sizeof(tensor.storage(spec.dtype)), device = dev }
  end
  local buf, size = runtime.pack_params(s, views, s.values)
  if dev.kind == "cuda" then core.device_set_option(dev.handle, "stream", ffi.cast("intptr_t", stream)) end
  local cfg = runtime.make_cfg(s, buf, size)
  if core.device_launch(dev.handle, fn, cfg) < 0 then
    error(("launching kernel \"%s\": %s"):format(entry.kernel.name, core.error_message()), 0)
  end
  -- the emulator's launch is done when it returns; a CUDA launch stays
  -- queued on the caller's stream (no sync: capturable in a CUDA graph)
  if dev.kind ~= "cuda" then dev:sync() end
end

--- Prepare a launch plan for n tensors whose dims C bound (lpx_bind_check:
-- bound, an int64_t * per symbol of runtime.bind_kernel, -1 unbound);
-- src/lpx_embed.c keeps it and runs later launches of the same shapes in
-- C, without Lua. Loads the function and fills plan (an lpx_embed_plan *)
-- with the device, the launch configuration, the packed parameters
-- (addresses placeholders: where each tensor's address and each TMA map
-- go is recorded). Returns the packed buffer, which the caller copies
-- before Lua runs again. plan_size: sizeof(lpx_embed_plan) in C, checked
-- against the cdef.
function M.plan_dlpack(ctx, entry, bound, n, plan, plan_size)
  if plan_size ~= ffi.sizeof("lpx_embed_plan") then
    error(("luaptx: lpx_embed_plan is %d bytes in C but %d in Lua (a build mismatch)"):format(plan_size, ffi.sizeof("lpx_embed_plan")), 0)
  end
  local k = entry.kernel
  local values, _, syms = {}, runtime.bind_kernel(k)
  for key, v in pairs(entry.values) do values[key] = v end
  local b = ffi.cast("const int64_t *", bound)
  for y, name in ipairs(syms) do
    if b[y - 1] >= 0 and values[name] == nil then values[name] = tonumber(b[y - 1]) end
  end
  local dev = device(ctx)
  local s = k:specialize(values)
  local fn = dev:function_of(s)
  if n > PLAN_TENSORS or #(s.tma or {}) > PLAN_MAPS then
    error(("kernel \"%s\": a C API launch takes at most %d tensors and %d TMA maps"):format(k.name, PLAN_TENSORS, PLAN_MAPS), 0)
  end
  local views = {}
  for i = 1, n do   -- placeholder addresses, 64 KiB aligned: C patches the real ones per launch
    local spec = s.tensors[i]
    views[i] = { ptr = ffi.cast("uint64_t", 0x10000 * i), shape = spec.shape, dtype = spec.dtype,
                 strides = tensor.row_major(spec.shape), elem_size = ffi.sizeof(tensor.storage(spec.dtype)), device = dev }
  end
  -- runtime scalars without a template value: placeholders C patches per launch
  local packed, bk = {}, runtime.bind_kernel(k)
  for key, v in pairs(s.values) do packed[key] = v end
  for j = 0, bk.nscalars - 1 do
    local name = ffi.string(bk.scalar[j].name)
    if packed[name] == nil then packed[name] = 0 end
  end
  local buf, size, layout = runtime.pack_params(s, views, packed)
  local cfg = runtime.make_cfg(s, buf, size)
  local p = ffi.cast("lpx_embed_plan *", plan)
  p.nscalars = bk.nscalars
  for j = 0, bk.nscalars - 1 do p.scalar_offset[j] = layout[n + bk.scalar[j].index].offset end
  p.device, p.ctx, p.fn, p.staged = dev.handle, core.ctx, fn, dev.kind == "cuda" and 0 or 1
  for d = 0, 2 do p.grid[d], p.block[d], p.cluster[d] = cfg.grid[d], cfg.block[d], cfg.cluster[d] end
  p.dynamic_smem, p.params, p.params_size = cfg.dynamic_smem, buf, size
  p.ntensors = n
  for i = 1, n do p.tensor_offset[i - 1] = layout[i].offset end
  local maps = s.tma or {}
  p.nmaps = #maps
  for j, d in ipairs(maps) do
    p.map_tensor[j - 1], p.map_offset[j - 1] = d.index - 1, layout[#layout - #maps + j].offset
    ffi.copy(p.map_name[j - 1], d.tensor:sub(1, PLAN_NAME - 1))
  end
  return buf
end

--- An entry's kernel, its template values and the context's device, for
-- the tools that act on a kernel of the C API (luaptx_kernel_tune calls
-- pyptx.tools.tune with them: the runtime does not require the tools).
function M.kernel_target(ctx, entry)
  return entry.kernel, entry.values, device(ctx)
end

--- luaptx_launch_ptrs: raw device addresses, shapes from the values.
function M.launch_ptrs(ctx, entry, array, n, stream)
  local ptrs = ffi.cast("const uint64_t *", array)
  local addrs = {}
  for i = 0, n - 1 do addrs[i + 1] = ptrs[i] end
  local k = entry.kernel
  if n ~= #k.in_specs + #k.out_specs then
    error(("kernel \"%s\" takes %d tensors (inputs then outputs), got %d"):format(k.name, #k.in_specs + #k.out_specs, n), 0)
  end
  launch_addrs(ctx, entry, entry.values, addrs, stream)
end

return M
