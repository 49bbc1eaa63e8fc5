-- luaptx has one version, VERSION at the root (docs/api.md, "Versions"):
-- the program, pyptx.version, the C header, the pkg-config file, the CMake
-- package and the Python package all say it.
local H = require "spec.helpers"

local VERSION = assert(H.read(H.ROOT .. "/VERSION"), "no VERSION file"):match("^(%d+%.%d+%.%d+)\n$")
local BUILD = H.BIN:match("^(.*)/[^/]+$")

describe("the version", function()
  it("is MAJOR.MINOR.PATCH on one line of VERSION", function()
    assert.is_string(VERSION)
  end)

  it("is what luaptx --version and pyptx.version say", function()
    local out, err, rc = H.luaptx { "--version" }
    assert.equal(0, rc, err)
    assert.equal("luaptx " .. VERSION .. " (", out:sub(1, #VERSION + 9))
    assert.equal(VERSION, require("pyptx").version)
  end)

  it("is LUAPTX_VERSION in luaptx.h", function()
    assert.equal(VERSION, H.read(H.ROOT .. "/src/luaptx.h"):match('\n#define LUAPTX_VERSION "([^"]*)"'))
  end)

  it("is the pkg-config file's and the CMake package's", function()
    local pc = H.read(BUILD .. "/luaptx.pc")
    if not pc then H.pending("no luaptx.pc beside " .. H.BIN) return end
    assert.equal(VERSION, pc:match("\nVersion: ([^\n]*)"))
    assert.equal(VERSION, H.read(BUILD .. "/luaptxConfigVersion.cmake"):match('set%(PACKAGE_VERSION "([^"]*)"%)'))
  end)

  it("is the Python package's, read from VERSION and written nowhere else", function()
    local toml = H.read(H.ROOT .. "/python/pyproject.toml")
    assert.is_nil(toml:match("\nversion%s*="), "python/pyproject.toml sets a version of its own")
    assert.truthy(toml:match('\ndynamic = %[ *"version" *%]'))
    local res = H.run({ "python3", "setup.py", "--version" },
      { cwd = H.ROOT .. "/python", env = { LUAPTX_BUILD_DIR = BUILD }, timeout = 60 })
    if res.status ~= 0 and (res.stderr .. res.stdout):match("No module named 'setuptools'") then
      H.pending("python3 has no setuptools: cannot ask python/setup.py its version") return
    end
    assert.equal(0, res.status, res.stderr)
    assert.equal(VERSION, res.stdout:match("([^\n]+)\n$"))
  end)
end)
