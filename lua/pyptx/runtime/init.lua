--- The launch runtime: packing parameters and launching `k(x, w)` with
-- shapes bound from the input tensors, on the device pyptx.runtime.device
-- chooses (its open, device, use and current_arch are re-exported here).
local ffi = require "ffi"
local core = require "pyptx.core"
local types = require "pyptx.types"
local tensor = require "pyptx.runtime.tensor"
local async = require "pyptx.async"
local kernel = require "pyptx.kernel"
local device = require "pyptx.runtime.device"
local sass = require "pyptx.runtime.sass"

local M = {}

local check = device.check_status
local clock_ms = core.clock_ms
M.open, M.device, M.use, M.current_arch = device.open, device.device, device.use, device.current_arch

-- ------------------------------------------------------------ parameters

--- Pack params in declaration order with natural alignment: tensor
-- pointers, raw params (values by name), then the TMA maps of s.tma,
-- encoded by each tensor's device. Returns buffer, size and the layout
-- (one { offset, name, bytes, ... } per parameter, in order; the C API's
-- launch plans patch addresses at those offsets). Errors are raised at
-- level (relative to the caller; nil: no position).
function M.pack_params(s, tensors, values, level)
  level = level and level + 1 or 0
  local layout, size = {}, 0
  local function add(ty, value, name, bytes, align)
    align = align or math.min(bytes, 8)
    size = math.ceil(size / align) * align
    layout[#layout + 1] = { offset = size, type = ty, value = value, name = name, bytes = bytes }
    size = size + bytes
  end
  for i, t in ipairs(tensors) do add(types.u64, t.ptr, s.tensors[i].param, 8) end
  for _, p in ipairs(s.kernel.raw_params) do
    local ty = types.get(p[1]) or p[1]
    local v = values[p[2]]
    if v == nil then error(("kernel \"%s\": raw param '%s' has no value; pass it in the options table"):format(s.kernel.name, p[2]), level) end
    add(ty, v, p[2], ty.bytes * math.max(p.count or 1, 1), p.align)
  end
  for _, d in ipairs(s.tma or {}) do   -- TMA tensor maps (X:tma_desc): built from the actual tensor
    local bytes, err = async.tma_bytes(d, tensors[d.index])
    if not bytes then error(("kernel \"%s\": %s"):format(s.kernel.name, err), level) end
    add(types.b8, bytes, d.name, 128, 64)
  end
  local buf = ffi.new("uint8_t[?]", math.max(size, 1))
  for _, e in ipairs(layout) do
    local v = e.value
    if tensor.is(v) then v = v.ptr end
    if type(v) == "string" or (type(v) == "cdata" and e.bytes > 8) then
      -- an array parameter (a TMA descriptor, a struct): copy its bytes
      if type(v) == "string" and #v ~= e.bytes then
        error(("kernel \"%s\": raw param '%s' takes %d bytes, got %d"):format(s.kernel.name, e.name, e.bytes, #v), level)
      end
      ffi.copy(buf + e.offset, v, e.bytes)
    else
      ffi.cast(tensor.storage(e.type) .. "*", buf + e.offset)[0] = tensor.encode(e.type, v)
    end
  end
  return buf, size, layout
end

-- --------------------------------------------------------------- binding

-- The C binding's limits and device types (src/lpx_bind.h).
local BIND = {}
for _, key in ipairs { "DIMS", "TENSORS", "SYMS", "NAME", "CPU", "CUDA", "SCALARS" } do BIND[key] = tonumber(ffi.C["LPX_BIND_" .. key]) end

-- The DLPack device type of a device kind (pyptx.bind's CPU or CUDA).
local function dl_device(dev) return dev.kind == "cuda" and BIND.CUDA or BIND.CPU end

--- A kernel's boundary for the C binding (lpx_bind_kernel), made once per
-- kernel: its specs' dtypes, ranks and dims, its symbols by index. Raises
-- at level (nil: no position) when it is beyond the binding's limits.
function M.bind_kernel(k, level)
  level = (level or 0) > 0 and level + 1 or 0
  if k._bind then return k._bind, k._bind_syms end
  local d, syms, index = ffi.new("lpx_bind_kernel"), {}, {}
  local specs = {}
  for _, s in ipairs(k.in_specs) do specs[#specs + 1] = s end
  for _, s in ipairs(k.out_specs) do specs[#specs + 1] = s end
  if #specs > BIND.TENSORS then
    error(("kernel \"%s\" takes %d tensors; luaptx binds at most %d"):format(k.name, #specs, BIND.TENSORS), level)
  end
  ffi.copy(d.name, k.name:sub(1, BIND.NAME - 1))
  d.nin, d.nout = #k.in_specs, #k.out_specs
  for i, s in ipairs(specs) do
    local sp = d.spec[i - 1]
    local code, bits = ffi.new("uint8_t[1]"), ffi.new("uint8_t[1]")
    if core.bind_dtype(s.dtype.name, code, bits) == 0 then sp.code, sp.bits = code[0], bits[0] else sp.code = 255 end
    if #s.dims > BIND.DIMS then
      error(("kernel \"%s\": %s has rank %d; luaptx binds ranks up to %d"):format(k.name, tostring(s), #s.dims, BIND.DIMS), level)
    end
    sp.ndim = #s.dims
    for j, dim in ipairs(s.dims) do
      if type(dim) == "string" then
        if not index[dim] then
          if #syms == BIND.SYMS then error(("kernel \"%s\" has more than %d symbolic dims"):format(k.name, BIND.SYMS), level) end
          syms[#syms + 1] = dim
          index[dim] = #syms - 1
          ffi.copy(d.sym[#syms - 1], dim:sub(1, BIND.NAME - 1))
        end
        sp.sym[j - 1] = index[dim]
      else
        sp.sym[j - 1], sp.dim[j - 1] = -1, dim
      end
    end
  end
  d.nsyms = #syms
  M.bind_scalars(k, d)
  k._bind, k._bind_syms = d, syms
  return d, syms
end

--- Is raw param p a runtime scalar (one integer, f32 or f64 value, which
-- a host passes per launch)? Returns its DLPack code and bits.
function M.runtime_scalar(p)
  if (p.count or 1) ~= 1 then return nil end
  local code, bits = ffi.new("uint8_t[1]"), ffi.new("uint8_t[1]")
  if core.bind_dtype(tostring(p[1]), code, bits) ~= 0 then return nil end
  local c, b = code[0], bits[0]
  if c == 0 or c == 1 or c == 3 or (c == 2 and b >= 32) then return c, b end
  return nil
end

--- Fill d's runtime scalars (lpx_bind_param) from k's raw params.
function M.bind_scalars(k, d)
  d.nscalars = 0
  for i, p in ipairs(k.raw_params) do
    local code, bits = M.runtime_scalar(p)
    if code and d.nscalars < BIND.SCALARS then
      local sp = d.scalar[d.nscalars]
      ffi.copy(sp.name, tostring(p[2]):sub(1, BIND.NAME - 1))
      sp.code, sp.bits, sp.index = code, bits, i
      d.nscalars = d.nscalars + 1
    end
  end
end

--- A tensor (a runtime tensor, or a host view { dtype | dl_dtype, shape,
-- strides, ptr, device_type, flags }) as an lpx_bind_tensor; keep holds
-- the arrays it points to. default_type: the launch's device type.
local function bind_tensor(t, out, keep, default_type)
  local shape = ffi.new("int64_t[?]", math.max(#t.shape, 1), t.shape)
  keep[#keep + 1] = shape
  out.shape, out.ndim = shape, #t.shape
  if t.strides then
    local st = ffi.new("int64_t[?]", math.max(#t.strides, 1), t.strides)
    keep[#keep + 1] = st
    out.strides = st
  end
  if t.dl_dtype then
    out.code, out.bits, out.lanes = t.dl_dtype[1], t.dl_dtype[2], t.dl_dtype[3] or 1
  else
    local code, bits = ffi.new("uint8_t[1]"), ffi.new("uint8_t[1]")
    if core.bind_dtype(t.dtype.name, code, bits) == 0 then out.code, out.bits = code[0], bits[0] else out.code = 254 end
    out.lanes = 1
  end
  out.data = ffi.cast("const void *", t.ptr or 0)
  out.device_type = t.device and dl_device(t.device) or t.device_type or default_type
  out.flags = t.flags or 0
end

--- The one shape binding of every host launch, in C (lpx_bind.c): k(x, w)
-- and runtime.prepare pass the inputs (runtime tensors), with opts.out the
-- inputs then the outputs. Checks the count here (a Lua call's message),
-- then, in C, each tensor's dtype, rank, fixed dims, layout (compact
-- row-major; size-1 dims any stride), memory and device, and that each
-- symbolic dim takes one value; values holds the values given (options,
-- template values) and receives the bound dims. dev: the launch's device
-- (nil: the current one). Errors name the kernel and the argument, raised
-- at level (relative to the caller; nil: no position).
function M.bind(k, tensors, values, with_outputs, level, dev)
  level = level and level + 1 or 0
  local nin = #k.in_specs
  local want = nin + (with_outputs and #k.out_specs or 0)
  local d, syms = M.bind_kernel(k, level)
  local r = ffi.new("lpx_bind_result")
  if core.bind_count(d, #tensors, with_outputs and 1 or 0, r) ~= 0 then error(ffi.string(r.message), level) end
  local ts, keep = ffi.new("lpx_bind_tensor[?]", math.max(want, 1)), {}
  local launch_type = dl_device(dev or M.device())
  for i = 1, want do
    local t = tensors[i]
    if type(t) ~= "table" or type(t.shape) ~= "table" or not (t.dtype or t.dl_dtype) then
      error(("kernel \"%s\": %s must be a tensor, got %s"):format(k.name, i <= nin and ("input " .. i) or ("output " .. (i - nin)), tostring(t)), level)
    end
    bind_tensor(t, ts[i - 1], keep, launch_type)
  end
  core.bind_reset(d, r)
  for y, name in ipairs(syms) do
    if type(values[name]) == "number" then r.value[y - 1] = values[name] end
  end
  if core.bind_check(d, ts, want, launch_type, r) ~= 0 then error(ffi.string(r.message), level) end
  for y, name in ipairs(syms) do
    if r.value[y - 1] >= 0 and values[name] == nil then values[name] = tonumber(r.value[y - 1]) end
  end
  return values
end

--- Split a launch's values into template values and runtime scalars (k's
-- raw params of one number): each scalar given as a number is checked by
-- the C binding (lpx_bind_scalar: type and range, the check C hosts and
-- Python make too) and kept out of the specialization, so a new value
-- traces nothing. Returns the template values and the scalars by name;
-- errors at level.
function M.split_scalars(k, values, level)
  level = level and level + 1 or 0
  local d = M.bind_kernel(k, level)
  if d.nscalars == 0 then return values, {} end
  local template, scalars, r = {}, {}, nil
  for key, v in pairs(values) do template[key] = v end
  for j = 0, d.nscalars - 1 do
    local name = ffi.string(d.scalar[j].name)
    local v = values[name]
    if v ~= nil then
      template[name], scalars[name] = nil, v
      local bv = ffi.new("lpx_bind_value")
      if type(v) == "number" then
        if v == math.floor(v) and math.abs(v) < 2 ^ 63 then bv.kind, bv.i = ffi.C.LPX_BIND_INT, v
        else bv.kind, bv.f = ffi.C.LPX_BIND_FLOAT, v end
      elseif ffi.istype("uint64_t", v) then bv.kind, bv.i = ffi.C.LPX_BIND_UINT, ffi.cast("int64_t", v)
      elseif ffi.istype("int64_t", v) then bv.kind, bv.i = ffi.C.LPX_BIND_INT, v
      end
      if bv.kind ~= 0 then
        r = r or ffi.new("lpx_bind_result")
        local out = ffi.new("uint8_t[8]")
        if core.bind_scalar(d, j, bv, out, r) ~= 0 then error(ffi.string(r.message), level) end
      end
    end
  end
  return template, scalars
end

-- ---------------------------------------------------------------- launch

-- The hardware's launch limits: grid x, y, z; block x, y, z; threads per block.
local GRID_MAX, BLOCK_MAX, THREADS_MAX = { 2 ^ 31 - 1, 65535, 65535 }, { 1024, 1024, 64 }, 1024

--- Why a grid and a block cannot launch (nil when they can): each
-- dimension a positive integer within the limits; named by what (a kernel).
function M.dims_error(what, grid, block)
  local function fmt(d) return ("(%s, %s, %s)"):format(tostring(d[1]), tostring(d[2]), tostring(d[3])) end
  for i = 1, 3 do
    local g, b = grid[i], block[i]
    if type(g) ~= "number" or g < 1 or g > GRID_MAX[i] or g ~= math.floor(g) then
      return ("%s: grid %s is out of range; valid: x in 1..2147483647 (2^31-1), y and z in 1..65535"):format(what, fmt(grid))
    end
    if type(b) ~= "number" or b < 1 or b > BLOCK_MAX[i] or b ~= math.floor(b) then
      return ("%s: block %s is out of range; valid: x and y in 1..1024, z in 1..64, at most 1024 threads in all"):format(what, fmt(block))
    end
  end
  local threads = block[1] * block[2] * block[3]
  if threads > THREADS_MAX then
    return ("%s: block %s has %d threads; valid: at most 1024 threads in all"):format(what, fmt(block), threads)
  end
  return nil
end

--- Refuse a specialization whose grid or block cannot launch, at level.
local function check_dims(s, level)
  local bad = M.dims_error(("kernel \"%s\""):format(s.kernel.name), s.grid, s.block)
  if bad then error(bad, level and level + 1 or 0) end
end

--- The launch configuration of a specialization with a packed buffer
-- (grid and block checked first: a value above 2^32 would wrap).
function M.make_cfg(s, buf, size)
  check_dims(s)
  local cfg = ffi.new("lpx_launch_cfg")
  for d = 0, 2 do
    cfg.grid[d], cfg.block[d], cfg.cluster[d] = s.grid[d + 1], s.block[d + 1], s.cluster[d + 1]
  end
  cfg.dynamic_smem = s.dynamic_smem
  cfg.params, cfg.params_size = buf, size
  return cfg
end

--- Split k(x, w[, opts]) arguments into the input tensors and the options.
local function split_args(...)
  local args, n = { ... }, select("#", ...)
  local opts = {}
  if n > 0 and type(args[n]) == "table" and not tensor.is(args[n]) then opts = table.remove(args, n) end
  return args, opts
end

--- The output tensors opts.out provides (a tensor, or a list of one per
-- out_specs), or nil when the call allocates them; errors at level.
local function provided_outputs(k, out, dev, level)
  if out == nil then return nil end
  if tensor.is(out) then out = { out } end
  if type(out) ~= "table" then
    error(("kernel \"%s\": opts.out must be a tensor or a list of tensors (one per out_specs), got %s"):format(k.name, type(out)), level)
  end
  if #out ~= #k.out_specs then
    error(("kernel \"%s\": opts.out holds %d tensor(s); the kernel has %d output(s) (its out_specs)"):format(k.name, #out, #k.out_specs), level)
  end
  for i, t in ipairs(out) do
    if not tensor.is(t) then error(("kernel \"%s\": output %d (opts.out[%d]) must be a tensor, got %s"):format(k.name, i, i, type(t)), level) end
    if t.device ~= dev then
      error(("kernel \"%s\": output %d (opts.out[%d]) lives on %s, the launch runs on %s"):format(k.name, i, i, t.device.name, dev.name), level)
    end
  end
  return out
end

--- The one host launch path: check and bind the inputs (and the outputs
-- the caller provides in opts.out), specialize, load, allocate the other
-- outputs (poisoned unless opts.poison == false; provided ones are left
-- as they are: a kernel may accumulate into them) and pack the
-- parameters. Errors name the caller of the public function that called
-- this one (level 3 here). Returns { dev, s, fn, outs, buf, cfg }.
local function stage(k, args, opts)
  local values = {}
  for key, v in pairs(opts) do if key ~= "device" and key ~= "poison" and key ~= "out" then values[key] = v end end
  local dev = opts.device or M.device()
  local given = provided_outputs(k, opts.out, dev, 4)
  local bound = args
  if given then
    bound = {}
    for i, t in ipairs(args) do bound[i] = t end
    for _, t in ipairs(given) do bound[#bound + 1] = t end
  end
  if given and #args ~= #k.in_specs then M.bind(k, args, values, false, 3, dev) end   -- the inputs' own message
  M.bind(k, bound, values, given ~= nil, 3, dev)
  local template, scalars = M.split_scalars(k, values, 3)
  local t0 = clock_ms()
  local s = k:specialize(template)
  local t1 = clock_ms()
  check_dims(s, 3)
  local fn = dev:function_of(s)
  local t2 = clock_ms()
  local outs, all = given or {}, {}
  for i, t in ipairs(args) do all[i] = t end
  for i = #args + 1, #s.tensors do
    if not given then
      local spec = s.tensors[i]
      outs[#outs + 1] = tensor.empty(spec.shape, spec.dtype, dev)
      if opts.poison ~= false then outs[#outs]:poison() end
    end
    all[#all + 1] = outs[i - #args]
  end
  local packed = s.values                -- the runtime scalars over the specialization's values
  if next(scalars) then
    packed = {}
    for key, v in pairs(s.values) do packed[key] = v end
    for key, v in pairs(scalars) do packed[key] = v end
  end
  local buf, size = M.pack_params(s, all, packed, 3)
  local cfg = M.make_cfg(s, buf, size)
  -- what came before the launch, in ms: the trace (a cache hit when the
  -- kernel was traced before), compiling (CUDA) or decoding (the
  -- emulator) it for the device, allocating outputs and packing parameters
  local times = { trace = t1 - t0, load = t2 - t1, pack = clock_ms() - t2 }
  return { dev = dev, s = s, fn = fn, outs = outs, buf = buf, cfg = cfg, times = times }
end

--- Prepare a launch once: bind shapes, allocate outputs, pack parameters;
-- returns a launcher whose call only launches (no Lua-side work per call),
-- and the output tensors. launcher() launches; launcher.outputs holds them;
-- launcher.times what preparing took in ms: trace, load (compile or
-- decode for the device) and pack (outputs and parameters).
function M.prepare(k, ...)
  local args, opts = split_args(...)
  local st = stage(k, args, opts)
  local handle, launch, fn, cfg = st.dev.handle, core.device_launch, st.fn, st.cfg
  return setmetatable({ outputs = st.outs, inputs = args, buffer = st.buf, cfg = cfg, specialization = st.s, times = st.times }, {
    __call = function()
      if launch(handle, fn, cfg) < 0 then error(("launching kernel \"%s\": %s"):format(k.name, core.error_message()), 2) end
    end,
  })
end

--- k(x, w[, opts]): bind dims, allocate outputs, launch, return outputs.
-- opts may carry template values, raw param values, `device`, `out` (the
-- output tensors, allocated by the caller: pre-allocated, accumulated
-- into, or an input for in place) and poison = false to leave the
-- outputs it allocates unpoisoned.
function M.launch(k, ...)
  local args, opts = split_args(...)
  local st = stage(k, args, opts)
  check(core.device_launch(st.dev.handle, st.fn, st.cfg), ("launching kernel \"%s\""):format(k.name))
  return unpack(st.outs)
end

-- k(x, w), k:sass{} and kernel "auto" arch resolution go through this runtime.
kernel.use_runtime { launch = M.launch, current_arch = M.current_arch, sass = sass.kernel }

return M
