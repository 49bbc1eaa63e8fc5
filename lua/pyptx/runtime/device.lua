--- Devices: choosing one (LUAPTX_DEVICE=auto|emu|cuda), its memory, its
-- graphs, and loading traced kernels onto it. The lowest runtime module:
-- tensors live on a device, launches (pyptx.runtime) run on one.
local ffi = require "ffi"
local core = require "pyptx.core"
local env = require "pyptx.core.env"

local M = {}

local Device = {}
Device.__index = Device

--- Fail with the core's message, prefixed by what was attempted (at the
-- caller of check's caller).
local function check(rc, what)
  if rc < 0 then error(what .. ": " .. core.error_message(), 3) end
end
M.check_status = check

--- Open a device of a kind; nil and the core's reason when it cannot be.
local function open_kind(kind)
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

--- Set one of the device's options by name (the emulator's: budget,
-- threads, checks, schedule, race_check, uninit_check, align_check; see
-- docs/emulator.md), e.g. dev:set_option("schedule", 7) for the
-- adversarial schedule with seed 7; an unknown name or a bad value is an
-- error at the caller's line that lists what is valid.
function Device:set_option(name, value)
  if type(name) ~= "string" then error("set_option: the option name must be a string, not " .. type(name), 2) end
  if type(value) == "boolean" then value = value and 1 or 0 end
  if type(value) ~= "number" or value ~= math.floor(value) then
    error(("set_option(%q): the value must be an integer or a boolean, not %s"):format(name, tostring(value)), 2)
  end
  check(core.device_set_option(self.handle, name, value), "device option " .. name)
  self.name = ffi.string(core.device_describe(self.handle))   -- the description names the schedule
end

--- The value of one of the device's options (an integer).
function Device:option(name)
  local v = ffi.new("int64_t[1]")
  check(core.device_get_option(self.handle, name, v), "device option " .. tostring(name))
  return tonumber(v[0])
end

--- Wait for all work on the device.
function Device:sync() check(core.device_sync(self.handle), "sync") end

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

--- Validate a TMA description (pyptx.tma.describe's) and encode it into
-- the 128 bytes a kernel takes: the driver's cuTensorMapEncode* on CUDA,
-- the emulator's record on emu, both in C (lpx_device_tma_encode); name
-- is the tensor errors name. Returns a uint8_t[128].
function Device:tma_encode(desc, name)
  local out = ffi.new("uint8_t[128]")
  if core.device_tma_encode(self.handle, name, desc, out) < 0 then error(core.error_message(), 2) end
  return out
end

--- Point a map tma_encode returned at a new global address in place
-- (checked as tma_encode checks it; name as there).
function Device:tma_replace_address(map, address, name)
  if core.device_tma_replace_address(self.handle, name, map, address) < 0 then error(core.error_message(), 2) end
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

return M
