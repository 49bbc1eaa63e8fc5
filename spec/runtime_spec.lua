--- Launching: grid and block sizes the hardware cannot run are refused
-- before launch, at the line that launches, instead of wrapping (2^32 in
-- a 32-bit grid field is 0); one shape binding for k(x, w) and the C API
-- (pyptx.embed), with the same messages; TMA maps encoded by the device at
-- launch, their errors at the launching line.
local ffi = require "ffi"
local pyptx = require "pyptx"
local runtime = require "pyptx.runtime"
local H = require "spec.helpers"
local tensor = require "pyptx.runtime.tensor"
local kernel, ptx, reg, Tile, T = pyptx.kernel, pyptx.ptx, pyptx.reg, pyptx.Tile, pyptx.types

--- The current line of the caller.

--- A kernel that only returns, with a grid of the template value G and a block.
local function noop(block)
  return kernel "noop" {
    arch = "sm_80", in_specs = { Tile(1, T.f32) }, out_specs = { Tile(1, T.f32) },
    grid = function(v) return { v.GX or 1, v.GY or 1, v.GZ or 1 } end, block = block or { 32 },
    params = { GX = 1, GY = 1, GZ = 1 },
    function() ptx.ret() end,
  }
end

describe("launching", function()
  local dev = H.emu()
  runtime.use(dev)
  local x = tensor.from_table({ 1 }, T.f32)
  local GRID = "valid: x in 1..2147483647 (2^31-1), y and z in 1..65535"

  it("refuses a grid of 2^32 in x (it would wrap to 0) at the launching line", function()
    local line
    local ok, err = pcall(function() line = H.here(); noop()(x, { GX = 2 ^ 32 }) end)
    assert.is_false(ok)
    assert.equal(("runtime_spec.lua:%d: kernel \"noop\": grid (4294967296, 1, 1) is out of range; %s"):format(line, GRID),
      tostring(err):match("[^/]*$"))
  end)

  it("refuses grid x above 2^31-1 and y or z above 65535, and accepts the limits", function()
    for _, g in ipairs { { GX = 2 ^ 31 }, { GY = 65536 }, { GZ = 65536 } } do
      local ok, err = pcall(noop(), x, g)
      assert.is_false(ok)
      assert.matches("kernel \"noop\": grid %(%d+, %d+, %d+%) is out of range; valid: x in 1..2147483647", tostring(err))
    end
    assert.is_true(tensor.is(noop()(x, { GX = 3, GY = 65535, GZ = 1 })))
  end)

  it("refuses blocks out of range at the launching line", function()
    for _, b in ipairs { { { 2048 }, "block %(2048, 1, 1%) is out of range" }, { { 1, 1, 65 }, "block %(1, 1, 65%) is out of range" },
                         { { 32, 32, 2 }, "block %(32, 32, 2%) has 2048 threads; valid: at most 1024 threads in all" } } do
      local line
      local ok, err = pcall(function() line = H.here(); noop(b[1])(x) end)
      assert.is_false(ok)
      assert.matches("runtime_spec.lua:" .. line .. ": kernel \"noop\": " .. b[2], tostring(err))
    end
  end)

  it("refuses them in runtime.prepare too, at its caller's line", function()
    local line
    local ok, err = pcall(function() line = H.here(); runtime.prepare(noop(), x, { GY = 70000 }) end)
    assert.is_false(ok)
    assert.matches("runtime_spec.lua:" .. line .. ": kernel \"noop\": grid %(1, 70000, 1%) is out of range", tostring(err))
  end)

  it("reports wrong inputs at the launching line", function()
    local line
    local ok, err = pcall(function() line = H.here(); noop()(tensor.from_table({ 1 }, T.f64)) end)
    assert.is_false(ok)
    assert.matches("runtime_spec.lua:" .. line .. ": kernel \"noop\": input 1 is f64 but in_specs%[1%] is", tostring(err))
    ok, err = pcall(function() line = H.here(); noop()() end)
    assert.is_false(ok)
    assert.matches("runtime_spec.lua:" .. line .. ": kernel \"noop\" takes 1 input tensor%(s%) %(its in_specs%), got 0", tostring(err))
  end)

  it("reports a raw param without a value at the launching line", function()
    local k = kernel "rawp" {
      arch = "sm_80", in_specs = { Tile(1, T.f32) }, out_specs = { Tile(1, T.f32) }, raw_params = { { "u32", "n" } },
      function() ptx.ret() end,
    }
    local line
    local ok, err = pcall(function() line = H.here(); k(x) end)
    assert.is_false(ok)
    assert.equal(("runtime_spec.lua:%d: kernel \"rawp\": raw param 'n' has no value; pass it in the options table"):format(line),
      tostring(err):match("[^/]*$"))
    ok, err = pcall(function() line = H.here(); runtime.prepare(k, x) end)
    assert.is_false(ok)
    assert.matches("^runtime_spec.lua:" .. line .. ": kernel \"rawp\": raw param 'n'", tostring(err):match("[^/]*$"))
  end)

  it("passes runtime scalars per launch: checked in C, no trace per value", function()
    local k = kernel "scalars" {
      arch = "sm_80", in_specs = { Tile(4, T.f32) }, out_specs = { Tile(4, T.f32) },
      raw_params = { { "f32", "alpha" }, { "u32", "n" } }, block = { 4 },
      function(X, Y)
        local px, py = ptx.global_ptrs(X, Y)
        local i = reg.from(ptx.special.tid.x(), T.u32)
        ptx.if_(i:lt(ptx.param("n", T.u32)), function()
          local off, v = i:mul_wide(4), reg.scalar(T.f32)
          ptx.ld.global(v, ptx.addr(px + off))
          ptx.st.global(ptx.addr(py + off), v * ptx.param("alpha", T.f32))
        end)
        ptx.ret()
      end,
    }
    local xs = tensor.from_table({ 1, 2, 3, 4 }, T.f32)
    for _, a in ipairs { 0.5, 2, -3 } do
      assert.same({ a, 2 * a, 3 * a, 4 * a }, k(xs, { alpha = a, n = 4 }):values())
    end
    local traces = 0
    for _ in pairs(k.cache) do traces = traces + 1 end
    assert.equal(1, traces)
    local line
    local ok, err = pcall(function() line = H.here(); k(xs, { alpha = 1, n = -1 }) end)
    assert.is_false(ok)
    assert.equal(("runtime_spec.lua:%d: kernel \"scalars\": scalar n is -1 but raw_params[2] is u32; valid: 0..4294967295"):format(line),
      tostring(err):match("[^/]*$"))
    ok, err = pcall(function() k(xs, { alpha = 1, n = 2.5 }) end)
    assert.is_false(ok)
    assert.matches("scalar n is 2.5, a float, but raw_params%[2%] is u32; valid: an integer", tostring(err))
  end)

  it("names what it checks in dims_error (for other launchers)", function()
    assert.is_nil(runtime.dims_error("k", { 2 ^ 31 - 1, 65535, 65535 }, { 1024, 1, 1 }))
    assert.matches("^k: grid %(0, 1, 1%) is out of range", runtime.dims_error("k", { 0, 1, 1 }, { 1, 1, 1 }))
    assert.matches("^k: grid %(1.5, 1, 1%) is out of range", runtime.dims_error("k", { 1.5, 1, 1 }, { 1, 1, 1 }))
  end)
end)

