-- The user's line of every traced instruction (.loc and error messages)
-- stays exact on the fast paths: in loops hot enough for the JIT to
-- compile, through local helpers, and through tcgen05.mma, whose opcode
-- and the plain TMA tensor load are interned once per spelling (the form
-- caches of pyptx.blackwell and pyptx.async).
local pyptx = require "pyptx"
local H = require "spec.helpers"
local reg, ptx, T = pyptx.reg, pyptx.ptx, pyptx.types

--- Each instruction of some PTX with the line of the .loc before it:
-- a list of { line, text }.
local function located(text)
  local out, line = {}, nil
  for l in text:gmatch("[^\n]+") do
    local n = l:match("^%s*%.loc%s+%d+%s+(%d+)")
    if n then line = tonumber(n)
    elseif line and l:match("^%s+[%a@]") and not l:match("^%s+%.") then
      out[#out + 1] = { line, (l:gsub("^%s+", ""):gsub("%s+", " ")) }
    end
  end
  return out
end

--- Trace body(lines) in an sm_100a kernel; returns the PTX.
local function trace(body)
  return pyptx.kernel "k" { arch = "sm_100a", block = { 128 }, function()
    body()
    ptx.ret()
  end }:specialize({}).ptx
end

describe("traced source lines", function()
  it("name the calling line of each instruction in a JIT-compiled loop, also through helpers", function()
    local want = {}
    local function bump(r) r:set(r + 1); want[#want + 1] = H.here() end   -- two instructions on this line
    local text = trace(function()
      local a = reg.scalar(T.u32, 0)
      for i = 1, 300 do                                   -- hot: the JIT compiles the loop
        local b = a + i; want[#want + 1] = H.here()
        bump(b)
        ptx.inst.add.u32(a, a, b); want[#want + 1] = H.here()
      end
    end)
    local got = located(text)
    -- mov (the init), then per iteration: add (a + i), add + mov (bump), add (ptx.inst)
    assert.are.equal(1 + 300 * 4, #got - 1)              -- and ret
    local k = 2
    for it = 1, 300 do
      local add_line, bump_line, inst_line = want[3 * it - 2], want[3 * it - 1], want[3 * it]
      assert.are.same({ add_line, "add.u32" }, { got[k][1], got[k][2]:match("^%S+") }, "iteration " .. it)
      assert.are.equal(bump_line, got[k + 1][1])
      assert.are.equal(bump_line, got[k + 2][1])
      assert.are.equal(inst_line, got[k + 3][1])
      k = k + 4
    end
  end)

  it("keeps each tcgen05.mma spelling apart in one trace and names the line of each", function()
    local lines = {}
    local text = trace(function()
      local d, idesc = reg.scalar(T.b32), reg.scalar(T.b32)
      local da, db = reg.scalar(T.b64), reg.scalar(T.b64)
      local p = reg.pred()
      for _ = 1, 100 do
        ptx.tcgen05.mma { d = d, a = da, b = db, idesc = idesc, enable_d = p }; lines[1] = H.here()
        ptx.tcgen05.mma { kind = "tf32", d = d, a = da, b = db, idesc = idesc, enable_d = p }; lines[2] = H.here()
        ptx.tcgen05.mma { collector = "fill", d = d, a = da, b = db, idesc = idesc, enable_d = p }; lines[3] = H.here()
        ptx.tcgen05.mma { d = d, a = d, b = db, idesc = idesc, enable_d = p, scale_d = 1 }; lines[4] = H.here()
      end
    end)
    local got = located(text)
    local want = {
      "tcgen05.mma.cta_group::1.kind::f16 [%r1], %rd1, %rd2, %r2, %p1;",
      "tcgen05.mma.cta_group::1.kind::tf32 [%r1], %rd1, %rd2, %r2, %p1;",
      "tcgen05.mma.cta_group::1.kind::f16.collector::a::fill [%r1], %rd1, %rd2, %r2, %p1;",
      "tcgen05.mma.cta_group::1.kind::f16 [%r1], [%r1], %rd2, %r2, %p1, 1;",
    }
    assert.are.equal(400 + 1, #got)
    for i = 1, 400 do
      local j = (i - 1) % 4 + 1
      assert.are.same({ lines[j], want[j] }, got[i], "instruction " .. i)
    end
  end)

  it("name the user's line in a tcgen05.mma error raised inside a hot loop", function()
    local line
    local ok, err = pcall(trace, function()
      local d, idesc = reg.scalar(T.b32), reg.scalar(T.b32)
      local da = reg.scalar(T.b64)
      for i = 1, 200 do
        local p = i < 200 and reg.pred() or nil
        line = H.here() + 1
        ptx.tcgen05.mma { d = d, a = da, b = da, idesc = idesc, enable_d = p }
      end
    end)
    assert.is_false(ok)
    assert.are.equal("spec/trace_lines_spec.lua:" .. line .. ": ptx.tcgen05.mma: needs enable_d "
      .. "(a predicate: false overwrites D, true accumulates)", err)
  end)

  it("keeps each TMA tensor-load spelling apart in one hot loop and names the line of each", function()
    local lines = {}
    for _, cta in ipairs { false, 2 } do
      local text = pyptx.kernel "k" { arch = "sm_100a", block = { 32 }, cluster = { 2, 1, 1 }, in_specs = { pyptx.Tile(64, 64, T.f32) },
        function(A)
          local s = pyptx.smem.alloc(T.f32, 1024, { align = 1024 })
          local bar = pyptx.smem.mbarrier(1)
          local c, mask = reg.scalar(T.u32, 0), reg.scalar(T.u16, 3)
          local d = A:tma_desc { box = { 8, 8 } }
          local cg = cta or nil
          for _ = 1, 100 do
            ptx.cp.async.bulk.tensor_2d { dst = s[0], src = d, coord = { c, c }, mbar = bar[0], cta_group = cg }; lines[1] = H.here()
            ptx.cp.async.bulk.tensor_2d { dst = s[0], src = d, coord = { c, c }, mbar = bar[0], multicast = mask }; lines[2] = H.here()
          end
          ptx.ret()
        end }:specialize({}).ptx
      local got = located(text)
      local plain = "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        .. (cta and ".cta_group::2" or "") .. " [k_smem], [%rd1, {%r1, %r1}], [k_smem+4096];"
      local multicast = "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
        .. " [k_smem], [%rd1, {%r1, %r1}], [k_smem+4096], %rs1;"
      local k = 1
      while not got[k][2]:match("^cp%.async") do k = k + 1 end   -- the setup (movs, the map's address)
      for i = 0, 199 do
        assert.are.same(i % 2 == 0 and { lines[1], plain } or { lines[2], multicast }, got[k + i], "copy " .. i)
      end
    end
  end)

  it("put every instruction of mbarrier.wait and X:tma_desc at the calling line, alternating in a hot loop", function()
    local lines = {}
    local text = pyptx.kernel "k" { arch = "sm_100a", block = { 128 }, in_specs = { pyptx.Tile(64, 64, T.bf16) },
      function(A)
        local bar = reg.scalar(T.u32, 0)
        for i = 1, 200 do                                   -- hot: the JIT compiles the loop
          ptx.mbarrier.wait(bar, i % 2); lines[1] = H.here()
          local _ = A:tma_desc { box = { 64, 64 } }; lines[2] = H.here()
        end
        ptx.ret()
      end }:specialize({}).ptx
    local got = located(text)
    local k = 2                                             -- after the mov of bar
    for i = 1, 200 do
      assert.are.same({ lines[1], "mbarrier.try_wait.parity.shared::cta.b64" }, { got[k][1], got[k][2]:match("^%S+") }, "wait " .. i)
      assert.are.same({ lines[1], "@!%p" .. i }, { got[k + 1][1], got[k + 1][2]:match("^%S+") }, "branch " .. i)
      assert.are.same({ lines[2], "mov.u64" }, { got[k + 2][1], got[k + 2][2]:match("^%S+") }, "map address " .. i)
      assert.are.same({ lines[2], "cvta.param.u64" }, { got[k + 3][1], got[k + 3][2]:match("^%S+") }, "cvta " .. i)
      k = k + 4
    end
  end)
end)
