--- The Lua half of the C embedding API (src/lpx_embed.c, luaptx.h): a
-- context per luaptx_state, kernel lookup by name with template values,
-- and launches from DLPack tensors or raw device addresses.
local ffi = require "ffi"
local types = require "pyptx.types"
local script = require "pyptx.runtime.script"
local tensor = require "pyptx.runtime.tensor"
local core = require "pyptx.core"
local runtime = require "pyptx.runtime"
local compile = require "pyptx.runtime.compile"
local toolkit = require "pyptx.runtime.toolkit"

local M = {}

ffi.cdef [[
typedef struct { uint32_t major, minor; } lpx_DLPackVersion;
typedef struct { int32_t device_type; int32_t device_id; } lpx_DLDevice;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } lpx_DLDataType;
typedef struct { void *data; lpx_DLDevice device; int32_t ndim; lpx_DLDataType dtype;
                 int64_t *shape; int64_t *strides; uint64_t byte_offset; } lpx_DLTensor;
typedef struct { lpx_DLPackVersion version; void *manager_ctx; void (*deleter)(void *);
                 uint64_t flags; lpx_DLTensor dl_tensor; } lpx_DLManagedTensorVersioned;
typedef struct {
  void *device; void *ctx; int32_t fn; int32_t staged;
  uint32_t grid[3], block[3], cluster[3]; uint32_t dynamic_smem;
  const uint8_t *params; uint64_t params_size;
  int32_t ntensors; uint64_t tensor_offset[32];
  int32_t nmaps; int32_t map_tensor[8]; uint64_t map_offset[8]; char map_name[8][64];
} lpx_embed_plan;
]]

-- The limits of a launch plan (lpx_embed_plan in src/lpx_embed.c).
local PLAN_TENSORS, PLAN_MAPS, PLAN_NAME = 32, 8, 64

local KDLCPU, KDLCUDA = 1, 2
local DL_CODES = { [0] = "s", [1] = "u", [2] = "f", [4] = "bf" }

--- The pyptx type of a DLPack dtype, or nil.
local function dl_type(dt)
  if dt.lanes ~= 1 then return nil end
  local prefix = DL_CODES[dt.code]
  if not prefix then return nil end
  return types.get(prefix .. dt.bits)
end

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
  return entry.kernel:specialize(values)
end

--- The device's description.
function M.device_name(ctx) return device(ctx).name end

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
-- comma-separated: numbers, or symbol names not given as template values).
function M.kernel_specs(_, entry)
  local k = entry.kernel
  local lines = { "where " .. k.where, "params " .. param_names(k) }
  for _, s in ipairs(k.in_specs) do lines[#lines + 1] = spec_line("in", s, entry.values) end
  for _, s in ipairs(k.out_specs) do lines[#lines + 1] = spec_line("out", s, entry.values) end
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

--- What the runtime's binding reads of a DLTensor: its pyptx dtype (nil
-- when it has none) and how to name it, its shape and, when given, its
-- strides (elements, outermost first).
local function dl_view(t)
  local ty = dl_type(t.dtype)
  local v = { dtype = ty, shape = {}, dtype_text = ty and ty.name or
    ("DLPack dtype (code %d, %d bits, %d lanes)"):format(t.dtype.code, t.dtype.bits, t.dtype.lanes) }
  for d = 1, t.ndim do v.shape[d] = tonumber(t.shape[d - 1]) end
  if t.strides ~= nil then
    v.strides = {}
    for d = 1, t.ndim do v.strides[d] = tonumber(t.strides[d - 1]) end
  end
  return v
end

--- Bind dims and check DLTensors against the kernel's specs (inputs then
-- outputs) through runtime.bind, the binding k(x, w) uses; returns the
-- values table with dims bound.
local function bind(entry, tensors, n)
  local views, values = {}, {}
  for i = 1, n do views[i] = dl_view(tensors[i - 1]) end
  for key, v in pairs(entry.values) do values[key] = v end
  return runtime.bind(entry.kernel, views, values, true)
end

