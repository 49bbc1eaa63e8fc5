--- PTX -> Lua transpiler: the script it writes, traced, re-emits the PTX
-- (structurally: the same instructions, operands, declarations and
-- directives; canonical formatting, no debug lines) and ptxas assembles it
-- to the same cubin as the input (the corpus's cubins: spec/transpile_cubin_spec.lua
-- and spec/transpile_large_spec.lua, run beside this file by ctest).
local transpile = require "luaptx.transpile"
local ptxparse = require "pyptx.ptxparse"
local sugar = require "pyptx.tools.transpile_sugar"
local H = require "spec.helpers"

local T = require "spec.transpile_common"
local CORPUS, round_trip, structure, labels, corpus = T.CORPUS, T.round_trip, T.structure, T.labels, T.corpus

describe("luaptx transpile", function()
  it("re-emits every corpus file structurally identical", function()
    local files = corpus()
    assert.is_true(#files >= 50)
    for _, path in ipairs(files) do
      local ptx = round_trip(path)
      assert.are.equal(structure(ptxparse.read_file(path)), structure(ptx), path)
    end
  end)

  it("sugars every corpus file into a script that traces to the same PTX, labels aside", function()
    local loops, fors = 0, 0
    for _, path in ipairs(corpus()) do
      local ptx, script = round_trip(path, true)
      assert.are.equal(labels(structure(ptxparse.read_file(path))), labels(structure(ptx)), path)
      loops = loops + select(2, script:gsub("ptx%.loop%(function%(%)", ""))
      fors = fors + select(2, script:gsub("\n%s*for i = 0, %d+ do\n", ""))
    end
    assert.is_true(loops >= 10 and fors >= 100, ("ptx.loop %d, for %d"):format(loops, fors))
  end)

  it("sugars names, labels, loops, repeats and opcodes", function()
    local _, script = round_trip(CORPUS .. "/nvcc/basic_sm80.ptx", true)
    assert.matches("-- scale(float, float)\nlocal scale = func \"_Z5scaleff\" {", script, 1, true)
    assert.matches("prelude[#prelude + 1] = scale", script, 1, true)
    assert.matches("ptx.inst.fma.rn.f32(f[3], f[1], f[2], ptx.imm(T.f32, 1))", script, 1, true)
    assert.matches('ptx.inst["and"].b64(', script, 1, true)
    assert.matches('ptx.at(p[1]).inst.bra(L"$L1")', script, 1, true)
    local _, control = round_trip(CORPUS .. "/nvcc/diff_control_sm80.ptx", true)
    assert.matches('ptx.loop(function()\n', control, 1, true)
    assert.matches('end, { top = "$L', control, 1, true)
    local _, gemm = round_trip(CORPUS .. "/large/big_gemm_sm80.ptx", true)
    assert.matches("      for i = 0, 9 do\n        ptx.inst.cvt.s64.s32(rd[2577 + 3 * i], r[18 + i])", gemm, 1, true)
  end)

  it("demangles C++ function names", function()
    assert.same({ "scale", "scale(float, float)" }, { sugar.demangle("_Z5scaleff") })
    assert.same({ "__cvta_generic_to_shared", "_INTERNAL_f9_9_hopper::__cvta_generic_to_shared(const void*)" },
      { sugar.demangle("_ZN21_INTERNAL_f9_9_hopper24__cvta_generic_to_sharedEPKv") })
    assert.same({ "k", "k(int*, unsigned int, ...)" }, { sugar.demangle("_Z1kPijSt") })
    assert.is_nil(sugar.demangle("saxpy"))
  end)

  it("writes register ranges, ptx.inst calls and kernel options", function()
    local _, script = round_trip(CORPUS .. "/nvcc/hopper_sm90a.ptx")
    assert.matches('kernel "hopper_kernel" {', script, 1, true)
    assert.matches('local r = reg.range(T.b32, "%r", 20)', script, 1, true)
    assert.matches('ptx.inst("mov.u32", r[2], S"%tid.x")', script, 1, true)
    assert.matches('ptx.at(p[1]).inst("bra", L"$L__BB0_2")', script, 1, true)
    assert.matches('{ ".reqnctapercluster", "2, 1, 1" }', script, 1, true)
    assert.matches("ptx.bracket(rd[3], {r[8], r[9]})", script, 1, true)   -- [tmap, {x, y}]
    assert.matches("ptx.raw[==[.shared .align 8 .u64 _ZZ13hopper_kernelE3bar;]==]", script, 1, true)
  end)

  it("writes device functions, .reg parameters, pointer attributes and named registers", function()
    local ptx, script, m = round_trip(CORPUS .. "/edge/functions.ptx")
    assert.matches('local f1 = func "add_one" {', script, 1, true)
    assert.matches('{ "b32", "x", reg = true }', script, 1, true)
    assert.matches('{ "u64", "caller_param_0", ptr = "global", ptr_align = 16 }', script, 1, true)
    assert.matches('ptx.inst("st.param.v2.b32", ptx.addr("ret"), {P["x"], P["y"]})', script, 1, true)
    assert.matches(".param .u64 .ptr .global .align 16 caller_param_0", ptx, 1, true)
    assert.are.equal(1, #m.kernels)
    local _, named = round_trip(CORPUS .. "/edge/operands.ptx")
    assert.matches('local v = reg.named(T.b32, { "acc", "%tmp", "$weird_name" })', named, 1, true)
    assert.matches('ptx.inst("ld.global.u32", r[7], ptx.addr(4096))', named, 1, true)
    local _, rets = round_trip(CORPUS .. "/edge/reg_returns.ptx")   -- .reg returns are registers, not "rv"
    assert.matches('ptx.inst("add.s32", P["rv"], P["x"], P["x"])', rets, 1, true)
    assert.matches('ptx.inst("mov.b64", {P["lo"], P["hi"]}, P["v"])', rets, 1, true)
  end)

  it("retraces real-world shapes: reused labels in inline asm, device functions, every special register", function()
    local core = require "pyptx.core"
    local ffi = require "ffi"
    local cases = {}
    for _, name in ipairs { "nvcc/inline_asm_sm80", "nvcc/inline_asm_sm90a", "nvcc/device_funcs_sm80",
      "nvcc/device_funcs_sm80_rdc", "nvcc/device_funcs_sm90a_G", "nvcc/specials_sm90a", "nvcc/specials_sm100a",
      "triton/softmax_sm80", "triton/tma_ring_sm90a" } do
      local path = CORPUS .. "/" .. name .. ".ptx"
      local text = ptxparse.read_file(path)
      assert.are.equal(text, ptxparse.parse(text, path):lossless(), path)
      local ptx = round_trip(path)
      assert.are.equal(structure(text), structure(ptx), path)
      cases[#cases + 1] = { path = path, ptx = ptx, arch = text:match("%.target%s+([%w_]+)") }
    end
    local _, dones = cases[1].ptx:gsub("\nDONE:", "")
    assert.is_true(dones >= 3, "DONE placed in each inlined block")
    local _, waits = cases[9].ptx:gsub("\nwaitLoop:", "")
    assert.equal(3, waits)
    assert.matches(".visible .func  (.param .b32 func_retval0) _Z5twicef", ptxparse.read_file(cases[4].path), 1, true)
    for id = 0, core.special_count() - 1 do   -- every special register, read through inline asm
      assert.matches(ffi.string(core.special_name(id)) .. ";", cases[6].ptx, 1, true)
    end
    for _, c in ipairs(cases) do assert(H.cubin(c.ptx, c.arch)) end
  end)

  it("keeps a multi-entry module one module, each kernel also traceable alone", function()
    local ptx, _, m = round_trip(CORPUS .. "/nvcc/diff_mma_sm80.ptx")
    assert.are.equal(4, #m.kernels)
    local _, entries = ptx:gsub("%.entry ", "")
    assert.are.equal(4, entries)
    for _, k in ipairs(m.kernels) do assert.matches(".entry " .. k.name, k:ptx(), 1, true) end
  end)

  it("carries .address_size 32 and target modifiers", function()
    local ptx, script = round_trip(CORPUS .. "/edge/module_directives.ptx")
    assert.matches("address_size = 32", script, 1, true)
    assert.matches(".address_size 32", ptx, 1, true)
  end)

  it("runs from the command line, with --sugar too", function()
    local out = H.temp_dir() .. "/out.lua"
    local log, _, rc = H.luaptx({ "transpile", CORPUS .. "/edge/crlf.ptx", "--name", "renamed", "-o", out }, { merge = true })
    assert.equal(0, rc, log)
    assert.matches('kernel "renamed"', ptxparse.read_file(out), 1, true)
    log, _, rc = H.luaptx({ "transpile", "--sugar", CORPUS .. "/nvcc/basic_sm80.ptx", "-o", out }, { merge = true })
    assert.equal(0, rc, log)
    assert.matches("local scale = func", ptxparse.read_file(out), 1, true)
    log, _, rc = H.luaptx({ "ptx", out }, { merge = true })
    assert.equal(0, rc, log)
    assert.matches(".func (.param .b32 func_retval0) _Z5scaleff(", log, 1, true)
    assert.matches(".visible .entry saxpy(", log, 1, true)
  end)

  describe("a module too big for one Lua function", function()
    --- PTX of a kernel with n labelled instructions, each with its own
    -- constant (so neither the plain nor the sugared script can fold them).
    local function long_kernel(n)
      local out = { ".version 8.0\n.target sm_90\n.address_size 64\n\n.visible .entry long(.param .u64 p)\n{\n",
        "\t.reg .b32 %r<3>;\n\t.reg .b64 %rd<2>;\n\t.reg .pred %p<2>;\n\tld.param.u64 %rd1, [p];\n\tmov.u32 %r1, 0;\n" }
      for i = 1, n do out[#out + 1] = ("L_%d:\n\tadd.u32 %%r1, %%r1, %d;\n"):format(i, i * 7919 % 1000003) end
      -- one loop around it all: --sugar must not make it one ptx.loop function
      out[#out + 1] = "\tsetp.lt.u32 %p1, %r1, 5;\n@%p1 bra L_1;\n\tst.global.u32 [%rd1], %r1;\n\tret;\n}\n"
      return table.concat(out)
    end

    --- PTX of a module with nfuncs device functions and nglobals variables.
    local function wide_module(nfuncs, nglobals)
      local out = { ".version 8.0\n.target sm_90\n.address_size 64\n\n" }
      for i = 1, nglobals do out[#out + 1] = (".global .u32 g%d = %d;\n"):format(i, i) end
      for i = 1, nfuncs do
        out[#out + 1] = (".func (.param .b32 r) f%d(.param .b32 a)\n{\n\t.reg .b32 %%r<3>;\n\tld.param.b32 %%r1, [a];\n"
          .. "\tadd.u32 %%r2, %%r1, %d;\n\tst.param.b32 [r], %%r2;\n\tret;\n}\n"):format(i, i)
      end
      out[#out + 1] = ".visible .entry k(.param .u64 p)\n{\n\t.reg .b32 %r<2>;\n\t.reg .b64 %rd<2>;\n"
        .. "\tld.param.u64 %rd1, [p];\n\t{\n\t.param .b32 a;\n\t.param .b32 r;\n\tst.param.b32 [a], 1;\n"
        .. ("\tcall.uni (r), f%d, (a);\n\tld.param.b32 %%r1, [r];\n\t}\n"):format(nfuncs)
        .. "\tst.global.u32 [%rd1], %r1;\n\tret;\n}\n"
      return table.concat(out)
    end

    --- Transpile text (sugared when asked) and trace it back: its PTX.
    local function back(text, sweet)
      local script = transpile.transpile(text, "big.ptx")
      if sweet then script = sugar.sugar(script) end
      local chunk = assert(loadstring(script, "=big.lua"))
      return chunk().module:ptx()
    end

    it("round-trips a kernel of 70,000 instructions and labels (over 65,536 constants), with --sugar too", function()
      local text = long_kernel(35000)
      local want = structure(text)
      assert.equal(want, structure(back(text)))
      assert.equal(want, structure(back(text, true)))
    end)

    it("round-trips a module of 300 device functions and 10,000 variables (over 200 locals, past unpack)", function()
      local text = wide_module(300, 10000)
      local want = structure(text)
      assert.equal(want, structure(back(text)))
      assert.equal(want, structure(back(text, true)))
      H.assert_ptxas(text, "sm_90")
    end)
  end)
end)
