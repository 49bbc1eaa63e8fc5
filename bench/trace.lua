--- Trace + emit speed: rms_norm(2048, 8192) and a synthetic kernel of
-- 12,000 instructions. Median of repeats, per kernel and per instruction.
-- usage: luaptx bench/trace.lua [repeats]
local median = require("bench.common").median
local pyptx = require "pyptx"
local kernel, reg, ptx = pyptx.kernel, pyptx.reg, pyptx.ptx
local u32, f32 = pyptx.types.u32, pyptx.types.f32

local repeats = tonumber(arg and arg[1]) or 31
local clock = os.clock

--- A kernel of n instructions mixing ALU, loads and stores.
local function synthetic(n)
  return kernel "synthetic" {
    arch = "sm_90a", block = { 128 },
    function()
      local a = reg.array(f32, 16)
      local p = reg.scalar(pyptx.types.u64)
      local i = reg.scalar(u32)
      local emitted = 0
      while emitted < n do
        for j = 0, 15 do
          ptx.inst.fma.rn.f32(a[j], a[j], a[(j + 1) % 16], a[(j + 3) % 16])
        end
        ptx.inst.ld.global.f32(a[0], ptx.addr(p, 16))
        ptx.inst.add.u32(i, i, 1)
        ptx.inst.st.global.f32(ptx.addr(p, 32), a[1])
        emitted = emitted + 19
      end
      ptx.ret()
    end,
  }
end

--- Time fresh traces (new kernel object each time: no trace cache hits).
local function measure(make, values)
  local times, count = {}, 0
  for r = 1, repeats + 3 do
    local k = make()
    local t0 = clock()
    local s = k:specialize(values)
    local dt = clock() - t0
    count = s.instructions
    if r > 3 then times[#times + 1] = dt end
  end
  return median(times), count
end

local rms = require "examples.hopper.rms_norm"
local rows = {
  { "rms_norm(2048, 8192)", function() return rms.build(2048, 8192) end },
  { "synthetic 12k", function() return synthetic(12000) end },
}
print(("%-22s %8s %12s %14s"):format("kernel", "insts", "trace+emit", "per inst"))
for _, row in ipairs(rows) do
  local t, n = measure(row[2], {})
  print(("%-22s %8d %9.3f ms %11.1f ns"):format(row[1], n, t * 1e3, t / n * 1e9))
end
