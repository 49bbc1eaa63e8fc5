-- The CPU emulator through the device interface: kernels traced with the
-- DSL, run on the "emu" device via the FFI, compared with CPU references
-- on random non-zero inputs; and every emulator check caught with a
-- message naming the Lua line of the planted bug.
local ffi = require "ffi"
local bit = require "bit"
local pyptx = require "pyptx"
local core = require "pyptx.core"
local floats = require "pyptx.runtime.floats"
local H = require "spec.helpers"
local kernel, reg, ptx, smem, Tile = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.smem, pyptx.Tile
local T = pyptx.types
local f32, u32, s32, u64, b32 = T.f32, T.u32, T.s32, T.u64, T.b32

pcall(ffi.cdef, "float nextafterf(float x, float y);")

--- The emulator's device handle (the file's one emulator, opened on first use).
local function emu() return H.emu().handle end

local CT = { [f32] = "float", [u32] = "uint32_t", [s32] = "int32_t", [u64] = "uint64_t", [b32] = "uint32_t" }

--- Run a kernel: bufs = { {type, n, values?}, ... } one per tensor param in
-- order; opts.values (specialization), opts.options (device options).
-- Returns ok, the host arrays after the launch (or the error message and them).
local function run(k, bufs, opts)
  opts = opts or {}
  local d = emu()
  local s = k:specialize(opts.values or {})
  local ptrs, hosts = ffi.new("uint64_t[?]", #bufs), {}
  for i, b in ipairs(bufs) do
    local ty, n, vals = b[1], b[2], b[3]
    local h = ffi.new(CT[ty] .. "[?]", n)
    for j = 0, n - 1 do h[j] = vals and vals[j + 1] or 0x7fc00000 end
    local p = ffi.new("uint64_t[1]")
    assert(core.device_alloc(d, n * ffi.sizeof(CT[ty]), p) == 0, core.error_message())
    assert(core.device_upload(d, p[0], h, n * ffi.sizeof(CT[ty])) == 0)
    ptrs[i - 1], hosts[i] = p[0], h
  end
  local mod, fn = ffi.new("int32_t[1]"), ffi.new("int32_t[1]")
  assert(core.device_load_ir(d, s.module, mod) == 0, core.error_message())
  assert(core.device_function(d, mod[0], k.name, fn) == 0, core.error_message())
  local cfg = ffi.new("lpx_launch_cfg")
  for i = 0, 2 do cfg.grid[i], cfg.block[i], cfg.cluster[i] = s.grid[i + 1], s.block[i + 1], s.cluster[i + 1] end
  cfg.dynamic_smem, cfg.params, cfg.params_size = s.dynamic_smem, ptrs, 8 * #bufs
  for name, v in pairs(opts.options or {}) do assert(core.device_set_option(d, name, v) == 0, core.error_message()) end
  local rc = core.device_launch(d, fn[0], cfg)
  local msg = rc ~= 0 and core.error_message() or nil
  for name in pairs(opts.options or {}) do
    core.device_set_option(d, name, name == "budget" and 1000000000 or (name == "checks" and 15 or 1))
  end
  for i, b in ipairs(bufs) do
    assert(core.device_download(d, hosts[i], ptrs[i - 1], b[2] * ffi.sizeof(CT[b[1]])) == 0)
    core.device_free(d, ptrs[i - 1])
  end
  if msg then return false, msg, hosts end
  return true, hosts
end

local rand_u32, rand_f32 = H.rand_u32, H.rand_uniform
--- The value of x rounded to f32.
local function f32r(x) return tonumber(ffi.new("float", x)) end

--- A u32 from a Lua number holding a signed 32-bit bit pattern.
local function u(x) return x % 4294967296 end

--- Wait on mbarrier.try_wait.parity for the phase of parity `parity` of
-- barrier `bar` (inside a kernel); returns the register counting the waits.
local function spin_wait(bar, parity)
  local spins = reg.scalar(u32, 0)
  ptx.loop(function()
    local done = reg.pred()
    ptx.inst.mbarrier.try_wait.parity.shared.b64(done, bar, parity)
    ptx.inst.add.u32(spins, spins, 1)
    return -done
  end)
  return spins
end

describe("the emu device", function()
  it("describes itself and rejects unknown kinds and options", function()
    assert.truthy(ffi.string(core.device_describe(emu())):match("^emu %(CPU emulator, %d+ threads?%)"))
    assert.is_true(core.device_open(core.ctx, "tpu") == nil)
    assert.truthy(core.error_message():find("valid: auto, emu, cuda", 1, true))
    assert.equal(-1, core.device_set_option(emu(), "speed", 1))
    assert.truthy(core.error_message():find("budget", 1, true))
  end)

  it("checks host copies against the allocation table", function()
    local p = ffi.new("uint64_t[1]")
    assert.equal(0, core.device_alloc(emu(), 64, p))
    local buf = ffi.new("uint8_t[128]")
    assert.equal(-1, core.device_upload(emu(), p[0], buf, 65))
    assert.truthy(core.error_message():find("past its end", 1, true))
    assert.equal(0, core.device_free(emu(), p[0]))
    assert.equal(-1, core.device_download(emu(), buf, p[0], 4))
  end)
end)

describe("the emulator's memory budget", function()
  local LOCAL_PTX = [[
.version 8.0
.target sm_80
.address_size 64
.visible .entry k()
{
  .local .align 8 .b8 a[%d];%s
  ret;
}
]]

  --- A fresh emulator with opts (device options); closed when the test ends
  -- (by after_each, not the collector: the process may exit first, and the
  -- leak check of the sanitizer build would report its memory).
  local opened = {}
  after_each(function()
    for i = #opened, 1, -1 do core.device_close(opened[i]); opened[i] = nil end
  end)
  local function open(opts)
    local d = core.device_open(core.ctx, "emu")
    assert(d ~= nil, core.error_message())
    opened[#opened + 1] = d
    for k, v in pairs(opts or {}) do assert.equal(0, core.device_set_option(d, k, v), core.error_message()) end
    return d
  end

  --- Launch k of PTX text on d with block threads; the status and the message.
  local function launch(d, text, block)
    local m = core.parse(core.ctx, text, #text, "mem.ptx")
    assert(m ~= nil, core.error_message())
    m = ffi.gc(m, core.module_free)
    local mod, fn = ffi.new("int32_t[1]"), ffi.new("int32_t[1]")
    assert.equal(0, core.device_load_ir(d, m, mod), core.error_message())
    assert.equal(0, core.device_function(d, mod[0], "k", fn), core.error_message())
    local cfg = ffi.new("lpx_launch_cfg")
    for i = 0, 2 do cfg.grid[i], cfg.block[i], cfg.cluster[i] = 1, i == 0 and block or 1, 1 end
    local rc = core.device_launch(d, fn[0], cfg)
    return rc, rc ~= 0 and core.error_message() or nil, m
  end

  it("defaults to half the host's memory and refuses an allocation past it, naming the budget and LUAPTX_EMU_MEMORY", function()
    local v = ffi.new("int64_t[1]")
    assert.equal(0, core.device_get_option(open(), "memory", v))
    local total = tonumber(H.read("/proc/meminfo"):match("MemTotal:%s+(%d+) kB")) * 1024
    assert.is_true(tonumber(v[0]) > 0 and tonumber(v[0]) <= total / 2, tostring(v[0]))
    local d = open { memory = 1048576 }
    local p = ffi.new("uint64_t[3]")
    assert.equal(-1, core.device_alloc(d, 2097152, p))
    assert.matches("^alloc of 2097152 bytes needs 2097152 bytes %(0%.0 GiB%) of host memory, but the emulator's memory budget "
      .. "is 1048576 bytes %(0%.0 GiB%) and its live allocations take 0; raise it with LUAPTX_EMU_MEMORY or the device option "
      .. "\"memory\"", core.error_message())
    assert.equal(0, core.device_alloc(d, 524288, p))
    assert.equal(0, core.device_alloc(d, 524288, p + 1))
    assert.equal(-1, core.device_alloc(d, 1, p + 2))                     -- live allocations count
    assert.matches("its live allocations take 1048576", core.error_message())
    assert.equal(0, core.device_free(d, p[0]))
    assert.equal(0, core.device_alloc(d, 524288, p + 2))                 -- freed memory counts no more
    assert.equal(0, core.device_free(d, p[1]))                           -- live allocations keep a closed
    assert.equal(0, core.device_free(d, p[2]))                           -- device alive: free them
    local out, err, rc = H.luaptx({ "-e", 'require("pyptx.runtime").open("emu")' }, { env = { LUAPTX_EMU_MEMORY = "1.5" } })
    assert.equal(1, rc, out)
    assert.matches("LUAPTX_EMU_MEMORY=1%.5: not an integer", err)
  end)

  it("refuses .local variables of more than 512 KB per thread together, at launch", function()
    local text = LOCAL_PTX:format(400000, "\n  .local .align 8 .b8 b[400000];")
    local rc, err = launch(open(), text, 32)
    assert.equal(-1, rc)
    assert.equal("launch k: its .local variables take 800000 bytes per thread; the hardware allows 524288 (512 KB)", err)
  end)

  it("refuses a launch whose CTA state would pass the budget, before allocating it", function()
    local text = LOCAL_PTX:format(400000, "")                          -- 12.8 MB of .local a warp
    local rc, err = launch(open { memory = 64 * 1048576, threads = 1 }, text, 256)
    assert.equal(-1, rc)
    assert.matches("^launch k %(1 CTA at a time on 1 host thread, %d+ bytes each with 400000 bytes of %.local per thread%) "
      .. "needs %d+ bytes %(0%.1 GiB%) of host memory, but the emulator's memory budget is 67108864 bytes", err)
    rc, err = launch(open { memory = 64 * 1048576, threads = 1 }, text, 32)   -- one warp fits
    assert.equal(0, rc, err)
  end)
end)

describe("the emulator's numerics", function()
  it("runs an elementwise kernel with a bounds guard (f32 fma, u32 mad)", function()
    local N = 1000
    local k = kernel "ew" {
      in_specs = { Tile(N, f32), Tile(N, f32), Tile(N, u32) }, out_specs = { Tile(N, f32), Tile(N, u32) },
      grid = { 8, 1, 1 }, block = { 128, 1, 1 },
      function(X, Y, A, O, P)
        local px, py, pa, po, pp = ptx.global_ptrs(X, Y, A, O, P)
        local i = reg.from(ptx.special.ctaid.x(), u32) * 128 + reg.from(ptx.special.tid.x(), u32)
        ptx.if_(i:lt(N), function()
          local off = i:mul_wide(4)
          local x, y, a = reg.scalar(f32), reg.scalar(f32), reg.scalar(u32)
          ptx.ld.global(x, ptx.addr(px + off))
          ptx.ld.global(y, ptx.addr(py + off))
          ptx.ld.global(a, ptx.addr(pa + off))
          ptx.st.global(ptx.addr(po + off), x:fma(y, x))
          ptx.inst.mad.lo.u32(a, a, 2654435761, i)
          ptx.st.global(ptx.addr(pp + off), a)
        end)
        ptx.ret()
      end,
    }
    local x, y, a = rand_f32(N, 1, -4, 4), rand_f32(N, 2, -4, 4), rand_u32(N, 3)
    local ok, out = run(k, { { f32, N, x }, { f32, N, y }, { u32, N, a }, { f32, N }, { u32, N } })
    assert.is_true(ok, out)
    for i = 1, N do
      local fx, fy = f32r(x[i]), f32r(y[i])
      assert.equal(f32r(fx * fy + fx), out[4][i - 1])   -- exact product in double, one rounding
      local want = ffi.cast("uint32_t", ffi.new("uint64_t", a[i]) * 2654435761ULL + (i - 1))
      assert.equal(tonumber(want), tonumber(out[5][i - 1]))
    end
  end)

  it("follows shfl.sync up/down/bfly/idx with segment widths", function()
    local modes = { "up", "down", "bfly", "idx" }
    local widths = { 32, 16, 8, 4 }
    local k = kernel "shfl" {
      in_specs = { Tile(64, u32) }, out_specs = { Tile(64 * 16, u32), Tile(64 * 16, u32) },
      block = { 64, 1, 1 },
      function(A, D, P)
        local pa, pd, pp = ptx.global_ptrs(A, D, P)
        local t = reg.from(ptx.special.tid.x(), u32)
        local v = reg.scalar(u32)
        ptx.ld.global(v, ptx.addr(pa + t:mul_wide(4)))
        local slot = 0
        for _, mode in ipairs(modes) do
          for _, w in ipairs(widths) do
            local c = mode == "up" and (32 - w) * 256 or (32 - w) * 256 + 31
            local b = mode == "idx" and 5 or 3
            local r, p = reg.scalar(u32), reg.pred()
            ptx.inst.shfl.sync[mode].b32(ptx.pipe(r, p), v, b, c, 0xffffffff)
            local off = (t + slot * 64):mul_wide(4)
            ptx.st.global(ptx.addr(pd + off), r)
            ptx.st.global(ptx.addr(pp + off), reg.from(ptx.imm(u32, 0), u32) + 0)
            ptx.at(p).inst.st.global.u32(ptx.addr(pp + off), 1)
            slot = slot + 1
          end
        end
        ptx.ret()
      end,
    }
    local a = rand_u32(64, 5)
    local ok, out = run(k, { { u32, 64, a }, { u32, 64 * 16 }, { u32, 64 * 16 } })
    assert.is_true(ok, out)
    local slot = 0
    for _, mode in ipairs(modes) do
      for _, w in ipairs(widths) do
        for t = 0, 63 do
          local lane, base = t % 32, t - t % 32
          local seg = bit.band(32 - w, 31)
          local cval = mode == "up" and 0 or 31
          local maxl = bit.bor(bit.band(lane, seg), bit.band(cval, bit.bnot(seg)))
          local minl = bit.band(lane, seg)
          local j, pv
          if mode == "up" then j = lane - 3; pv = j >= maxl
          elseif mode == "down" then j = lane + 3; pv = j <= maxl
          elseif mode == "bfly" then j = bit.bxor(lane, 3); pv = j <= maxl
          else j = bit.bor(minl, bit.band(5, bit.bnot(seg))); pv = j <= maxl end
          if not pv then j = lane end
          local got, gp = tonumber(out[2][slot * 64 + t]), tonumber(out[3][slot * 64 + t])
          assert.equal(a[base + j + 1], got, ("%s width %d thread %d"):format(mode, w, t))
          assert.equal(pv and 1 or 0, gp, ("%s width %d thread %d predicate"):format(mode, w, t))
        end
        slot = slot + 1
      end
    end
  end)

  it("votes, reduces and matches across a warp (vote, redux, match, activemask)", function()
    local k = kernel "coll" {
      arch = "sm_90a",
      in_specs = { Tile(64, u32) }, out_specs = { Tile(64 * 8, u32) },
      block = { 64, 1, 1 },
      function(A, O)
        local pa, po = ptx.global_ptrs(A, O)
        local t = reg.from(ptx.special.tid.x(), u32)
        local v = reg.scalar(u32)
        ptx.ld.global(v, ptx.addr(pa + t:mul_wide(4)))
        local odd = v:band(1):eq(1)
        local r = reg.array(u32, 8)
        ptx.inst.vote.sync.ballot.b32(r[0], odd, 0xffffffff)
        local pall, pany = reg.pred(), reg.pred()
        ptx.inst.vote.sync.any.pred(pany, odd, 0xffffffff)
        ptx.inst.vote.sync.all.pred(pall, odd, 0xffffffff)
        ptx.inst.selp.u32(r[1], 1, 0, pany)
        ptx.inst.selp.u32(r[2], 1, 0, pall)
        local small = v:band(0xffff)
        ptx.inst.redux.sync.add.u32(r[3], small, 0xffffffff)
        ptx.inst.redux.sync.max.u32(r[4], v, 0xffffffff)
        ptx.inst.redux.sync["xor"].b32(r[5], v, 0xffffffff)
        ptx.inst.match.any.sync.b32(r[6], v:band(3), 0xffffffff)     -- nvcc's spelling
        -- activemask inside a branch taken by the odd lanes only
        ptx.inst.mov.u32(r[7], 0)
        ptx.if_(odd, function() ptx.inst.activemask.b32(r[7]) end)
        for i = 0, 7 do ptx.st.global(ptx.addr(po + (t + i * 64):mul_wide(4)), r[i]) end
        ptx.ret()
      end,
    }
    local a = rand_u32(64, 9)
    local ok, out = run(k, { { u32, 64, a }, { u32, 64 * 8 } })
    assert.is_true(ok, out)
    for w = 0, 1 do
      local ballot, sum, mx, x = 0, 0, 0, 0
      for l = 0, 31 do
        local v = a[w * 32 + l + 1]
        if v % 2 == 1 then ballot = ballot + 2 ^ l end
        sum = sum + v % 65536
        mx = math.max(mx, v)
        x = bit.bxor(x, v)
      end
      for l = 0, 31 do
        local t, v = w * 32 + l, a[w * 32 + l + 1]
        local function got(i) return tonumber(out[2][t + i * 64]) end
        assert.equal(ballot, got(0))
        assert.equal(ballot ~= 0 and 1 or 0, got(1))
        assert.equal(ballot == 2 ^ 32 - 1 and 1 or 0, got(2))
        assert.equal(sum % 4294967296, got(3))
        assert.equal(mx, got(4))
        assert.equal(u(x), got(5))
        local same = 0
        for j = 0, 31 do if a[w * 32 + j + 1] % 4 == v % 4 then same = same + 2 ^ j end end
        assert.equal(same, got(6))
        assert.equal(v % 2 == 1 and ballot or 0, got(7))
      end
    end
  end)

  it("reconverges nested divergent loops", function()
    local k = kernel "loops" {
      out_specs = { Tile(96, u32) }, block = { 96, 1, 1 },
      function(O)
        local po = ptx.global_ptrs(O)
        local t = reg.from(ptx.special.tid.x(), u32)
        local acc = reg.scalar(u32, 0)
        local n_outer = t % 7 + 1
        ptx.range(0, n_outer, 1, function(i)
          local n_inner = (t + i) % 3 + 1
          ptx.range(0, n_inner, 1, function(j)
            ptx.if_(j:band(1):eq(0), function()
              ptx.inst.add.u32(acc, acc, i * 10 + j)
            end, function()
              ptx.inst.xor.b32(acc, acc, t)
            end)
          end)
        end)
        local b = reg.scalar(u32)
        ptx.inst.vote.sync.ballot.b32(b, acc:gt(20), 0xffffffff)
        ptx.st.global(ptx.addr(po + t:mul_wide(4)), acc + b)
        ptx.ret()
      end,
    }
    local ok, out = run(k, { { u32, 96 } })
    assert.is_true(ok, out)
    local accs = {}
    for t = 0, 95 do
      local acc = 0
      for i = 0, t % 7 do
        for j = 0, (t + i) % 3 do
          if j % 2 == 0 then acc = acc + i * 10 + j else acc = bit.bxor(acc, t) end
        end
      end
      accs[t] = u(acc)
    end
    for t = 0, 95 do
      local ballot, w = 0, t - t % 32
      for l = 0, 31 do if accs[w + l] > 20 then ballot = ballot + 2 ^ l end end
      assert.equal((accs[t] + ballot) % 4294967296, tonumber(out[1][t]), "thread " .. t)
    end
  end)

  it("counts with global and shared atomics from many CTAs", function()
    local k = kernel "hist" {
      in_specs = { Tile(4096, u32) }, out_specs = { Tile(16, u32), Tile(2, f32) },
      grid = { 16, 1, 1 }, block = { 256, 1, 1 },
      function(A, Hist, S)
        local pa, ph, ps = ptx.global_ptrs(A, Hist, S)
        local bins = smem.alloc(u32, 16)
        local t = reg.from(ptx.special.tid.x(), u32)
        local base = bins:base()
        ptx.if_(t:lt(16), function() ptx.st.shared(ptx.addr(base + t:shl(2)), reg.scalar(u32, 0)) end)
        ptx.bar_sync(0)
        local i = reg.from(ptx.special.ctaid.x(), u32) * 256 + t
        local v = reg.scalar(u32)
        ptx.ld.global(v, ptx.addr(pa + i:mul_wide(4)))
        local old = reg.scalar(u32)
        ptx.inst.atom.shared.add.u32(old, ptx.addr(base + v:band(15):shl(2)), 1)
        local f = reg.scalar(f32)
        ptx.inst.mov.f32(f, 0.5)
        ptx.inst.red.global.add.f32(ptx.addr(ps), f)
        ptx.inst.red.global.max.u32(ptx.addr(ps, 4), v:band(1023))
        ptx.bar_sync(0)
        ptx.if_(t:lt(16), function()
          local c = reg.scalar(u32)
          ptx.ld.shared(c, ptx.addr(base + t:shl(2)))
          ptx.inst.red.global.add.u32(ptx.addr(ph + t:mul_wide(4)), c)
        end)
        ptx.ret()
      end,
    }
    local a = rand_u32(4096, 11)
    local ok, out = run(k, { { u32, 4096, a }, { u32, 16, { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 } }, { u32, 2, { 0, 0 } } })
    assert.is_true(ok, out)
    local h, mx = {}, 0
    for b = 0, 15 do h[b] = 0 end
    for i = 1, 4096 do h[a[i] % 16] = h[a[i] % 16] + 1; mx = math.max(mx, a[i] % 1024) end
    for b = 0, 15 do assert.equal(h[b], tonumber(out[2][b])) end
    assert.equal(4096 * 0.5, tonumber(ffi.cast("float*", out[3])[0]))
    assert.equal(mx, tonumber(out[3][1]))
  end)

  it("converts f32 to f16 and bf16 with round-to-nearest-even, and back", function()
    local N = 512
    local k = kernel "halfs" {
      in_specs = { Tile(N, f32) }, out_specs = { Tile(N, u32), Tile(N, f32) }, block = { 128, 1, 1 }, grid = { 4, 1, 1 },
      function(X, Hv, Y)
        local px, ph, py = ptx.global_ptrs(X, Hv, Y)
        local i = reg.from(ptx.special.ctaid.x(), u32) * 128 + reg.from(ptx.special.tid.x(), u32)
        local off = i:mul_wide(4)
        local x = reg.scalar(f32)
        ptx.ld.global(x, ptx.addr(px + off))
        local h, bf, pk = reg.scalar(T.b16), reg.scalar(T.b16), reg.scalar(b32)
        ptx.inst.cvt.rn.f16.f32(h, x)
        ptx.inst.cvt.rn.bf16.f32(bf, x)
        ptx.inst.mov.b32(pk, { h, bf })
        ptx.st.global(ptx.addr(ph + off), pk)
        local back, sum = reg.scalar(f32), reg.scalar(f32)
        ptx.inst.cvt.f32.f16(back, h)
        local hb = reg.scalar(f32)
        ptx.inst.cvt.f32.bf16(hb, bf)
        ptx.inst.add.rz.f32(sum, back, hb)
        ptx.st.global(ptx.addr(py + off), sum)
        ptx.ret()
      end,
    }
    local x = rand_f32(N, 13, -70000, 70000)
    for i = 1, 64 do x[i] = x[i] * 1e-9 end        -- f16 subnormals and underflow
    for i = 65, 96 do x[i] = 1 + (i - 64) * 2 ^ -11 end -- f16 ties
    local ok, out = run(k, { { f32, N, x }, { u32, N }, { f32, N } })
    assert.is_true(ok, out)
    for i = 1, N do
      local want_h, want_b = floats.to_f16(x[i]), floats.to_bf16(x[i])
      local got = tonumber(out[2][i - 1])
      assert.equal(want_h, got % 65536, "f16 of " .. x[i])
      assert.equal(want_b, math.floor(got / 65536), "bf16 of " .. x[i])
      local a, b = floats.from_f16(want_h), floats.from_bf16(want_b)
      local s = a + b                                          -- exact in double
      local r = f32r(s)
      if math.abs(r) > math.abs(s) then r = ffi.C.nextafterf(r, 0) end -- round toward zero
      assert.equal(r, out[3][i - 1], "add.rz of " .. a .. " + " .. b)
    end
  end)

  it("converts to and from fp8 pairs (cvt.rn.satfinite{.relu}.e4m3x2/.e5m2x2 from f32 and f16x2, cvt.rn{.relu}.f16x2 back)", function()
    local N = 256
    local k = kernel "fp8s" { arch = "sm_90a",
      in_specs = { Tile(2 * N, f32), Tile(N, u32), Tile(N, u32) }, out_specs = { Tile(7 * N, u32) }, block = { N, 1, 1 },
      function(X, Hv, P, O)
        local px, ph, pp, po = ptx.global_ptrs(X, Hv, P, O)
        local t = reg.from(ptx.special.tid.x(), u32)
        local a, b, h2, pat = reg.scalar(f32), reg.scalar(f32), reg.scalar(b32), reg.scalar(b32)
        ptx.ld.global(a, ptx.addr(px + t:mul_wide(8)))
        ptx.ld.global(b, ptx.addr(px + t:mul_wide(8), 4))
        ptx.ld.global(h2, ptx.addr(ph + t:mul_wide(4)))
        ptx.ld.global(pat, ptx.addr(pp + t:mul_wide(4)))
        local q = {}
        for i = 1, 6 do q[i] = reg.scalar(T.b16) end
        ptx.inst.cvt.rn.satfinite.e4m3x2.f32(q[1], a, b)
        ptx.inst.cvt.rn.satfinite.e5m2x2.f32(q[2], a, b)
        ptx.inst.cvt.rn.satfinite.relu.e4m3x2.f32(q[3], a, b)
        ptx.inst.cvt.rn.satfinite.relu.e5m2x2.f32(q[4], a, b)
        ptx.inst.cvt.rn.satfinite.e4m3x2.f16x2(q[5], h2)
        ptx.inst.cvt.rn.satfinite.e5m2x2.f16x2(q[6], h2)
        local lo, hi = reg.scalar(T.b16), reg.scalar(T.b16)
        ptx.inst.mov.b32({ lo, hi }, pat)
        local w = {}
        for i = 1, 7 do w[i] = reg.scalar(b32) end
        ptx.inst.mov.b32(w[1], { q[1], q[2] })
        ptx.inst.mov.b32(w[2], { q[3], q[4] })
        ptx.inst.mov.b32(w[3], { q[5], q[6] })
        ptx.inst.cvt.rn.f16x2.e4m3x2(w[4], lo)
        ptx.inst.cvt.rn.f16x2.e5m2x2(w[5], lo)
        ptx.inst.cvt.rn.relu.f16x2.e4m3x2(w[6], hi)
        ptx.inst.cvt.rn.relu.f16x2.e5m2x2(w[7], hi)
        for i = 1, 7 do ptx.st.global(ptx.addr(po + t:mul_wide(28), 4 * (i - 1)), w[i]) end
        ptx.ret()
      end,
    }
    math.randomseed(require("pyptx.tools.verify").fresh_seed())
    local specials = { 0 / 0, math.huge, -math.huge, 0, -0.0, 448, 464, 480, -470, 57344, 61440, -61439, 1e9,
                       2 ^ -9, 2 ^ -10, 3 * 2 ^ -11, 2 ^ -16, 2 ^ -17, 1.0625, 1.1875, -1.125 * 2 ^ -6, 2 ^ -7 * 1.5 }
    local x = {}
    for i = 1, 2 * N do
      local r = math.random()
      x[i] = f32r(specials[i] or (r < 0.4 and (math.random() * 2 - 1) * 600 or r < 0.7 and (math.random() * 2 - 1) * 70000
        or (math.random() * 2 - 1) * 2 ^ -math.random(1, 20)))
    end
    local h, p = {}, {}
    for i = 1, N do
      h[i] = floats.to_f16(x[2 * i - 1] * 1.5) * 65536 + floats.to_f16(x[2 * i] / 3)
      p[i] = { i - 1, ((i - 1) * 37 + 11) % 256, ((i - 1) * 101 + 5) % 256, ((i - 1) * 53 + 200) % 256 }
    end
    local words = {}
    for i = 1, N do words[i] = p[i][1] + 256 * p[i][2] + 65536 * p[i][3] + 16777216 * p[i][4] end
    local ok, out = run(k, { { f32, 2 * N, x }, { u32, N, h }, { u32, N, words }, { u32, 7 * N } })
    assert.is_true(ok, out)
    local function relu(v) return (v > 0 or v ~= v) and v or 0 end
    local function pair(enc, hi, lo) return enc(hi) * 256 + enc(lo) end
    local function f16(v) return v ~= v and 0x7fff or floats.to_f16(v) end
    local function back(dec, code, r) local v = dec(code); return f16(r and relu(v) or v) end
    for i = 1, N do
      local a, b = x[2 * i - 1], x[2 * i]
      local ha, hb = floats.from_f16(math.floor(h[i] / 65536)), floats.from_f16(h[i] % 65536)
      local c = p[i]
      local want = {
        pair(floats.to_e4m3, a, b) + 65536 * pair(floats.to_e5m2, a, b),
        pair(floats.to_e4m3, relu(a), relu(b)) + 65536 * pair(floats.to_e5m2, relu(a), relu(b)),
        pair(floats.to_e4m3, ha, hb) + 65536 * pair(floats.to_e5m2, ha, hb),
        back(floats.from_e4m3, c[1], false) + 65536 * back(floats.from_e4m3, c[2], false),
        back(floats.from_e5m2, c[1], false) + 65536 * back(floats.from_e5m2, c[2], false),
        back(floats.from_e4m3, c[3], true) + 65536 * back(floats.from_e4m3, c[4], true),
        back(floats.from_e5m2, c[3], true) + 65536 * back(floats.from_e5m2, c[4], true),
      }
      for j = 1, 7 do
        local got = tonumber(out[4][7 * (i - 1) + j - 1])
        if got ~= want[j] then
          error(("thread %d word %d (a %.9g, b %.9g, f16x2 %.9g/%.9g, codes 0x%08x): got 0x%08x, want 0x%08x")
            :format(i - 1, j, a, b, ha, hb, words[i], got, want[j]))
        end
      end
    end
  end)

  it("rounds f32 arithmetic in every IEEE mode (add/mul/div/sqrt .rn .rz .rm .rp)", function()
    local N, modes = 256, { "rn", "rz", "rm", "rp" }
    local k = kernel "rnd" {
      in_specs = { Tile(N, f32), Tile(N, f32) }, out_specs = { Tile(N * 16, f32) }, block = { 256, 1, 1 },
      function(X, Y, O)
        local px, py, po = ptx.global_ptrs(X, Y, O)
        local t = reg.from(ptx.special.tid.x(), u32)
        local x, y = reg.scalar(f32), reg.scalar(f32)
        ptx.ld.global(x, ptx.addr(px + t:mul_wide(4)))
        ptx.ld.global(y, ptx.addr(py + t:mul_wide(4)))
        local slot = 0
        for _, op in ipairs { "add", "mul", "div", "sqrt" } do
          for _, m in ipairs(modes) do
            local r = reg.scalar(f32)
            if op == "sqrt" then ptx.inst.sqrt[m].f32(r, x) else ptx.inst[op][m].f32(r, x, y) end
            ptx.st.global(ptx.addr(po + (t + slot * N):mul_wide(4)), r)
            slot = slot + 1
          end
        end
        ptx.ret()
      end,
    }
    local x, y = rand_f32(N, 17, 0.001, 1000), rand_f32(N, 19, -3, 3)
    local ok, out = run(k, { { f32, N, x }, { f32, N, y }, { f32, N * 16 } })
    assert.is_true(ok, out)
    --- Round the double d to f32 in mode m; exact tells whether d is the exact result.
    local function round(d, m)
      local r = f32r(d)
      if r == d or m == "rn" then return r end
      local down = r > d and ffi.C.nextafterf(r, -math.huge) or r
      local up = r < d and ffi.C.nextafterf(r, math.huge) or r
      if m == "rm" then return down elseif m == "rp" then return up end
      return d > 0 and down or up
    end
    local slot = 0
    for _, op in ipairs { "add", "mul", "div", "sqrt" } do
      for _, m in ipairs(modes) do
        for i = 1, N do
          local a, b = f32r(x[i]), f32r(y[i])
          local got = out[3][(slot * N) + i - 1]
          if op == "add" or op == "mul" then
            local d = op == "add" and a + b or a * b   -- exact in double for these inputs
            assert.equal(round(d, m), got, op .. "." .. m)
          else
            -- div/sqrt are not exact in double: check the result brackets the true value
            local d = op == "div" and a / b or math.sqrt(a)
            local lo, hi = ffi.C.nextafterf(got, -math.huge), ffi.C.nextafterf(got, math.huge)
            assert.is_true(d > lo and d < hi, op .. "." .. m)
            if m == "rz" then assert.is_true(math.abs(got) <= math.abs(d) * (1 + 1e-15), op .. ".rz") end
            if m == "rm" then assert.is_true(got <= d * (1 + (d > 0 and 1e-15 or -1e-15)), op .. ".rm") end
            if m == "rp" then assert.is_true(got >= d * (1 - (d > 0 and 1e-15 or -1e-15)), op .. ".rp") end
          end
        end
        slot = slot + 1
      end
    end
  end)

  it("synchronises named barriers with thread counts and reduces with bar.red", function()
    local k = kernel "named" {
      in_specs = { Tile(128, u32) }, out_specs = { Tile(128, u32), Tile(128, u32) }, block = { 128, 1, 1 },
      function(A, O, R)
        local pa, po, pr = ptx.global_ptrs(A, O, R)
        local s = smem.alloc(u32, 128)
        local t = reg.from(ptx.special.tid.x(), u32)
        local base = s:base()
        local v = reg.scalar(u32)
        ptx.ld.global(v, ptx.addr(pa + t:mul_wide(4)))
        ptx.st.shared(ptx.addr(base + t:shl(2)), v)
        -- warps 0-1 meet at barrier 1, warps 2-3 at barrier 2 (64 threads each)
        local id = reg.scalar(u32)
        ptx.inst.selp.u32(id, 1, 2, t:lt(64))
        ptx.inst.bar.sync(id, 64)
        local x = reg.scalar(u32)
        ptx.ld.shared(x, ptx.addr(base + t:bxor(32):shl(2)))     -- the partner warp in the same group
        ptx.st.global(ptx.addr(po + t:mul_wide(4)), x)
        local n = reg.scalar(u32)
        ptx.inst.bar.red.popc.u32(n, 0, v:band(1):eq(1))
        ptx.st.global(ptx.addr(pr + t:mul_wide(4)), n)
        ptx.ret()
      end,
    }
    local a = rand_u32(128, 29)
    local ok, out = run(k, { { u32, 128, a }, { u32, 128 }, { u32, 128 } })
    assert.is_true(ok, out)
    local odd = 0
    for i = 1, 128 do odd = odd + a[i] % 2 end
    for t = 0, 127 do
      assert.equal(a[bit.bxor(t, 32) + 1], tonumber(out[2][t]))
      assert.equal(odd, tonumber(out[3][t]))
    end
  end)

  it("copies with cp.async (zero-filling past the source size) and waits", function()
    local k = kernel "cpa" {
      arch = "sm_80", in_specs = { Tile(128, u32) }, out_specs = { Tile(128, u32) }, block = { 32, 1, 1 },
      function(A, O)
        local pa, po = ptx.global_ptrs(A, O)
        local s = smem.alloc(u32, 128, { align = 16 })
        local t = reg.from(ptx.special.tid.x(), u32)
        local src = pa + t:mul_wide(16)
        local dst = s:base() + t:shl(4)
        local keep = reg.scalar(u32)
        ptx.inst.selp.u32(keep, 16, 8, t:lt(16))                 -- the upper half copies 8 bytes, zero-fills 8
        ptx.inst.cp.async.cg.shared.global(ptx.addr(dst), ptx.addr(src), 16, keep)
        ptx.inst.cp.async.commit_group()
        ptx.inst.cp.async.wait_group(0)
        ptx.bar_sync(0)
        local v = reg.array(u32, 4)
        ptx.ld.shared({ v[0], v[1], v[2], v[3] }, ptx.addr(dst))
        ptx.st.global(ptx.addr(po + t:mul_wide(16)), { v[0], v[1], v[2], v[3] })
        ptx.ret()
      end,
    }
    local a = rand_u32(128, 31)
    local ok, out = run(k, { { u32, 128, a }, { u32, 128 } })
    assert.is_true(ok, out)
    for i = 0, 127 do
      local t, j = math.floor(i / 4), i % 4
      assert.equal((t < 16 or j < 2) and a[i + 1] or 0, tonumber(out[2][i]))
    end
  end)

  it("pipelines a bulk copy through an mbarrier (init, arrive.expect_tx, complete_tx, try_wait.parity)", function()
    local N = 64
    local k = kernel "bulk" {
      arch = "sm_90a", in_specs = { Tile(N, f32) }, out_specs = { Tile(N, f32), Tile(N, u32) }, block = { N, 1, 1 },
      function(X, Y, S)
        local px, py, ps = ptx.global_ptrs(X, Y, S)
        local buf = smem.alloc(f32, N, { align = 128 })
        local bar = smem.mbarrier(1)
        local t = reg.from(ptx.special.tid.x(), u32)
        local leader = t:eq(0)
        ptx.if_(leader, function() ptx.inst.mbarrier.init.shared.b64(bar[0], 1) end)
        ptx.inst.fence.mbarrier_init.release.cluster()
        ptx.bar_sync(0)
        ptx.if_(leader, function()
          local state = reg.scalar(T.b64)
          ptx.inst.mbarrier.arrive.expect_tx.shared.b64(state, bar[0], N * 4)
          ptx.inst("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes", buf[0], ptx.addr(px), N * 4, bar[0])
        end)
        spin_wait(bar[0], 0)
        local v = reg.scalar(f32)
        ptx.ld.shared(v, ptx.addr(buf:base() + t:shl(2)))
        ptx.st.global(ptx.addr(py + t:mul_wide(4)), v * 2)
        -- a second wait on the same parity returns at once: that phase stays completed
        local again = reg.pred()
        ptx.inst.mbarrier.test_wait.parity.shared.b64(again, bar[0], 0)
        local r = reg.scalar(u32)
        ptx.inst.selp.u32(r, 1, 0, again)
        ptx.st.global(ptx.addr(ps + t:mul_wide(4)), r)
        ptx.ret()
      end,
    }
    local x = rand_f32(N, 59, -3, 3)
    local ok, out = run(k, { { f32, N, x }, { f32, N }, { u32, N } })
    assert.is_true(ok, out)
    for i = 0, N - 1 do
      assert.equal(f32r(x[i + 1]) * 2, out[2][i])
      assert.equal(1, tonumber(out[3][i]))
    end
  end)

  it("ends a warp's turn at a failed mbarrier wait, so the warp that completes the phase runs next", function()
    -- Warp 1 arrives last at bar.sync and runs on into a wait that only
    -- warp 0's arrival completes: it waits once, yields, and succeeds on
    -- its next turn (spinning through its whole turn would count ~250).
    local k = kernel "spin_yield" {
      arch = "sm_90a", out_specs = { Tile(64, u32) }, block = { 64, 1, 1 },
      function(S)
        local ps = ptx.global_ptrs(S)
        local bar = smem.mbarrier(1)
        local t = reg.from(ptx.special.tid.x(), u32)
        ptx.if_(t:eq(0), function() ptx.inst.mbarrier.init.shared.b64(bar[0], 1) end)
        ptx.inst.fence.mbarrier_init.release.cluster()
        ptx.bar_sync(0)
        ptx.if_(t:eq(0), function()
          local state = reg.scalar(T.b64)
          ptx.inst.mbarrier.arrive.shared.b64(state, bar[0])
        end)
        local spins = spin_wait(bar[0], 0)
        ptx.st.global(ptx.addr(ps + t:mul_wide(4)), spins)
        ptx.ret()
      end,
    }
    local ok, out = run(k, { { u32, 64 } })
    assert.is_true(ok, out)
    for i = 0, 63 do assert.equal(i < 32 and 1 or 2, tonumber(out[1][i])) end
  end)

  it("clears what a CTA touched of shared memory and its race shadows before the next CTA on the thread runs", function()
    -- Two CTAs on one host thread, one after the other: CTA 0 stores at
    -- byte 0x3000 of 16 KB (a page of its own), CTA 1 only loads it. CTA 1
    -- must find it unwritten (the uninitialised-read report) and zero (with
    -- that check off), not CTA 0's store.
    local k = kernel "reuse" {
      arch = "sm_80", out_specs = { Tile(2, u32) }, grid = { 2, 1, 1 }, block = { 32, 1, 1 },
      function(Out)
        local po = ptx.global_ptrs(Out)
        local buf = smem.alloc(u32, 4096)
        local cta = reg.from(ptx.special.ctaid.x(), u32)
        local t = reg.from(ptx.special.tid.x(), u32)
        local at = ptx.addr(buf:base() + 0x3000)
        ptx.if_(t:eq(0), function()
          ptx.if_(cta:eq(0), function() ptx.inst.st.shared.u32(at, 0xabcd) end, function()
            local v = reg.scalar(u32)
            ptx.inst.ld.shared.u32(v, at)
            ptx.st.global(ptx.addr(po + cta:mul_wide(4)), v)
          end)
        end)
        ptx.ret()
      end,
    }
    local ok, err = run(k, { { u32, 2, { 7, 7 } } }, { options = { threads = 1 } })
    assert.is_false(ok)
    assert.matches("reads 4 bytes of shared memory at offset 0x3000 that no thread has written", err, 1, true)
    assert.matches("CTA (1,0,0)", err, 1, true)
    local ok2, out = run(k, { { u32, 2, { 7, 7 } } }, { options = { threads = 1, checks = 7 } })
    assert.is_true(ok2, out)
    assert.equal(0, tonumber(out[1][1]))
  end)

  it("reports an arrival on an mbarrier that was never initialised", function()
    local line
    local k = kernel "mbad" {
      arch = "sm_90a", out_specs = { Tile(32, u32) }, block = { 32, 1, 1 },
      function()
        local bar = smem.mbarrier(1)
        local state = reg.scalar(T.b64)
        line = H.here(); ptx.inst.mbarrier.arrive.shared.b64(state, bar[0])
        ptx.ret()
      end,
    }
    local ok, msg = run(k, { { u32, 32 } })
    assert.is_false(ok)
    assert.truthy(msg:find("emu_spec.lua:" .. line .. ":", 1, true), msg)
    assert.truthy(msg:find("not initialised", 1, true), msg)
  end)

  it("multiplies with mma.sync m16n8k16 bf16 and m16n8k8 tf32 in the ISA's fragment layouts", function()
    -- A (16 x K) and B (K x 8) come from memory row-major; every lane loads its
    -- own fragment elements as the PTX ISA lays them out, then one mma.
    local function build(name, form, K, atype)
      return kernel(name) {
        arch = "sm_90a", in_specs = { Tile(16 * K, u32), Tile(K * 8, u32) }, out_specs = { Tile(128, f32) },
        block = { 32, 1, 1 },
        function(A, B, C)
          local pa, pb, pc = ptx.global_ptrs(A, B, C)
          local l = reg.from(ptx.special.laneid(), u32)
          local g, t = l:shr(2), l:band(3)
          local function elem(base, idx)                       -- 32-bit word idx of a table
            local v = reg.scalar(b32)
            ptx.ld.global(v, ptx.addr(base + idx:mul_wide(4)))
            return v
          end
          local function pair(base, row, col, ld)             -- two 16-bit values (col, col+1) of row
            local lo, hi = elem(base, row * ld + col), elem(base, row * ld + col + 1)
            local r = reg.scalar(b32)
            ptx.inst.prmt.b32(r, lo, hi, 0x5410)
            return r
          end
          local a, b = {}, {}
          if atype == "tf32" then
            for r = 0, 3 do a[r + 1] = elem(pa, (g + 8 * (r % 2)) * K + t + 4 * math.floor(r / 2)) end
            for r = 0, 1 do b[r + 1] = elem(pb, (t + 4 * r) * 8 + g) end
          else
            for r = 0, 3 do a[r + 1] = pair(pa, g + 8 * (r % 2), t * 2 + 8 * math.floor(r / 2), K) end
            for r = 0, 1 do
              local lo, hi = elem(pb, (t * 2 + 8 * r) * 8 + g), elem(pb, (t * 2 + 1 + 8 * r) * 8 + g)
              b[r + 1] = reg.scalar(b32)
              ptx.inst.prmt.b32(b[r + 1], lo, hi, 0x5410)
            end
          end
          local c = reg.fragments(f32, 4, true)
          local d = { c[0], c[1], c[2], c[3] }
          ptx.inst(form, d, a, b, d)
          for r = 0, 3 do
            local row, col = g + 8 * math.floor(r / 2), t * 2 + r % 2
            ptx.st.global(ptx.addr(pc + (row * 8 + col):mul_wide(4)), c[r])
          end
          ptx.ret()
        end,
      }
    end
    for _, case in ipairs {
      { "mma_bf16", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", 16, "bf16" },
      { "mma_tf32", "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", 8, "tf32" },
    } do
      local K, atype = case[3], case[4]
      local k = build(case[1], case[2], K, atype)
      local av, bv = rand_f32(16 * K, 61, -2, 2), rand_f32(K * 8, 67, -2, 2)
      local ah, bh, aval, bval = {}, {}, {}, {}
      for i = 1, 16 * K do
        if atype == "bf16" then ah[i] = floats.to_bf16(av[i]); aval[i] = floats.from_bf16(ah[i])
        else ah[i] = bit.band(floats.f32_bits(av[i]), 0xffffe000); aval[i] = floats.from_f32_bits(ah[i]) end
      end
      for i = 1, K * 8 do
        if atype == "bf16" then bh[i] = floats.to_bf16(bv[i]); bval[i] = floats.from_bf16(bh[i])
        else bh[i] = bit.band(floats.f32_bits(bv[i]), 0xffffe000); bval[i] = floats.from_f32_bits(bh[i]) end
        bh[i] = bh[i] % 4294967296
      end
      for i = 1, 16 * K do ah[i] = ah[i] % 4294967296 end
      local ok, out = run(k, { { u32, 16 * K, ah }, { u32, K * 8, bh }, { f32, 128 } })
      assert.is_true(ok, out)
      for i = 0, 15 do
        for j = 0, 7 do
          local want = 0
          for q = 0, K - 1 do want = want + aval[i * K + q + 1] * bval[q * 8 + j + 1] end
          assert.is_true(math.abs(out[3][i * 8 + j] - want) < 1e-5, ("%s D[%d][%d] = %g, want %g"):format(case[1], i, j, out[3][i * 8 + j], want))
        end
      end
    end
  end)

  it("runs the CTAs of a cluster together: barrier.cluster, mapa and distributed shared memory", function()
    local k = kernel "dsmem" {
      arch = "sm_90a", out_specs = { Tile(8 * 64, u32), Tile(2, u32) }, grid = { 8, 1, 1 }, block = { 64, 1, 1 },
      cluster = { 4, 1, 1 },
      function(O, C)
        local po, pc = ptx.global_ptrs(O, C)
        local buf = smem.alloc(u32, 65)
        local t = reg.from(ptx.special.tid.x(), u32)
        local rank = reg.from(ptx.special.cluster_ctarank(), u32)
        local cta = reg.from(ptx.special.ctaid.x(), u32)
        local base = buf:base()
        ptx.st.shared(ptx.addr(base + t:shl(2)), rank * 1000 + t)
        ptx.if_(t:eq(0), function() ptx.st.shared(ptx.addr(base, 256), reg.scalar(u32, 0)) end)
        ptx.inst.barrier.cluster.arrive()
        ptx.inst.barrier.cluster.wait()
        -- read the next CTA's slot t, and count every thread into CTA 0's counter
        local remote, counter = reg.scalar(u32), reg.scalar(u32)
        ptx.inst.mapa.shared_cluster.u32(remote, base + t:shl(2), (rank + 1):band(3))
        ptx.inst.mapa.shared_cluster.u32(counter, base + 256, 0)
        local v, old = reg.scalar(u32), reg.scalar(u32)
        ptx.inst.ld.shared_cluster.u32(v, ptx.addr(remote))
        ptx.inst.atom.shared_cluster.add.u32(old, ptx.addr(counter), 1)
        ptx.inst.barrier.cluster.arrive()
        ptx.inst.barrier.cluster.wait()
        ptx.st.global(ptx.addr(po + (cta * 64 + t):mul_wide(4)), v)
        ptx.if_(t:eq(0):and_(rank:eq(0)), function()
          local n = reg.scalar(u32)
          ptx.ld.shared(n, ptx.addr(base, 256))
          ptx.st.global(ptx.addr(pc + cta:shr(2):mul_wide(4)), n)
        end)
        ptx.ret()
      end,
    }
    local ok, out = run(k, { { u32, 8 * 64 }, { u32, 2 } })
    assert.is_true(ok, out)
    for c = 0, 7 do
      for t = 0, 63 do assert.equal(((c % 4 + 1) % 4) * 1000 + t, tonumber(out[1][c * 64 + t]), "CTA " .. c .. " thread " .. t) end
    end
    assert.same({ 256, 256 }, { tonumber(out[2][0]), tonumber(out[2][1]) })
  end)

  it("runs the rms_norm example at two sizes against the double-precision reference", function()
    local rms = dofile("examples/hopper/rms_norm.lua")
    for _, sz in ipairs { { 3, 512 }, { 2, 4096 } } do
      local B, N = sz[1], sz[2]
      local k = rms.build(B, N)
      local inp = rms.inputs(B, N, 23)
      local ok, out = run(k, { { f32, B * N, inp.x }, { f32, N, inp.w }, { f32, B * N } })
      assert.is_true(ok, out)
      local ref, maxerr = rms.reference(inp), 0
      for i = 1, B * N do maxerr = math.max(maxerr, math.abs(out[3][i - 1] - ref[i])) end
      assert.is_true(maxerr < 1e-5, "max error " .. maxerr)
    end
  end)
end)

describe("the emulator on nvcc output", function()
  --- Parse an nvcc fixture (spec/fixtures/cuda/basic.cu compiled for sm_80) and load it.
  local function load_fixture()
    local path = "spec/fixtures/ptx/nvcc/basic_sm80.ptx"
    local f = assert(io.open(path, "rb"))
    local text = f:read("*a")
    f:close()
    local m = core.parse(core.ctx, text, #text, path)
    assert(m ~= nil, core.error_message())
    local mod = ffi.new("int32_t[1]")
    assert.equal(0, core.device_load_ir(emu(), m, mod), core.error_message())
    return ffi.gc(m, core.module_free), mod[0]
  end

  --- Launch entry name of the loaded module with a packed parameter struct.
  local function launch(mod, name, grid, block, dyn, ctype, init)
    local fn = ffi.new("int32_t[1]")
    assert.equal(0, core.device_function(emu(), mod, name, fn), core.error_message())
    local params = ffi.new(ctype, init)
    local cfg = ffi.new("lpx_launch_cfg")
    for i = 0, 2 do cfg.grid[i], cfg.block[i], cfg.cluster[i] = i == 0 and grid or 1, i == 0 and block or 1, 1 end
    cfg.dynamic_smem, cfg.params, cfg.params_size = dyn, params, ffi.sizeof(ctype)
    return core.device_launch(emu(), fn[0], cfg)
  end

  -- What buffer() allocated in the running test: freed after it, since
  -- device memory keeps its device (and every module loaded on it) alive.
  local allocated = {}
  after_each(function()
    for i = #allocated, 1, -1 do
      assert.equal(0, core.device_free(emu(), allocated[i]), core.error_message())
      allocated[i] = nil
    end
  end)

  --- Device memory holding n values of ctype (optionally from a table).
  local function buffer(ctype, n, vals)
    local h = ffi.new(ctype .. "[?]", n)
    for i = 0, n - 1 do h[i] = vals and vals[i + 1] or 0 end
    local p = ffi.new("uint64_t[1]")
    assert.equal(0, core.device_alloc(emu(), n * ffi.sizeof(ctype), p))
    allocated[#allocated + 1] = p[0]
    assert.equal(0, core.device_upload(emu(), p[0], h, n * ffi.sizeof(ctype)))
    return p[0], h
  end

  it("runs reduce (grid-stride loop, shared tree, bar.sync, float atomics)", function()
    local _, mod = load_fixture()
    local n = 5000
    local vals = rand_f32(n, 37, -1, 1)
    local din = buffer("float", n, vals)
    local dout, hout = buffer("float", 1)
    assert.equal(0, launch(mod, "reduce", 4, 256, 0, "struct { uint64_t in, out; int32_t n; }", { din, dout, n }),
      core.error_message())
    assert.equal(0, core.device_download(emu(), hout, dout, 4))
    local sum = 0
    for i = 1, n do sum = sum + f32r(vals[i]) end
    assert.is_true(math.abs(hout[0] - sum) < 1e-4 * n ^ 0.5, hout[0] .. " vs " .. sum)
  end)

  it("runs dyn_smem (extern shared float4, generic addressing)", function()
    local _, mod = load_fixture()
    local N = 96
    local dout, hout = buffer("float", 4 * N)
    assert.equal(0, launch(mod, "dyn_smem", 1, N, 16 * N, "struct { uint64_t out; }", { dout }), core.error_message())
    assert.equal(0, core.device_download(emu(), hout, dout, 16 * N))
    for t = 0, N - 1 do
      assert.same({ (t + 1) % N, 1.5, -2, f32r(1e30) }, { hout[4 * t], hout[4 * t + 1], hout[4 * t + 2], hout[4 * t + 3] })
    end
  end)

  it("calls device functions (saxpy calls scale)", function()
    local _, mod = load_fixture()
    local n = 200
    local x, y = rand_f32(n, 41, -2, 2), rand_f32(n, 43, -2, 2)
    local dx = buffer("float", n, x)
    local dy, hy = buffer("float", n, y)
    assert.equal(0, launch(mod, "saxpy", 2, 128, 0, "struct { int32_t n; float a; uint64_t x, y; }", { n, 1.5, dx, dy }),
      core.error_message())
    assert.equal(0, core.device_download(emu(), hy, dy, 4 * n))
    -- y = scale(a*x + y, coeffs[i & 15]) with __constant__ coeffs = {1, 2, 3.5, -4.25, 0...}
    local coeffs = { [0] = 1, 2, 3.5, -4.25 }
    for i = 0, n - 1 do
      local c = coeffs[i % 16] or 0
      local v = (1.5 * f32r(x[i + 1]) + f32r(y[i + 1])) * c + 1
      assert.is_true(math.abs(hy[i] - v) <= 1e-5 * math.max(1, math.abs(v)), ("y[%d] = %.9g, expected %.9g"):format(i, hy[i], v))
    end
  end)

  it("runs mma_tile (cp.async, ldmatrix .x4 and .x2.trans, mma.sync m16n8k16 f16 -> f32)", function()
    local path = "spec/fixtures/ptx/nvcc/ampere_sm80.ptx"
    local f = assert(io.open(path, "rb"))
    local text = f:read("*a")
    f:close()
    local m = core.parse(core.ctx, text, #text, path)
    assert(m ~= nil, core.error_message())
    m = ffi.gc(m, core.module_free)
    local mod = ffi.new("int32_t[1]")
    assert.equal(0, core.device_load_ir(emu(), m, mod), core.error_message())
    local a, b = rand_f32(256, 47, -2, 2), rand_f32(256, 53, -2, 2)
    local ha, hb = {}, {}
    for i = 1, 256 do ha[i], hb[i] = floats.to_f16(a[i]), floats.to_f16(b[i]) end
    local da, db = buffer("uint16_t", 256, ha), buffer("uint16_t", 256, hb)
    local dc, hc = buffer("float", 128)
    assert.equal(0, launch(mod[0], "mma_tile", 1, 32, 0, "struct { uint64_t a, b, c; }", { da, db, dc }), core.error_message())
    assert.equal(0, core.device_download(emu(), hc, dc, 512))
    -- the kernel's ldmatrix addresses repeat A's first 8 columns as its last 8 (row (t % 16), column 0)
    local function A(i, k) return floats.from_f16(ha[i * 16 + k % 8 + 1]) end
    local function B(k, n) return floats.from_f16(hb[k * 16 + n + 1]) end
    for t = 0, 31 do
      local g, q = math.floor(t / 4), t % 4
      for r = 0, 3 do
        local i, n = g + 8 * math.floor(r / 2), 2 * q + r % 2
        local want = 0
        for k = 0, 15 do want = want + A(i, k) * B(k, n) end
        assert.is_true(math.abs(hc[t * 4 + r] - want) < 1e-5, ("D[%d][%d] = %g, want %g"):format(i, n, hc[t * 4 + r], want))
      end
    end
  end)

  --- Parse PTX text into a loaded module.
  local function load_text(text)
    local m = core.parse(core.ctx, text, #text, "inline.ptx")
    assert(m ~= nil, core.error_message())
    local mod = ffi.new("int32_t[1]")
    assert.equal(0, core.device_load_ir(emu(), m, mod), core.error_message())
    return ffi.gc(m, core.module_free), mod[0]
  end

  it("runs divergent, nested device-function calls with parameters and returns", function()
    local keep, mod = load_text([[
.version 8.0
.target sm_80
.address_size 64
.func (.param .b32 r) twice(.param .b32 a)
{
	.reg .b32 %r<3>;
	ld.param.b32 %r1, [a];
	shl.b32 %r2, %r1, 1;
	st.param.b32 [r], %r2;
	ret;
}
.func (.param .b32 func_retval0) mix(.param .b32 a, .param .b64 b)
{
	.reg .b32 %r<5>;
	.reg .b64 %rd<2>;
	ld.param.b32 %r1, [a];
	ld.param.b64 %rd1, [b];
	cvt.u32.u64 %r2, %rd1;
	{
	.param .b32 param0;
	st.param.b32 [param0], %r1;
	.param .b32 retval0;
	call.uni (retval0), twice, (param0);
	ld.param.b32 %r3, [retval0];
	}
	add.s32 %r4, %r3, %r2;
	st.param.b32 [func_retval0+0], %r4;
	ret;
}
.visible .entry k(.param .u64 out)
{
	.reg .pred %p<2>;
	.reg .b32 %r<5>;
	.reg .b64 %rd<5>;
	ld.param.u64 %rd1, [out];
	mov.u32 %r1, %tid.x;
	mov.u32 %r4, 7;
	and.b32 %r2, %r1, 3;
	setp.ne.u32 %p1, %r2, 0;
	@%p1 bra SKIP;
	cvt.u64.u32 %rd2, %r1;
	{
	.param .b32 param0;
	st.param.b32 [param0], %r1;
	.param .b64 param1;
	st.param.b64 [param1], %rd2;
	.param .b32 retval0;
	call.uni (retval0), mix, (param0, param1);
	ld.param.b32 %r4, [retval0];
	}
SKIP:
	mul.wide.u32 %rd3, %r1, 4;
	add.s64 %rd4, %rd1, %rd3;
	st.global.u32 [%rd4], %r4;
	ret;
}
]])
    local d, h = buffer("uint32_t", 64)
    assert.equal(0, launch(mod, "k", 1, 64, 0, "struct { uint64_t out; }", { d }), core.error_message())
    assert.equal(0, core.device_download(emu(), h, d, 256))
    for t = 0, 63 do assert.equal(t % 4 == 0 and 3 * t or 7, tonumber(h[t]), "thread " .. t) end
    assert.truthy(keep)
  end)

  it("reports calls it cannot make (an extern function other than vprintf and __assertfail) at the call's PTX line", function()
    local _, mod = load_text([[
.version 8.0
.target sm_80
.address_size 64
.extern .func (.param .b32 func_retval0) vscanf(.param .b64 a, .param .b64 b);
.visible .entry k()
{
	.reg .b32 %r<2>;
	{
	.param .b64 param0;
	.param .b64 param1;
	.param .b32 retval0;
	call.uni (retval0), vscanf, (param0, param1);
	}
	ret;
}
]])
    assert.equal(-1, launch(mod, "k", 1, 32, 0, "struct { uint8_t none; }", { 0 }))
    assert.truthy(core.error_message():find("k, PTX line 12: call.uni", 1, true), core.error_message())
    assert.truthy(core.error_message():find("calls the extern function vscanf", 1, true), core.error_message())
  end)
end)

describe("the emulator's checks", function()
  --- A kernel over n threads whose body(t, po, line) plants a bug.
  local function planted(name, n, body, opts)
    return kernel(name) {
      out_specs = { Tile(n, u32) }, block = { n, 1, 1 },
      function(O)
        local po = ptx.global_ptrs(O)
        local t = reg.from(ptx.special.tid.x(), u32)
        body(t, po)
        ptx.ret()
      end,
    }, opts
  end

  it("reports an out-of-bounds global store with the lane, CTA, allocation and Lua line", function()
    local line
    local k = planted("oob", 64, function(t, po)
      line = H.here(); ptx.st.global(ptx.addr(po + (t + 1):mul_wide(4)), t)     -- bug: t + 1
    end)
    local ok, msg = run(k, { { u32, 64 } })
    assert.is_false(ok)
    assert.truthy(msg:find("emu_spec.lua:" .. line .. ":", 1, true), msg)
    assert.truthy(msg:find("out-of-bounds global access of 4 bytes", 1, true), msg)
    assert.truthy(msg:find("0 bytes past the end of allocation", 1, true), msg)
    assert.truthy(msg:find("lane 31 of warp 1, CTA (0,0,0)", 1, true), msg)
  end)

  it("reports a misaligned access", function()
    local line
    local k = planted("mis", 32, function(t, po)
      line = H.here(); ptx.st.global(ptx.addr(po + t:mul_wide(4), 2), t)       -- bug: +2 bytes
    end)
    local ok, msg = run(k, { { u32, 64 } })
    assert.is_false(ok)
    assert.truthy(msg:find("emu_spec.lua:" .. line .. ":", 1, true), msg)
    assert.truthy(msg:find("misaligned global access: 4 bytes", 1, true), msg)
  end)

  it("checks a warp's global loads together but reports the one bad lane as a lane-by-lane check does", function()
    -- The emulator checks a warp's global addresses with one range test when every lane passes; a warp
    -- with one lane out of bounds or misaligned falls back to the per-lane check, which names that lane.
    for _, case in ipairs { { 13, 4096, "out%-of%-bounds global access of 4 bytes" }, { 22, 2, "misaligned global access: 4 bytes" } } do
      local bad, shift, want = case[1], case[2], case[3]
      local line
      local k = planted("one_bad_lane", 32, function(t, po)
        local off = reg.scalar(u32)
        ptx.inst.selp.u32(off, shift, 0, t:eq(bad))
        local v = reg.scalar(u32)
        line = H.here(); ptx.ld.global(v, ptx.addr(po + (t:shl(2) + off):mul_wide(1)))
        ptx.st.global(ptx.addr(po + t:mul_wide(4)), v)
      end)
      local ok, msg = run(k, { { u32, 32 } })
      assert.is_false(ok)
      assert.truthy(msg:find("emu_spec.lua:" .. line .. ":", 1, true), msg)
      assert.matches(want, msg)
      assert.truthy(msg:find(("lane %d of warp 0, CTA (0,0,0)"):format(bad), 1, true), msg)
    end
  end)

  it("reports an out-of-bounds shared access", function()
    local line
    local k = planted("soob", 32, function(t)
      local s = smem.alloc(u32, 32)
      line = H.here(); ptx.st.shared(ptx.addr(s:base() + t:shl(3)), t)          -- bug: stride 8
    end)
    local ok, msg = run(k, { { u32, 32 } })
    assert.is_false(ok)
    assert.truthy(msg:find("emu_spec.lua:" .. line .. ":", 1, true), msg)
    assert.truthy(msg:find("out-of-bounds shared access", 1, true), msg)
  end)

  it("reports a shared-memory race between barriers", function()
    local line
    local k = planted("race", 64, function(t, po)
      local s = smem.alloc(u32, 64)
      local base = s:base()
      ptx.st.shared(ptx.addr(base + t:shl(2)), t)
      local v = reg.scalar(u32)
      -- bug: no bar.sync between the store above and this read of another warp's slot
      line = H.here(); ptx.ld.shared(v, ptx.addr(base + t:bxor(32):shl(2)))
      ptx.st.global(ptx.addr(po + t:mul_wide(4)), v)
    end)
    local ok, msg = run(k, { { u32, 64 } }, { options = { uninit_check = 0 } })
    assert.is_false(ok)
    assert.truthy(msg:find("emu_spec.lua:" .. line .. ":", 1, true), msg)
    assert.truthy(msg:find("shared-memory race", 1, true), msg)
  end)

  it("accepts the same exchange with a barrier", function()
    local k = planted("norace", 64, function(t, po)
      local s = smem.alloc(u32, 64)
      local base = s:base()
      ptx.st.shared(ptx.addr(base + t:shl(2)), t)
      ptx.bar_sync(0)
      local v = reg.scalar(u32)
      ptx.ld.shared(v, ptx.addr(base + t:bxor(32):shl(2)))
      ptx.st.global(ptx.addr(po + t:mul_wide(4)), v)
    end)
    local ok, out = run(k, { { u32, 64 } })
    assert.is_true(ok, out)
    for t = 0, 63 do assert.equal(bit.bxor(t, 32), tonumber(out[1][t])) end
  end)

  it("reports a read of a register never written", function()
    local line
    local k = planted("uninit", 32, function(t, po)
      local x = reg.scalar(u32)                                                 -- bug: never set
      line = H.here(); local y = x + t
      ptx.st.global(ptx.addr(po + t:mul_wide(4)), y)
    end)
    local ok, msg = run(k, { { u32, 32 } })
    assert.is_false(ok)
    assert.truthy(msg:find("emu_spec.lua:" .. line .. ":", 1, true), msg)
    assert.truthy(msg:find("which this thread never wrote", 1, true), msg)
  end)

  it("reports a read of shared memory no thread wrote", function()
    local line
    local k = planted("sinit", 32, function(t, po)
      local s = smem.alloc(u32, 64)
      local v = reg.scalar(u32)
      ptx.st.shared(ptx.addr(s:base() + t:shl(2)), t)
      line = H.here(); ptx.ld.shared(v, ptx.addr(s:base() + t:shl(2), 128))      -- bug: the upper half is never written
      ptx.st.global(ptx.addr(po + t:mul_wide(4)), v)
    end)
    local ok, msg = run(k, { { u32, 32 } })
    assert.is_false(ok)
    assert.truthy(msg:find("emu_spec.lua:" .. line .. ":", 1, true), msg)
    assert.truthy(msg:find("that no thread has written", 1, true), msg)
  end)

  it("refuses, before any instruction runs, a kernel holding a form it does not implement", function()
    local line
    local k = planted("unimpl", 32, function(t, po)
      local s, bar = smem.alloc(u32, 8, { align = 16 }), smem.mbarrier(1)
      ptx.st.global(ptx.addr(po + t:mul_wide(4)), t)                 -- would run first
      line = H.here(); ptx.inst("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster",
        s[0], ptx.addr(po), 16, bar[0], reg.scalar(pyptx.types.u16, 1))
    end)
    local ok, msg, hosts = run(k, { { u32, 32 } })
    assert.is_false(ok)
    assert.truthy(msg:find("emu_spec.lua:" .. line .. ": cp.async.bulk.shared::cluster", 1, true), msg)
    assert.truthy(msg:find("not implemented: cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster (", 1, true), msg)
    for i = 0, 31 do assert.equal(0x7fc00000, tonumber(hosts[1][i])) end   -- nothing ran
  end)

  it("refuses a kernel whose callee holds a form it does not implement, and runs its neighbours", function()
    local m = pyptx.load_ptx([[
.version 8.0
.target sm_90a
.address_size 64
.func helper(.param .u64 p)
{
  .reg .b64 %rd<2>;
  .reg .b16 %rs<2>;
  .shared .align 16 .b8 buf[64];
  ld.param.u64 %rd1, [p];
  mov.u16 %rs1, 1;
  cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [buf], [%rd1], 16, [buf+32], %rs1;
  ret;
}
.visible .entry uses(.param .u64 p)
{
  .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [p];
  { .param .b64 a; st.param.b64 [a], %rd1; call helper, (a); }
  ret;
}
.visible .entry fine(.param .u64 p)
{
  .reg .b64 %rd<2>;
  .reg .b32 %r<2>;
  ld.param.u64 %rd1, [p];
  mov.u32 %r1, 7;
  st.global.u32 [%rd1], %r1;
  ret;
}
]], "callee.ptx")
    local dev = H.device("emu")
    local out = require("pyptx.runtime.tensor").empty({ 1 }, u32, dev)
    local ok, err = pcall(m.uses, { grid = { 1 }, block = { 32 }, args = { out }, device = dev })
    assert.is_false(ok)
    assert.matches("helper, PTX line 11: cp.async.bulk.shared::cluster", err, 1, true)
    assert.matches("not implemented: cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster (", err, 1, true)
    m.fine { grid = { 1 }, block = { 1 }, args = { out }, device = dev }
    assert.equal(7, out:totable()[1])
  end)

  it("reports a barrier some threads never reach as a deadlock", function()
    local line
    local k = planted("dead", 64, function(t, po)
      ptx.if_(t:lt(32), function()
        line = H.here(); ptx.bar_sync(0)                                          -- bug: half the CTA skips it
      end)
      ptx.st.global(ptx.addr(po + t:mul_wide(4)), t)
    end)
    local ok, msg = run(k, { { u32, 64 } })
    assert.is_false(ok)
    assert.truthy(msg:find("emu_spec.lua:" .. line .. ":", 1, true), msg)
    assert.truthy(msg:find("deadlock: barrier 0 waits for 64 threads but only 32 arrived", 1, true), msg)
  end)

  --- Two CTAs of a cluster: CTA 1 waits on its mbarrier; with arrive, CTA
  -- 0 arrives on it remotely (mapa); without, nothing ever does.
  local function cluster_wait(arrive, lines)
    return kernel "clwait" {
      arch = "sm_90a", out_specs = { Tile(2, u32) }, grid = { 2, 1, 1 }, block = { 32, 1, 1 }, cluster = { 2, 1, 1 },
      function(O)
        local po = ptx.global_ptrs(O)
        local bar = smem.mbarrier(1)
        local t = reg.from(ptx.special.tid.x(), u32)
        local rank = reg.from(ptx.special.cluster_ctarank(), u32)
        ptx.if_(t:eq(0), function() ptx.mbarrier.init(bar[0], 1) end)
        ptx.inst("fence.mbarrier_init.release.cluster")
        ptx.inst.barrier.cluster.arrive()
        ptx.inst.barrier.cluster.wait()
        if arrive then
          ptx.if_(rank:eq(0):and_(t:eq(0)), function()
            local remote = reg.scalar(u32)
            ptx.inst.mapa.shared_cluster.u32(remote, bar:base(), 1)
            ptx.inst("mbarrier.arrive.shared::cluster.b64", ptx.sink, ptx.addr(remote))
          end)
        end
        ptx.if_(rank:eq(1), function()
          lines.wait = H.here(); ptx.mbarrier.wait(bar[0], 0)
        end)
        ptx.if_(t:eq(0), function() ptx.st.global(ptx.addr(po + rank:mul_wide(4)), rank + 1) end)
      end }
  end

  it("reports an mbarrier wait no CTA of the cluster can complete as a deadlock, and waits for a remote arrival", function()
    local lines = {}
    local ok, out = run(cluster_wait(true, lines), { { u32, 2 } }, { options = { budget = 200000 } })
    assert(ok, out)
    assert.are.same({ 1, 2 }, { out[1][0], out[1][1] })
    local msg
    ok, msg = run(cluster_wait(false, lines), { { u32, 2 } }, { options = { budget = 200000 } })
    assert.is_false(ok)
    assert.truthy(msg:find("emu_spec.lua:" .. lines.wait .. ":", 1, true), msg)
    assert.truthy(msg:find("deadlock: this wait for the mbarrier phase with parity 0 can never complete: every warp of the "
      .. "cluster is waiting or has exited", 1, true), msg)
  end)

  it("ends an endless loop at the instruction budget", function()
    local line
    local k = planted("spin", 32, function(t, po)
      local x = reg.scalar(u32, 0)
      ptx.loop(function()
        line = H.here(); ptx.inst.add.u32(x, x, 1)                                -- bug: never exits
      end)
      ptx.st.global(ptx.addr(po + t:mul_wide(4)), x)
    end)
    local ok, msg = run(k, { { u32, 32 } }, { options = { budget = 200000 } })
    assert.is_false(ok)
    assert.truthy(msg:find("instruction budget exhausted", 1, true), msg)
    assert.truthy(msg:find("emu_spec.lua:" .. line, 1, true) or msg:find("emu_spec.lua:" .. (line + 1), 1, true), msg)
  end)
end)
