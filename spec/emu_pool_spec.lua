-- The emulator keeps a launch's CTA state (shared memory and its race and
-- proxy shadows, warps, registers, .local) between launches on a device
-- (src/emu/emu_pool.c): a launch after others that left it dirty, or
-- failed, must find it as a fresh device's first launch does.
local ffi = require "ffi"
local core = require "pyptx.core"

-- 64 threads (two warps) write 0xdeadbeef over all of s (thread t the
-- words t, t + 64, ...), a word of .local and a register; mode 1 traps
-- after that, mode 2 reads the other warp's word 0 (a race).
local DIRTY = [[
.version 8.0
.target sm_80
.address_size 64
.visible .entry dirty(.param .u32 mode)
{
  .reg .u32 %r<12>;
  .reg .pred %p;
  .shared .align 4 .b8 s[8192];
  .local .align 4 .b8 a[64];
  mov.u32 %r1, %tid.x;
  shl.b32 %r2, %r1, 2;
  mov.u32 %r3, s;
  add.u32 %r3, %r3, %r2;
  mov.u32 %r4, 0;
LOOP:
  st.shared.u32 [%r3], 0xdeadbeef;
  add.u32 %r3, %r3, 256;
  add.u32 %r4, %r4, 1;
  setp.lt.u32 %p, %r4, 32;
  @%p bra LOOP;
  st.local.u32 [a+4], 0x12345678;
  mov.u32 %r9, 0x5a5a5a5a;
  ld.param.u32 %r6, [mode];
  setp.eq.u32 %p, %r6, 1;
  @%p trap;
  xor.b32 %r10, %r1, 32;
  shl.b32 %r10, %r10, 2;
  mov.u32 %r11, s;
  add.u32 %r10, %r10, %r11;
  setp.eq.u32 %p, %r6, 2;
  @%p ld.shared.u32 %r8, [%r10];
  ret;
}
]]

-- 64 threads OR together what they read, before anything is written, of
-- the other warp's words of s (%d bytes), a word of .local and a register,
-- and store it at out[t]: 0 on a fresh device.
local FRESH = [[
.version 8.0
.target sm_80
.address_size 64
.visible .entry fresh(.param .u64 out)
{
  .reg .u32 %%r<12>;
  .reg .u64 %%rd<4>;
  .reg .pred %%p;
  .shared .align 4 .b8 s[%d];
  .local .align 4 .b8 a[64];
  mov.u32 %%r1, %%tid.x;
  xor.b32 %%r2, %%r1, 32;
  shl.b32 %%r2, %%r2, 2;
  mov.u32 %%r3, s;
  add.u32 %%r3, %%r3, %%r2;
  mov.u32 %%r4, 0;
  mov.u32 %%r5, 0;
LOOP:
  ld.shared.u32 %%r6, [%%r3];
  or.b32 %%r5, %%r5, %%r6;
  add.u32 %%r3, %%r3, 256;
  add.u32 %%r4, %%r4, 1;
  setp.lt.u32 %%p, %%r4, %d;
  @%%p bra LOOP;
  ld.local.u32 %%r7, [a+4];
  or.b32 %%r5, %%r5, %%r7;
  or.b32 %%r5, %%r5, %%r9;
  ld.param.u64 %%rd1, [out];
  cvta.to.global.u64 %%rd1, %%rd1;
  mul.wide.u32 %%rd2, %%r1, 4;
  add.u64 %%rd1, %%rd1, %%rd2;
  st.global.u32 [%%rd1], %%r5;
  ret;
}
]]

