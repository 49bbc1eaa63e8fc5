-- pyptx.load_ptx: foreign PTX (nvcc, Triton, hand-written) parsed into
-- kernel objects launched with explicit grid, block, shared memory and raw
-- arguments packed by each entry's .param list.
local ffi = require "ffi"
local pyptx = require "pyptx"
local runtime = require "pyptx.runtime"
local tensor = require "pyptx.runtime.tensor"
local ptx_loader = require "pyptx.runtime.ptx_loader"
local floats = require "pyptx.runtime.floats"
local H = require "spec.helpers"
local ptxparse = require "pyptx.ptxparse"

local types = pyptx.types
local emu = H.emu

-- Every scalar param kind, an aligned .b8 array and a .f16; the kernel
-- copies the param space bytes it reads into out so packing can be checked.
local PARAMS_PTX = [[
.version 8.0
.target sm_80
.address_size 64

.visible .entry params(
  .param .u64 .ptr .global .align 8 params_out,
  .param .u8 p_u8,
  .param .s16 p_s16,
  .param .f64 p_f64,
  .param .align 16 .b8 p_arr[12],
  .param .f16 p_h,
  .param .s32 p_s32,
  .param .f32 p_f32,
  .param .b32 p_b32,
  .param .u64 p_u64
)
{
  .reg .b16 %rs<3>;
  .reg .b32 %r<12>;
  .reg .b64 %rd<4>;
  .reg .f32 %f<2>;
  .reg .f64 %fd<2>;
  ld.param.u64 %rd1, [params_out];
  cvta.to.global.u64 %rd1, %rd1;
  ld.param.u8 %rs1, [p_u8];
  cvt.u32.u16 %r1, %rs1;
  st.global.u32 [%rd1], %r1;
  ld.param.s16 %rs2, [p_s16];
  cvt.s32.s16 %r2, %rs2;
  st.global.u32 [%rd1+4], %r2;
  ld.param.f64 %fd1, [p_f64];
  st.global.f64 [%rd1+8], %fd1;
  ld.param.u32 %r3, [p_arr];
  ld.param.u32 %r4, [p_arr+4];
  ld.param.u32 %r5, [p_arr+8];
  st.global.u32 [%rd1+16], %r3;
  st.global.u32 [%rd1+20], %r4;
  st.global.u32 [%rd1+24], %r5;
  ld.param.b16 %rs1, [p_h];
  cvt.u32.u16 %r6, %rs1;
  st.global.u32 [%rd1+28], %r6;
  ld.param.s32 %r7, [p_s32];
  st.global.u32 [%rd1+32], %r7;
  ld.param.f32 %f1, [p_f32];
  st.global.f32 [%rd1+36], %f1;
  ld.param.b32 %r8, [p_b32];
  st.global.u32 [%rd1+40], %r8;
  ld.param.u64 %rd2, [p_u64];
  st.global.u64 [%rd1+48], %rd2;
  ret;
}

// Triton's spelling: .ptr .global .align 1 params, a trailing scratch pointer
.visible .entry _Z4fillPfji(
  .param .u64 .ptr .global .align 1 fill_param_0,
  .param .u32 fill_param_1,
  .param .u32 fill_param_2,
  .param .u64 .ptr .global .align 1 fill_param_3
)
.reqntid 64, 1, 1
{
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [fill_param_0];
  ld.param.u32 %r1, [fill_param_1];
  ld.param.u32 %r2, [fill_param_2];
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mov.u32 %r5, %tid.x;
  mad.lo.s32 %r6, %r3, %r4, %r5;
  setp.ge.s32 %p1, %r6, %r2;
  @%p1 bra $L__done;
  mul.wide.s32 %rd2, %r6, 4;
  add.s64 %rd3, %rd1, %rd2;
  add.s32 %r7, %r6, %r1;
  st.global.u32 [%rd3], %r7;
$L__done:
  ret;
}
]]

