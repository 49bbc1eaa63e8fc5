-- The launch directives a GPU enforces (.reqntid, .maxntid,
-- .reqnctapercluster, .explicitcluster, .maxclusterrank) are enforced at
-- every launch on every device (lpx_device_launch, src/lpx_bounds.c),
-- naming the directive and the launch; .minnctapersm is a compiler hint,
-- warned of where ptxas ignores it.
local ffi = require "ffi"
local pyptx = require "pyptx"
local tensor = require "pyptx.runtime.tensor"
local H = require "spec.helpers"

--- A kernel whose thread 0 of each CTA writes %cluster_nctarank (or 1
-- before sm_90) to out[ctaid], with directives dirs.
local function source(dirs, target)
  local body = target == "sm_80" and "mov.u32 %r1, 1;" or "mov.u32 %r1, %cluster_nctarank;"
  return ([[
.version 8.0
.target %s
.address_size 64
.visible .entry k(.param .u64 out)
%s
{
  .reg .b32 %%r<4>;
  .reg .b64 %%rd<4>;
  .reg .pred %%p<2>;
  mov.u32 %%r2, %%tid.x;
  setp.ne.u32 %%p1, %%r2, 0;
  @%%p1 bra DONE;
  %s
  mov.u32 %%r3, %%ctaid.x;
  ld.param.u64 %%rd1, [out];
  cvta.to.global.u64 %%rd1, %%rd1;
  mul.wide.u32 %%rd2, %%r3, 4;
  add.s64 %%rd1, %%rd1, %%rd2;
  st.global.u32 [%%rd1], %%r1;
DONE:
  ret;
}
]]):format(target or "sm_90a", dirs, body)
end

