--- Trace + emit speed, in-process, median of repeats (wall clock):
--  * rms_norm(2048, 8192) and a synthetic kernel of 12,000 instructions;
--  * the Blackwell GEMM (examples/blackwell/gemm.lua) with its k-block
--    loops unrolled at trace time to about 12.7k PTX lines;
--  * the script `luaptx transpile` makes of big_gemm_sm80.ptx (1 MB of
--    nvcc output), traced back (loading the Lua chunk is not counted);
--  * 400 ptx.raw calls in kernels of 10, 1,000 and 4,000 registers: the
--    cost of one call must not grow with the kernel.
-- "lines" counts the PTX lines without .loc; "lines/us" is them per
-- microsecond of trace + emit.
-- usage: luaptx bench/trace.lua [repeats]
local common = require "bench.common"
local now, median = common.now, common.median
local pyptx = require "pyptx"
local core = require "pyptx.core"
local ffi = require "ffi"
local kernel, reg, ptx = pyptx.kernel, pyptx.reg, pyptx.ptx
local u32, f32 = pyptx.types.u32, pyptx.types.f32

local repeats = tonumber(arg and arg[1]) or 21

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

--- PTX lines other than .loc.
local function lines_of(text)
  return select(2, text:gsub("\n", "")) - select(2, text:gsub("\n\t%.loc\t", ""))
end

--- Time fresh traces (a new kernel object each time: no trace cache hits).
local function measure(make)
  local times, s = {}, nil
  for r = 1, repeats + 3 do
    local k = make()
    collectgarbage()
    local t0 = now()
    s = k:specialize({})
    local dt = now() - t0
    if r > 3 then times[#times + 1] = dt end
  end
  return median(times), s
end

--- The script `luaptx transpile` makes of a PTX file, as a loaded chunk.
local function transpiled(path)
  local text = assert(io.open(path, "rb")):read("*a")
  local out, len = ffi.new("const char *[1]"), ffi.new("size_t[1]")
  local m = ffi.gc(core.parse(core.ctx, text, #text, path), core.module_free)
  assert(m ~= nil, core.error_message())
  assert(core.transpile(m, path, out, len) == 0, core.error_message())
  local chunk = assert(loadstring(ffi.string(out[0], len[0]), "@" .. path:gsub("%.ptx$", ".lua")))
  return chunk, #text
end

local gemm = dofile "examples/blackwell/gemm.lua"
local big_path = "spec/fixtures/ptx/large/big_gemm_sm80.ptx"
local big_chunk, big_bytes = transpiled(big_path)
local rms = require "examples.hopper.rms_norm"
local rows = {
  { "rms_norm(2048, 8192)", function() return rms.build(2048, 8192) end },
  { "synthetic 12k", function() return synthetic(12000) end },
  { "blackwell gemm unrolled", function() return gemm.build(128, 256, 23936, { unroll = true }) end },
  { "transpiled big_gemm_sm80", function() return big_chunk().kernels[1] end, big_bytes },
}
print(("trace + emit, in-process (median of %d, %s)"):format(repeats, jit.version))
print(("%-26s %8s %8s %11s %10s %9s"):format("kernel", "insts", "lines", "trace+emit", "per inst", "lines/us"))
for _, row in ipairs(rows) do
  local t, s = measure(row[2])
  local lines = lines_of(s.ptx)
  local extra = row[3] and ("  %.1f ms per MB of PTX"):format(t * 1e3 / (row[3] / 1e6)) or ""
  print(("%-26s %8d %8d %8.3f ms %7.1f ns %9.2f%s"):format(row[1], s.instructions, lines, t * 1e3,
    t / s.instructions * 1e9, lines / (t * 1e6), extra))
end

--- Seconds for `calls` ptx.raw calls in a kernel that has nregs registers.
local function raw_calls(nregs, calls)
  local dt
  kernel "raw" {
    arch = "sm_90a", block = { 32 },
    function()
      local r = reg.array(u32, nregs)
      local env = { a = r[0], b = r[nregs - 1] }
      local t0 = now()
      for _ = 1, calls do ptx.raw("add.u32 %{a}, %{b}, 1;", env) end
      dt = now() - t0
      ptx.ret()
    end,
  }:specialize({})
  return dt
end

print()
print(("%-26s %12s %10s"):format("400 ptx.raw calls", "total", "per call"))
for _, n in ipairs { 10, 1000, 4000 } do
  local times = {}
  for r = 1, repeats + 3 do
    local dt = raw_calls(n, 400)
    if r > 3 then times[#times + 1] = dt end
  end
  local t = median(times)
  print(("%-26s %9.3f ms %7.2f us"):format(("with %d registers"):format(n), t * 1e3, t / 400 * 1e6))
end
