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

--- "input 2" / "output 1" and its spec's name ("in_specs[2]") for
-- argument i of a launch whose first nin tensors are the inputs.
local function arg_names(i, nin)
  if i <= nin then return ("input %d"):format(i), ("in_specs[%d]"):format(i) end
  return ("output %d"):format(i - nin), ("out_specs[%d]"):format(i - nin)
end

--- A shape as text: 4x512.
local function shape_text(shape) return #shape > 0 and table.concat(shape, "x") or "scalar" end

--- Check one tensor against its spec and bind the spec's symbolic dims;
-- returns an error text or nil. bound_by[name] = { argument, shape }.
local function bind_one(spec, t, arg, spec_name, values, bound_by)
  local shape = t.shape
  if t.dtype ~= spec.dtype then
    return ("%s is %s but %s is %s"):format(arg, t.dtype_text or t.dtype.name, spec_name, tostring(spec))
  end
  if #shape ~= #spec.dims then
    return ("%s has rank %d (shape %s) but %s is %s"):format(arg, #shape, shape_text(shape), spec_name, tostring(spec))
  end
  for d, dim in ipairs(spec.dims) do
    local got = shape[d]
    if type(dim) == "number" and dim ~= got then
      return ("%s dim %d is %d but %s fixes it at %d"):format(arg, d, got, spec_name, dim)
    elseif type(dim) == "string" and values[dim] == nil then
      values[dim], bound_by[dim] = got, { arg, shape }
    elseif type(dim) == "string" and values[dim] ~= got then
      local prev = bound_by[dim]
      return ("dimension %s is %d %s but %d from %s (shape %s)"):format(dim, values[dim],
        prev and ("from %s (shape %s)"):format(prev[1], shape_text(prev[2])) or "(a given value)", got, arg, shape_text(shape))
    end
  end
  local expect = 1
  for d = #shape, 1, -1 do
    if t.strides and t.strides[d] ~= expect then
      return ("%s is not compact row-major: strides %s (elements), expected %s"):format(arg,
        table.concat(t.strides, "x"), table.concat(tensor.row_major(shape), "x"))
    end
    expect = expect * shape[d]
  end
end

--- The one shape binding of every host launch: k(x, w) and runtime.prepare
-- pass the inputs (runtime tensors); the C API (pyptx.embed) passes the
-- inputs then the outputs as views of its DLPack tensors ({ dtype,
-- dtype_text, shape, strides } in elements, outermost first). Checks the
-- count, then each tensor's dtype, rank, fixed dims and compact row-major
-- strides, and that each symbolic dim takes one value; values holds the
-- values given (options, template values) and receives the bound dims.
-- Errors name the kernel and the argument, raised at level (relative to
-- the caller; nil: no position).
function M.bind(k, tensors, values, with_outputs, level)
  level = level and level + 1 or 0
  local nin, specs = #k.in_specs, {}
  for _, s in ipairs(k.in_specs) do specs[#specs + 1] = s end
  if with_outputs then for _, s in ipairs(k.out_specs) do specs[#specs + 1] = s end end
  if #tensors ~= #specs then
    error(with_outputs
      and ("kernel \"%s\" takes %d tensors (%d input(s), then %d output(s)), got %d"):format(k.name, #specs, nin, #specs - nin, #tensors)
      or ("kernel \"%s\" takes %d input tensor(s) (its in_specs), got %d"):format(k.name, nin, #tensors), level)
  end
  local bound_by = {}
  for i, spec in ipairs(specs) do
    local t, arg, spec_name = tensors[i], arg_names(i, nin)
    if type(t) ~= "table" or type(t.shape) ~= "table" or not (t.dtype or t.dtype_text) then
      error(("kernel \"%s\": %s must be a tensor, got %s"):format(k.name, arg, tostring(t)), level)
    end
    local err = bind_one(spec, t, arg, spec_name, values, bound_by)
    if err then error(("kernel \"%s\": %s"):format(k.name, err), level) end
  end
  return values
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
  if given and #args ~= #k.in_specs then M.bind(k, args, values, false, 3) end   -- the inputs' own message
  M.bind(k, bound, values, given ~= nil, 3)
  local t0 = clock_ms()
  local s = k:specialize(values)
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
  local buf, size = M.pack_params(s, all, s.values, 3)
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
