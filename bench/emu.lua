--- Emulator speed: lane-instructions per second on one host thread and on
-- all of them, for rms_norm(256, 4096) and an ALU-bound loop kernel (each
-- thread runs add/xor/mad/fma in a counted loop), and on one thread with the
-- profiler's counters on (luaptx profile, docs/profile.md). Timed with device events
-- around one launch after a warm-up launch; counts from lpx_device_stats.
-- usage: luaptx bench/emu.lua [loop iterations]
package.path = "./?.lua;" .. package.path
local ffi = require "ffi"
local pyptx = require "pyptx"
local core = require "pyptx.core"
local sys = require "pyptx.core.sys"
local kernel, reg, ptx, Tile = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.Tile
local u32, f32 = pyptx.types.u32, pyptx.types.f32

local ITER = tonumber(arg and arg[1]) or 1000

--- The ALU-bound kernel: 64 CTAs of 256 threads, 16 ALU instructions per iteration.
local alu = kernel "alu_loop" {
  out_specs = { Tile(256 * 64, u32) }, grid = { 64, 1, 1 }, block = { 256, 1, 1 },
  function(O)
    local po = ptx.global_ptrs(O)
    local t = reg.from(ptx.special.tid.x(), u32)
    local a, b, c = reg.scalar(u32, 1), reg.scalar(u32, 2), reg.from(t)
    local f = reg.scalar(f32, 1.0)
    ptx.range(0, ITER, 1, function()
      for _ = 1, 4 do
        ptx.inst.add.u32(a, a, c)
        ptx.inst.xor.b32(b, b, a)
        ptx.inst.mad.lo.u32(c, b, 3, a)
        ptx.inst.fma.rn.f32(f, f, f, f)
      end
    end)
    local g = reg.from(ptx.special.ctaid.x(), u32) * 256 + t
    ptx.st.global(ptx.addr(po + g:mul_wide(4)), a + b + c)
    ptx.ret()
  end,
}

--- One launch of specialization s with nbuf buffers of bytes each; returns ms, lane-instructions.
local function measure(dev, s, name, nbuf, bytes)
  local params = ffi.new("uint64_t[?]", nbuf)
  local host = ffi.new("float[?]", bytes / 4)
  for i = 0, bytes / 4 - 1 do host[i] = 1 + i % 7 end
  for i = 0, nbuf - 1 do
    local p = ffi.new("uint64_t[1]")
    assert(core.device_alloc(dev, bytes, p) == 0, core.error_message())
    assert(core.device_upload(dev, p[0], host, bytes) == 0)
    params[i] = p[0]
  end
  local mod, fn = ffi.new("int32_t[1]"), ffi.new("int32_t[1]")
  assert(core.device_load_ir(dev, s.module, mod) == 0, core.error_message())
  assert(core.device_function(dev, mod[0], name, fn) == 0, core.error_message())
  local cfg = ffi.new("lpx_launch_cfg")
  for i = 0, 2 do cfg.grid[i], cfg.block[i], cfg.cluster[i] = s.grid[i + 1], s.block[i + 1], 1 end
  cfg.dynamic_smem, cfg.params, cfg.params_size = s.dynamic_smem, params, 8 * nbuf
  assert(core.device_launch(dev, fn[0], cfg) == 0, core.error_message())       -- warm-up
  local w0, l0, w1, l1 = ffi.new("uint64_t[1]"), ffi.new("uint64_t[1]"), ffi.new("uint64_t[1]"), ffi.new("uint64_t[1]")
  local e0, e1, ms = ffi.new("int32_t[1]"), ffi.new("int32_t[1]"), ffi.new("double[1]")
  core.device_stats(dev, w0, l0)
  core.device_event_record(dev, e0)
  assert(core.device_launch(dev, fn[0], cfg) == 0, core.error_message())
  core.device_event_record(dev, e1)
  core.device_event_elapsed(dev, e0[0], e1[0], ms)
  core.device_stats(dev, w1, l1)
  return ms[0], tonumber(l1[0] - l0[0])
end

local rms = require "examples.hopper.rms_norm"
local cases = {
  { "rms_norm(256, 4096)", rms.build(256, 4096):specialize(), "rms_norm", 3, 256 * 4096 * 4 },
  { ("alu loop (%d iterations)"):format(ITER), alu:specialize(), "alu_loop", 1, 256 * 64 * 4 },
}
local nproc = sys.run { "nproc" }
local cores = nproc and tonumber(nproc.stdout:match("%d+")) or 1
print(("%-28s %8s %8s %12s %14s %16s"):format("kernel", "threads", "profile", "ms", "lane-insts", "M lane-insts/s"))
for _, c in ipairs(cases) do
  for _, run in ipairs { { 1, 0 }, { cores, 0 }, { 1, 1 } } do
    local dev = core.device_open(core.ctx, "emu")
    core.device_set_option(dev, "threads", run[1])
    core.device_set_option(dev, "profile", run[2])
    local ms, lanes = measure(dev, c[2], c[3], c[4], c[5])
    print(("%-28s %8d %8s %12.1f %14d %16.0f"):format(c[1], run[1], run[2] == 1 and "on" or "off", ms, lanes, lanes / ms / 1e3))
    core.device_close(dev)
  end
end
