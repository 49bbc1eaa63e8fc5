-- User-facing errors: every public helper called with arguments of the
-- wrong kind, and every subcommand given bad input, says what is wrong at
-- the user's file:line (or nowhere), never at luaptx's own files, never
-- with a Lua VM message from deep inside luaptx, and never crashes.
local H = require "spec.helpers"
local args = require "pyptx.args"
local pyptx = require "pyptx"
for _, m in ipairs { "hopper", "ampere", "blackwell", "tma", "runtime.floats", "tools.verify", "runtime.compile",
  "runtime.toolkit", "operands" } do
  require("pyptx." .. m)
end

-- Helpers whose argument checks live in a file reserved for another
-- branch (tensor.lua): only the no-leak and no-crash checks apply to them.
local DEFERRED = {}

--- Does a message mention one of luaptx's own source files?
local function leaks(msg)
  return msg:find("lua/pyptx/", 1, true) or msg:find("bin/[%w_]+%.lua") or msg:find("stack traceback", 1, true)
end

describe("errors", function()
  describe("public helpers called with arguments of the wrong kind", function()
    local out, rows

    setup(function()
      local _, rc
      -- toolkit.temp_file and friends really make files: in a directory removed with the file's temporaries
      out, _, rc = H.luaptx({ "spec/fixtures/bad_args.lua" }, { env = { LUAPTX_TRACEBACK = false, TMPDIR = H.temp_dir() } })
      out = out .. "status " .. tostring(rc)
      rows = {}
      for name, case, msg in out:gmatch("\n([%w_.]+)#(%d+)\t([^\n]*)") do
        rows[#rows + 1] = { name = name, case = tonumber(case), msg = msg }
      end
    end)

    it("never crash the process", function()
      assert.matches("\ndone\t%d+\nstatus 0$", out)
      local n = tonumber(out:match("\ndone\t(%d+)"))
      assert.is_true(n >= 190, "only " .. n .. " helpers were called")
      assert.is_true(#rows >= 900, "only " .. #rows .. " calls failed")
    end)

    it("name the user's line or nothing, never luaptx's own files", function()
      for _, r in ipairs(rows) do
        assert.is_falsy(leaks(r.msg), r.name .. "#" .. r.case .. ": " .. r.msg)
        local file = r.msg:match("^([^:]+):%d+: ")
        if file then assert.equal("spec/fixtures/bad_args.lua", file, r.name .. "#" .. r.case .. ": " .. r.msg) end
      end
    end)

    it("say what is wrong, never with a Lua VM error from inside luaptx", function()
      for _, r in ipairs(rows) do
        if not DEFERRED[r.name] then
          for _, vm in ipairs { "attempt to ", "bad argument #", "cannot convert '" } do
            assert.is_nil(r.msg:find(vm, 1, true), r.name .. "#" .. r.case .. ": " .. r.msg)
          end
        end
      end
    end)
  end)

  describe("signed helpers", function()
    it("name the argument, what it expects and what they got, at the caller's line", function()
      assert.is_true(#args.signed >= 60, "only " .. #args.signed .. " helpers are signed")
      for _, s in ipairs(args.signed) do
        -- the first parameter that not every value fits gets one that does not
        local call = {}
        for i, p in ipairs(s.params) do
          if p.kinds[1] ~= "any" then
            for _, v in ipairs { "x", 1.5, true, {} } do
              if not args.fits(p, v) then call[i] = v break end
            end
            local ok, err = pcall(s.fn, unpack(call, 1, i))
            assert.is_false(ok, s.name)
            assert.matches("^spec/errors_spec%.lua:%d+: " .. s.name:gsub("%p", "%%%0") .. ": argument " .. i .. " %("
              .. p.name .. "%) must be .+; got ", err, 1)
            break
          end
          call[i] = "x"
        end
      end
    end)

    it("show what a wrong value is", function()
      local hopper = require "pyptx.hopper"
      local _, err = pcall(hopper.swizzle_address, nil, 128)
      assert.matches("errors_spec%.lua:%d+: hopper%.swizzle_address: argument 1 %(a%) must be an integer or a register; got nil$", err)
      _, err = pcall(hopper.desc_bits, "128B", "16", 1024)
      assert.matches("hopper%.desc_bits: argument 2 %(lbo%) must be an integer; got a string %(\"16\"%)$", err)
      _, err = pcall(hopper.desc_bits, "128B", 16, 1024, 1.5)
      assert.matches("argument 4 %(base_offset%) must be an integer %(or nil%); got 1%.5$", err)
      local k = pyptx.kernel "k" { arch = "sm_90a", function()
        hopper.swizzle_address(128, pyptx.reg.scalar(pyptx.types.u32))
      end }
      _, err = pcall(k.ptx, k)
      assert.matches("errors_spec%.lua:%d+: hopper%.swizzle_address: argument 2 %(span%) must be an integer; got a register$", err)
    end)

    it("keep hot helpers as fast as unchecked ones (the JIT compiles the checks)", function()
      local checked, unchecked
      for _, s in ipairs(args.signed) do
        if s.name == "floats.to_bf16" then checked, unchecked = s.fn, s.unchecked end
      end
      local function time(f)
        local t0, sum = os.clock(), 0
        for i = 1, 5e6 do sum = sum + f(i * 1e-3) end
        return os.clock() - t0, sum
      end
      time(checked)
      local tc, sc = time(checked)
      local tu, su = time(unchecked)
      assert.equal(su, sc)
      assert.is_true(tc < 3 * tu + 0.02, ("checked %.3f s, unchecked %.3f s"):format(tc, tu))
    end)
  end)

  describe("a user's file whose path looks like luaptx's own", function()
    it("is still the user's: its errors name its line (luaptx's own code is known by how it was loaded)", function()
      local root = H.temp_dir()
      local text = H.read(H.ROOT .. "/spec/fails/operand_type.lua")
      for _, rel in ipairs { "pyptx/kern/bad.lua", "pyptx/bad.lua", "lua/pyptx/runtime/bad.lua", "bin/bad.lua" } do
        local path = root .. "/" .. rel
        require("pyptx.core.sys").mkdirs(path:match("^(.*)/"))
        H.write(path, text)
        for _, dir in ipairs { false, H.ROOT .. "/lua" } do
          local _, err, rc = H.luaptx({ "ptx", path }, { env = { LUAPTX_LUA_DIR = dir } })
          assert.equal(1, rc)
          assert.equal("luaptx: " .. path .. ":8: add.u32: operand 2 is a f32 register (%f1); "
            .. "expected a u32/s32/b32 register or an integer\n", err)
        end
      end
    end)
  end)
end)
