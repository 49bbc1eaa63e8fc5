--- pyptx.load_ptx on modules of many entries: seconds to load (parse the
-- PTX and read every entry's .param list) and entries per second, next to
-- the parse alone (ptxparse.parse, what `luaptx fmt` does) on the same
-- text. Each entry has four params (.u64 .ptr .align, .u32, .f32 and an
-- aligned .b8 array) and a short body, as nvcc writes them. CPU time,
-- median of repeats (one repeat for the largest sizes).
-- usage: luaptx bench/load_ptx.lua [sizes...]   (default 500 1000 2000 4000 16000)
local median = require("bench.common").median
local ptx_loader = require "pyptx.runtime.ptx_loader"
local ptxparse = require "pyptx.ptxparse"

local clock = os.clock

--- PTX text with n entries.
local function module_text(n)
  local parts = { ".version 8.0\n.target sm_80\n.address_size 64\n" }
  for i = 1, n do
    parts[#parts + 1] = ([[
// entry %d
.visible .entry k%d(
	.param .u64 .ptr .global .align 8 k%d_param_0,
	.param .u32 k%d_param_1,
	.param .f32 k%d_param_2,
	.param .align 16 .b8 k%d_param_3[12]
)
.maxntid 128, 1, 1
{
	.reg .b32 	%%r<4>;
	.reg .b64 	%%rd<3>;
	ld.param.u64 	%%rd1, [k%d_param_0];
	ld.param.u32 	%%r1, [k%d_param_1];
	cvta.to.global.u64 	%%rd2, %%rd1;
	st.global.u32 	[%%rd2], %%r1;
	ret;
}
]]):format(i, i, i, i, i, i, i, i)
  end
  return table.concat(parts)
end

--- CPU seconds of fn(), median of reps runs.
local function timed(reps, fn)
  local ts = {}
  for r = 1, reps do
    collectgarbage()
    local t0 = clock()
    fn()
    ts[r] = clock() - t0
  end
  return median(ts)
end

local sizes = {}
for i = 1, arg and #arg or 0 do sizes[i] = assert(tonumber(arg[i]), "sizes are numbers of entries") end
if #sizes == 0 then sizes = { 500, 1000, 2000, 4000, 16000 } end

print(("%8s %10s %12s %14s %12s"):format("entries", "KB", "parse s", "load_ptx s", "entries/s"))
for _, n in ipairs(sizes) do
  local text = module_text(n)
  local reps = n <= 4000 and 5 or 1
  local t_parse = timed(reps, function() ptxparse.parse(text, "bench.ptx") end)
  local mod
  local t_load = timed(reps, function() mod = ptx_loader.load(text, "bench.ptx") end)
  assert(#mod:names() == n and #mod.entries[n].params == 4 and mod.entries[n].size == 28)
  print(("%8d %10.0f %12.3f %14.3f %12.0f"):format(n, #text / 1024, t_parse, t_load, n / t_load))
end
