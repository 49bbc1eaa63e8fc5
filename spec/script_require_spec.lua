--- A script's own modules from any working directory
-- (pyptx.runtime.script_require): `luaptx run /abs/examples/...` from a
-- temporary directory finds examples.lib.*, each script resolves requires
-- from its own tree, and package.path is left alone.
local H = require "spec.helpers"
local sys = require "pyptx.core.sys"

--- Write a file, creating its directory.
local function put(path, text)
  sys.mkdirs(path:match("^(.*)/[^/]+$"))
  return H.write(path, text)
end

--- Environment edits for a child started elsewhere: a relative
-- LUAPTX_LUA_DIR made absolute (nil when there is nothing to edit).
local function env()
  local dir = os.getenv("LUAPTX_LUA_DIR")
  if dir and dir ~= "" and dir:sub(1, 1) ~= "/" then return { LUAPTX_LUA_DIR = H.ROOT .. "/" .. dir } end
end

describe("a script's require", function()
  it("finds examples.lib.* when an example runs from another directory", function()
    local cwd = H.temp_dir()
    for _, ex in ipairs { "examples/hopper/rms_norm.lua", "examples/ampere/rms_norm.lua" } do   -- ampere: lib.retarget -> hopper
      local out, err, rc = H.luaptx({ "run", H.ROOT .. "/" .. ex }, { cwd = cwd, env = env() })
      assert.equal(0, rc, ex .. ": " .. err)
      assert.matches("rms_norm%(%d+, %d+%): ok on .-all %d+ elements match", out)
    end
    local out, err, rc = H.luaptx({ "ptx", H.ROOT .. "/examples/hopper/softmax.lua" }, { cwd = cwd, env = env() })
    assert.equal(0, rc, err)
    assert.matches(".visible .entry softmax(", out, 1, true)
  end)

  it("resolves each script's modules from its own tree, ahead of the working directory's", function()
    local root = H.temp_dir()
    put(root .. "/a/lib/helper.lua", 'return "A helper"\n')
    put(root .. "/a/lib/a_only.lua", 'return "A only"\n')
    put(root .. "/b/tool/run.lua", 'local ok = pcall(require, "lib.a_only")\nreturn ok and "B saw A\'s module" or "B: not found"\n')
    put(root .. "/cwd/lib/helper.lua", 'return "the working directory\'s helper"\n')
    put(root .. "/a/app/main.lua", ([[
local path = package.path
print(require "lib.helper")
print(dofile("%s/b/tool/run.lua"))
print(package.path == path)
]]):format(root))
    local out, err, rc = H.luaptx({ root .. "/a/app/main.lua" }, { cwd = root .. "/cwd", env = env() })
    assert.equal(0, rc, err)
    assert.equal("A helper\nB: not found\ntrue\n", out)
  end)

  it("says where it looked when a module is in no directory above the script", function()
    local root = H.temp_dir()
    put(root .. "/s/main.lua", 'require "lib.nowhere"\n')
    local _, err, rc = H.luaptx({ root .. "/s/main.lua" }, { cwd = root, env = env() })
    assert.equal(1, rc)
    local dir = sys.real_path(root .. "/s")
    assert.matches("no file 'lib/nowhere.lua' in " .. dir:gsub("%p", "%%%0") .. " or a directory above it", err)
  end)

  describe("stays inside the script's own project", function()
    --- chmod a path (argv, no shell).
    local function chmod(mode, path) assert.equal(0, sys.run({ "chmod", mode, path }).status) end

    --- A fresh directory holding files (path below it -> text); its path.
    local function tree(files)
      local root = H.temp_dir()
      for path, text in pairs(files) do put(root .. path, text) end
      return root
    end

    it("never loads a module planted in a directory others can write, nor shadows a system module from there", function()
      local root = tree {
        ["/sys/planted_mod.lua"] = 'return "the system module"\n',
        ["/shared/planted_mod.lua"] = 'return "planted"\n',
        ["/shared/lib/only_planted.lua"] = 'return "planted"\n',
        ["/shared/job/main.lua"] = 'print(require "planted_mod")\nprint(pcall(require, "lib.only_planted"))\n',
      }
      chmod("1777", root .. "/shared")                              -- like /tmp
      local e = env() or {}
      e.LUA_PATH = root .. "/sys/?.lua;;"
      local out, err, rc = H.luaptx({ root .. "/shared/job/main.lua" }, { cwd = root, env = e })
      assert.equal(0, rc, err)
      local job = sys.real_path(root .. "/shared/job")
      assert.matches("^the system module\nfalse\t.-\n\tno file 'lib/only_planted%.lua' in " .. job:gsub("%p", "%%%0")
        .. " or a directory above it up to " .. job:gsub("%p", "%%%0") .. " %(the requiring file's project; stopped: "
        .. sys.real_path(root .. "/shared"):gsub("%p", "%%%0") .. ": it is writable by others%)", out)
    end)

    it("stops at a marked project root (.git or .luaptx-root)", function()
      for _, mark in ipairs { ".git", ".luaptx-root" } do
        local root = tree {
          ["/above.lua"] = 'return "above the project"\n',
          ["/proj/lib/inside.lua"] = 'return "inside"\n',
          ["/proj/" .. mark] = "",
          ["/proj/app/main.lua"] = 'print(require "lib.inside")\nprint((pcall(require, "above")))\n',
        }
        local out, err, rc = H.luaptx({ root .. "/proj/app/main.lua" }, { cwd = H.temp_dir(), env = env() })
        assert.equal(0, rc, err)
        assert.equal("inside\nfalse\n", out, mark)
      end
    end)

    it("refuses a module file another user can change, naming it", function()
      local root = tree { ["/lib/shared_mod.lua"] = 'return "changed by someone"\n', ["/app/main.lua"] = 'require "lib.shared_mod"\n' }
      chmod("666", root .. "/lib/shared_mod.lua")
      local _, err, rc = H.luaptx({ root .. "/app/main.lua" }, { cwd = root, env = env() })
      assert.equal(1, rc)
      assert.matches("refusing to load " .. sys.real_path(root .. "/lib/shared_mod.lua"):gsub("%p", "%%%0")
        .. ": [^\n]*: it is writable by others", err)
    end)

    it("refuses a module another user owns (run as root: chown to nobody)", function()
      if sys.run({ "id", "-u" }).stdout ~= "0\n" then H.pending("needs root to chown a file to another user") return end
      local root = tree { ["/lib/theirs.lua"] = 'return "theirs"\n', ["/app/main.lua"] = 'require "lib.theirs"\n' }
      assert.equal(0, sys.run({ "chown", "65534", root .. "/lib/theirs.lua" }).status)
      local _, err, rc = H.luaptx({ root .. "/app/main.lua" }, { cwd = H.temp_dir(), env = env() })
      assert.equal(1, rc)
      assert.matches("refusing to load [^\n]*theirs%.lua: [^\n]*: it is owned by another user", err)
    end)
  end)
end)
