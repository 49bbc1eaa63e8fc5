-- pyptx.core.sys: programs from an argv (no shell), private files and
-- directories, temporaries.
local sys = require "pyptx.core.sys"
local H = require "spec.helpers"

describe("pyptx.core.sys", function()

  it("runs an argv and captures status, stdout, stderr and stdin", function()
    local r = sys.run({ "sh", "-c", "echo out; echo err >&2; cat; exit 3" }, { input = "in\n" })
    assert.same({ 3, "out\nin\n", "err\n", false }, { r.status, r.stdout, r.stderr, r.timed_out })
    r = sys.run({ "sh", "-c", "echo a; echo b >&2" }, { merge = true })
    assert.equal("a\nb\n", r.stdout)
  end)

  it("passes quotes, $() and spaces as plain bytes", function()
    local d = H.temp_dir()
    local evil = "x'; touch " .. d .. "/pwned; echo '$(touch " .. d .. "/pwned2)"
    local r = sys.run { "printf", "%s", evil }
    assert.equal(evil, r.stdout)
    assert.is_nil(sys.kind(d .. "/pwned"))
    assert.is_nil(sys.kind(d .. "/pwned2"))
  end)

  it("edits the environment and the working directory", function()
    local d = H.temp_dir()
    local r = sys.run({ "sh", "-c", "echo \"$LPX_A|${HOME-unset}\"; pwd" }, { env = { LPX_A = "a b", HOME = false }, cwd = d })
    local real = sys.run({ "sh", "-c", "cd \"$1\" && pwd -P", "sh", d }).stdout
    assert.equal("a b|unset\n" .. real, r.stdout)
  end)

  it("says why a program cannot start", function()
    local r, err = sys.run { "/nonexistent/prog" }
    assert.is_nil(r)
    assert.equal("cannot run /nonexistent/prog: No such file or directory", err)
    r, err = sys.run({ "true" }, { cwd = "/nonexistent/dir" })
    assert.is_nil(r)
    assert.equal("cannot run true: the working directory /nonexistent/dir does not exist", err)
    assert.has_error(function() sys.run("ls -l") end, "sys.run: argument 1 must be a list of strings { program, args... }")
  end)

  it("kills a program that outlives its time-out, children too", function()
    local t0 = os.time()
    local r = sys.run({ "sh", "-c", "sleep 30 & sleep 30" }, { timeout = 0.2 })
    assert.is_true(r.timed_out)
    assert.equal(137, r.status)
    assert.is_true(os.time() - t0 < 10)
  end)

  it("feeds large input to a program that stops reading", function()
    local big = string.rep("x", 4 * 1024 * 1024)
    assert.equal(#big, #sys.run({ "cat" }, { input = big }).stdout)
    assert.equal(0, sys.run({ "true" }, { input = big }).status)
  end)

  it("creates private directories, parents included", function()
    local d = H.temp_dir()
    sys.mkdirs(d .. "/a/b/c")
    assert.equal("directory", sys.kind(d .. "/a/b/c"))
    assert.is_true(sys.private_dir(d .. "/p/q"))
    local mode = H.run({ "stat", "-c", "%a", d .. "/p/q" }).stdout
    assert.equal("700\n", mode)
  end)

  it("refuses a private directory that is a link or writable by others", function()
    local d = H.temp_dir()
    sys.mkdirs(d .. "/real")
    H.run { "ln", "-s", d .. "/real", d .. "/link" }
    local ok, err = sys.private_dir(d .. "/link")
    assert.is_nil(ok)
    assert.equal("refusing directory " .. d .. "/link: it is a symbolic link", err)
    H.run { "chmod", "777", d .. "/real" }
    ok, err = sys.private_dir(d .. "/real")
    assert.is_nil(ok)
    assert.matches("it is writable by group or others", err, 1, true)
  end)

  it("names a file in the way of a directory", function()
    local d = H.temp_dir()
    H.write(d .. "/f", "")
    assert.has_error(function() sys.mkdirs(d .. "/f/sub") end,
      "cannot create directory " .. d .. "/f: it exists and is not a directory")
  end)

  it("writes files atomically, 0600, replacing a planted link instead of following it", function()
    local d = H.temp_dir()
    H.write(d .. "/victim", "keep")
    H.run { "ln", "-s", d .. "/victim", d .. "/out" }
    sys.write_file(d .. "/out", "new")
    assert.equal("keep", H.read(d .. "/victim"))
    assert.equal("file", sys.kind(d .. "/out"))
    assert.equal("new", H.read(d .. "/out"))
    assert.equal("600\n", H.run({ "stat", "-c", "%a", d .. "/out" }).stdout)
  end)

  it("makes fresh temporaries and removes trees without following links", function()
    local keep = H.temp_dir()
    H.write(keep .. "/precious", "p")
    local f = sys.temp_file("abc", ".ptx")
    assert.matches("/luaptx%-%w+%.ptx$", f)
    assert.equal("abc", H.read(f))
    assert.equal("600\n", H.run({ "stat", "-c", "%a", f }).stdout)
    local d = sys.temp_dir()
    sys.mkdirs(d .. "/x/y")
    H.run { "ln", "-s", keep, d .. "/x/link" }
    sys.remove_tree(d)
    sys.remove_tree(f)
    assert.is_nil(sys.kind(d))
    assert.is_nil(sys.kind(f))
    assert.equal("p", H.read(keep .. "/precious"))
  end)

  it("finds no shell escape in the project", function()
    local offenders = {}
    local banned = { "os%.execute", "io%.popen", "[^_%w]popen%s*%(", "[^_%w]system%s*%(", "os%.tmpname" }
    for _, dir in ipairs { "src", "lua", "bin", "spec", "bench", "examples", "cmake" } do
      for _, path in ipairs(H.find(dir, "%.[chl]u?a?$")) do
        local text = H.read(path)
        for _, pat in ipairs(banned) do
          if path ~= "spec/sys_spec.lua" and text:find(pat) then
            offenders[#offenders + 1] = path .. ": " .. pat
          end
        end
      end
    end
    assert.same({}, offenders)
  end)

  describe("how many CPUs this process may use (lpx_cpu_count)", function()
    local core = require "pyptx.core"

    it("reads cgroup v2 cpu.max quotas of the process's cgroup and every one above it, rounding up", function()
      local root = H.temp_dir()
      local function cpu_max(rel, text)
        sys.mkdirs(root .. rel)
        H.write(root .. rel .. "/cpu.max", text)
      end
      cpu_max("", "max 100000\n")
      cpu_max("/slurm", "800000 100000\n")
      cpu_max("/slurm/job", "150000 100000\n")                   -- 1.5 CPUs: 2 threads
      sys.mkdirs(root .. "/slurm/job/step")                        -- no cpu.max of its own
      assert.equal(2, core.cgroup_cpus(root, "/slurm/job/step"))
      assert.equal(8, core.cgroup_cpus(root, "/slurm"))
      assert.equal(0, core.cgroup_cpus(root, "/"))                 -- "max": no limit
      assert.equal(0, core.cgroup_cpus(root, "/nonexistent"))
      assert.equal(0, core.cgroup_cpus(root, "/slurm/../.."))      -- never climbs out of the root
      for _, bad in ipairs { "", "-1 100000", "100000 0", "0 100000", "abc 100000", "100000", "1e9 100000" } do
        cpu_max("/bad", bad)
        assert.equal(0, core.cgroup_cpus(root, "/bad"), bad)
      end
      cpu_max("/bad", "50000 100000")                             -- half a CPU: one thread
      assert.equal(1, core.cgroup_cpus(root, "/bad"))
      local fifo = root .. "/fifo"
      sys.mkdirs(fifo)
      assert.equal(0, sys.run({ "mkfifo", fifo .. "/cpu.max" }).status)
      assert.equal(0, core.cgroup_cpus(root, "/fifo"))             -- a FIFO is not waited on
    end)

    it("reads cgroup v1 CFS quotas too (cpu.cfs_quota_us over cpu.cfs_period_us), -1 meaning none", function()
      local root = H.temp_dir()
      local function cfs(rel, quota, period)
        sys.mkdirs(root .. rel)
        H.write(root .. rel .. "/cpu.cfs_quota_us", quota .. "\n")
        H.write(root .. rel .. "/cpu.cfs_period_us", period .. "\n")
      end
      cfs("", "-1", "100000")
      cfs("/docker", "300000", "100000")
      cfs("/docker/abc", "-1", "100000")
      assert.equal(3, core.cgroup1_cpus(root, "/docker/abc"))       -- the parent's quota holds
      cfs("/docker/abc", "25000", "10000")
      assert.equal(3, core.cgroup1_cpus(root, "/docker/abc"))       -- 2.5 CPUs: 3 threads
      assert.equal(0, core.cgroup1_cpus(root, "/"))
      cfs("/bad", "100000", "0")
      assert.equal(0, core.cgroup1_cpus(root, "/bad"))
    end)

    it("counts the affinity mask, not the machine's CPUs: the emulator and parallel compiles follow it", function()
      local mask = sys.run({ "sh", "-c", 'taskset -pc "$$"' })                -- ours: the shell inherits it
      assert.equal(0, mask.status, mask.stderr)
      local first = assert(mask.stdout:match("affinity list: (%d+)"), mask.stdout)   -- a CPU we may use
      local code = 'print(require("pyptx.core").cpu_count()); print(require("pyptx.runtime").device("emu"))'
      local r = sys.run({ "taskset", "-c", first, H.BIN, "-e", code })
      assert.equal(0, r.status, r.stderr)
      assert.matches("^1\n", r.stdout)
      assert.matches("emu %(CPU emulator, 1 thread%)", r.stderr)
      local all = tonumber(sys.run({ H.BIN, "-e", 'print(require("pyptx.core").cpu_count())' }).stdout)
      assert.is_true(all >= 1)
    end)
  end)
end)
