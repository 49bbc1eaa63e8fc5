-- Every script in spec/fails/ breaks one validation rule. Its first line
-- says what must happen (`-- expect: <message>` for an error, `-- warn:
-- <message>` for a warning that still emits PTX) and the line that must be
-- named ends with `-- here`. Each runs as `luaptx ptx spec/fails/<name>.lua`.
local BIN = os.getenv("LUAPTX_BIN") or "./build/luaptx"

--- Run a shell command; returns stdout, stderr and the exit status.
local function run(cmd)
  local err_path = os.tmpname()
  local p = io.popen(cmd .. " 2>" .. err_path .. "; echo \"__rc=$?\"")
  local out = p:read("*a")
  p:close()
  local f = io.open(err_path, "rb")
  local err = f and f:read("*a") or ""
  if f then f:close() end
  os.remove(err_path)
  local rc = tonumber(out:match("__rc=(%d+)%s*$"))
  return (out:gsub("__rc=%d+%s*$", "")), err, rc
end

--- The scripts in spec/fails/, sorted.
local function scripts()
  local list = {}
  local p = io.popen("ls spec/fails/*.lua 2>/dev/null")
  for path in p:lines() do list[#list + 1] = path end
  p:close()
  table.sort(list)
  return list
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
  local list = scripts()

  it("holds a script per validation rule", function()
    assert.is_true(#list >= 20, "only " .. #list .. " scripts")
  end)

  for _, path in ipairs(list) do
    local kind, text, here = expectation(path)
    it(path .. " " .. (kind == "warn" and "warns" or "fails") .. " naming its line", function()
      assert.is_truthy(kind == "expect" or kind == "warn", path .. ": the first line must be -- expect: or -- warn:")
      assert.is_number(here, path .. ": no line is marked -- here")
      local out, err, rc = run(BIN .. " ptx " .. path)
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
    local out = run(BIN .. " ptx spec/fails/raw_unknown_opcode.lua")
    assert.matches("\tfrobnicate%.sync%.b32 \t%%r1, %%r1, 4294967295;", out)
  end)
end)
