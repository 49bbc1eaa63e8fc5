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

local M = {}

local check = device.check_status
M.open, M.device, M.use, M.current_arch = device.open, device.device, device.use, device.current_arch

-- ------------------------------------------------------------ parameters

--- Pack params in declaration order with natural alignment: tensor
-- pointers, then raw params (values by name). Returns buffer, size.
function M.pack_params(s, tensors, values)
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
    if v == nil then error(("kernel \"%s\": raw param '%s' has no value; pass it in the options table"):format(s.kernel.name, p[2]), 3) end
    add(ty, v, p[2], ty.bytes * math.max(p.count or 1, 1), p.align)
  end
  for _, d in ipairs(s.tma or {}) do   -- TMA tensor maps (X:tma_desc): built from the actual tensor
    add(types.b8, async.tma_bytes(d, tensors[d.index]), d.name, 128, 64)
  end
  local buf = ffi.new("uint8_t[?]", math.max(size, 1))
  for _, e in ipairs(layout) do
    local v = e.value
    if tensor.is(v) then v = v.ptr end
    if type(v) == "string" or (type(v) == "cdata" and e.bytes > 8) then
      -- an array parameter (a TMA descriptor, a struct): copy its bytes
      if type(v) == "string" and #v ~= e.bytes then
        error(("kernel \"%s\": raw param '%s' takes %d bytes, got %d"):format(s.kernel.name, e.name, e.bytes, #v), 3)
      end
      ffi.copy(buf + e.offset, v, e.bytes)
    else
      ffi.cast(tensor.storage(e.type) .. "*", buf + e.offset)[0] = tensor.encode(e.type, v)
    end
  end
  return buf, size
end

-- ---------------------------------------------------------------- launch

--- Bind the symbolic dims of in_specs from the input tensors' shapes.
local function bind_dims(k, args, values)
  local bound_by = {}
  for i, spec in ipairs(k.in_specs) do
    local t = args[i]
    if not tensor.is(t) then error(("kernel \"%s\": input %d must be a tensor, got %s"):format(k.name, i, tostring(t)), 4) end
    if t.dtype ~= spec.dtype then
      error(("kernel \"%s\": input %d is %s but in_specs[%d] is %s"):format(k.name, i, t.dtype.name, i, tostring(spec)), 4)
    end
    if #t.shape ~= #spec.dims then
      error(("kernel \"%s\": input %d has rank %d (%s) but in_specs[%d] is %s"):format(k.name, i, #t.shape, table.concat(t.shape, "x"), i, tostring(spec)), 4)
    end
    for d, dim in ipairs(spec.dims) do
      local got = t.shape[d]
      if type(dim) == "number" and dim ~= got then
        error(("kernel \"%s\": input %d dim %d is %d but in_specs[%d] fixes it at %d"):format(k.name, i, d, got, i, dim), 4)
      elseif type(dim) == "string" then
        if values[dim] == nil then values[dim], bound_by[dim] = got, { i, t.shape }
        elseif values[dim] ~= got then
          local prev = bound_by[dim]
          error(("kernel \"%s\": dimension %s is %d from input %d (shape %s) but %d from input %d (shape %s)")
            :format(k.name, dim, values[dim], prev and prev[1] or 0, prev and table.concat(prev[2], "x") or "option",
              got, i, table.concat(t.shape, "x")), 4)
        end
      end
    end
  end
end

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

--- The one host launch path: check and bind the inputs, specialize, load,
-- allocate the outputs (poisoned unless opts.poison == false) and pack the
-- parameters. Errors name the caller of the public function that called
-- this one (level 3 here). Returns { dev, s, fn, outs, buf, cfg }.
local function stage(k, args, opts)
  if #args ~= #k.in_specs then
    error(("kernel \"%s\" takes %d input tensor(s) (its in_specs), got %d"):format(k.name, #k.in_specs, #args), 3)
  end
  local dev = opts.device or M.device()
  local values = {}
  for key, v in pairs(opts) do if key ~= "device" and key ~= "poison" then values[key] = v end end
  bind_dims(k, args, values)
  local s = k:specialize(values)
  check_dims(s, 3)
  local fn = dev:function_of(s)
  local outs, all = {}, {}
  for i, t in ipairs(args) do all[i] = t end
  for i = #args + 1, #s.tensors do
    local spec = s.tensors[i]
    outs[#outs + 1] = tensor.empty(spec.shape, spec.dtype, dev)
    if opts.poison ~= false then outs[#outs]:poison() end
    all[#all + 1] = outs[#outs]
  end
  local buf, size = M.pack_params(s, all, s.values)
  return { dev = dev, s = s, fn = fn, outs = outs, buf = buf, cfg = M.make_cfg(s, buf, size) }
end

--- Prepare a launch once: bind shapes, allocate outputs, pack parameters;
-- returns a launcher whose call only launches (no Lua-side work per call),
-- and the output tensors. launcher() launches; launcher.outputs holds them.
function M.prepare(k, ...)
  local args, opts = split_args(...)
  local st = stage(k, args, opts)
  local handle, launch, fn, cfg = st.dev.handle, core.device_launch, st.fn, st.cfg
  return setmetatable({ outputs = st.outs, inputs = args, buffer = st.buf, cfg = cfg, specialization = st.s }, {
    __call = function()
      if launch(handle, fn, cfg) < 0 then error(("launching kernel \"%s\": %s"):format(k.name, core.error_message()), 2) end
    end,
  })
end

--- k(x, w[, opts]): bind dims, allocate outputs, launch, return outputs.
-- opts may carry template values, raw param values, `device`, and
-- poison = false to leave the outputs unpoisoned.
function M.launch(k, ...)
  local args, opts = split_args(...)
  local st = stage(k, args, opts)
  check(core.device_launch(st.dev.handle, st.fn, st.cfg), ("launching kernel \"%s\""):format(k.name))
  return unpack(st.outs)
end

-- k(x, w) and kernel "auto" arch resolution go through this runtime.
kernel.use_runtime { launch = M.launch, current_arch = M.current_arch }

return M
