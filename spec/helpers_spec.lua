--- spec/helpers.lua's own promises where a mistake would pass tests
-- silently: the ptxas answers it keeps on disk (so that a later run asks
-- ptxas only about changed texts) are ptxas's answers for exactly that
-- ptxas, arch, options and text, and anything else in the cache is not
-- taken for one.
local sys = require "pyptx.core.sys"
local H = require "spec.helpers"

--- A toolkit root whose ptxas counts its runs in bin/ptxas.runs, says
-- `version` to --version, refuses sm_99 and accepts the rest.
local function fake_toolkit(version)
  local home = H.temp_dir()
  sys.mkdirs(home .. "/bin")
  local exe = H.write(home .. "/bin/ptxas", "#!/bin/sh\n"
    .. "case \"$*\" in *--version*) echo '" .. version .. "'; exit 0;; esac\n"
    .. "echo run >> \"$0.runs\"\n"
    .. "case \"$*\" in *sm_99*) echo \"ptxas fatal   : no sm_99\"; exit 1;; esac\n"
    .. "echo \"ptxas info    : Compiling entry function 'k' for 'sm_80'\"\n"
    .. "echo \"ptxas info    : Used 7 registers\"\n")
  H.run { "chmod", "700", exe }
  return home, function() return select(2, (H.read(exe .. ".runs") or ""):gsub("run\n", "")) end
end

--- Ask H.ptxas in a fresh luaptx process (nothing remembered in memory)
-- with the environment given; returns what it printed.
local function ask_in_child(env, text_file, arch)
  local script = H.temp_file(([[
package.path = "./?.lua;" .. package.path
local H = require "spec.helpers"
local f = assert(io.open(%q, "rb")); local text = f:read("*a"); f:close()
local ok, report, log = H.ptxas(text, %q)
io.write(tostring(ok), " ", tostring(report and report.k and report.k.registers), " ", log)
]]):format(text_file, arch), ".lua")
  return H.with_env(env, function() return (H.luaptx { script }) end)
end

describe("spec.helpers: ptxas's answers kept across runs", function()
  it("asks ptxas once per (ptxas version, arch, options, text), refusals too, and reads the answers back in a new process", function()
    local home, runs = fake_toolkit("fake ptxas 1.0")
    local cache = H.temp_dir()
    local text = ".version 8.0\n.target sm_80\n.address_size 64\n// " .. home .. "\n"   -- a text no run asked about
    local env = { CUDA_HOME = home, LUAPTX_CACHE_DIR = cache }
    local text_file = H.write(H.temp_dir() .. "/t.ptx", text)
    assert.matches("^true 7 ptxas info", ask_in_child(env, text_file, "sm_80"))
    assert.matches("^false nil ptxas fatal   : no sm_99", ask_in_child(env, text_file, "sm_99"))
    assert.equal(2, runs())
    assert.matches("^true 7 ptxas info", ask_in_child(env, text_file, "sm_80"))     -- read back, not run
    assert.matches("^false nil ptxas fatal   : no sm_99", ask_in_child(env, text_file, "sm_99"))
    assert.equal(2, runs())
    H.write(text_file, text .. "\n")                                                 -- another text
    assert.matches("^true 7", ask_in_child(env, text_file, "sm_80"))
    assert.equal(3, runs())
    -- another ptxas (its --version differs) is asked again
    local home2, runs2 = fake_toolkit("fake ptxas 2.0")
    env.CUDA_HOME = home2
    assert.matches("^true 7", ask_in_child(env, text_file, "sm_80"))
    assert.equal(1, runs2())
  end)

  it("takes nothing but a whole answer of its own format from the cache", function()
    local home, runs = fake_toolkit("fake ptxas 3.0")
    local cache = H.temp_dir()
    local text_file = H.write(H.temp_dir() .. "/t.ptx", ".version 8.0\n.target sm_80\n// " .. home .. "\n")
    local env = { CUDA_HOME = home, LUAPTX_CACHE_DIR = cache }
    ask_in_child(env, text_file, "sm_80")
    local names = H.list(cache .. "/spec-ptxas", "%.log$")
    assert.equal(1, #names)
    for _, garbage in ipairs { "", "ok\nptxas info", "luaptx spec-ptxas verdict 1\nmaybe\nx", "luaptx spec-ptxas verdict 1\n" } do
      H.write(names[1], garbage)
      local before = runs()
      assert.matches("^true 7 ptxas info", ask_in_child(env, text_file, "sm_80"))
      assert.equal(before + 1, runs(), ("%q was taken for an answer"):format(garbage))
    end
  end)
end)
