--- Environment variables are parsed strictly: a bad value is an error
-- naming the variable, the value and what is valid (pyptx.core.env and the C
-- side, src/lpx_env.c, through the emulator's variables).
local ffi = require "ffi"
local env = require "pyptx.core.env"
local runtime = require "pyptx.runtime"
local kernel = require "pyptx.kernel"
local core = require "pyptx.core"
local H = require "spec.helpers"

pcall(ffi.cdef, "int setenv(const char *, const char *, int);")
pcall(ffi.cdef, "int unsetenv(const char *);")

--- Run fn with the variable set to value (nil: unset), restoring it after.
local function with_env(name, value, fn)
  local old = os.getenv(name)
  if value then ffi.C.setenv(name, value, 1) else ffi.C.unsetenv(name) end
  local ok, err = pcall(fn)
  if old then ffi.C.setenv(name, old, 1) else ffi.C.unsetenv(name) end
  if not ok then error(err, 0) end
end

--- The error fn raises (as text), or nil.
local function err_of(fn, ...)
  local ok, err = pcall(fn, ...)
  return not ok and tostring(err) or nil
end

describe("pyptx.core.env", function()
  it("reads choices, integers (also 1e6) and switches, defaults when unset or empty", function()
    with_env("LPX_SPEC", nil, function()
      assert.equal("auto", env.choice("LPX_SPEC", { "auto", "emu" }, "auto"))
      assert.equal(5, env.int("LPX_SPEC", 1, 10, "a test", 5))
      assert.is_false(env.flag("LPX_SPEC", false))
    end)
    with_env("LPX_SPEC", "", function() assert.equal(5, env.int("LPX_SPEC", 1, 10, "a test", 5)) end)
    with_env("LPX_SPEC", "1e6", function() assert.equal(1000000, env.int("LPX_SPEC", 1, 2 ^ 53, "a test")) end)
    with_env("LPX_SPEC", "emu", function() assert.equal("emu", env.choice("LPX_SPEC", { "auto", "emu" })) end)
    with_env("LPX_SPEC", "1", function() assert.is_true(env.flag("LPX_SPEC", false)) end)
  end)

  it("refuses a bad value naming the variable, the value and what is valid", function()
    for value, why in pairs { ["1.5"] = "not an integer", ["12abc"] = "not an integer", ["0x10"] = "not an integer",
                              ["11"] = "out of range", ["1e30"] = "out of range" } do
      with_env("LPX_SPEC", value, function()
        assert.equal(("LPX_SPEC=%s: %s; valid: an integer in 1..10 (a test)"):format(value, why),
          err_of(env.int, "LPX_SPEC", 1, 10, "a test"))
      end)
    end
    with_env("LPX_SPEC", "gpu", function()
      assert.equal("LPX_SPEC=gpu: valid values are auto, emu", err_of(env.choice, "LPX_SPEC", { "auto", "emu" }))
    end)
    with_env("LPX_SPEC", "yes", function()
      assert.equal("LPX_SPEC=yes: valid: 0 (off) or 1 (on)", err_of(env.flag, "LPX_SPEC"))
    end)
  end)
end)

describe("luaptx's environment variables", function()
  it("LUAPTX_EMU_BUDGET=1e6 is a million warp-instructions, not 1", function()
    with_env("LUAPTX_EMU_BUDGET", "1e6", function()
      local dev = runtime.open("emu")
      local v = ffi.new("int64_t[1]")
      assert.equal(0, core.device_get_option(dev.handle, "budget", v))
      assert.equal(1000000, tonumber(v[0]))
    end)
  end)

  it("refuses LUAPTX_EMU_THREADS and LUAPTX_EMU_BUDGET values out of range or not integers", function()
    with_env("LUAPTX_EMU_THREADS", "99999999999", function()
      assert.equal("LUAPTX_EMU_THREADS=99999999999: out of range; valid: an integer in 0..256 "
        .. "(host threads running CTAs, 0 for one per usable CPU)", err_of(runtime.open, "emu"))
    end)
    with_env("LUAPTX_EMU_BUDGET", "1.5", function()
      assert.matches("^LUAPTX_EMU_BUDGET=1.5: not an integer; valid: an integer in 1..9223372036854775807",
        err_of(runtime.open, "emu"))
    end)
  end)

  it("refuses an unknown LUAPTX_DEVICE without naming luaptx's own files", function()
    local saved = runtime.device()
    runtime.use(nil)
    with_env("LUAPTX_DEVICE", "gpu", function()
      assert.equal("LUAPTX_DEVICE=gpu: valid values are auto, emu, cuda", err_of(runtime.device))
    end)
    runtime.use(saved)
  end)

  it("refuses an LUAPTX_ARCH that is not an arch", function()
    for _, bad in ipairs { "sm_9x", "sm_999" } do   -- sm_999 has the form of an arch, yet no such target exists
      with_env("LUAPTX_ARCH", bad, function()
        assert.matches("^LUAPTX_ARCH=" .. bad .. ": unknown arch '" .. bad .. "'; valid: sm_50 sm_52 .* sm_90a ",
          err_of(kernel.auto_arch))
      end)
    end
    with_env("LUAPTX_ARCH", "sm_80", function() assert.equal("sm_80", kernel.auto_arch()) end)
  end)
end)

describe("docs/cli.md's environment table", function()
  it("names every variable the C core, the Lua modules and bin/ read", function()
    local doc = assert(H.read("docs/cli.md")):match("## Environment(.*)")
    local sources = {}
    for _, dir in ipairs { "src", "lua/pyptx", "bin" } do
      for _, f in ipairs(H.find(dir, "%.[cl]u?a?$")) do sources[#sources + 1] = f end
    end
    assert.is_true(#sources > 60, "found only " .. #sources .. " source files")
    local seen = {}
    for _, path in ipairs(sources) do
      local text = assert(H.read(path))
      for name in text:gmatch('getenv%("([%w_]+)"%)') do seen[name] = path end
      for name in text:gmatch('"(LUAPTX_[%u_]+)"') do seen[name] = path end
      for name in text:gmatch('env%.%a+%("([%u_]+)"') do seen[name] = path end
    end
    local n = 0
    for name, path in pairs(seen) do
      n = n + 1
      assert.truthy(doc:find("`" .. name .. "`", 1, true), name .. " (read in " .. path .. ") is not in the table")
    end
    assert.is_true(n >= 12, "found only " .. n .. " variables")
  end)
end)