-- ------------------------------------------------------------ binding

--- The kernel both binding paths launch: K bound by both inputs, 4 fixed.
local BIND_SRC = [[
local p = require "pyptx"
local Tile, f32 = p.Tile, p.types.f32
return p.kernel "bind" { arch = "sm_80", in_specs = { Tile("M", "K", f32), Tile("K", 4, f32) },
  out_specs = { Tile("M", 4, f32) }, block = { 32 }, function() p.ptx.ret() end }
]]

--- A host tensor view (what a host such as the C API's DLTensors gives
-- the binding; arrays kept alive by keep) of a DLPack dtype name and a
-- shape, with strides when given; CPU memory, as for the emulator.
local DL = { f32 = { 2, 32 }, f64 = { 2, 64 }, s32 = { 0, 32 }, u8x4 = { 1, 8, 4 } }
local function view(keep, dtype, shape, strides)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  local data = ffi.new("double[?]", math.max(n, 1))
  keep[#keep + 1] = data
  return { dl_dtype = DL[dtype], shape = shape, strides = strides, ptr = data, device_type = 1 }
end

--- The error of binding "bind" in C (lpx_bind_check, which the C API
-- calls too) for views { dtype, shape[, strides] } (inputs then outputs)
-- and given values.
local function embed_error(specs, values)
  local k = assert(loadstring(BIND_SRC, "=bind"))()
  local keep, views = {}, {}
  for i, sp in ipairs(specs) do views[i] = view(keep, sp[1], sp[2], sp[3]) end
  local ok, err = pcall(runtime.bind, k, views, values or {}, true)
  assert.is_false(ok)
  return err
end

--- The error of k(...) for tensors { dtype, shape } and options, with the
-- launching line stripped (checked to be this file's).
local function lua_error(specs, opts)
  local k = assert(loadstring(BIND_SRC, "=bind"))()
  local args = {}
  for i, sp in ipairs(specs) do args[i] = tensor.empty(sp[2], T[sp[1]]) end
  if opts then args[#args + 1] = opts end
  local line
  local ok, err = pcall(function() line = H.here(); k(unpack(args)) end)
  assert.is_false(ok)
  local prefix = "runtime_spec.lua:" .. line .. ": "
  local at = tostring(err):find(prefix, 1, true)
  assert.truthy(at, "not at the launching line: " .. tostring(err))
  return tostring(err):sub(at + #prefix)
end

describe("shape binding", function()
  runtime.use(H.emu())

  it("gives k(x, w) and the C API the same message for the same wrong inputs", function()
    local out = { "f32", { 8, 4 } }
    for _, case in ipairs {
      { { { "f64", { 8, 16 } }, { "f32", { 16, 4 } } }, nil,
        'kernel "bind": input 1 is f64 but in_specs[1] is Tile(M, K, f32)' },
      { { { "f32", { 8 } }, { "f32", { 16, 4 } } }, nil,
        'kernel "bind": input 1 has rank 1 (shape 8) but in_specs[1] is Tile(M, K, f32)' },
      { { { "f32", { 8, 16 } }, { "f32", { 16, 5 } } }, nil,
        'kernel "bind": input 2 dim 2 is 5 but in_specs[2] fixes it at 4' },
      { { { "f32", { 8, 16 } }, { "f32", { 12, 4 } } }, nil,
        'kernel "bind": dimension K is 16 from input 1 (shape 8x16) but 12 from input 2 (shape 12x4)' },
      { { { "f32", { 8, 16 } }, { "f32", { 16, 4 } } }, { K = 32 },
        'kernel "bind": dimension K is 32 (a given value) but 16 from input 1 (shape 8x16)' },
    } do
      assert.equal(case[3], lua_error(case[1], case[2]))
      local with_out = { case[1][1], case[1][2], out }
      assert.equal(case[3], embed_error(with_out, case[2]))
    end
  end)

  it("checks the C API's outputs, strides and DLPack dtypes with the same binding", function()
    local x, w = { "f32", { 8, 16 } }, { "f32", { 16, 4 } }
    assert.equal('kernel "bind": output 1 dim 2 is 5 but out_specs[1] fixes it at 4',
      embed_error { x, w, { "f32", { 8, 5 } } })
    assert.equal('kernel "bind": dimension M is 8 from input 1 (shape 8x16) but 9 from output 1 (shape 9x4)',
      embed_error { x, w, { "f32", { 9, 4 } } })
    assert.equal('kernel "bind": input 1 is not compact row-major: strides 1x8 (elements), expected 16x1',
      embed_error { { "f32", { 8, 16 }, { 1, 8 } }, w, { "f32", { 8, 4 } } })
    assert.equal('kernel "bind": output 1 is DLPack dtype (code 1, 8 bits, 4 lanes) but out_specs[1] is Tile(M, 4, f32)',
      embed_error { x, w, { "u8x4", { 8, 4 } } })
    assert.equal('kernel "bind" takes 3 tensors (2 input(s), then 1 output(s)), got 2', embed_error { x, w })
  end)

  it("has one layout rule (numpy's): size-1 dims any stride, empty tensors, broadcast dims refused", function()
    local k = assert(loadstring(BIND_SRC, "=bind"))()
    local keep, w, y = {}, { "f32", { 16, 4 } }, { "f32", { 1, 4 } }
    -- a (1, 16) that is the transpose of a (16, 1): numpy calls it C-contiguous
    local x = view(keep, "f32", { 1, 16 }, { 1, 1 })
    assert.same({ M = 1, K = 16 }, runtime.bind(k, { x, view(keep, unpack(w)), view(keep, unpack(y)) }, {}, true))
    assert.equal('kernel "bind": input 1 is a broadcast view (dim 1 of size 8 has stride 0); pass a materialised copy',
      embed_error { { "f32", { 8, 16 }, { 0, 1 } }, w, { "f32", { 8, 4 } } })
    -- zero elements: any strides, no data; M binds to 0
    local empty = { dl_dtype = DL.f32, shape = { 0, 16 }, strides = { 7, 3 }, device_type = 1 }
    local out = { dl_dtype = DL.f32, shape = { 0, 4 }, device_type = 1 }
    assert.same({ M = 0, K = 16 }, runtime.bind(k, { empty, view(keep, unpack(w)), out }, {}, true))
  end)

  it("binds dims from runtime tensors and from host views alike", function()
    local k = assert(loadstring(BIND_SRC, "=bind"))()
    local v = runtime.bind(k, { tensor.empty({ 8, 16 }, T.f32), tensor.empty({ 16, 4 }, T.f32) }, {})
    assert.same({ M = 8, K = 16 }, v)
    local keep = {}
    v = runtime.bind(k, { view(keep, "f32", { 6, 2 }, { 2, 1 }), view(keep, "f32", { 2, 4 }), view(keep, "f32", { 6, 4 }) },
      { extra = 1 }, true)
    assert.same({ M = 6, K = 2, extra = 1 }, v)
    local ok, err = pcall(runtime.bind, k, { 1, 2 }, {})
    assert.is_false(ok)
    assert.equal('kernel "bind": input 1 must be a tensor, got 1', err)
  end)
end)

-- --------------------------------------------------------------- TMA maps

describe("TMA maps at launch", function()
  local dev = H.emu()
  runtime.use(dev)

  --- A kernel with one tensor map on its input (the map is only declared).
  local function tma_kernel()
    return kernel "tmak" {
      arch = "sm_90a", in_specs = { Tile(64, 64, T.bf16) }, out_specs = { Tile(1, T.f32) }, block = { 32 },
      function(A) A:tma_desc { box = { 64, 64 }, swizzle = "128B" }; ptx.ret() end,
    }
  end

  --- The map of a prepared launch (after the two tensor pointers, 64-byte aligned).
  local function map_of(launch) return ffi.string(ffi.cast("const uint8_t *", launch.buffer) + 64, 128) end

  --- What the device encodes for the kernel's map on tensor t.
  local function encoded(t)
    local desc = require("pyptx.tma").describe { address = t.ptr, shape = { 64, 64 }, dtype = "bf16",
      box = { 64, 64 }, swizzle = "128B" }
    return ffi.string(dev:tma_encode(desc, "A"), 128)
  end

  it("are encoded by the device in C: the emulator's record for the launched tensor", function()
    local k, a = tma_kernel(), tensor.empty({ 64, 64 }, T.bf16)
    local launch = runtime.prepare(k, a)
    assert.equal(1, #launch.specialization.tma)
    assert.equal("XTMA", map_of(launch):sub(1, 4))   -- the emulator's record (its magic, little-endian)
    assert.equal(encoded(a), map_of(launch))
  end)

  it("patch the address of a map already encoded when only the tensor moves", function()
    local k = tma_kernel()
    local a, b = tensor.empty({ 64, 64 }, T.bf16), tensor.empty({ 64, 64 }, T.bf16)
    local m1, m2 = runtime.prepare(k, a), runtime.prepare(k, b)
    assert.equal(encoded(a), map_of(m1))
    assert.equal(encoded(b), map_of(m2))
    assert.not_equal(map_of(m1), map_of(m2))
  end)

  it("report a map the device refuses at the launching line, naming the tensor, encoded or patched", function()
    local k, a, b = tma_kernel(), tensor.empty({ 64, 64 }, T.bf16), tensor.empty({ 64, 64 }, T.bf16)
    a.ptr = a.ptr + 8   -- a view 8 bytes in: TMA needs 16-byte aligned tensors
    local want = "runtime_spec.lua:%d: kernel \"tmak\": TMA descriptor for tmak_param_0: global address 0x%x is not "
      .. "16-byte aligned"
    local line
    local ok, err = pcall(function() line = H.here(); k(a) end)   -- a new map: tma_encode
    assert.is_false(ok)
    assert.equal(want:format(line, a.ptr), tostring(err):match("[^/]*$"))
    k(b)
    ok, err = pcall(function() line = H.here(); k(a) end)         -- b's map moved: tma_replace_address
    assert.is_false(ok)
    assert.equal(want:format(line, a.ptr), tostring(err):match("[^/]*$"))
  end)

  it("refuse an invalid description in C, naming the tensor, on the emulator", function()
    local desc = require("pyptx.tma").describe { address = 1024, shape = { 64, 512 }, dtype = "bf16", box = { 64, 300 } }
    local line
    local ok, err = pcall(function() line = H.here(); dev:tma_encode(desc, "A") end)
    assert.is_false(ok)
    assert.equal(("runtime_spec.lua:%d: TMA descriptor for A: box [0, innermost first] = 300 must be in 1..256"):format(line),
      tostring(err):match("[^/]*$"))
  end)
end)

describe("device options", function()
  --- A kernel where thread t writes shared word t and reads word t ^ 32 with no barrier: a race.
  local function racy()
    return kernel "opt_race" {
      out_specs = { Tile(64, T.u32) }, block = { 64 },
      function(O)
        local po = ptx.global_ptrs(O)
        local t = pyptx.reg.from(ptx.special.tid.x(), T.u32)
        local s = pyptx.smem.alloc(T.u32, 64)
        ptx.st.shared(ptx.addr(s:base() + t:shl(2)), t)
        local v = pyptx.reg.scalar(T.u32)
        ptx.ld.shared(v, ptx.addr(s:base() + t:bxor(32):shl(2)))
        ptx.st.global(ptx.addr(po + t:mul_wide(4)), v)
        ptx.ret()
      end,
    }
  end

  it("are set and read on the current device through Device:set_option / option", function()
    local dev = runtime.open("emu")
    for _, name in ipairs { "race_check", "uninit_check", "align_check" } do
      dev:set_option(name, false)
      assert.equal(0, dev:option(name))
      dev:set_option(name, true)
      assert.equal(1, dev:option(name))
    end
    dev:set_option("budget", 5e6)
    assert.equal(5000000, dev:option("budget"))
  end)

  it("switch the emulator's race check off and on for the launches that follow", function()
    local dev, k = runtime.open("emu"), racy()
    local saved = runtime.device()
    runtime.use(dev)
    dev:set_option("uninit_check", false)   -- the other warp's word may not be written yet
    dev:set_option("race_check", false)
    local ok, err0 = pcall(k)
    dev:set_option("race_check", true)
    local ok2, err = pcall(k)
    runtime.use(saved)
    assert.is_true(ok, err0)
    assert.is_false(ok2)
    assert.matches("shared-memory race", err, 1, true)
  end)

  it("refuse unknown names and bad values at the caller's line, saying what is valid", function()
    local dev = runtime.open("emu")
    local line = H.here(); local ok, err = pcall(dev.set_option, dev, "speed", 1)
    assert.is_false(ok)
    assert.matches("unknown emu option 'speed'; valid: budget, threads, checks, schedule, profile, memory, race_check, uninit_check, align_check", err, 1, true)
    ok, err = pcall(function() line = H.here(); dev:set_option("race_check", 2) end)
    assert.is_false(ok)
    assert.matches("runtime_spec.lua:" .. line .. ": device option race_check: emu option race_check = 2: valid 0 or 1", err, 1, true)
    ok, err = pcall(function() line = H.here(); dev:set_option("budget", 1.5) end)
    assert.is_false(ok)
    assert.matches("runtime_spec.lua:" .. line .. ": set_option(\"budget\"): the value must be an integer or a boolean", err, 1, true)
    assert.is_number(line)
  end)
end)

describe("outputs the caller provides", function()
  --- y = y + 2 * x over N f32 (an accumulating kernel: it reads its output).
  local acc = kernel "acc2x" {
    in_specs = { Tile("N", T.f32) }, out_specs = { Tile("N", T.f32) }, block = { 64 },
    grid = function(p) return { p.N / 64 } end,
    function(X, Y)
      local px, py = ptx.global_ptrs(X, Y)
      local i = pyptx.reg.from(ptx.special.ctaid.x(), T.u32) * 64 + pyptx.reg.from(ptx.special.tid.x(), T.u32)
      local off = i:mul_wide(4)
      local x, y = pyptx.reg.scalar(T.f32), pyptx.reg.scalar(T.f32)
      ptx.ld.global(x, ptx.addr(px + off))
      ptx.ld.global(y, ptx.addr(py + off))
      ptx.st.global(ptx.addr(py + off), x:fma(2.0, y))
      ptx.ret()
    end,
  }
  local emu
  before_each(function() emu = H.emu(); runtime.use(emu) end)

  it("launches into a tensor passed as opts.out, keeps its contents and returns it", function()
    local x = tensor.rand({ 128 }, T.f32, { seed = 3 })
    local y = tensor.rand({ 128 }, T.f32, { seed = 4 })
    local before, xs = y:totable(), x:totable()
    local got = acc(x, { out = y })
    assert.equal(y, got)
    local after = y:totable()
    for i = 1, 128 do assert.equal(ffi.new("float", 2 * xs[i] + before[i]), ffi.new("float", after[i]), i) end
    local l2 = runtime.prepare(acc, x, { out = { y } })
    assert.equal(y, l2.outputs[1])
    l2()
    for i = 1, 128 do assert.equal(tonumber(ffi.new("float", 2 * xs[i] + after[i])), y:totable()[i]) end
  end)

  it("runs in place when an input is also the output", function()
    local x = tensor.rand({ 64 }, T.f32, { seed = 5 })
    local xs = x:totable()
    acc(x, { out = x })
    for i = 1, 64 do assert.equal(tonumber(ffi.new("float", 3 * xs[i])), x:totable()[i]) end
  end)

  it("refuses outputs of the wrong count, shape, kind or device at the launching line", function()
    local x = tensor.rand({ 64 }, T.f32, { seed = 6 })
    local cases = {
      { { tensor.empty({ 64 }, T.f32), tensor.empty({ 64 }, T.f32) }, "opts.out holds 2 tensor(s); the kernel has 1 output(s)" },
      { tensor.empty({ 32 }, T.f32), "dimension N is 64 from input 1 (shape 64) but 32 from output 1 (shape 32)" },
      { tensor.empty({ 64 }, T.s32), "output 1" },
      { { 7 }, "output 1 (opts.out[1]) must be a tensor, got number" },
      { "y", "opts.out must be a tensor or a list of tensors" },
      { tensor.empty({ 64 }, T.f32, runtime.open("emu")), "output 1 (opts.out[1]) lives on" },
    }
    for _, c in ipairs(cases) do
      local line
      local ok, err = pcall(function() line = H.here(); acc(x, { out = c[1] }) end)
      assert.is_false(ok)
      assert.matches("runtime_spec.lua:" .. line .. ": kernel \"acc2x\": ", err, 1, true)
      assert.matches(c[2], err, 1, true)
    end
    local line
    local ok, err = pcall(function() line = H.here(); acc({ out = x }) end)
    assert.is_false(ok)
    assert.matches("runtime_spec.lua:" .. line .. ": kernel \"acc2x\" takes 1 input tensor(s) (its in_specs), got 0", err, 1, true)
  end)
end)
