-- mbarrier: the state spaces each operation takes (lpx_isa.def
-- LPX_MBAR_SPACES, checked by the validator) against ptxas for sm_90a, and
-- .noComplete arrivals on the emulator: they count, and one that would
-- complete the phase (undefined in the PTX ISA) is reported at its line.
local pyptx = require "pyptx"
local trace = require "pyptx.trace"
local H = require "spec.helpers"
local kernel, reg, ptx, smem, Tile = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.smem, pyptx.Tile
local T = pyptx.types
local u32, b64 = T.u32, T.b64

-- Every space word PTX spells, and none (a generic address).
local SPACES = { "", "shared", "shared::cta", "shared::cluster", "global", "local", "const", "param", "generic" }

-- Operand lists of the mbarrier forms, from the barrier's address.
local OPERANDS = {
  bar = function(a) return a end,
  bar_n = function(a) return a, 16 end,
  st_bar = function(a) return reg.scalar(b64, 0), a end,
  sink_bar = function(a) return ptx.sink, a end,
  st_bar_n = function(a) return reg.scalar(b64, 0), a, 1 end,
  sink_bar_n = function(a) return ptx.sink, a, 1 end,
  wait_state = function(a) return reg.pred(), a, reg.scalar(b64, 0) end,
  wait_parity = function(a) return reg.pred(), a, 0 end,
  count_state = function() return reg.scalar(u32), reg.scalar(b64, 0) end,
}

-- The forms: each operation word with the operand lists PTX writes it with
-- (and a few it does not), in every space.
local FORMS = {
  { "init", "bar_n" }, { "inval", "bar" }, { "expect_tx", "bar_n" }, { "complete_tx", "bar_n" },
  { "arrive", "st_bar" }, { "arrive", "sink_bar" }, { "arrive", "st_bar_n" }, { "arrive", "sink_bar_n" },
  { "arrive_drop", "st_bar" }, { "arrive_drop", "sink_bar" },
  { "arrive.expect_tx", "st_bar_n" }, { "arrive.expect_tx", "sink_bar_n" },
  { "arrive.noComplete", "st_bar_n" }, { "arrive.noComplete", "sink_bar_n" }, { "arrive.noComplete", "st_bar" },
  { "arrive_drop.noComplete", "st_bar_n" }, { "arrive.noComplete.expect_tx", "st_bar_n" },
  { "init.noComplete", "bar_n" }, { "test_wait.noComplete", "wait_parity" },
  { "test_wait", "wait_state" }, { "test_wait.parity", "wait_parity" },
  { "try_wait", "wait_state" }, { "try_wait.parity", "wait_parity" },
  { "pending_count", "count_state" },
}

