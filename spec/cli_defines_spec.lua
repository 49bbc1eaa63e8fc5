-- luaptx ptx/check/compile/sass/profile -D NAME=VALUE (docs/cli.md): the
-- command line binds template values and symbolic dims, checked against
-- what the script's kernels take.
local H = require "spec.helpers"
local script_mod = require "pyptx.runtime.script"

local RMS = "examples/python/rms_norm.lua"

--- The PTX the kernel named name of a script traces with values, in this process.
local function ptx_in_process(path, name, values)
  local script = script_mod.load_file(path, {})
  for _, e in ipairs(script_mod.entries(script)) do
    if e.kernel.name == name then return e.kernel:ptx(values) end
  end
  error("no kernel " .. name)
end

describe("luaptx -D NAME=VALUE", function()
  it("binds a script's symbolic dims, as k:ptx{...} does", function()
    local out, err, rc = H.luaptx { "ptx", RMS, "--kernel", "rms_norm_fwd", "-D", "B=4", "-D", "N=64" }
    assert.equal(0, rc, err)
    assert.equal(ptx_in_process(RMS, "rms_norm_fwd", { B = 4, N = 64 }), out)
    local other = H.luaptx { "ptx", RMS, "--kernel", "rms_norm_fwd", "-DB=4", "-DN=128" }
    assert.equal(ptx_in_process(RMS, "rms_norm_fwd", { B = 4, N = 128 }), other)
    assert.are_not.equal(out, other)
  end)

  it("binds a template value over its default", function()
    local out, err, rc = H.luaptx { "ptx", RMS, "--kernel", "rms_norm_fwd", "-D", "B=4", "-D", "N=64", "-D", "eps=0.5" }
    assert.equal(0, rc, err)
    assert.equal(ptx_in_process(RMS, "rms_norm_fwd", { B = 4, N = 64, eps = 0.5 }), out)
    assert.are_not.equal(ptx_in_process(RMS, "rms_norm_fwd", { B = 4, N = 64 }), out)
  end)

  it("says how to bind an unbound dim from the command line", function()
    local out, err, rc = H.luaptx { "ptx", RMS, "-D", "B=4" }
    assert.equal(1, rc)
    assert.equal("", out)
    assert.matches("dimension N of in spec 1 is not bound; pass it, e.g. k:ptx{N = 1024} (luaptx ptx/check/sass/compile/profile: -D N=1024)", err, 1, true)
  end)

  it("refuses a name no kernel takes, listing those they take", function()
    local out, err, rc = H.luaptx { "ptx", RMS, "-D", "Q=4" }
    assert.equal(1, rc)
    assert.equal("", out)
    assert.equal("luaptx: " .. RMS .. ": -D Q=4: no kernel of the script takes Q; valid: B, N, eps (template values and symbolic dims)\n", err)
  end)

  it("refuses a value of the wrong kind, a repeated name and a text without =", function()
    local _, err, rc = H.luaptx { "ptx", RMS, "-D", "N=64", "-D", "B=2.5" }
    assert.equal(1, rc)
    assert.matches('-D B=2.5: B is a dimension of kernel "rms_norm_fwd"; valid: a positive integer', err, 1, true)
    _, err, rc = H.luaptx { "ptx", RMS, "-D", "N=64", "-D", "B=2", "-D", "eps=tiny" }
    assert.equal(1, rc)
    assert.matches([[-D eps=tiny: kernel "rms_norm_fwd"'s eps is a number (default 1e-06); valid: a number]], err, 1, true)
    _, err, rc = H.luaptx { "ptx", RMS, "-D", "N=64", "-D", "N=32" }
    assert.equal(1, rc)
    assert.matches("-D N=32: N is given twice", err, 1, true)
    _, err, rc = H.luaptx { "ptx", RMS, "-D", "N" }
    assert.equal(1, rc)
    assert.equal("luaptx: ptx: -D: expected NAME=VALUE, e.g. -D B=1024\n", err)
  end)

  it("is a flag of ptx, check, compile, sass and profile, and checked by each", function()
    for _, cmd in ipairs { "ptx", "check", "compile", "sass", "profile" } do
      local out, err, rc = H.luaptx { "help", cmd }
      assert.equal(0, rc, err)
      assert.matches("-D NAME=VALUE", out, 1, true)
      local o, e, r = H.luaptx { cmd, RMS, "-D", "Q=1" }
      assert.equal(1, r, cmd)
      assert.equal("", o)
      assert.matches("-D Q=1: no kernel of the script takes Q", e, 1, true)
    end
  end)

  it("gives check the bound kernels to assemble", function()
    local out, err, rc = H.luaptx { "check", RMS, "-D", "B=4", "-D", "N=64" }
    if rc == 2 then H.pending(err) return end
    assert.equal(0, rc, err)
    for _, name in ipairs { "rms_norm_fwd", "rms_norm_fwd_f64", "rms_norm_bwd", "rms_norm_bwd_f64", "noop" } do
      assert.matches("\n" .. name .. " ", out, 1, true)
    end
  end)

  it("makes the values the kernels' defaults for profile's launches", function()
    local script = script_mod.load_file(RMS, {})
    script_mod.default_defines(script, script_mod.defines { "eps=0.25", "N=8" }, RMS)
    for _, e in ipairs(script_mod.entries(script)) do
      assert.equal(8, e.kernel.params.N)
      assert.equal(e.kernel.name:match("fwd") and 0.25 or nil, e.kernel.params.eps)   -- only the forwards take eps
    end
  end)
end)
