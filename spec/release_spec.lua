-- Consumer release (issue 24 item 1): remote mbarrier arrivals default
-- to the ISA's .release.cta (CUTLASS's ClusterBarrier form, no fence in
-- SASS), .release.cluster and .relaxed on request. The emulator's side
-- (issue 26 item 7: a stage released once per warpgroup after its
-- wgmma.wait_group; the early_release and no_empty_wait mutants) is in
-- spec/hopper_gemm_fast_spec.lua and spec/hopper_spec.lua.
local pyptx = require "pyptx"
local pipeline = require "pyptx.pipeline"
local sass = require "pyptx.runtime.sass"
local compile = require "pyptx.runtime.compile"
local H = require "spec.helpers"
local kernel, reg, ptx, Tile = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.Tile
local u32 = pyptx.types.u32

--- A cluster-of-2 kernel that arrives 100 times on barrier 0 of CTA 1 with opts.
local function arrivals(name, opts, version)
  return kernel(name) {
    arch = "sm_90a", version = version, cluster = { 2, 1, 1 }, block = { 128, 1, 1 }, grid = { 2, 1, 1 },
    out_specs = { Tile(1, u32) },
    function()
      local bars = pipeline.barriers(2, 1)
      local tid = reg.from(ptx.special.tid.x(), u32)
      ptx.if_(tid:eq(0), function() bars:init(); ptx.fence.mbarrier_init() end)
      ptx.cluster.sync()
      ptx.range(0, 100, 1, function() bars:at(0):when(tid:eq(0)):arrive_remote(1, opts) end)
      ptx.cluster.sync()
      ptx.ret()
    end,
  }
end

--- The arrive line of a kernel's PTX.
local function arrive_line(k)
  return k:ptx():match("[^\n]*mbarrier%.arrive[^\n]*shared::cluster[^\n]*")
end

describe("remote mbarrier arrivals: the release order", function()
  it("default to the ISA's .release.cta form; sem and scope are options", function()
    assert.matches("@%%p%d+ mbarrier%.arrive%.shared::cluster%.b64%s+_, %[%%r%d+%];", arrive_line(arrivals("a")))
    assert.matches("mbarrier%.arrive%.release%.cluster%.shared::cluster%.b64",
      arrive_line(arrivals("b", { sem = "release", scope = "cluster" })))
    assert.matches("mbarrier%.arrive%.release%.cta%.shared::cluster%.b64", arrive_line(arrivals("c", { scope = "cta" })))
    assert.matches("mbarrier%.arrive%.relaxed%.cluster%.shared::cluster%.b64",
      arrive_line(arrivals("d", { sem = "relaxed", scope = "cluster" }, "8.6")))
  end)

  it("refuses a sem or scope the ISA lacks, and .relaxed before PTX 8.6, at the caller's line", function()
    local function refuses(pattern, opts, version)
      local ok, err = pcall(function() return arrivals("bad", opts, version):ptx() end)
      assert.is_false(ok)
      assert.matches("release_spec%.lua:%d+: .*" .. pattern, tostring(err))
    end
    refuses('sem must be "release" or "relaxed"; got acquire', { sem = "acquire" })
    refuses('scope must be "cta" or "cluster"; got gpu', { scope = "gpu" })
    refuses('sem = "relaxed" needs PTX ISA 8.6', { sem = "relaxed" })
    refuses("unknown option", { order = "cta" })
    local ok, err = pcall(function()
      return kernel "bad_opts" { arch = "sm_90a", cluster = { 2, 1, 1 }, block = { 32 }, out_specs = { Tile(1, u32) },
        function()
          local bar = pyptx.smem.mbarrier(1)
          ptx.mbarrier.arrive_remote(ptx.cluster.mapa(bar:base(), 1), 1, "cluster")
          ptx.ret()
        end }:ptx()
    end)
    assert.is_false(ok)
    assert.matches('release_spec%.lua:%d+: .*mbarrier%.arrive_remote: opts must be a table { sem =, scope = }; got string',
      tostring(err))
  end)

  it("costs a GPU-scope fence per arrival only with .release.cluster (ptxas SASS)", function()
    H.need_tool("nvdisasm")
    local ok, err = pcall(compile.compiler)
    if not ok then H.pending(tostring(err)) return end
    local function counts(k)
      local _, listing = sass.kernel(k)
      local c = {}
      for _, it in ipairs(listing.functions[1].items) do
        local op = it.text and it.text:match("^@?!?U?P?T?%d*%s*([%u%d_%.]+)")
        if op then c[op] = (c[op] or 0) + 1 end
      end
      return c
    end
    -- two cluster barriers (barrier.cluster.arrive.release) bring one fence each in every form
    for _, case in ipairs {
      { "r_default", nil, nil, 2 }, { "r_cta", { scope = "cta" }, nil, 2 },
      { "r_relaxed", { sem = "relaxed", scope = "cluster" }, "8.6", 2 },
      { "r_cluster", { sem = "release", scope = "cluster" }, nil, 102 },
    } do
      local c = counts(arrivals(case[1], case[2], case[3]))
      assert.equal(100, c["SYNCS.ARRIVE.TRANS64.RED.A1T0"], case[1])
      assert.equal(case[4], c["MEMBAR.ALL.GPU"] or 0, case[1])
      assert.equal(case[4], c.ERRBAR or 0, case[1])
    end
  end)
end)
