--- Device functions (pyptx.func), multi-item modules (pyptx.module) and
-- the kernel options that place them (funcs, address_size,
-- target_modifiers): the PTX they trace to, ptxas's verdict, and a call
-- through a traced .func running on the emulator.
local pyptx = require "pyptx"
local runtime = require "pyptx.runtime"
local tensor = require "pyptx.runtime.tensor"
local H = require "spec.helpers"
local reg, ptx, T = pyptx.reg, pyptx.ptx, pyptx.types

--- add_one(a) = a + 1 as a .func with a .param return value.
local add_one = pyptx.func "add_one" {
  params = { { "b32", "a" } }, returns = { { "b32", "ret0" } },
  function(P)
    local r, s = reg.scalar(T.b32), reg.scalar(T.s32)
    ptx.inst("ld.param.b32", r, ptx.addr(P.a))
    ptx.inst("add.s32", s, r, 1)
    ptx.inst("st.param.b32", ptx.addr(P.ret0), s)
    ptx.inst("ret")
  end,
}

--- out[i] = add_one(inp[i]) for 32 threads, calling through a call block.
local caller = pyptx.kernel "caller" {
  arch = "sm_80", block = { 32, 1, 1 }, funcs = { add_one },
  raw_params = { { "u64", "out", ptr = "global", ptr_align = 4 }, { "u64", "inp" } },
  function()
    local o, i, tid, off = reg.scalar(T.u64), reg.scalar(T.u64), reg.scalar(T.u32), reg.scalar(T.u64)
    ptx.inst("ld.param.u64", o, ptx.addr("out"))
    ptx.inst("ld.param.u64", i, ptx.addr("inp"))
    ptx.inst("mov.u32", tid, ptx.special.tid.x())
    ptx.inst("mul.wide.u32", off, tid, 4)
    ptx.inst("add.s64", o, o, off)
    ptx.inst("add.s64", i, i, off)
    local x = reg.scalar(T.u32)
    ptx.inst("ld.global.u32", x, ptx.addr(i))
    ptx.raw [[{
    .param .b32 param0;
    st.param.b32 [param0], %r2;
    .param .b32 retval0;
    call.uni (retval0), add_one, (param0);
    ld.param.b32 %r2, [retval0];
    }]]
    ptx.inst("st.global.u32", ptx.addr(o), x)
    ptx.inst("ret")
  end,
}

describe("pyptx.func", function()
  it("traces a .func with return values before the kernel listing it", function()
    local text = caller:ptx()
    assert.matches(".func (.param .b32 ret0) add_one(\n\t.param .b32 a\n)", text, 1, true)
    assert.matches(".param .u64 .ptr .global .align 4 out", text, 1, true)
    assert.is_true(text:find(".func", 1, true) < text:find(".entry", 1, true))
  end)

  it("runs a call through it on the emulator, every element", function()
    local dev = H.emu()
    runtime.use(dev)
    local mod = pyptx.load_ptx(caller:ptx())
    local host = {}
    for i = 1, 32 do host[i] = math.random(1, 2 ^ 30) end
    local inp = tensor.from_table(host, T.u32, { 32 }, dev)
    local out = tensor.empty({ 32 }, T.u32, dev):fill_bytes(0xff)
    mod.caller { grid = { 1 }, block = { 32 }, args = { out, inp } }
    local got = out:to_host()
    for i = 1, 32 do assert.equal(host[i] + 1, tonumber(got[i - 1])) end
  end)

  it("declares a body-less function and takes .reg parameters and linkage", function()
    local vprintf = pyptx.func "vprintf" { linkage = "extern", params = { { "b64", "f" }, { "b64", "a" } }, returns = { { "b32", "r" } } }
    local pair = pyptx.func "pair" {
      linkage = "visible", params = { { "b32", "x", reg = true } }, returns = { { "b8", "ret", align = 16, count = 8 } },
      function(P)
        ptx.inst("st.param.v2.b32", ptx.addr(P.ret), { P.x, P.x })
        ptx.inst("ret")
      end,
    }
    local text = pyptx.kernel "k" { arch = "sm_80", funcs = { vprintf, pair }, function() ptx.inst("ret") end }:ptx()
    assert.matches(".extern .func (.param .b32 r) vprintf (.param .b64 f, .param .b64 a);", text, 1, true)
    assert.matches(".visible .func (.param .align 16 .b8 ret[8]) pair(\n\t.reg .b32 x\n)", text, 1, true)
    assert.matches("st.param.v2.b32 \t[ret], {x, x};", text, 1, true)
  end)

  it("names the defining line for bad options and parameters", function()
    local ok, err = pcall(function() return pyptx.func "f" { linkage = "public", function() end } end)
    assert.is_false(ok)
    assert.matches("func_spec.lua:%d+: linkage 'public'; valid: visible, extern, weak, common", err)
    ok, err = pcall(function() return pyptx.func "f" { params = { { "q7", "a" } }, function() end } end)
    assert.is_false(ok)
    assert.matches("func_spec.lua:%d+: params%[1%]: unknown type q7", err)
    ok, err = pcall(function() return pyptx.func "f" { parms = {}, function() end } end)
    assert.is_false(ok)
    assert.matches("option 'parms' is unknown", err, 1, true)
    ok, err = pcall(function() return pyptx.kernel "k" { funcs = { 42 }, function() end } end)
    assert.is_false(ok)
    assert.matches("funcs[1] must be a pyptx.func or module-level PTX text, got 42", err, 1, true)
  end)

  it("assembles with ptxas", function()
    local text = caller:ptx()
    assert.matches("call.uni \t(retval0), add_one, (param0);", text, 1, true)
    H.assert_ptxas(text, "sm_80")
  end)
end)

describe("pyptx.module", function()
  local function two_kernels()
    return pyptx.module {
      arch = "sm_80", version = "8.0", line_info = false,
      ".global .align 4 .u32 counter;",
      add_one,
      pyptx.kernel "first" { function() ptx.inst("ret") end },
      pyptx.kernel "second" { function() ptx.inst("ret") end },
    }
  end

  it("traces its items into one module in order", function()
    local text = two_kernels():ptx()
    local a, f, k1, k2 = text:find("counter", 1, true), text:find("add_one", 1, true), text:find(".entry first", 1, true), text:find(".entry second", 1, true)
    assert.is_true(a < f and f < k1 and k1 < k2)
    assert.are.equal(2, #two_kernels():kernels())
    H.assert_ptxas(text, "sm_80")
  end)

  it("carries address_size and target modifiers", function()
    local text = pyptx.module { arch = "sm_80", address_size = 32, target_modifiers = { "texmode_independent" },
      pyptx.kernel "k" { function() ptx.inst("ret") end } }:ptx()
    assert.matches(".target sm_80, texmode_independent\n.address_size 32\n", text, 1, true)
    local ok, err = pcall(pyptx.module, { address_size = 16 })
    assert.is_false(ok)
    assert.matches("address_size must be 32 or 64, got 16", err, 1, true)
    ok, err = pcall(pyptx.module, { 42 })
    assert.is_false(ok)
    assert.matches("module item 1 must be a kernel, a pyptx.func or module-level PTX text, got 42", err, 1, true)
  end)
end)