--- The module of source(dirs, target), loaded; what it wrote to stderr (warnings) lands in warned.
local warned = {}
local function module(dirs, target)
  local saved = io.stderr
  io.stderr = { write = function(_, ...) for _, v in ipairs({ ... }) do warned[#warned + 1] = tostring(v) end end } -- luacheck: ignore 122
  local ok, mod = pcall(pyptx.load_ptx, source(dirs, target), "bounds.ptx")
  io.stderr = saved -- luacheck: ignore 122
  if not ok then error(mod, 0) end
  return mod
end

--- Launch entry k of a module with directives dirs; the error, or nil and out's values.
local function launch(dirs, opts, target)
  local out = tensor.empty({ 4 }, pyptx.types.u32, H.emu()):fill(0)
  local ok, err = pcall(module(dirs, target).k, { grid = 4, block = opts.block or 128, cluster = opts.cluster,
    args = { out }, device = H.emu() })
  if not ok then return tostring(err) end
  return nil, out:values()
end

describe("launch directives (issue 26 item 3)", function()
  it(".reqntid: exactly that block runs; any other is refused, naming the directive and the launch", function()
    assert.is_nil((launch(".reqntid 128", { block = 128 })))
    assert.matches("kernel k launched with block %(64, 1, 1%), but it declares %.reqntid 128, 1, 1: a GPU refuses any other block",
      launch(".reqntid 128", { block = 64 }))
    assert.matches("%.reqntid 64, 2, 1", launch(".reqntid 64, 2", { block = 128 }))
  end)

  it(".maxntid: up to that many threads run; more are refused", function()
    assert.is_nil((launch(".maxntid 128, 1, 1", { block = 64 })))
    assert.matches("kernel k launched with block %(256, 1, 1%) of 256 threads, but it declares %.maxntid 128, 1, 1: a GPU refuses "
      .. "more than 128 threads", launch(".maxntid 128, 1, 1", { block = 256 }))
  end)

  it(".reqnctapercluster: a launch without a cluster gets that cluster; another cluster is refused", function()
    local err, v = launch(".reqnctapercluster 2, 1, 1", {})
    assert.is_nil(err)
    assert.same({ 2, 2, 2, 2 }, v)
    assert.is_nil((launch(".reqnctapercluster 2, 1, 1", { cluster = 2 })))
    assert.matches("kernel k launched with cluster %(4, 1, 1%), but it declares %.reqnctapercluster 2, 1, 1: a GPU refuses any "
      .. "other cluster", launch(".reqnctapercluster 2, 1, 1", { cluster = 4 }))
  end)

  it(".explicitcluster: a launch must give a cluster (or the kernel .reqnctapercluster)", function()
    assert.matches("kernel k launched without a cluster, but it declares %.explicitcluster", launch(".explicitcluster", {}))
    local err, v = launch(".explicitcluster", { cluster = 2 })
    assert.is_nil(err)
    assert.same({ 2, 2, 2, 2 }, v)
    assert.is_nil((launch(".explicitcluster\n.reqnctapercluster 4, 1, 1", {})))
  end)

  it(".maxclusterrank: at most that many CTAs per cluster", function()
    assert.is_nil((launch(".maxclusterrank 2", { cluster = 2 })))
    assert.matches("kernel k launched with cluster %(4, 1, 1%) of 4 CTAs, but it declares %.maxclusterrank 2: a GPU refuses more "
      .. "than 2 CTAs per cluster", launch(".maxclusterrank 2", { cluster = 4 }))
  end)

  it(".minnctapersm is a hint to ptxas (ignored when it cannot be met), not a launch condition", function()
    warned = {}
    assert.is_nil((launch(".maxntid 1024, 1, 1\n.minnctapersm 4", { block = 1024 }, "sm_80")))
    assert.matches("^bounds%.ptx: warning: kernel k: %.minnctapersm 4 is ignored", table.concat(warned))
  end)

  it(".minnctapersm is checked against the SM's resources as ptxas checks it: a warning where ptxas ignores it", function()
    -- { directives, luaptx's warning (nil: none) }; ptxas 13.0 warns in exactly the same cases
    local CASES = {
      { ".maxntid 1024, 1, 1\n.minnctapersm 4", "4 CTAs of 1024 threads are 128 warps, and an SM of sm_90 holds 64" },
      { ".minnctapersm 4", "neither %.maxntid nor %.reqntid is given" },
      { ".maxntid 128, 1, 1\n.minnctapersm 64", "an SM of sm_90 holds at most 32 CTAs" },
      { ".maxntid 256, 1, 1\n.minnctapersm 8" },
      { ".reqntid 128\n.minnctapersm 16" },
    }
    local sys = require "pyptx.core.sys"
    for _, c in ipairs(CASES) do
      local ptx = source(c[1], "sm_90")
      local path = sys.temp_file(ptx, ".ptx")
      local _, err, status = H.luaptx({ "-e", ("require('pyptx').load_ptx(%q)"):format(path) })
      sys.remove_tree(path)
      assert.equal(0, status, err)
      if c[2] then
        assert.matches("%.ptx: warning: kernel k: %.minnctapersm %d+ is ignored, as ptxas ignores it: " .. c[2]
          .. " %(it is a register%-budget hint, never a launch condition%)\n$", err)
      else
        assert.equal("", err)
      end
      local ok, _, log = H.ptxas(ptx, "sm_90")
      assert.is_true(ok, log)
      assert.equal(c[2] ~= nil, (log or ""):find("ignored", 1, true) ~= nil, c[1] .. ": " .. tostring(log))
    end
  end)

  it("warns of a DSL kernel's minnctapersm the same way", function()
    local _, err, status = H.luaptx({ "-e", [[
local pyptx = require "pyptx"
pyptx.kernel "big" { arch = "sm_90a", block = { 1024 }, minnctapersm = 4, in_specs = {}, out_specs = {},
  function() pyptx.ptx.ret() end }:ptx()]] })
    assert.equal(0, status, err)
    assert.matches("warning: kernel big: %.minnctapersm 4 is ignored, as ptxas ignores it: 4 CTAs of 1024 threads are 128 "
      .. "warps, and an SM of sm_90a holds 64", err)
  end)

  it("refuses Triton's .reqntid kernel launched with another block", function()
    local mod = pyptx.load_ptx("spec/fixtures/triton/add_sm_80.ptx")
    local x = tensor.empty({ 1000 }, pyptx.types.f32, H.emu()):fill(1)
    local null = ffi.new("uint64_t", 0)
    local ok, err = pcall(mod.add_kernel, { grid = 8, block = 64, args = { x, x, x, 1000, null, null }, device = H.emu() })
    assert.is_false(ok)
    assert.matches("launching entry add_kernel: kernel add_kernel launched with block %(64, 1, 1%), "
      .. "but it declares %.reqntid 128, 1, 1", err)
  end)
end)

describe("launch directives on the CUDA device (issue 26 item 3)", function()
  it("are checked before the driver sees the launch (the stand-in driver of spec/c/fake_cuda.c)", function()
    local fake = H.BIN:gsub("[^/]+$", "") .. "fake-cuda"
    if not H.read(fake .. "/libcuda.so.1") then H.pending("no stand-in driver at " .. fake) return end
    local out, err, status = H.luaptx({ "-e", [[
local pyptx, ffi = require "pyptx", require "ffi"
local dev = require("pyptx.runtime").open("cuda")
local mod = pyptx.load_ptx("spec/fixtures/triton/add_sm_80.ptx")
local null = ffi.new("uint64_t", 0)
for _, block in ipairs({ 64, 128 }) do
  print(block, pcall(mod.add_kernel, { grid = 8, block = block, args = { null, null, null, 1000, null, null }, device = dev }))
end]] }, { cwd = H.ROOT, env = { LD_LIBRARY_PATH = fake, LUAPTX_CACHE_DIR = H.temp_dir() } })
    assert.equal(0, status, err)
    assert.matches("^64\tfalse\tlaunching entry add_kernel: kernel add_kernel launched with block %(64, 1, 1%), but it declares "
      .. "%.reqntid 128, 1, 1: a GPU refuses any other block\n128\ttrue\n$", out)
  end)
end)
