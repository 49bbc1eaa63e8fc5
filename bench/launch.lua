--- Launch overhead on a CUDA device: microseconds per launch for an empty
-- kernel and for rms_norm with 3 tensors, eager from Lua (k(x, w)) and
-- prepared (parameters packed once), median of 10,000 launches each.
-- usage: luaptx bench/launch.lua [launches]
local pyptx = require "pyptx"
local runtime = require "pyptx.runtime"
local tensor = require "pyptx.runtime.tensor"
local now = require("bench.common").now
local f32 = pyptx.types.f32

local n = tonumber(arg and arg[1]) or 10000
local ok, dev = pcall(runtime.open, "cuda")
if not ok then
  print("bench/launch.lua: no CUDA device here (" .. tostring(dev):gsub("\n.*", "") .. ")")
  print("it measures launch overhead on a GPU; on the emulator it would time the emulator instead. Skipped.")
  return
end
runtime.use(dev)

--- Monotonic microseconds.
local function now_us() return now() * 1e6 end

--- Median host time of n calls of f, in microseconds.
local function time_calls(f)
  local xs = {}
  for _ = 1, 100 do f() end
  dev:sync()
  for i = 1, n do
    local t0 = now_us()
    f()
    xs[i] = now_us() - t0
  end
  dev:sync()
  table.sort(xs)
  return xs[math.floor(n / 2) + 1]
end

local empty = pyptx.kernel "empty" {
  in_specs = { pyptx.Tile(1, f32) }, arch = "auto",
  function() pyptx.ptx.ret() end,
}
local rms = require("examples.hopper.rms_norm").build(16, 1024, { arch = "auto" })
local x1 = tensor.rand({ 1 }, f32, { seed = 1 })
local x, w = tensor.rand({ 16, 1024 }, f32, { seed = 2 }), tensor.rand({ 1024 }, f32, { seed = 3 })

print(("device: %s; %d launches each"):format(dev.name, n))
print(("%-20s %12s %12s"):format("kernel", "eager us", "prepared us"))
for _, row in ipairs { { "empty", empty, { x1 } }, { "rms_norm 3 tensors", rms, { x, w } } } do
  local k, args = row[2], row[3]
  local eager = time_calls(function() k(unpack(args)) end)
  local launcher = runtime.prepare(k, unpack(args))
  local prepared = time_calls(launcher)
  print(("%-20s %12.2f %12.2f"):format(row[1], eager, prepared))
end
