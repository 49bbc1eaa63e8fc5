-- pyptx.runtime.toolkit: finding ptxas, running it, reading its resource report and
-- mapping its line numbers back to Lua lines.
local pyptx = require "pyptx"
local toolkit = require "pyptx.runtime.toolkit"
local sys = require "pyptx.core.sys"
local H = require "spec.helpers"
local ptx, T = pyptx.ptx, pyptx.types

local GOOD = [[
.version 8.0
.target sm_80
.address_size 64
.visible .entry k()
{
	.reg .b32 	%r<3>;
	mov.u32 	%r1, %tid.x;
	add.u32 	%r2, %r1, 1;
	ret;
}
]]

local BAD = [[
.version 8.0
.target sm_80
.address_size 64
	.file	1 "kern.lua"
.visible .entry k()
{
	.reg .f32 	%f<3>;
	.loc	1 42 1
	rem.f32 	%f1, %f2, %f2;
	ret;
}
]]

describe("pyptx.runtime.toolkit", function()

  it("runs ptxas from an argv: an output path with quotes and $() is just a name", function()
    local d = H.temp_dir()
    local out = d .. "/it's $(echo pwned) `echo x`.cubin"
    H.need_ptxas()
    local ok, _, log = toolkit.ptxas(".version 8.0\n.target sm_80\n.address_size 64\n", "sm_80", { output = out })
    assert(ok, log)
    assert.equal("file", sys.kind(out))
    assert.same({ out }, H.list(d))
  end)

  it("searches one toolkit root, $CUDA_HOME (else $CUDA_PATH, else /usr/local/cuda), then $PATH", function()
    local home, path = H.temp_dir(), H.temp_dir()
    H.with_env({ CUDA_HOME = home, CUDA_PATH = path, PATH = "/nonexistent:/also-not" }, function()
      assert.same({ home .. "/bin", "/nonexistent", "/also-not" }, toolkit.search_dirs())
    end)
    H.with_env({ CUDA_HOME = false, CUDA_PATH = path, PATH = "/nonexistent" }, function()
      assert.same({ path .. "/bin", "/nonexistent" }, toolkit.search_dirs())
    end)
    H.with_env({ CUDA_HOME = "", CUDA_PATH = false, PATH = "/nonexistent" }, function()
      assert.same({ "/usr/local/cuda/bin", "/nonexistent" }, toolkit.search_dirs())
    end)
  end)

  it("finds a tool in $CUDA_HOME/bin, and nothing when CUDA_HOME names an empty directory", function()
    local home, empty = H.temp_dir(), H.temp_dir()
    sys.mkdirs(home .. "/bin")
    H.write(home .. "/bin/ptxas", "")
    H.with_env({ CUDA_HOME = home, PATH = empty }, function()
      assert.equal(home .. "/bin/ptxas", toolkit.find("ptxas"))
      assert.is_nil(toolkit.find("no-such-tool-xyz"))
    end)
    H.with_env({ CUDA_HOME = empty, PATH = empty }, function()   -- even with /usr/local/cuda installed
      assert.is_nil(toolkit.find("ptxas"))
      local ok, _, log = toolkit.ptxas(".version 8.0\n.target sm_80\n.address_size 64\n", "sm_80")
      assert.is_nil(ok)
      assert.equal(toolkit.missing_message("ptxas"), log)
    end)
  end)

  it("says how to get the toolkit when a tool is missing, naming the root it searched", function()
    H.with_env({ CUDA_HOME = "/opt/cuda-x", CUDA_PATH = false }, function()
      assert.equal("ptxas not found: install the CUDA toolkit, or point CUDA_HOME at it "
        .. "(searched $CUDA_HOME/bin = /opt/cuda-x/bin, then $PATH)", toolkit.missing_message("ptxas"))
    end)
    H.with_env({ CUDA_HOME = false, CUDA_PATH = "/opt/cp" }, function()
      assert.matches("(searched $CUDA_PATH/bin = /opt/cp/bin, then $PATH)", toolkit.missing_message("nvcc"), 1, true)
    end)
    H.with_env({ CUDA_HOME = false, CUDA_PATH = false }, function()
      assert.matches("(searched /usr/local/cuda/bin, then $PATH)", toolkit.missing_message("ptxas"), 1, true)
    end)
  end)

  it("finds the wheel's nvdisasm in $VIRTUAL_ENV and the user's site-packages (CUDA 13 and 12 layouts)", function()
    local venv, user, empty = H.temp_dir(), H.temp_dir(), H.temp_dir()
    local exe13 = venv .. "/lib/python3.12/site-packages/nvidia/cu13/bin/nvdisasm"
    local exe12 = user .. "/lib/python3.9/site-packages/nvidia/cuda_nvdisasm/bin/nvdisasm"
    for _, p in ipairs { exe13, exe12 } do
      sys.mkdirs(p:match("^(.*)/"))
      H.write(p, "")
    end
    H.with_env({ CUDA_HOME = empty, PATH = empty, VIRTUAL_ENV = venv, PYTHONUSERBASE = user }, function()
      assert.equal(exe13, toolkit.find("nvdisasm"))
      assert.same({ venv, sys.exe_dir() .. "/venv", user }, toolkit.python_roots())
      local dirs = toolkit.wheel_dirs("nvdisasm")
      assert.equal(exe12:match("^(.*)/"), dirs[#dirs])
      assert.is_nil(toolkit.find("cuobjdump"))
      assert.same({}, toolkit.wheel_dirs("ptxas"))
      local msg = toolkit.missing_message("nvdisasm")
      assert.matches("`pip install nvidia-cuda-nvdisasm`", msg, 1, true)
      assert.matches(("(searched $CUDA_HOME/bin = %s/bin, then $PATH, then nvidia/cu13/bin and nvidia/cuda_nvdisasm/bin "
        .. "under lib/python3.*/site-packages of %s, %s/venv, %s)"):format(empty, venv, sys.exe_dir(), user), msg, 1, true)
    end)
  end)

  it("writes temp files with a suffix", function()
    local path = toolkit.temp_file("hello", ".ptx")
    assert.matches("%.ptx$", path)
    assert.equal("hello", H.read(path))
    os.remove(path)
  end)

  it("reads a ptxas -v report per kernel", function()
    local log = [[
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'rms_norm' for 'sm_90a'
ptxas info    : Function properties for rms_norm
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem, 400 bytes cmem[0]
ptxas info    : Compiling entry function 'other' for 'sm_90a'
ptxas info    : Function properties for other
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers, 368 bytes cmem[0]
]]
    assert.same({
      rms_norm = { registers = 40, smem = 2048, stack = 8, spill_stores = 4, spill_loads = 12, cmem = 400, barriers = 1 },
      other = { registers = 8, smem = 0, stack = 0, spill_stores = 0, spill_loads = 0, cmem = 368, barriers = 0 },
    }, toolkit.parse_report(log))
  end)

  it("maps ptxas line numbers to the Lua line of the closest .loc", function()
    local log = "ptxas x.ptx, line 10; error   : Unexpected instruction types specified for 'rem'"
    assert.equal("ptxas x.ptx, line 10; error   : Unexpected instruction types specified for 'rem' (from kern.lua:42)",
      toolkit.map_lines(log, BAD))
    assert.equal("line 2; x", toolkit.map_lines("line 2; x", BAD))
  end)

  describe("ptxas", function()
    it("assembles valid PTX and returns its report", function()
      H.need_ptxas()
      local ok, report, log = toolkit.ptxas(GOOD, "sm_80")
      assert.is_true(ok)
      assert.is_table(report.k)
      assert.is_true(report.k.registers > 0)
      assert.matches("Compiling entry function 'k' for 'sm_80'", log)
    end)

    it("fails on invalid PTX with the log mapped to Lua lines and the PTX kept", function()
      H.need_ptxas()
      local tmp = H.temp_dir()                            -- where the failed PTX is kept
      local ok, report, log = H.with_env({ TMPDIR = tmp }, function() return toolkit.ptxas(BAD, "sm_80") end)
      assert.is_false(ok)
      assert.is_nil(report)
      assert.matches("line 9; error   : Unexpected instruction types specified for 'rem' %(from kern.lua:42%)", log)
      local kept = log:match("%(the PTX is kept at ([^)]+)%)")
      assert.truthy(kept)
      assert.equal(tmp, kept:match("^(.*)/[^/]+$"))
      assert.equal(BAD, H.read(kept))
      assert.is_nil(log:find("__luaptx_rc", 1, true))
    end)

    it("can drop the failed PTX instead of keeping it", function()
      H.need_ptxas()
      local tmp = H.temp_dir()
      local ok, _, log = H.with_env({ TMPDIR = tmp }, function() return toolkit.ptxas(BAD, "sm_80", { keep_failed = false }) end)
      assert.is_false(ok)
      assert.is_nil(log:find("kept at", 1, true))
      assert.same({}, H.list(tmp))
    end)

    it("runs ptxas once per process for the same text, arch and ptxas; again for a failure or an output file", function()
      local home, empty = H.temp_dir(), H.temp_dir()
      sys.mkdirs(home .. "/bin")
      local exe = H.write(home .. "/bin/ptxas", "#!/bin/sh\necho run >> \"$0.runs\"\n"   -- a ptxas that counts its runs
        .. "case \"$*\" in *sm_99*) echo \"ptxas fatal   : no sm_99\"; exit 1;; esac\n"
        .. "echo \"ptxas info    : Compiling entry function 'k' for 'sm_80'\"\n")
      H.run { "chmod", "700", exe }
      local function runs() return select(2, (H.read(exe .. ".runs") or ""):gsub("run\n", "")) end
      local text = GOOD .. "// " .. tostring(os.time()) .. " " .. home .. "\n"   -- a text no test assembled before
      H.with_env({ CUDA_HOME = home, PATH = empty }, function()
        local ok, report, log = toolkit.ptxas(text, "sm_80")
        assert.is_true(ok)
        assert.matches("Compiling entry function 'k'", log)
        assert.same({ ok, report, log }, { toolkit.ptxas(text, "sm_80") })
        assert.equal(1, runs())
        assert.is_true((toolkit.ptxas(text, "sm_80", { lineinfo = false })))   -- another command line
        assert.is_true((toolkit.ptxas(text .. "\n", "sm_80")))                -- another text
        assert.is_true((toolkit.ptxas(text, "sm_90a")))                       -- another arch
        assert.equal(4, runs())
        assert.is_true((toolkit.ptxas(text, "sm_80", { output = H.temp_dir() .. "/k.cubin" })))   -- writes a file: runs
        assert.equal(5, runs())
        for _ = 1, 2 do assert.is_false((toolkit.ptxas(text, "sm_99", { keep_failed = false }))) end   -- failures run again
        assert.equal(7, runs())
      end)
    end)

    it("accepts the PTX luaptx emits, with -lineinfo", function()
      local k = pyptx.kernel "lined" { arch = "sm_90a", in_specs = { pyptx.Tile(4, T.f32) }, function(X)
        local p = ptx.global_ptrs(X)
        ptx.st.global(ptx.addr(p), pyptx.reg.scalar(T.f32, 1.0))
      end }
      assert.matches("\tst.global.f32 \t[%rd", k:ptx(), 1, true)
      H.need_ptxas()
      local ok, report, log = toolkit.ptxas(k:ptx(), "sm_90a")
      assert.is_true(ok, log)
      assert.is_table(report.lined)
    end)
  end)
end)