--- Every case: { opcode, operand list }.
local function cases()
  local out = {}
  for _, f in ipairs(FORMS) do
    for _, sp in ipairs(SPACES) do
      out[#out + 1] = { "mbarrier." .. f[1] .. (sp ~= "" and "." .. sp or "") .. ".b64", f[2], sp }
    end
  end
  return out
end

--- The barrier address of a case: a 32-bit shared address for a shared
-- space word, else a 64-bit register (generic and the other spaces).
local function address(sp)
  if sp:match("^shared") then return ptx.addr(reg.scalar(u32, 0)) end
  return ptx.addr(reg.scalar(T.u64, 0))
end

--- A kernel of the cases, emitted through the validator (checked) or
-- unchecked (an unknown opcode, renamed in the text afterwards).
local function cases_kernel(list, checked)
  return kernel "mb" { arch = "sm_90a", version = "8.0", function()
    for _, c in ipairs(list) do
      local args = { OPERANDS[c[2]](address(c[3])) }
      if checked then
        ptx.inst(c[1], unpack(args, 1, table.maxn(args)))
      else
        trace.emit(trace.form("zz__." .. c[1], false), unpack(args, 1, table.maxn(args)))
      end
    end
    ptx.ret()
  end }
end

--- Does the validator accept a case (traced alone)? Also its message.
local function validator_accepts(c)
  local ok, err = pcall(function() return cases_kernel({ c }, true):ptx() end)
  return ok, err
end

--- Run fn with stderr discarded (the unchecked path warns).
local function quietly(fn)
  local saved = io.stderr
  rawset(io, "stderr", { write = function(self) return self end })
  local ok, res = pcall(fn)
  rawset(io, "stderr", saved)
  assert(ok, res)
  return res
end

describe("mbarrier state spaces", function()
  it("refuses mbarrier.arrive.global.b64 at the caller's line, naming the spaces it takes", function()
    local line
    local ok, err = pcall(function()
      return kernel "g" { arch = "sm_90a", function()
        line = H.here(); ptx.inst("mbarrier.arrive.global.b64", reg.scalar(b64), ptx.addr(reg.scalar(T.u64, 0)))
      end }:ptx()
    end)
    assert.is_false(ok)
    assert.are.equal("spec/mbarrier_spec.lua:" .. line .. ": mbarrier.arrive.global.b64: mbarrier.arrive takes .shared, "
      .. ".shared::cta or .shared::cluster (or no space: a generic address), not .global", err)
  end)

  it("refuses the space words, .noComplete uses and results each operation does not take", function()
    local want = {
      ["mbarrier.init.shared::cluster.b64"] = "mbarrier.init takes .shared or .shared::cta (or no space: a generic address), "
        .. "not .shared::cluster",
      ["mbarrier.try_wait.parity.shared::cluster.b64"] = "mbarrier.try_wait takes .shared or .shared::cta",
      ["mbarrier.expect_tx.local.b64"] = "mbarrier.expect_tx takes .shared, .shared::cta or .shared::cluster",
      ["mbarrier.pending_count.shared.b64"] = "mbarrier.pending_count takes no state space",
      ["mbarrier.arrive.noComplete.shared::cluster.b64"] = "mbarrier.arrive.noComplete takes .shared or .shared::cta",
      ["mbarrier.init.noComplete.shared.b64"] = ".noComplete goes with mbarrier.arrive and mbarrier.arrive_drop only",
      ["mbarrier.arrive.noComplete.expect_tx.shared.b64"] = ".noComplete does not combine with .expect_tx",
    }
    local seen = 0
    for _, c in ipairs(cases()) do
      local msg = want[c[1]]
      if msg and c[2] ~= "sink_bar_n" then
        local ok, err = validator_accepts(c)
        assert.is_false(ok, c[1])
        assert.matches("^spec/mbarrier_spec.lua:%d+: " .. c[1]:gsub("%p", "%%%0") .. ": ", err)
        assert.truthy(err:find(msg, 1, true), err)
        seen = seen + 1
      end
    end
    assert.is_true(seen >= #FORMS / 4)
    local ok, err = validator_accepts { "mbarrier.arrive.noComplete.shared.b64", "st_bar", "shared" }
    assert.is_false(ok)
    assert.truthy(err:find(".noComplete needs the count operand (state, [addr], count)", 1, true), err)
    ok, err = validator_accepts { "mbarrier.arrive.shared::cluster.b64", "st_bar", "shared::cluster" }
    assert.is_false(ok)
    assert.truthy(err:find("returns no state; its destination is the sink _", 1, true), err)
  end)

  it("agrees with ptxas for sm_90a on every operation in every space", function()
    local list, verdict, accepted = cases(), {}, 0
    for i, c in ipairs(list) do
      verdict[i] = validator_accepts(c)
      if verdict[i] then accepted = accepted + 1 end
    end
    assert.is_true(accepted > 20 and accepted < #list - 20, "accepted " .. accepted .. " of " .. #list)
    -- one unchecked file: ptxas reports every refused line
    local text = quietly(function() return cases_kernel(list, false):ptx() end):gsub("zz__%.", "")
    local lines, n = {}, 0
    for line in (text .. "\n"):gmatch("([^\n]*)\n") do
      n = n + 1
      if line:match("^%s*mbarrier%.") then lines[#lines + 1] = n end
    end
    assert.are.equal(#list, #lines)
    local ok, _, log = H.ptxas(text, "sm_90a")
    assert.is_false(ok)
    local refused = {}
    for num in log:gmatch("line (%d+); error") do refused[tonumber(num)] = true end
    local wrong = {}
    for i, c in ipairs(list) do
      local ptxas_ok = not refused[lines[i]]
      if ptxas_ok ~= verdict[i] then
        wrong[#wrong + 1] = ("%s (%s): validator %s, ptxas %s"):format(c[1], c[2], verdict[i] and "accepts" or "refuses",
          ptxas_ok and "accepts" or "refuses")
      end
    end
    assert.are.same({}, wrong)
    -- and the accepted forms alone assemble
    local good = {}
    for i, c in ipairs(list) do if verdict[i] then good[#good + 1] = c end end
    H.assert_ptxas(cases_kernel(good, true), "sm_90a")
  end)
end)

describe("mbarrier.arrive.noComplete on the emulator", function()
  --- A kernel where thread 0 inits a barrier for 3 arrivals, arrives with
  -- .noComplete (count nc), then arrives plainly `plain` times; out gets the
  -- pending count after the .noComplete arrival and whether phase 0 completed.
  local function nc_kernel(nc, plain, lines)
    return kernel "nc" { arch = "sm_90a", out_specs = { Tile(2, u32) }, block = { 32 },
      function(Out)
        local bar = smem.mbarrier(1)
        local po = ptx.global_ptrs(Out)
        ptx.if_(reg.from(ptx.special.tid.x(), u32):eq(0), function()
          ptx.mbarrier.init(bar[0], 3)
          local st = reg.scalar(b64)
          lines.nc = H.here(); ptx.inst("mbarrier.arrive.noComplete.shared::cta.b64", st, bar[0], nc)
          local st2 = reg.scalar(b64)
          ptx.inst("mbarrier.arrive.shared::cta.b64", st2, bar[0])
          ptx.inst.st.global.u32(ptx.addr(po), ptx.mbarrier.pending_count(st2))
          for _ = 2, plain do ptx.mbarrier.arrive(bar[0]) end
          local done = ptx.mbarrier.test_wait(bar[0], 0)
          local r = reg.scalar(u32)
          ptx.inst.selp.u32(r, 1, 0, done)
          ptx.inst.st.global.u32(ptx.addr(po, 4), r)
        end)
        ptx.ret()
      end }
  end

  it("counts its arrivals without completing the phase; a plain arrival completes it", function()
    local out = nc_kernel(2, 1, {})():values()
    assert.are.same({ 1, 1 }, out)                 -- 3 - 2 pending before the last arrival; then complete
    out = nc_kernel(1, 1, {})():values()
    assert.are.same({ 2, 0 }, out)                 -- one arrival still missing: not complete
  end)

  it("reports a .noComplete arrival that would complete the phase, at its line", function()
    local lines = {}
    local ok, err = pcall(nc_kernel(3, 1, lines))
    assert.is_false(ok)
    assert.truthy(err:find("mbarrier_spec.lua:" .. lines.nc .. ":", 1, true), err)
    assert.truthy(err:find("would complete the phase; the PTX ISA leaves that undefined", 1, true), err)
  end)
end)
