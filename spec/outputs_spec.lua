-- Every path a user names for an output (ptx -o, fmt -o, transpile -o,
-- compile -o, REPL :save, profile --json/--html, tune --csv/--json/--plot)
-- is written one way (pyptx.core.sys.write_output): a regular file
-- atomically, 0600 when new and keeping its mode when it is ours; a FIFO or
-- a character device in place; a symbolic link refused; a failed write is
-- exit 1 with the reason. Standard output is checked the same way.
local ffi = require "ffi"
local lfs = require "lfs"
local sys = require "pyptx.core.sys"
local H = require "spec.helpers"

for _, decl in ipairs {
  "int open(const char *path, int flags, ...);",
  "int fcntl(int fd, int cmd, ...);",
  "long read(int fd, void *buf, size_t n);",
  "int close(int fd);",
} do pcall(ffi.cdef, decl) end

local O_NONBLOCK, F_SETPIPE_SZ = 2048, 1031
local PTX = H.ROOT .. "/spec/fixtures/histogram.ptx"
local RMS = H.ROOT .. "/examples/hopper/rms_norm.lua"
local SCALE = H.ROOT .. "/examples/tune/scale_sweep.lua"

-- `luaptx -e TO_FULL device prog args...`: exec prog with its standard
-- output on device (no shell: open, dup2, execv).
local TO_FULL = [[
local ffi = require "ffi"
ffi.cdef "int open(const char *p, int f, ...); int dup2(int a, int b); int execv(const char *p, char *const argv[]);"
local argv = ffi.new("char *[?]", #arg + 1)   -- argv + 1: from the program on
for i = 1, #arg do argv[i - 1] = ffi.cast("char *", arg[i]) end
assert(ffi.C.dup2(ffi.C.open(arg[1], 1), 1) == 1)
ffi.C.execv(arg[2], argv + 1)
]]

--- Each command that writes a path the user names: how to run it writing
-- `path` (in the temporary directory dir), returning stdout, stderr and
-- status; for the REPL the error is in its output, not its status.
local WRITERS = {
  { "ptx -o", function(path) return H.luaptx { "ptx", RMS, "-o", path } end },
  { "fmt -o", function(path) return H.luaptx { "fmt", PTX, "-o", path } end },
  { "transpile -o", function(path) return H.luaptx { "transpile", PTX, "-o", path } end },
  { "profile --json", function(path) return H.luaptx { "profile", RMS, "--json", path } end },
  { "profile --html", function(path) return H.luaptx { "profile", RMS, "--html", path } end },
  { "tune --csv", function(path, dir)
    return H.luaptx({ "tune", SCALE, "--shard", "1/12", "--csv", path }, { env = { LUAPTX_CACHE_DIR = dir .. "/cache" } })
  end },
  { "tune --json", function(path, dir)
    return H.luaptx({ "tune", SCALE, "--shard", "1/12", "--json", path }, { env = { LUAPTX_CACHE_DIR = dir .. "/cache" } })
  end },
  { "tune --plot", function(path, dir)
    return H.luaptx({ "tune", SCALE, "--shard", "1/12", "--plot", path }, { env = { LUAPTX_CACHE_DIR = dir .. "/cache" } })
  end },
  { "repl :save", function(path)
    local out = H.luaptx({ "repl" }, { input = "local a = reg.scalar(u32, 7)\n:save " .. path .. "\n", merge = true })
    local bad = out:match("error: :save: [^\n]*")
    return out, bad or "", bad and 1 or 0
  end },
}

--- A device like /dev/full (every write fails with ENOSPC) to aim a writer
-- at. As root, a private node in dir: a writer that wrongly renamed over
-- its path would otherwise replace the machine's /dev/full. Pending when
-- root cannot make one; other users cannot replace /dev/full, so they use it.
local function full_device(dir)
  local root = H.run({ "id", "-u" }).stdout == "0\n"
  if not root then return "/dev/full" end
  local res = H.run { "mknod", dir .. "/full", "c", "1", "7" }
  if res.status ~= 0 then H.pending("as root, needs a private /dev/full (mknod): " .. res.stderr) end
  return dir .. "/full"
end

--- The permission bits of path (not following a link), e.g. "rw-------".
local function perms(path)
  return lfs.symlinkattributes(path, "permissions")
end

--- Run a writer with a FIFO at its path, a reader holding it open (so the
-- writer's open does not wait): returns what came through, and the run's
-- results.
local function through_fifo(w, dir)
  local fifo = dir .. "/out.fifo"
  H.run { "mkfifo", fifo }
  local fd = ffi.C.open(fifo, O_NONBLOCK)
  assert(fd >= 0, "cannot open the FIFO")
  ffi.C.fcntl(fd, F_SETPIPE_SZ, ffi.cast("int", 1048576))
  local out, err, status = w[2](fifo, dir)
  local parts, buf = {}, ffi.new("char[65536]")
  while true do
    local n = tonumber(ffi.C.read(fd, buf, 65536))
    if n <= 0 then break end
    parts[#parts + 1] = ffi.string(buf, n)
  end
  ffi.C.close(fd)
  return table.concat(parts), out, err, status
end

describe("outputs the user names", function()
  for _, w in ipairs(WRITERS) do
    describe(w[1], function()
      it("creates a new file 0600 and leaves no temporary", function()
        local dir = H.temp_dir()
        local _, err, status = w[2](dir .. "/new.out", dir)
        assert.equal(0, status, err)
        assert.equal("rw-------", perms(dir .. "/new.out"))
        assert.is_true(#H.read(dir .. "/new.out") > 0)
        assert.same({}, H.list(dir, "%.tmp%-"))
      end)

      it("replaces an existing file of ours keeping its mode", function()
        local dir = H.temp_dir()
        local path = H.write(dir .. "/old.out", "old")
        H.run { "chmod", "640", path }
        local _, err, status = w[2](path, dir)
        assert.equal(0, status, err)
        assert.equal("rw-r-----", perms(path))
        assert.not_equal("old", H.read(path))
      end)

      it("refuses a symbolic link at the path, leaving what it names alone", function()
        local dir = H.temp_dir()
        local victim = H.write(dir .. "/victim", "keep")
        H.run { "ln", "-s", victim, dir .. "/link.out" }
        local _, err, status = w[2](dir .. "/link.out", dir)
        assert.equal(1, status)
        assert.matches("cannot write " .. dir .. "/link.out: it is a symbolic link", err, 1, true)
        assert.equal("keep", H.read(victim))
        assert.equal("link", sys.kind(dir .. "/link.out"))
      end)

      it("writes into a FIFO in place", function()
        local dir = H.temp_dir()
        local got, _, err, status = through_fifo(w, dir)
        assert.equal(0, status, err)
        assert.equal("other", sys.kind(dir .. "/out.fifo"), "the FIFO was replaced")
        assert.is_true(#got > 0, "nothing came through the FIFO")
      end)

      it("exits 1 with the reason when the write fails (a /dev/full, written in place)", function()
        local dir = H.temp_dir()
        local full = full_device(dir)
        local _, err, status = w[2](full, dir)
        assert.equal(1, status)
        assert.matches("cannot write " .. full .. ": No space left on device", err, 1, true)
        assert.equal("other", sys.kind(full))
      end)
    end)
  end

  it("writes compile -o DIR's cubins 0600 and refuses a link planted at one", function()
    H.need_ptxas()
    local dir = H.temp_dir()
    local env = { env = { LUAPTX_CACHE_DIR = dir .. "/cache" } }
    local _, err, status = H.luaptx({ "compile", RMS, "-o", dir .. "/out" }, env)
    assert.equal(0, status, err)
    local cubins = H.list(dir .. "/out", "%.cubin$")
    assert.equal(1, #cubins)
    assert.equal("rw-------", perms(cubins[1]))
    local victim = H.write(dir .. "/victim", "keep")
    os.remove(cubins[1])
    H.run { "ln", "-s", victim, cubins[1] }
    _, err, status = H.luaptx({ "compile", RMS, "-o", dir .. "/out" }, env)
    assert.equal(1, status)
    assert.matches("it is a symbolic link", err, 1, true)
    assert.equal("keep", H.read(victim))
  end)

  it("exits 1 when standard output cannot be written (ptx, fmt, transpile, help)", function()
    local full = full_device(H.temp_dir())
    for _, args in ipairs { { "ptx", RMS }, { "fmt", PTX }, { "transpile", PTX }, { "help" } } do
      local res = H.run({ H.BIN, "-e", TO_FULL, full, H.BIN, unpack(args) })
      assert.equal(1, res.status, args[1])
      assert.matches("cannot write standard output", res.stderr, 1, true)
    end
  end)
end)
