--- The device runtime: choosing a device (LUAPTX_DEVICE=auto|emu|cuda),
-- memory, loading traced kernels, packing parameters and launching
-- `k(x, w)` with shapes bound from the input tensors.
local ffi = require "ffi"
local core = require "pyptx.core"
local types = require "pyptx.types"
local tensor = require "pyptx.tensor"
local env = require "pyptx.env"

local M = {}

local Device = {}
Device.__index = Device

--- Fail with the core's message, prefixed by what was attempted.
local function check(rc, what)
  if rc < 0 then error(what .. ": " .. core.error_message(), 3) end
end

--- Open a device of a kind; nil and the core's reason when it cannot be.
local function open_kind(kind)
  if not core.device_open then return nil, "this luaptx build has no device support" end
  local h = core.device_open(core.ctx, kind)
  if h == nil then return nil, core.error_message() end
  h = ffi.gc(h, core.device_close)
  local dev = setmetatable({ handle = h, kind = ffi.string(core.device_kind(h)), name = ffi.string(core.device_describe(h)) }, Device)
  local cc = ffi.new("int64_t[1]")
  if dev.kind == "cuda" and core.device_get_option(h, "cc", cc) == 0 then
    local n = tonumber(cc[0])
    dev.arch = ("sm_%d%s"):format(n, n >= 90 and "a" or "")
  end
  return dev
end

--- Open a device of a kind ("emu", "cuda"); errors carry the core's reason.
function M.open(kind)
  local dev, err = open_kind(kind)
  if not dev then error(err, 2) end
  return dev
end

local current

--- The current device, opened on first use from $LUAPTX_DEVICE (default
-- auto: cuda when a driver and a GPU exist, else the emulator; says which).
function M.device()
  if current then return current end
  local want = env.choice("LUAPTX_DEVICE", { "auto", "emu", "cuda" }, "auto")
  local dev, err
  if want == "auto" then
    dev = open_kind("cuda")
    if not dev then dev, err = open_kind("emu") end
  else
    dev, err = open_kind(want)
  end
  if not dev then error(err, 0) end   -- the reason names the device or the variable
  current = dev
  if want == "auto" then io.stderr:write("luaptx: device ", current.name, "\n") end
  return current
end

--- Make dev the current device (e.g. runtime.use(runtime.open("emu"))).
function M.use(dev) current = dev end

--- The arch "auto" means on the current device.
function M.current_arch()
  local dev = M.device()
  return dev.arch or "sm_90a"
end

--- Allocate n bytes; returns the device address and a handle whose
-- collection frees the memory.
function Device:alloc(n)
  local p = ffi.new("uint64_t[1]")
  check(core.device_alloc(self.handle, n, p), "device alloc of " .. n .. " bytes")
  local handle = self.handle
  local box = ffi.gc(ffi.new("uint64_t[1]", p[0]), function(b) core.device_free(handle, b[0]) end)
  return p[0], box
end

--- Copy n bytes from a host pointer to a device address.
function Device:upload(dst, src, n) check(core.device_upload(self.handle, dst, src, n), "upload") end

--- Copy n bytes from a device address to a host pointer.
function Device:download(dst, src, n) check(core.device_download(self.handle, dst, src, n), "download") end

--- Set n bytes at a device address to a byte value.
function Device:memset(dst, b, n) check(core.device_memset(self.handle, dst, b, n), "memset") end

--- Fill count elements of width bytes at a device address with pattern.
function Device:fill(dst, pattern, width, count) check(core.device_fill(self.handle, dst, pattern, width, count), "fill") end

--- Wait for all work on the device.
function Device:sync() check(core.device_sync(self.handle), "sync") end

--- Set a device option by name (the emulator's: budget, threads, checks,
-- schedule, race_check, uninit_check, align_check; see docs/emulator.md),
-- e.g. dev:set_option("schedule", 7) for the adversarial schedule with seed 7.
function Device:set_option(name, value)
  check(core.device_set_option(self.handle, name, value), "device option " .. tostring(name))
  self.name = ffi.string(core.device_describe(self.handle))
end

--- The value of a device option.
function Device:option(name)
  local v = ffi.new("int64_t[1]")
  check(core.device_get_option(self.handle, name, v), "device option " .. tostring(name))
  return tonumber(v[0])
end

--- Capture the launches fn makes into a graph; returns a function that
-- replays them (a CUDA graph on a GPU, a recorded sequence on the emulator).
function Device:capture(fn)
  check(core.device_graph_begin(self.handle), "graph capture")
  local ok, err = pcall(fn)
  local g = ffi.new("int32_t[1]")
  local rc = core.device_graph_end(self.handle, g)
  if not ok then error(err, 2) end
  check(rc, "graph capture")
  local handle, id = self.handle, g[0]
  return function()
    if core.device_graph_launch(handle, id) < 0 then error("graph replay: " .. core.error_message(), 2) end
  end
end

--- The device function of a specialization (loaded once per device).
function Device:function_of(s)
  s.loaded = s.loaded or {}
  local fn = s.loaded[self]
  if fn then return fn end
  local mod, f = ffi.new("int32_t[1]"), ffi.new("int32_t[1]")
  check(core.device_load_ir(self.handle, s.module, mod), "loading kernel " .. s.kernel.name)
  check(core.device_function(self.handle, mod[0], s.kernel.name, f), "kernel " .. s.kernel.name)
  s.loaded[self] = f[0]
  return f[0]
end

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
    add(types.b8, require("pyptx.async").tma_bytes(d, tensors[d.index]), d.name, 128, 64)
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

return M
