-- pyptx.kernel: kernel "name" { options..., body }, option checking, the
-- entry header it emits, specialization and its cache, k:module.
local H = require "spec.helpers"
local pyptx = require "pyptx"
local kernel_mod = require "pyptx.kernel"
local reg, ptx, T, Tile = pyptx.reg, pyptx.ptx, pyptx.types, pyptx.Tile

--- The error of building (and, with trace, tracing) a kernel.
local function build_error(fn)
  local ok, err = pcall(fn)
  assert(not ok, "expected an error")
  return err
end

--- The entry header of a PTX text: from ".visible .entry" to "{".
local function header(text)
  return text:match("(%.visible %.entry.-)\n{")
end

describe("pyptx.kernel", function()
  describe("options", function()
    it("refuses an unknown option and lists the valid ones at the defining line", function()
      local err = build_error(function()
        local k = pyptx.kernel "k" { arch = "sm_80", blocks = { 1 }, function() end }
        return k
      end)
      assert.matches("^spec/kernel_spec.lua:%d+: kernel \"k\": unknown option 'blocks'; "
        .. "valid options: address_size, arch, block, check_refs, cluster, extern_smem", err)
    end)

    it("refuses an option of the wrong type", function()
      assert.matches("kernel_spec.lua:%d+: kernel \"k\": option 'arch' must be a string, got number",
        build_error(function() local k = pyptx.kernel "k" { arch = 90, function() end } return k end))
      assert.matches("option 'block' must be a table, got number",
        build_error(function() local k = pyptx.kernel "k" { block = 128, function() end } return k end))
    end)

    it("refuses integer options out of their range at the defining line", function()
      local function opt_error(opts)
        opts[1] = function() end
        return build_error(function() local k = pyptx.kernel "k"(opts) return k end)
      end
      assert.matches("kernel_spec.lua:%d+: kernel \"k\": option 'smem' must be an integer in %[0, 2147483647%] "
        .. "%(a byte count%), got %-5", opt_error { smem = -5 })
      assert.matches("option 'smem' must be an integer in %[0, 2147483647%] %(a byte count%), got 1.5",
        opt_error { smem = 1.5 })
      assert.matches("option 'maxnreg' must be an integer in %[1, 255%]", opt_error { maxnreg = 300 })
      assert.matches("option 'minnctapersm' must be an integer in %[1, 64%]", opt_error { minnctapersm = 0 })
      assert.matches("option 'address_size' must be 32 or 64, got 48", opt_error { address_size = 48 })
    end)

    it("needs the body function and a PTX identifier as name", function()
      assert.matches("kernel_spec.lua:%d+: kernel \"k\" needs its body function as the table's first item",
        build_error(function() local k = pyptx.kernel "k" { arch = "sm_80" } return k end))
      assert.matches("kernel_spec.lua:%d+: kernel name 'my kernel' is not a PTX identifier",
        build_error(function() local k = pyptx.kernel "my kernel" { function() end } return k end))
      assert.matches("kernel_spec.lua:%d+: kernel \"k\" expects an options table",
        build_error(function() local k = pyptx.kernel "k" (function() end) return k end))
    end)

    it("takes a kernel name as PTX identifiers go (ptxas agrees): `_` refused, `a$b` and `$x` kept", function()
      local bads, kernels = { "_", "$", "a.b", "1a" }, {}
      for _, bad in ipairs(bads) do
        assert.matches("kernel name '" .. bad:gsub("%p", "%%%0") .. "' is not a PTX identifier",
          build_error(function() local k = pyptx.kernel(bad) { function() end } return k end))
      end
      for _, good in ipairs { "a$b", "$x", "_1", "__", "A9" } do
        local k = pyptx.kernel(good) { arch = "sm_90a", function() end }
        assert.matches(".visible .entry " .. good:gsub("%p", "%%%0") .. "%(", k:ptx())
        kernels[#kernels + 1] = k
      end
      for _, k in ipairs(kernels) do H.assert_ptxas(k, "sm_90a") end   -- ptxas agrees (pending without it)
      for _, bad in ipairs(bads) do
        H.assert_ptxas_refuses((".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry %s()\n{\n\tret;\n}\n")
          :format(bad))
      end
    end)

    it("checks block, cluster and grid triples", function()
      assert.matches("kernel_spec.lua:%d+: block%[2%] must be a positive integer, got 0",
        build_error(function() local k = pyptx.kernel "k" { block = { 32, 0 }, function() end } return k end))
      assert.matches("cluster%[1%] must be a positive integer, got 1.5",
        build_error(function() local k = pyptx.kernel "k" { cluster = { 1.5 }, function() end } return k end))
      assert.matches("grid%[1%] must be a positive integer, got %-1",
        build_error(function() return pyptx.kernel "k" { grid = { -1 }, function() end }:ptx() end))
    end)

    it("needs Tiles in the specs", function()
      assert.matches("kernel_spec.lua:%d+: in_specs%[2%] must be a Tile, got x",
        build_error(function() local k = pyptx.kernel "k" { in_specs = { Tile(4, T.f32), "x" }, function() end } return k end))
      assert.matches("out_specs%[1%] must be a Tile",
        build_error(function() local k = pyptx.kernel "k" { out_specs = { 4 }, function() end } return k end))
    end)

    it("refuses an unknown arch and an unknown raw param type when traced", function()
      assert.matches("kernel_spec.lua:%d+: kernel \"k\": unknown arch 'sm_9x'; use e.g. sm_80, sm_90a, sm_100a or \"auto\"",
        build_error(function() return pyptx.kernel "k" { arch = "sm_9x", function() end }:ptx() end))
      assert.matches("kernel_spec.lua:%d+: raw_params%[1%]: unknown type u33",
        build_error(function() return pyptx.kernel "k" { raw_params = { { "u33", "n" } }, function() end }:ptx() end))
    end)
  end)

  describe("versions and targets", function()
    it("default the PTX version to the first that covers the ISA and knows the target", function()
      local want = { sm_80 = "8.0", sm_89 = "8.0", sm_90a = "8.0", sm_100a = "8.6", sm_120a = "8.7", sm_100f = "8.8", sm_103a = "8.8" }
      for arch, version in pairs(want) do
        local text = pyptx.kernel "v" { arch = arch, function() end }:ptx()
        assert.equal(version, text:match("%.version (%S+)"), arch)
        assert.equal(arch, text:match("%.target (%S+)"))
      end
    end)

    it("take the version as {major, minor}, \"major.minor\" or a number", function()
      for _, v in ipairs { { 8, 5 }, "8.5", 8.5 } do
        assert.equal("8.5", pyptx.kernel "v" { arch = "sm_90a", version = v, function() end }:ptx():match("%.version (%S+)"))
      end
    end)

    it("refuse a version that does not know the target", function()
      assert.matches("kernel_spec.lua:%d+: kernel \"v\": PTX ISA 7.8 does not know sm_90a; use version 8.0 or newer",
        build_error(function() return pyptx.kernel "v" { arch = "sm_90a", version = "7.8", function() end }:ptx() end))
    end)

    it("refuse a malformed version", function()
      assert.matches("kernel_spec.lua:%d+: version must be {major, minor} or \"major.minor\", got 8",
        build_error(function() return pyptx.kernel "v" { version = "8", function() end }:ptx() end))
      assert.matches("kernel_spec.lua:%d+: version must be {major, minor} or \"major.minor\", got a table without two numbers",
        build_error(function() return pyptx.kernel "v" { version = {}, function() end }:ptx() end))
    end)

    it("refuse a version newer than the newest PTX ISA luaptx knows", function()
      assert.matches("kernel_spec.lua:%d+: PTX ISA 99.9 is newer than luaptx knows; the newest is %d+%.%d",
        build_error(function() return pyptx.kernel "v" { version = "99.9", function() end }:ptx() end))
    end)

    it("resolve arch = \"auto\" to something concrete", function()
      local arch = kernel_mod.auto_arch()
      assert.matches("^sm_%d+[af]?$", arch)
      assert.equal(arch, pyptx.kernel "v" { arch = "auto", function() end }:specialize().arch)
    end)
  end)

  describe("the entry header", function()
    it("declares tensor params, raw params and directives", function()
      local text = pyptx.kernel "full" {
        arch = "sm_90a", in_specs = { Tile(4, T.f32) }, out_specs = { Tile(4, T.f32) }, cluster = { 2, 1, 1 },
        raw_params = { { "u32", "n" }, { T.f32, "alpha" }, { "b8", "blob", align = 16, count = 64 } },
        reqntid = { 256 }, maxnreg = 128, minnctapersm = 2, raw_directives = { { ".maxclusterrank", { 8 } } },
        function() end,
      }:ptx()
      assert.equal(table.concat({
        ".visible .entry full(",
        "\t.param .u64 full_param_0,",
        "\t.param .u64 full_param_1,",
        "\t.param .u32 n,",
        "\t.param .f32 alpha,",
        "\t.param .align 16 .b8 blob[64]",
        ")",
        ".reqntid 256",
        ".minnctapersm 2",
        ".maxnreg 128",
        ".reqnctapercluster 2, 1, 1",
        ".maxclusterrank 8",
      }, "\n"), header(text))
    end)

    it("gives .maxntid from block when there is no reqntid", function()
      local text = pyptx.kernel "b" { arch = "sm_80", block = { 128, 2 }, function() end }:ptx()
      assert.equal(".visible .entry b()\n.maxntid 128, 2, 1", header(text))
    end)
  end)

  describe("specialization", function()
    it("binds template params over the defaults and traces each set once", function()
      local traced = 0
      local k = pyptx.kernel "tmpl" {
        arch = "sm_80", params = { BM = 64, M = 8 }, in_specs = { Tile("M", T.f32) },
        grid = function(v) return { v.M / 4, 2 } end,
        function(_, v)
          traced = traced + 1
          reg.scalar(T.u32, v.BM)
        end,
      }
      assert.matches("mov.u32 \t%%r1, 64;", k:ptx())
      assert.matches("mov.u32 \t%%r1, 128;", k:ptx { BM = 128 })
      assert.equal(k:specialize(), k:specialize { BM = 64 })
      assert.are_not.equal(k:specialize(), k:specialize { BM = 128 })
      assert.equal(2, traced)
      assert.same({ 4, 2, 1 }, k:specialize { M = 16 }.grid)
      assert.same({ 2, 2, 1 }, k:specialize().grid)
    end)

    it("names an unbound symbolic dim and how to bind it", function()
      local k = pyptx.kernel "sym" { arch = "sm_80", in_specs = { Tile(4, T.f32) }, out_specs = { Tile("N", "K", T.f32) }, function() end }
      assert.matches("kernel_spec.lua:%d+: kernel \"sym\": dimension N of out spec 1 is not bound; pass it, e.g. k:ptx{N = 1024}",
        build_error(function() return k:ptx() end))
    end)

    it("retargets with an arch value", function()
      local k = pyptx.kernel "re" { arch = "sm_80", function() end }
      assert.equal("sm_100a", k:specialize { arch = "sm_100a" }.arch)
      assert.matches("%.target sm_100a", k:ptx { arch = "sm_100a" })
    end)

    it("counts instructions and reports shared memory", function()
      local s = pyptx.kernel "cnt" { arch = "sm_80", function()
        pyptx.smem.alloc(T.f32, 8)
        local a = reg.scalar(T.u32, 1)
        local _ = a + 1
        ptx.ret()
      end }:specialize()
      assert.same({ 3, 32, 0 }, { s.instructions, s.static_smem, s.dynamic_smem })
    end)
  end)

  describe("tracing", function()
    it("waits longer between collections while it traces, and gives the pause back after, also on failure", function()
      local seen
      local before = collectgarbage("setpause", 170)
      pyptx.kernel "p" { arch = "sm_90a", function()
        seen = collectgarbage("setpause", 999)
        collectgarbage("setpause", seen)
        ptx.ret()
      end }:ptx()
      assert.equal(400, seen)
      assert.equal(170, collectgarbage("setpause", 170))
      assert.is_false(pcall(function() pyptx.kernel "q" { arch = "sm_90a", function() error("boom") end }:ptx() end))
      assert.equal(170, collectgarbage("setpause", before))
    end)

    it("is deterministic: the same kernel gives the same bytes", function()
      local function build()
        return pyptx.kernel "det" { arch = "sm_90a", in_specs = { Tile(64, T.f32) }, function(X)
          local p = ptx.global_ptrs(X)
          local v = reg.scalar(T.f32)
          ptx.ld.global(v, ptx.addr(p))
          ptx.warp.reduce_sum(v)
          ptx.st.global(ptx.addr(p), v)
        end }
      end
      local a, b = build():ptx(), build():ptx()
      assert.equal(a, b)
      assert.equal(a, build():ptx { arch = "sm_90a" })
    end)

    it("writes .loc lines for the user's lines unless line_info is false", function()
      local k = pyptx.kernel "loc" { arch = "sm_80", function()
        ptx.ret()
      end }
      local text = k:ptx()
      assert.matches("\t%.file\t1 \"[^\"]*spec/kernel_spec.lua\"", text)
      assert.matches("\t%.loc\t1 %d+ 1\n\tret;", text)
      local plain = pyptx.kernel "loc" { arch = "sm_80", line_info = false, function() ptx.ret() end }:ptx()
      assert.is_nil(plain:find(".loc", 1, true))
      assert.is_nil(plain:find(".file", 1, true))
    end)

    it("never points .loc into luaptx's own code, also when the body tail-calls", function()
      local k = pyptx.kernel "tailcall" { arch = "sm_80", function() return ptx.ret() end }
      local text = k:ptx()
      assert.matches('\t%.file\t1 "[^"]*spec/kernel_spec%.lua"', text)
      assert.is_nil(text:find("pyptx/", 1, true))
      assert.is_nil(text:find("bin/luaptx", 1, true))
    end)

    it("recovers after a failed trace", function()
      build_error(function() return pyptx.kernel "bad" { arch = "sm_80", function() ptx.inst.add.u33() end }:ptx() end)
      assert.matches("ret;", pyptx.kernel "good" { arch = "sm_80", function() ptx.ret() end }:ptx())
    end)

    it("refuses to trace a kernel inside another kernel's trace", function()
      local inner = pyptx.kernel "inner" { arch = "sm_80", function() end }
      assert.matches("a kernel trace is already active",
        build_error(function() return pyptx.kernel "outer" { arch = "sm_80", function() inner:ptx() end }:ptx() end))
    end)
  end)

  describe("k:module", function()
    it("gives the IR as Lua tables", function()
      local m = pyptx.kernel "mod" {
        arch = "sm_90a", in_specs = { Tile(4, T.f32) }, raw_params = { { "u32", "n" } }, block = { 64 },
        function() ptx.ret() end,
      }:module()
      assert.same({
        version = "8.0", target = "sm_90a", address_size = 64,
        entry = { name = "mod", params = { { name = "mod_param_0", type = "u64" }, { name = "n", type = "u32" } }, body = { "ret;" } },
        grid = { 1, 1, 1 }, block = { 64, 1, 1 }, cluster = { 1, 1, 1 }, dynamic_smem = 0,
      }, m)
    end)
  end)

  it("launches through the runtime, which registers itself, and says so when none is loaded", function()
    local script = H.write(H.temp_dir() .. "/bare.lua", [[
local kernel = require "pyptx.kernel"
local k = kernel.kernel "bare" { function() end }
print(pcall(function() k() end))
require "pyptx.runtime"
print(pcall(function() k() end))
]])
    local out = H.luaptx({ script }, { env = { LUAPTX_DEVICE = "emu" } })
    assert.equal("false\t" .. script .. ':3: kernel "bare": launching needs pyptx.runtime; require "pyptx" '
      .. '(or "pyptx.runtime") first, or inspect the kernel with k:ptx{}\ntrue\n', out)
  end)

  it("prints as kernel \"name\" (arch)", function()
    assert.equal('kernel "k" (sm_80)', tostring(pyptx.kernel "k" { arch = "sm_80", function() end }))
    assert.is_true(pyptx.is_kernel(pyptx.kernel "k" { function() end }))
    assert.is_false(pyptx.is_kernel({}))
  end)
end)
