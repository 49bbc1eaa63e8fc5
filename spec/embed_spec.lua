--- The C API's Lua half (pyptx.runtime.embed): a kernel of arch "auto" is
-- built for the state's own device, which becomes the state's current
-- device, rather than for a default device opened on the side; launch
-- plans record where the addresses go.
local ffi = require "ffi"
local runtime = require "pyptx.runtime"
local embed = require "pyptx.runtime.embed"

local AUTO_SRC = [[
local p = require "pyptx"
return p.kernel "k" { arch = "auto", in_specs = { p.Tile("N", p.types.f32) }, out_specs = { p.Tile("N", p.types.f32) },
  function() p.ptx.ret() end }
]]

--- An embed context on the emulator with the "auto" kernel loaded, and its entry.
local function auto_entry(kind)
  local ctx = embed.open(kind or "emu", "", "", true)
  embed.load_string(ctx, AUTO_SRC, "=auto.lua")
  return ctx, embed.kernel_get(ctx, "k", "N=4")
end

describe("embed", function()
  local before
  before_each(function() before = runtime.device(); runtime.use(nil) end)
  after_each(function() runtime.use(before) end)

  it("builds an arch auto kernel for the state's device, made current", function()
    local ctx, entry = auto_entry()
    local text = embed.kernel_ptx(ctx, entry)
    assert.truthy(ctx.device, "the state's device was opened for the arch")
    assert.equal(ctx.device, runtime.device())
    assert.truthy(text:find(".target " .. (ctx.device.arch or "sm_90a"), 1, true))
  end)

  it("tells a C caller to bind a dimension through luaptx_kernel_get's params, not k:ptx{}", function()
    local ctx = embed.open("emu", "", "", true)
    embed.load_string(ctx, AUTO_SRC, "=auto.lua")
    local entry = embed.kernel_get(ctx, "k", "")
    for _, call in ipairs {
      function() return embed.kernel_ptx(ctx, entry) end,
      function() return embed.launch_ptrs(ctx, entry, ffi.new("uint64_t[2]", 4096, 8192), 2, nil) end,
    } do
      local ok, err = pcall(call)
      assert.is_false(ok)
      assert.matches("dimension N of in spec 1 is not bound; pass it in luaptx_kernel_get's params, e.g. \"N=1024\"", err, 1, true)
      assert.is_nil(err:find("k:ptx", 1, true))
    end
  end)

  it("refuses a NULL script path with a message, not an internal line", function()
    local ctx = embed.open("emu", "", "", true)
    local ok, err = pcall(embed.load_file, ctx, nil)
    assert.is_false(ok)
    assert.equal("load_file: the script path is NULL; give a file name", err)
  end)

  it("still gives the PTX of an arch auto kernel when the state's device cannot open", function()
    local ctx, entry = auto_entry("cuda")
    local text = embed.kernel_ptx(ctx, entry)
    assert.truthy(text:find(".entry k(", 1, true) and text:find(".target sm_", 1, true))
  end)

  it("plans a launch: tensor addresses first, at 8-byte steps", function()
    local ctx, entry = auto_entry()
    local bound = ffi.new("int64_t[?]", ffi.C.LPX_BIND_SYMS, -1)
    bound[0] = 4   -- N, the kernel's first symbol, as lpx_bind_check binds it
    local plan = ffi.new("lpx_embed_plan")
    local buf = embed.plan_dlpack(ctx, entry, bound, 2, plan, ffi.sizeof(plan))
    assert.equal(1, plan.staged)
    assert.equal(2, plan.ntensors)
    assert.equal(0, tonumber(plan.tensor_offset[0]))
    assert.equal(8, tonumber(plan.tensor_offset[1]))
    assert.equal(0, plan.nmaps)
    assert.truthy(buf ~= nil and tonumber(plan.params_size) >= 16)
    assert.has_error(function() embed.plan_dlpack(ctx, entry, bound, 2, plan, 8) end,
      "luaptx: lpx_embed_plan is 8 bytes in C but " .. ffi.sizeof(plan) .. " in Lua (a build mismatch)")
  end)
end)