--- A poisoned device buffer of n u32 words.
local function words(n)
  local t = tensor.empty({ n }, types.u32, emu())
  t:fill_bytes(0xff)
  return t
end

describe("pyptx.load_ptx", function()
  after_each(H.cleanup)

  it("loads nvcc output from a file and launches by name (mod.name and mod:get)", function()
    local mod = pyptx.load_ptx("spec/fixtures/ptx/nvcc/basic_sm80.ptx")
    assert.same({ "saxpy", "reduce", "warp_ops", "dyn_smem" }, mod:names())
    local n = 3000
    local x = tensor.rand({ n }, types.f32, { seed = 5, lo = -1, hi = 1, device = emu() })
    local out = tensor.from_table({ 0 }, types.f32, { 1 }, emu())
    mod.reduce { grid = { 3 }, block = { 256 }, smem = 0, args = { x, out, n }, device = emu() }
    local sum = 0
    for _, v in ipairs(x:totable()) do sum = sum + v end
    assert.is_true(math.abs(out:totable()[1] - sum) < 1e-3, out:totable()[1] .. " vs " .. sum)
    assert.equal(mod.reduce, mod:get("reduce"))
    -- dynamic shared memory through smem
    local N = 64
    local o = tensor.empty({ 4 * N }, types.f32, emu())
    mod:get("dyn_smem") { grid = 1, block = N, smem = 16 * N, args = { o }, device = emu() }
    local v = o:totable()
    assert.same({ 1, 1.5, -2 }, { v[1], v[2], v[3] })
  end)

  it("loads PTX text, finds a C++ entry by its unmangled name, honours 2D grids", function()
    local mod = pyptx.load_ptx(PARAMS_PTX, "inline.ptx")
    assert.same({ "params", "_Z4fillPfji" }, mod:names())
    local n = 200
    local o = words(256)
    mod.fill { grid = { 4, 2 }, block = { 64 }, args = { o, 7, n, 0ULL }, device = emu() }
    local h = o:to_host()
    for i = 0, 255 do assert.equal(i < n and i + 7 or 0xffffffff, tonumber(h[i])) end
    assert.equal(mod.fill, mod:get("_Z4fillPfji"))
  end)

  it("packs params by the entry's declaration: types, .align, arrays, f16, typed .b32", function()
    local mod = pyptx.load_ptx(PARAMS_PTX)
    local e = mod.params.entry
    local offsets = {}
    for i, p in ipairs(e.params) do offsets[i] = p.offset end
    assert.same({ 0, 8, 10, 16, 32, 44, 48, 52, 56, 64 }, offsets)
    assert.equal(72, e.size)
    local o = words(16)
    mod.params { grid = 1, block = 1, device = emu(),
                 args = { o, 200, -1234, 0.1, { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 }, 1.5, -7, 2.5, ptx_loader.f32(0.75),
                          0x123456789abcULL } }
    local h = o:to_host()
    local as = ffi.cast("double *", h + 2)
    assert.same({ 200, 0xffffffff - 1233 }, { tonumber(h[0]), tonumber(h[1]) })
    assert.equal(0.1, as[0])
    assert.same({ 0x04030201, 0x08070605, 0x0c0b0a09 }, { tonumber(h[4]), tonumber(h[5]), tonumber(h[6]) })
    assert.equal(floats.to_f16(1.5), tonumber(h[7]))
    assert.equal(2 ^ 32 - 7, tonumber(h[8]))
    assert.equal(2.5, ffi.cast("float *", h + 9)[0])
    assert.equal(0.75, ffi.cast("float *", h + 10)[0])
    assert.equal(0x123456789abcULL, ffi.cast("uint64_t *", h + 12)[0])
    -- an array param from a string of the right size, an integer to the untyped .b32
    mod.params { grid = 1, block = 1, device = emu(),
                 args = { o, 1, 2, 3, ("\1\0\0\0\2\0\0\0\3\0\0\0"), 0, 0, 0, 77, 0ULL } }
    h = o:to_host()
    assert.same({ 1, 2, 3, 77 }, { tonumber(h[4]), tonumber(h[5]), tonumber(h[6]), tonumber(h[10]) })
  end)

  it("reports a malformed file with the parser's file:line:col", function()
    local bad = ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k(\n.param .u32 a\n{\n  ret;\n}\n"
    local ok, err = pcall(pyptx.load_ptx, bad, "bad.ptx")
    assert.is_false(ok)
    assert.matches("^bad%.ptx:%d+:%d+: ", err)
    ok, err = pcall(pyptx.load_ptx, "spec/fixtures/ptx/nvcc/no_such_file.ptx")
    assert.is_false(ok)
    assert.matches("no_such_file", err)
  end)

  it("refuses sizes and alignments past the hardware's limits at load, with the size, the limit and the line", function()
    local head = ".version %s\n.target sm_90\n.address_size 64\n"
    local cases = {   -- PTX after the header (line 4), the message, whether ptxas refuses it too
      { ".global .u32 g[4611686018427387904];\n.visible .entry k() { ret; }",
        "^t%.ptx:4:%d+: g: 4611686018427387904 elements of %.u32 are more than 2%^64 bytes, over the largest global "
        .. "variable luaptx accepts %(256 TiB%): at most 281474976710656 bytes in %.global$" },
      { ".global .u32 g[4294967296][4294967296][2];\n.visible .entry k() { ret; }", "^t%.ptx:4:%d+: array size overflows" },
      { ".visible .entry k() { .shared .b8 s[4294967296]; ret; }",
        "^t%.ptx:4:%d+: s: 4294967296 elements of %.b8 are 4294967296 bytes, over the most shared memory a CTA can have: "
        .. "at most 232448 bytes in %.shared$" },
      { ".visible .entry k() { .local .b8 l[1099511627776]; ret; }",
        "^t%.ptx:4:%d+: l: 1099511627776 elements of %.b8 are 1099511627776 bytes, over the most local memory a thread "
        .. "can have: at most 524288 bytes in %.local$" },
      { ".visible .entry k() { .local .b32 l[131073]; ret; }", "524292 bytes, over the most local memory" },
      { ".visible .const .b8 c[70000];\n.visible .entry k() { ret; }", "70000 bytes, over the constant bank", true },
      { ".visible .entry k(.param .b8 p[4294967295]) { ret; }",
        "^t%.ptx:4:%d+: p: 4294967295 elements of %.b8 are 4294967295 bytes, over a kernel's parameter space before "
        .. "PTX ISA 8%.1: at most 4352 bytes in %.param$", true },
      { ".visible .entry k(.param .b8 p[4000], .param .b8 q[400]) { ret; }",
        "^t%.ptx:4:%d+: the kernel's parameters take 4400 bytes, over a kernel's parameter space before PTX ISA 8%.1: "
        .. "at most 4352 bytes$", true },
      { ".global .align 0 .u32 a0;\n.visible .entry k() { ret; }",
        "^t%.ptx:4:%d+: %.align 0: an alignment must be a power of two from 1 to 2%^30$", true },
      { ".global .align 3 .u32 a3;\n.visible .entry k() { ret; }", "^t%.ptx:4:%d+: %.align 3: an alignment must be", true },
      { ".visible .entry k(.param .u64 .ptr .align 12 p) { ret; }", "^t%.ptx:4:%d+: %.align 12: an alignment must be", true },
      { ".visible .entry k() { .reg .b32 %r<4294967296>; ret; }",
        "^t%.ptx:4:%d+: register count 4294967296 too large: at most 2147483647$" },
    }
    local refused = {}   -- what ptxas must refuse too, checked last (pending without ptxas)
    for _, c in ipairs(cases) do
      local ptx = head:format("8.0") .. c[1] .. "\n"
      local ok, err = pcall(pyptx.load_ptx, ptx, "t.ptx")
      assert.is_false(ok, c[1])
      assert.matches(c[2], err)
      if c[3] then refused[#refused + 1] = ptx end
    end
    -- at the limits: accepted, and PTX ISA 8.1 allows 32764 bytes of parameters
    for _, ptx in ipairs {
      head:format("8.0") .. ".visible .entry k() { .shared .b8 s[232448]; .local .b8 l[524288]; ret; }\n",
      head:format("8.0") .. ".visible .const .b8 c[65536];\n.visible .entry k(.param .b8 p[4352]) { ret; }\n",
      head:format("8.1") .. ".visible .entry k(.param .b8 p[32764]) { ret; }\n",
      head:format("8.0") .. ".global .align 1073741824 .u32 a;\n.visible .entry k() { ret; }\n",
      -- a device function's parameters are not a kernel's parameter space (ptxas takes this)
      head:format("8.0") .. ".func f(.param .b8 p[8000]) { ret; }\n"
        .. ".visible .entry k() { .param .b8 a[8000]; call.uni f, (a); ret; }\n",
    } do
      assert.is_true((pcall(pyptx.load_ptx, ptx, "t.ptx")), ptx)
    end
    -- a register of a 2^30 range by its 10-digit name
    local big = head:format("8.0") .. ".visible .entry k() { .reg .b32 %r<1073741824>; mov.b32 %r1073741823, 1; ret; }\n"
    assert.is_true((pcall(pyptx.load_ptx, big, "t.ptx")))
    for _, ptx in ipairs(refused) do H.assert_ptxas_refuses(ptx, "sm_90") end
    H.assert_ptxas(big, "sm_90")
  end)

  it("names the available entries for an unknown name", function()
    local mod = pyptx.load_ptx("spec/fixtures/ptx/nvcc/basic_sm80.ptx")
    local ok, err = pcall(function() return mod.sxapy end)
    assert.is_false(ok)
    assert.matches("no entry named 'sxapy'; entries: saxpy, reduce, warp_ops, dyn_smem", err, 1, true)
  end)

  it("validates every instruction as a traced one is, at its PTX file:line:col", function()
    local function refused(body, target, version)
      local text = (".version %s\n.target %s\n.address_size 64\n.visible .entry k()\n{\n"
        .. "  .reg .b32 %%r<4>;\n  .reg .f32 %%acc;\n%s\n  ret;\n}\n"):format(version or "8.0", target or "sm_80", body)
      local ok, err = pcall(pyptx.load_ptx, text, "bad.ptx")
      assert.is_false(ok)
      return err
    end
    assert.equal("bad.ptx:8:3: add.u32: operand 2 is a f32 register (%acc); expected a u32/s32/b32 register or an integer",
      refused("  add.u32 %r1, %acc, 1;"))
    assert.equal("bad.ptx:8:3: elect.sync needs sm_90 or newer; this kernel targets sm_80", refused("  elect.sync %r1|_, 0xffffffff;"))
    assert.equal("bad.ptx:8:3: frobnicate.u32: opcode not in luaptx's instruction table, so it can be neither checked nor run",
      refused("  frobnicate.u32 %r1;"))
    assert.matches("^bad.ptx:8:3: add.frob.u32: ", refused("  add.frob.u32 %r1, %r2, 1;"))
    -- fmt stays tolerant: it formats what load_ptx refuses
    local text = ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\n  .reg .b32 %r<4>;\n"
      .. "  .reg .f32 %acc;\n  add.u32 %r1, %acc, 1;\n  ret;\n}\n"
    assert.equal(text, ptxparse.parse(text, "bad.ptx"):lossless())
  end)

  it("loads every real PTX file of the corpus (nvcc output, emitted examples) under validation", function()
    local files = H.find("spec/fixtures/ptx/nvcc", "%.ptx$")
    for _, f in ipairs(H.find("spec/fixtures/ptx/examples", "%.ptx$")) do files[#files + 1] = f end
    for _, f in ipairs(H.find("spec/fixtures/ptx/large", "%.ptx$")) do files[#files + 1] = f end
    assert.is_true(#files >= 50)
    for _, f in ipairs(files) do
      local ok, err = pcall(pyptx.load_ptx, f)
      assert(ok, err)
    end
  end)

  it("refuses a grid or block beyond the hardware's limits before launching", function()
    local mod = pyptx.load_ptx("spec/fixtures/ptx/nvcc/basic_sm80.ptx")
    local ok, err = pcall(mod.saxpy, { grid = 2 ^ 32, block = 1, args = {}, device = emu() })
    assert.is_false(ok)
    assert.matches("entry saxpy: grid (4294967296, 1, 1) is out of range; valid: x in 1..2147483647", err, 1, true)
    ok, err = pcall(mod.saxpy, { grid = 1, block = { 32, 32, 2 }, args = {}, device = emu() })
    assert.is_false(ok)
    assert.matches("entry saxpy: block (32, 32, 2) has 2048 threads; valid: at most 1024 threads in all", err, 1, true)
  end)

  it("names an unwritten register by the name the file gave it", function()
    local mod = pyptx.load_ptx([=[
.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 p)
{
  .reg .b32 %r<4>;
  .reg .b32 %acc;
  .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [p];
  add.s32 %r1, %acc, 1;
  st.global.u32 [%rd1], %r1;
  ret;
}
]=], "unwritten.ptx")
    local out = tensor.empty({ 1 }, pyptx.types.u32, emu())
    local ok, err = pcall(mod.k, { grid = 1, block = 1, args = { out }, device = emu() })
    assert.is_false(ok)
    assert.matches("PTX line 10: add.s32  %r1, %acc, 1: reads %acc, which this thread never wrote", err, 1, true)
  end)

  it("names the parameter on a wrong argument count or type", function()
    local mod = pyptx.load_ptx(PARAMS_PTX)
    local o = words(16)
    --- Launch with args; it must fail with a message containing msg.
    local function fails(args, msg, grid)
      local ok, err = pcall(mod.params, { grid = grid or 1, block = 1, args = args, device = emu() })
      assert.is_false(ok)
      assert.matches(msg, err, 1, true)
    end
    fails({ o, 1 }, "entry params takes 10 argument(s) (params_out: u64, p_u8: u8, p_s16: s16")
    fails({ o, 1, 2, 3, {}, 0, 0, 0, 0, 0ULL }, "argument 5 (param p_arr) takes 12 b8 elements")
    fails({ o, 300, 2, 3, "123456789012", 0, 0, 0, 0, 0ULL }, "argument 2 (param p_u8) takes u8, got 300 (out of range)")
    fails({ o, 1, 2, o, "123456789012", 0, 0, 0, 0, 0ULL }, "argument 4 (param p_f64) takes f64, got a tensor")
    fails({ 1.5, 1, 2, 3, "123456789012", 0, 0, 0, 0, 0ULL }, "argument 1 (param params_out) takes u64, got number 1.5")
    fails({ o, 1, 2, 3, "123456789012", 0, 2.5, 0, 0, 0ULL }, "argument 7 (param p_s32) takes s32, got number 2.5")
    fails({ o, 1, 2, 3, "123456789012", 0, 0, 0, ptx_loader.f64(1), 0ULL }, "argument 9 (param p_b32) takes b32, got a f64 value")
    fails({ o, 1, 2, 3, "1234", 0, 0, 0, 0, 0ULL }, "argument 5 (param p_arr) takes 12 bytes, got a string of 4")
    fails({}, "grid[1] must be a positive integer", 0)
  end)

  it("reads entries and params from the parser's IR: .ptr .align is the pointee's, not the param's", function()
    local mod = pyptx.load_ptx([[
.version 8.0
.target sm_80
.address_size 64
// .visible .entry commented_out(.param .u32 x)
.visible .entry k(
  .param .u32 k_n,  // a comment with .entry, commas (a, b) and ) inside
  .param .u64 .ptr .global .align 1 k_p,
  /* .param .u32 k_hidden, */ .param .align 16 .b8 k_arr[12]
)
{
  ret;
}
]], "ir.ptx")
    assert.same({ "k" }, mod:names())
    local e = mod.k.entry
    local got = {}
    for i, p in ipairs(e.params) do got[i] = { p.name, p.type, p.offset, p.bytes } end
    assert.same({ { "k_n", "u32", 0, 4 }, { "k_p", "u64", 8, 8 }, { "k_arr", "b8", 16, 12 } }, got)
    assert.equal(28, e.size)
  end)

  it("loads a module of 4,000 entries in linear time (no rescan per entry)", function()
    local parts = { ".version 8.0\n.target sm_80\n.address_size 64\n" }
    for i = 1, 4000 do
      parts[#parts + 1] = (".visible .entry k%d(\n\t.param .u64 k%d_p0,\n\t.param .f32 k%d_p1\n)\n{\n\tret;\n}\n"):format(i, i, i)
    end
    local text = table.concat(parts)
    local t0 = os.clock()
    local mod = pyptx.load_ptx(text, "many.ptx")
    local t = os.clock() - t0
    assert.equal(4000, #mod:names())
    assert.same({ "k4000_p0", "k4000_p1" }, { mod.k4000.entry.params[1].name, mod.k4000.entry.params[2].name })
    assert.equal(12, mod.k4000.entry.size)
    assert.is_true(t < 2, ("4,000 entries took %.2f s"):format(t))   -- 15 s when a pattern rescanned the text per entry
  end)

  it("takes an existing file as a path even when its name contains .entry", function()
    local dir = H.temp_dir()
    local path = H.write(dir .. "/my.entry.ptx", H.read("spec/fixtures/ptx/nvcc/basic_sm80.ptx"))
    local mod = pyptx.load_ptx(path)
    assert.same({ "saxpy", "reduce", "warp_ops", "dyn_smem" }, mod:names())
    assert.equal(path, mod.source)
    local ok, err = pcall(pyptx.load_ptx, dir .. "/missing.entry.ptx")
    assert.is_false(ok)
    assert.matches("missing.entry.ptx", err, 1, true)
  end)

  it("names a directory given as the PTX file (load_ptx, fmt, transpile)", function()
    local dir = H.temp_dir()
    local ok, err = pcall(pyptx.load_ptx, dir)
    assert.is_false(ok)
    assert.equal("load_ptx: " .. dir .. " is a directory (expected a PTX file)", err)
    for _, cmd in ipairs { "fmt", "transpile" } do
      local _, stderr, status = H.luaptx({ cmd, dir })
      assert.equal(1, status)
      assert.equal("luaptx: " .. dir .. " is a directory (expected a PTX file)\n", stderr)
    end
  end)

  it("refuses a launch without grid or block, naming the missing option", function()
    local mod = pyptx.load_ptx(PARAMS_PTX)
    local o = words(256)
    local ok, err = pcall(mod.fill, { block = 64, args = { o, 7, 200, 0ULL }, device = emu() })
    assert.is_false(ok)
    assert.matches("entry _Z4fillPfji: grid is missing (give grid = n or {x, y, z}", err, 1, true)
    ok, err = pcall(mod.fill, { grid = 4, args = { o, 7, 200, 0ULL }, device = emu() })
    assert.is_false(ok)
    assert.matches("entry _Z4fillPfji: block is missing", err, 1, true)
    assert.equal(0xffffffff, tonumber(o:to_host()[0]))   -- nothing was launched
  end)

  it("scopes .reg names to their { } block and takes .reg.b32 glued, as nvcc's inline PTX writes them", function()
    -- cuda_fp16.h's hsqrt writes "{.reg.b32 f; ...}"; the double trig
    -- reduction declares %r1..%r3 again inside a block: after the block
    -- they are the function's registers again.
    local mod = pyptx.load_ptx([[
.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 o)
{
  .reg .b32 %r<10>; .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [o];
  mov.u32 %r3, 7;
  {
  .reg .u32 %r0, %r1, %r2, %r3;
  mov.u32 %r3, 100;
  mov.u32 %r1, %r3;
  {
  .reg.b32 %r1;
  mov.u32 %r1, 1000;
  }
  add.u32 %r2, %r1, 1;
  st.global.u32 [%rd1+4], %r2;
  }
  add.u32 %r4, %r3, 1;
  st.global.u32 [%rd1], %r4;
  ret;
}]], "scopes.ptx")
    local o = words(2)
    mod.k { grid = 1, block = 1, args = { o }, device = emu() }
    local h = o:to_host()
    assert.equal(8, tonumber(h[0]))     -- the outer %r3
    assert.equal(101, tonumber(h[1]))   -- the block's %r1, not the inner block's
  end)

  it("reports launch failures from the device with the entry's name", function()
    local mod = pyptx.load_ptx(PARAMS_PTX)
    local ok, err = pcall(mod.params, { grid = 1, block = 1, device = emu(),
                                        args = { 0ULL, 1, 2, 3, "123456789012", 0, 0, 0, 0, 0ULL } })
    assert.is_false(ok)
    assert.matches("launching entry params", err, 1, true)
  end)
end)

describe("double literals in f32 instructions", function()
  it("are rounded to f32 as ptxas does (0d and decimal forms)", function()
    local emu_dev = emu()
    runtime.use(emu_dev)
    local mod = require("pyptx").load_ptx([[
.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 o)
{
	.reg .f32 	%f<4>;
	.reg .b64 	%rd<2>;
	ld.param.u64 	%rd1, [o];
	mov.f32 	%f1, 0d3FF8000000000000;
	add.f32 	%f2, %f1, 0d4000000000000000;
	mul.f32 	%f3, %f2, 0d3FB999999999999A;
	st.global.f32 	[%rd1], %f3;
	ret;
}]])
    local out = tensor.empty({ 1 }, require("pyptx").types.f32, emu_dev)
    mod.k { grid = { 1 }, block = { 1 }, args = { out } }
    local f = require("ffi").new("float[3]", 1.5, 3.5, 0.1)
    f[0] = f[1] * f[2]
    assert.equal(f[0], out:values()[1])
  end)
end)

describe("a braced scalar operand, { %r1 } (Triton's inline asm)", function()
  local TEXT = [[
.version 8.0
.target sm_80
.address_size 64
.visible .entry one(.param .u64 out, .param .u64 inp)
{
	.reg .b32 	%r<3>;
	.reg .b64 	%rd<3>;
	ld.param.u64 	%rd1, [out];
	ld.param.u64 	%rd2, [inp];
	mov.u32 %r2, 0x0;
	ld.global.b32 { %r2 }, [ %rd2 + 4 ];
	add.u32 %r2, %r2, 1;
	st.global.b32 [ %rd1 + 0 ], { %r2 };
	ret;
}
]]

  it("loads, runs on the emulator and assembles as the scalar", function()
    local dev = emu()
    runtime.use(dev)
    local mod = pyptx.load_ptx(TEXT)
    local inp = tensor.from_table({ 5, 41 }, types.u32, { 2 }, dev)
    local out = tensor.empty({ 1 }, types.u32, dev):fill_bytes(0xff)
    mod.one { grid = { 1 }, block = { 1 }, args = { out, inp } }
    assert.equal(42, tonumber(out:to_host()[0]))
    H.assert_ptxas(TEXT, "sm_80")
  end)
end)
