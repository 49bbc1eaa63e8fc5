-- docs/emulator-coverage.md against the ISA table and the emulator, and the
-- LUAPTX_EMU_COVERAGE records the page is made from.
local H = require "spec.helpers"
local coverage = require "spec.emu_coverage"

--- The page's text.
local function page()
  return assert(H.read("docs/emulator-coverage.md"), "docs/emulator-coverage.md is missing: run make emulator-coverage")
end

--- The page's table rows: { name, emulated, forms, specs, checked } in order.
local function page_rows()
  local rows = {}
  for name, emu, forms, specs, checked in page():gmatch("\n| `([^`]+)` | (%a+) | (%d+) | ([^|\n]+) | ([^|\n]+) |") do
    rows[#rows + 1] = { name = name, emulated = emu == "yes", forms = tonumber(forms), specs = specs, checked = checked }
  end
  return rows
end

--- A comma-separated list of the page as a set ("—" is none).
local function set_of(list)
  local out = {}
  for x in list:gmatch("[^, ]+") do if x ~= "—" then out[x] = true end end
  return out
end

describe("docs/emulator-coverage.md", function()
  it("lists every row of the ISA table, in order, as the emulator sees it", function()
    local want, got = coverage.rows(), page_rows()
    local stale = "docs/emulator-coverage.md is stale: run make emulator-coverage"
    assert.equal(#want, #got, stale)
    for i, r in ipairs(want) do
      assert.equal(r.name, got[i].name, stale)
      assert.equal(r.emulated, got[i].emulated, stale .. " (" .. r.name .. ")")
    end
  end)

  it("names as checked by an oracle exactly the tests of a row whose header declares one", function()
    local oracles, stale = coverage.oracles(coverage.spec_files()), "docs/emulator-coverage.md is stale: run make emulator-coverage"
    assert.is_truthy(oracles.diff_scalar and oracles.diff, "the nvcc differentials declare their oracles")
    for _, r in ipairs(page_rows()) do
      local want = coverage.checked(set_of(r.specs), oracles)
      assert.equal(#want > 0 and table.concat(want, ", ") or "—", (r.checked:gsub("%s+$", "")), stale .. " (" .. r.name .. ")")
    end
    local listed = {}
    for base, what in page():gmatch("\n%- `([%w_]+)`: ([^\n]+)") do
      if oracles[base] ~= nil or not what:match("^`") then listed[base] = what end
    end
    assert.same(oracles, listed, stale)
  end)

  it("shows no emulated row without a spec that runs it", function()
    local untested = {}
    for _, r in ipairs(page_rows()) do
      if r.emulated and (r.forms == 0 or r.specs == "—") then untested[#untested + 1] = r.name end
    end
    assert.same({}, untested)
  end)
end)

describe("LUAPTX_EMU_COVERAGE", function()
  local script = [[
    local pyptx = require "pyptx"
    local runtime = require "pyptx.runtime"
    local u32 = pyptx.types.u32
    local k = pyptx.kernel "cov" { out_specs = { pyptx.Tile(32, u32) }, block = { 32 },
      function(O)
        local po = pyptx.ptx.global_ptrs(O)
        local t = pyptx.reg.from(pyptx.ptx.special.tid.x(), u32)
        pyptx.ptx.st.global(pyptx.ptx.addr(po + t:mul_wide(4)), t:bxor(5))
        pyptx.ptx.ret()
      end }
    runtime.use(runtime.open("emu"))
    local out = k()
    print(out:totable()[3])
  ]]

  it("appends the distinct forms of each program the emulator decodes", function()
    local path = H.temp_dir() .. "/cov.txt"
    local out, err, status = H.luaptx({ "-e", script }, { env = { LUAPTX_EMU_COVERAGE = path } })
    assert.equal(0, status, err)
    assert.equal("7\n", out)
    local rec = assert(H.read(path))
    assert.matches("\nxor\txor.b32\n", "\n" .. rec, 1, true)
    assert.matches("\nst\tst.global.u32\n", "\n" .. rec, 1, true)
    local lines = {}
    for line in rec:gmatch("[^\n]+") do
      assert.is_nil(lines[line], "repeated: " .. line)
      lines[line] = true
    end
  end)

  it("refuses a path that is not a regular file of the user's", function()
    local dir = H.temp_dir()
    local _, err, status = H.luaptx({ "-e", script }, { env = { LUAPTX_EMU_COVERAGE = dir } })
    assert.is_not.equal(0, status)
    assert.matches("LUAPTX_EMU_COVERAGE=" .. dir .. ": cannot append to it", err, 1, true)
    assert.matches("valid: a path to a regular file of yours, or unset", err, 1, true)
  end)
end)