describe("the emulator's launch state kept between launches", function()
  local opened, modules = {}, {}
  after_each(function()
    for i = #opened, 1, -1 do core.device_close(opened[i]); opened[i] = nil end
    modules = {}
  end)

  --- A fresh emulator on one host thread with opts (device options), closed by after_each.
  local function open(opts)
    local d = core.device_open(core.ctx, "emu")
    assert(d ~= nil, core.error_message())
    opened[#opened + 1] = d
    assert.equal(0, core.device_set_option(d, "threads", 1), core.error_message())
    for k, v in pairs(opts or {}) do assert.equal(0, core.device_set_option(d, k, v), core.error_message()) end
    return d
  end

  --- Launch entry name of PTX text on d (one CTA of 64 threads) with the
  -- 8-byte parameter param; the status and the message.
  local function launch(d, text, name, param)
    local m = core.parse(core.ctx, text, #text, name .. ".ptx")
    assert(m ~= nil, core.error_message())
    modules[#modules + 1] = ffi.gc(m, core.module_free)
    local mod, fn = ffi.new("int32_t[1]"), ffi.new("int32_t[1]")
    assert.equal(0, core.device_load_ir(d, m, mod), core.error_message())
    assert.equal(0, core.device_function(d, mod[0], name, fn), core.error_message())
    local cfg = ffi.new("lpx_launch_cfg")
    for i = 0, 2 do cfg.grid[i], cfg.block[i], cfg.cluster[i] = 1, i == 0 and 64 or 1, 1 end
    local params = ffi.new("uint64_t[1]", param)
    cfg.params, cfg.params_size = params, 8
    local rc = core.device_launch(d, fn[0], cfg)
    return rc, rc ~= 0 and core.error_message() or nil
  end

  --- Run the dirtying kernel in mode; its status and message.
  local function dirty(d, mode) return launch(d, DIRTY, "dirty", mode) end

  --- Run the reading kernel with shared bytes of s; its status, message
  -- and the 64 words it stored.
  local function fresh(d, bytes)
    local p = ffi.new("uint64_t[1]")
    assert.equal(0, core.device_alloc(d, 256, p), core.error_message())
    local rc, err = launch(d, FRESH:format(bytes, math.floor(bytes / 256)), "fresh", p[0])
    local out = ffi.new("uint32_t[64]")
    assert.equal(0, core.device_download(d, out, p[0], 256))
    assert.equal(0, core.device_free(d, p[0]))
    local words = {}
    for i = 0, 63 do words[i + 1] = out[i] end
    return rc, err, words
  end

  local ZEROS = {}
  for i = 1, 64 do ZEROS[i] = 0 end

  it("finds shared memory, .local and registers zero after launches that wrote them, failed, or had more shared memory", function()
    local d = open { checks = 0 }
    local rc, err, words = fresh(d, 8192)
    assert.equal(0, rc, err)
    assert.same(ZEROS, words)                    -- what a fresh device gives
    assert.equal(0, (dirty(d, 0)))
    rc, err, words = fresh(d, 8192)
    assert.equal(0, rc, err)
    assert.same(ZEROS, words)
    rc, err = dirty(d, 1)
    assert.equal(-1, rc)
    assert.matches("trap executed", err, 1, true)
    rc, err, words = fresh(d, 8192)
    assert.equal(0, rc, err)
    assert.same(ZEROS, words)
    assert.equal(0, (dirty(d, 0)))
    rc, err, words = fresh(d, 4096)              -- smaller: other pages of the same buffer
    assert.equal(0, rc, err)
    assert.same(ZEROS, words)
  end)

  it("reports an unwritten shared read after a launch that wrote those bytes, as a fresh device does", function()
    local d = open()
    local rc0, err0 = fresh(d, 8192)
    assert.equal(-1, rc0)
    assert.matches("that no thread has written", err0, 1, true)
    assert.equal(0, (dirty(d, 0)))
    local rc, err = fresh(d, 8192)
    assert.equal(-1, rc)
    assert.equal(err0, err)
  end)

  it("carries no race from one launch into the next", function()
    local d = open { uninit_check = 0 }
    local rc, err = dirty(d, 2)
    assert.equal(-1, rc)
    assert.matches("shared-memory race", err, 1, true)
    local words
    rc, err, words = fresh(d, 8192)               -- reads the bytes the other warp wrote in the last launch's epoch 1
    assert.equal(0, rc, err)
    assert.same(ZEROS, words)
    assert.equal(0, (dirty(d, 0)))
    rc, err, words = fresh(d, 8192)
    assert.equal(0, rc, err)
    assert.same(ZEROS, words)
  end)

  it("lets the kept state go when a device allocation needs the memory budget", function()
    local big = [[
.version 8.0
.target sm_80
.address_size 64
.visible .entry big()
{
  .local .align 8 .b8 a[200000];
  ret;
}
]]
    local d = open { memory = 20000000 }
    assert.equal(0, (launch(d, big, "big", 0)))       -- 12.8 MB of .local kept after it
    local p = ffi.new("uint64_t[1]")
    assert.equal(0, core.device_alloc(d, 15000000, p), core.error_message())
    local rc, err = launch(d, big, "big", 0)          -- now it does not fit beside the allocation
    assert.equal(-1, rc)
    assert.matches("memory budget is 20000000 bytes", err, 1, true)
    assert.equal(0, core.device_free(d, p[0]))
    assert.equal(0, (launch(d, big, "big", 0)))
  end)
end)
