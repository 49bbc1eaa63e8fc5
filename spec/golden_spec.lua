-- Golden PTX: each kernel script spec/fixtures/<name>.lua must trace to
-- exactly the bytes in spec/fixtures/<name>.ptx, and each golden must
-- assemble with ptxas for its target (with and without -lineinfo).
--
-- To regenerate after an intended change of the emitted PTX, run from the
-- repository root:
--   LUAPTX_UPDATE_GOLDEN=1 ./build/luaptx /usr/bin/busted spec/golden_spec.lua
-- then review `git diff spec/fixtures/*.ptx`.
local H = require "spec.helpers"

local NAMES = { "vec_add", "warp_sum", "smem_rows", "histogram", "half_convert", "cluster_flags" }
local UPDATE = os.getenv("LUAPTX_UPDATE_GOLDEN") == "1"

--- Load a fixture script afresh and trace its kernel.
local function trace(name)
  local chunk = assert(loadfile("spec/fixtures/" .. name .. ".lua"))
  return chunk():ptx()
end

local read = H.read

describe("golden PTX", function()
  for _, name in ipairs(NAMES) do
    local golden_path = "spec/fixtures/" .. name .. ".ptx"

    it(name .. " traces to its golden byte for byte", function()
      local text = trace(name)
      if UPDATE then
        local f = assert(io.open(golden_path, "wb"))
        f:write(text)
        f:close()
        pending("rewrote " .. golden_path)
        return
      end
      local golden = read(golden_path)
      assert.is_string(golden, golden_path .. " is missing; create it with LUAPTX_UPDATE_GOLDEN=1 (see the top of this file)")
      assert.equal(golden, text)
    end)

    it(name .. " traces to the same bytes every time", function()
      local a, b = trace(name), trace(name)
      assert.equal(a, b)
    end)

    it(name .. " assembles with ptxas for its target, with and without -lineinfo", function()
      local golden = read(golden_path) or trace(name)
      local arch = golden:match("\n%.target ([%w_]+)")
      assert.is_string(arch)
      local report = H.assert_ptxas(golden, arch)
      assert.is_table(report[name])
      H.assert_ptxas(golden, arch, { lineinfo = false })
    end)
  end

  it("carries .loc lines that point into the fixture script", function()
    local golden = read("spec/fixtures/vec_add.ptx") or trace("vec_add")
    assert.matches('\t%.file\t1 "spec/fixtures/vec_add%.lua"\n', golden)
    local n = 0
    for file, line in golden:gmatch("\t%.loc\t(%d+) (%d+) 1\n") do
      assert.equal("1", file)
      assert.is_true(tonumber(line) >= 10 and tonumber(line) <= 24)
      n = n + 1
    end
    assert.is_true(n >= 8)
  end)
end)
