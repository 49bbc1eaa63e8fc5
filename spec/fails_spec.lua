-- Every script in spec/fails/ breaks one validation rule. Its first line
-- says what must happen (`-- expect: <message>` for an error, `-- warn:
-- <message>` for a warning that still emits PTX) and the line that must be
-- named ends with `-- here`. Each runs as `luaptx ptx spec/fails/<name>.lua`.
local H = require "spec.helpers"

--- Run `luaptx ptx path`; returns stdout, stderr and the exit status.
local function ptx_of(path)
  return H.luaptx { "ptx", path }
end

--- The expectation of a script: kind ("expect"/"warn"), message, marked line.
local function expectation(path)
  local kind, text, here
  local n = 0
  for line in io.lines(path) do
    n = n + 1
    if n == 1 then kind, text = line:match("^%-%- (%a+): (.*)$") end
    if line:match("%-%- here%s*$") then here = n end
  end
  return kind, text, here
end

describe("spec/fails", function()
  local list = H.list("spec/fails", "%.lua$")

  it("holds a script per validation rule", function()
    assert.is_true(#list >= 20, "only " .. #list .. " scripts")
  end)

  for _, path in ipairs(list) do
    local kind, text, here = expectation(path)
    it(path .. " " .. (kind == "warn" and "warns" or "fails") .. " naming its line", function()
      assert.is_truthy(kind == "expect" or kind == "warn", path .. ": the first line must be -- expect: or -- warn:")
      assert.is_number(here, path .. ": no line is marked -- here")
      local out, err, rc = ptx_of(path)
      local want = path .. ":" .. here .. ": " .. (kind == "warn" and "warning: " or "") .. text
      assert.is_truthy(err:find(want, 1, true), "stderr lacks\n  " .. want .. "\ngot\n  " .. err)
      if kind == "expect" then
        assert.equal(1, rc)
        assert.equal("", out)
        assert.is_nil(err:find("stack traceback", 1, true))
      else
        assert.equal(0, rc, err)
        assert.matches("%.entry", out)
      end
    end)
  end

  it("emits the unknown raw opcode unchecked", function()
    local out = ptx_of("spec/fails/raw_unknown_opcode.lua")
    assert.matches("\tfrobnicate%.sync%.b32 \t%%r1, %%r1, 4294967295;", out)
  end)
end)
