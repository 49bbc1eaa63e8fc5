--- Launching: grid and block sizes the hardware cannot run are refused
-- before launch, at the line that launches, instead of wrapping (2^32 in
-- a 32-bit grid field is 0).
local pyptx = require "pyptx"
local runtime = require "pyptx.runtime"
local H = require "spec.helpers"
local tensor = require "pyptx.runtime.tensor"
local kernel, ptx, Tile, T = pyptx.kernel, pyptx.ptx, pyptx.Tile, pyptx.types

--- The current line of the caller.
local function here() return debug.getinfo(2, "l").currentline end

--- A kernel that only returns, with a grid of the template value G and a block.
local function noop(block)
  return kernel "noop" {
    arch = "sm_80", in_specs = { Tile(1, T.f32) }, out_specs = { Tile(1, T.f32) },
    grid = function(v) return { v.GX or 1, v.GY or 1, v.GZ or 1 } end, block = block or { 32 },
    params = { GX = 1, GY = 1, GZ = 1 },
    function() ptx.ret() end,
  }
end

describe("launching", function()
  local dev = H.emu()
  runtime.use(dev)
  local x = tensor.from_table({ 1 }, T.f32)
  local GRID = "valid: x in 1..2147483647 (2^31-1), y and z in 1..65535"

  it("refuses a grid of 2^32 in x (it would wrap to 0) at the launching line", function()
    local line
    local ok, err = pcall(function() line = here(); noop()(x, { GX = 2 ^ 32 }) end)
    assert.is_false(ok)
    assert.equal(("runtime_spec.lua:%d: kernel \"noop\": grid (4294967296, 1, 1) is out of range; %s"):format(line, GRID),
      tostring(err):match("[^/]*$"))
  end)

  it("refuses grid x above 2^31-1 and y or z above 65535, and accepts the limits", function()
    for _, g in ipairs { { GX = 2 ^ 31 }, { GY = 65536 }, { GZ = 65536 } } do
      local ok, err = pcall(noop(), x, g)
      assert.is_false(ok)
      assert.matches("kernel \"noop\": grid %(%d+, %d+, %d+%) is out of range; valid: x in 1..2147483647", tostring(err))
    end
    assert.is_true(tensor.is(noop()(x, { GX = 3, GY = 65535, GZ = 1 })))
  end)

  it("refuses blocks out of range at the launching line", function()
    for _, b in ipairs { { { 2048 }, "block %(2048, 1, 1%) is out of range" }, { { 1, 1, 65 }, "block %(1, 1, 65%) is out of range" },
                         { { 32, 32, 2 }, "block %(32, 32, 2%) has 2048 threads; valid: at most 1024 threads in all" } } do
      local line
      local ok, err = pcall(function() line = here(); noop(b[1])(x) end)
      assert.is_false(ok)
      assert.matches("runtime_spec.lua:" .. line .. ": kernel \"noop\": " .. b[2], tostring(err))
    end
  end)

  it("refuses them in runtime.prepare too, at its caller's line", function()
    local line
    local ok, err = pcall(function() line = here(); runtime.prepare(noop(), x, { GY = 70000 }) end)
    assert.is_false(ok)
    assert.matches("runtime_spec.lua:" .. line .. ": kernel \"noop\": grid %(1, 70000, 1%) is out of range", tostring(err))
  end)

  it("reports wrong inputs at the launching line", function()
    local line
    local ok, err = pcall(function() line = here(); noop()(tensor.from_table({ 1 }, T.f64)) end)
    assert.is_false(ok)
    assert.matches("runtime_spec.lua:" .. line .. ": kernel \"noop\": input 1 is f64 but in_specs%[1%] is", tostring(err))
    ok, err = pcall(function() line = here(); noop()() end)
    assert.is_false(ok)
    assert.matches("runtime_spec.lua:" .. line .. ": kernel \"noop\" takes 1 input tensor%(s%) %(its in_specs%), got 0", tostring(err))
  end)

  it("names what it checks in dims_error (for other launchers)", function()
    assert.is_nil(runtime.dims_error("k", { 2 ^ 31 - 1, 65535, 65535 }, { 1024, 1, 1 }))
    assert.matches("^k: grid %(0, 1, 1%) is out of range", runtime.dims_error("k", { 0, 1, 1 }, { 1, 1, 1 }))
    assert.matches("^k: grid %(1.5, 1, 1%) is out of range", runtime.dims_error("k", { 1.5, 1, 1 }, { 1, 1, 1 }))
  end)
end)