--- Launch a specialization with device addresses, on the device's stream.
local function launch_addrs(ctx, entry, values, addrs, stream)
  local dev = device(ctx)
  local s = entry.kernel:specialize(values)
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

--- Refuse tensor t (0-based i) in memory the device cannot use.
local function check_memory(dev, t, i)
  local dt = t.device.device_type
  if not ((dt == KDLCPU and dev.kind ~= "cuda") or (dt == KDLCUDA and dev.kind == "cuda")) then
    error(("tensor %d is in DLPack device type %d memory, which the %s device cannot use (CPU tensors need the emulator, CUDA tensors the cuda device)")
      :format(i + 1, dt, dev.kind), 0)
  end
end

--- Launch with DLTensors (CPU tensors are staged through device memory).
local function launch_tensors(ctx, entry, tensors, n, stream)
  local values = bind(entry, tensors, n)
  local dev = device(ctx)
  local addrs, staged = {}, {}
  for i = 0, n - 1 do
    local t = tensors[i]
    check_memory(dev, t, i)
    local bytes = t.dtype.bits / 8
    for d = 0, t.ndim - 1 do bytes = bytes * tonumber(t.shape[d]) end
    local base = ffi.cast("uint8_t *", t.data) + t.byte_offset
    if dev.kind ~= "cuda" then
      local ptr, mem = dev:alloc(bytes)
      dev:upload(ptr, base, bytes)
      addrs[i + 1], staged[#staged + 1] = ptr, { ptr = ptr, mem = mem, host = base, bytes = bytes }
    else
      addrs[i + 1] = ffi.cast("uint64_t", base)
    end
  end
  launch_addrs(ctx, entry, values, addrs, stream)
  for _, st in ipairs(staged) do dev:download(st.host, st.ptr, st.bytes) end
end

--- Prepare a launch plan for DLTensors of these shapes, dtypes and
-- devices (src/lpx_embed.c keeps it and runs later launches of the same
-- shapes in C, without Lua): binds and checks as a launch does, loads the
-- function and fills plan (an lpx_embed_plan *) with the device, the
-- launch configuration, the packed parameters (addresses placeholders:
-- where each tensor's address and each TMA map go is recorded). Returns
-- the packed buffer, which the caller copies before Lua runs again.
-- plan_size: sizeof(lpx_embed_plan) in C, checked against the cdef.
function M.plan_dlpack(ctx, entry, array, n, plan, plan_size)
  if plan_size ~= ffi.sizeof("lpx_embed_plan") then
    error(("luaptx: lpx_embed_plan is %d bytes in C but %d in Lua (a build mismatch)"):format(plan_size, ffi.sizeof("lpx_embed_plan")), 0)
  end
  local tensors = ffi.cast("lpx_DLTensor *const *", array)
  local values = bind(entry, tensors, n)
  local dev = device(ctx)
  local k = entry.kernel
  for i = 0, n - 1 do check_memory(dev, tensors[i], i) end
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
  local buf, size, layout = runtime.pack_params(s, views, s.values)
  local cfg = runtime.make_cfg(s, buf, size)
  local p = ffi.cast("lpx_embed_plan *", plan)
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

--- luaptx_launch_dlpack (the Lua path: the C API runs plans instead)
function M.launch_dlpack(ctx, entry, array, n, stream)
  launch_tensors(ctx, entry, ffi.cast("lpx_DLTensor *const *", array), n, stream)
end

--- luaptx_launch_dlpack_versioned: check each version, then launch.
function M.launch_dlpack_versioned(ctx, entry, array, n, stream)
  local mts = ffi.cast("lpx_DLManagedTensorVersioned *const *", array)
  local ts = ffi.new("lpx_DLTensor *[?]", math.max(n, 1))
  for i = 0, n - 1 do
    if mts[i].version.major ~= 1 then
      error(("tensor %d is DLPack version %d.%d; luaptx reads DLPack 1.x"):format(i + 1, mts[i].version.major, mts[i].version.minor), 0)
    end
    ts[i] = mts[i].dl_tensor
  end
  launch_tensors(ctx, entry, ts, n, stream)
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
