--- A small pseudo-terminal driver for specs: spawn a program (posix_spawn,
-- no shell) with a pty as its controlling terminal, type into it, wait for
-- text to appear, send signals, and collect its exit status.
-- Specs load it with `local pty = require "spec.pty"`.
local ffi = require "ffi"

local M = {}

-- One declaration per call: another module may have declared some already.
for _, decl in ipairs {
  "int posix_openpt(int flags);",
  "int grantpt(int fd);",
  "int unlockpt(int fd);",
  "int ptsname_r(int fd, char *buf, size_t len);",
  "int posix_spawn(int *pid, const char *path, const void *file_actions, const void *attr, char *const argv[], char *const envp[]);",
  "int posix_spawn_file_actions_init(void *fa);",
  "int posix_spawn_file_actions_destroy(void *fa);",
  "int posix_spawn_file_actions_addopen(void *fa, int fd, const char *path, int oflag, unsigned int mode);",
  "int posix_spawn_file_actions_adddup2(void *fa, int fd, int newfd);",
  "int posix_spawnattr_init(void *attr);",
  "int posix_spawnattr_destroy(void *attr);",
  "int posix_spawnattr_setflags(void *attr, short flags);",
  "int posix_spawnattr_setsigdefault(void *attr, const void *set);",
  "int posix_spawnattr_setsigmask(void *attr, const void *set);",
  "int sigemptyset(void *set);",
  "int sigaddset(void *set, int sig);",
  "struct lpx_pollfd { int fd; short events; short revents; };",
  "int poll(void *fds, unsigned long nfds, int timeout);",
  "long read(int fd, void *buf, size_t n);",
  "long write(int fd, const void *buf, size_t n);",
  "int close(int fd);",
  "int kill(int pid, int sig);",
  "int waitpid(int pid, int *status, int options);",
  "struct lpx_spec_winsize { unsigned short rows, cols, xpixel, ypixel; };",
  "int ioctl(int fd, unsigned long request, ...);",
  "extern char **environ;",
} do pcall(ffi.cdef, decl) end

local C = ffi.C
local O_RDWR, O_NOCTTY = 2, 256
local POSIX_SPAWN_SETSIGDEF, POSIX_SPAWN_SETSIGMASK, POSIX_SPAWN_SETSID = 0x04, 0x08, 0x80
local TIOCSWINSZ, WNOHANG, POLLIN = 0x5414, 1, 1
M.SIGHUP, M.SIGINT, M.SIGKILL, M.SIGTERM = 1, 2, 9, 15

--- The current environment with edits { NAME = value | false } applied.
local function environment(edits)
  local env, out = {}, {}
  local i = 0
  while C.environ[i] ~= nil do
    local kv = ffi.string(C.environ[i])
    env[kv:match("^[^=]*")] = kv
    i = i + 1
  end
  for k, v in pairs(edits or {}) do env[k] = v and (k .. "=" .. v) or nil end
  for _, kv in pairs(env) do out[#out + 1] = kv end
  return out
end

--- A NULL-terminated char *[] for a list of strings (kept alive by keep).
local function cstrings(list, keep)
  local arr = ffi.new("char *[?]", #list + 1)
  for i, s in ipairs(list) do
    local buf = ffi.new("char[?]", #s + 1, s)
    keep[#keep + 1] = buf
    arr[i - 1] = buf
  end
  keep[#keep + 1] = arr
  return arr
end

--- A pty master and its slave's path.
local function open_pty()
  local master = C.posix_openpt(O_RDWR + O_NOCTTY)
  assert(master >= 0, "posix_openpt failed")
  assert(C.grantpt(master) == 0 and C.unlockpt(master) == 0, "grantpt/unlockpt failed")
  local name = ffi.new("char[256]")
  assert(C.ptsname_r(master, name, 256) == 0, "ptsname_r failed")
  C.ioctl(master, TIOCSWINSZ, ffi.new("struct lpx_spec_winsize", { 24, 200, 0, 0 }))
  return master, ffi.string(name)
end

local Pty = {}
Pty.__index = Pty

--- Spawn argv in a new session whose controlling terminal is a fresh pty;
-- env: edits to the current environment. SIGINT, SIGTERM and SIGHUP start
-- with their default actions and nothing blocked, whatever the caller has.
function M.spawn(argv, env)
  local master, slave = open_pty()
  local fa, attr = ffi.new("uint64_t[64]"), ffi.new("uint64_t[128]")
  local sigs, none = ffi.new("uint64_t[32]"), ffi.new("uint64_t[32]")
  C.posix_spawn_file_actions_init(fa)
  C.posix_spawn_file_actions_addopen(fa, 0, slave, O_RDWR, 0)   -- after setsid: the controlling tty
  C.posix_spawn_file_actions_adddup2(fa, 0, 1)
  C.posix_spawn_file_actions_adddup2(fa, 0, 2)
  C.posix_spawnattr_init(attr)
  C.sigemptyset(sigs)
  for _, s in ipairs { M.SIGINT, M.SIGTERM, M.SIGHUP } do C.sigaddset(sigs, s) end
  C.sigemptyset(none)
  C.posix_spawnattr_setsigdefault(attr, sigs)
  C.posix_spawnattr_setsigmask(attr, none)
  C.posix_spawnattr_setflags(attr, POSIX_SPAWN_SETSID + POSIX_SPAWN_SETSIGDEF + POSIX_SPAWN_SETSIGMASK)
  local keep, pid = {}, ffi.new("int[1]")
  local rc = C.posix_spawn(pid, argv[1], fa, attr, cstrings(argv, keep), cstrings(environment(env), keep))
  C.posix_spawn_file_actions_destroy(fa)
  C.posix_spawnattr_destroy(attr)
  if rc ~= 0 then C.close(master) error("posix_spawn " .. argv[1] .. " failed: " .. rc, 2) end
  return setmetatable({ fd = master, pid = pid[0], out = "", seen = 0 }, Pty)
end

--- Read what the program printed, waiting up to ms milliseconds for it.
function Pty:pump(ms)
  local pfd = ffi.new("struct lpx_pollfd[1]", { { self.fd, POLLIN, 0 } })
  if C.poll(pfd, 1, ms) <= 0 then return false end
  local buf = ffi.new("char[4096]")
  local n = C.read(self.fd, buf, 4096)
  if n <= 0 then self.eof = true return false end
  self.out = self.out .. ffi.string(buf, n)
  return true
end

--- Keep reading what the program prints for about ms milliseconds
-- (pump returns at the first output; this waits the whole time).
function Pty:drain(ms)
  for _ = 1, math.ceil(ms / 10) do
    while self:pump(0) do end
    C.poll(nil, 0, 10)
  end
end

--- Type text into the terminal.
function Pty:write(text)
  assert(C.write(self.fd, text, #text) == #text, "write to the pty failed")
end

--- Wait until text (plain) appears after what earlier expects consumed;
-- returns the output up to and including it, or errors with the transcript.
function Pty:expect(text, timeout)
  local deadline = os.time() + (timeout or 20)
  while true do
    local s, e = self.out:find(text, self.seen + 1, true)
    if s then
      local got = self.out:sub(self.seen + 1, e)
      self.seen = e
      return got
    end
    if self.eof or os.time() > deadline then
      error(("pty: %q did not appear; the program printed:\n%s"):format(text, self.out:sub(self.seen + 1)), 2)
    end
    self:pump(100)
  end
end

--- Send a signal to the program.
function Pty:signal(sig)
  C.kill(self.pid, sig)
end

--- Wait for the program to exit (reading its output meanwhile); returns
-- its exit status, or nil and the signal that killed it. Kills it after timeout.
function Pty:wait(timeout)
  local deadline = os.time() + (timeout or 20)
  local status = ffi.new("int[1]")
  while true do
    local r = C.waitpid(self.pid, status, WNOHANG)
    if r == self.pid then break end
    if os.time() > deadline then C.kill(self.pid, M.SIGKILL) end
    if not self:pump(50) and self.eof then
      -- the pty closed; poll waitpid without output to read
      C.poll(nil, 0, 20)
    end
  end
  while self:pump(0) do end
  local s = status[0]
  if s % 128 == 0 then return math.floor(s / 256) % 256 end
  return nil, s % 128
end

--- Release the terminal (kill the program first if still running).
function Pty:close()
  if self.fd >= 0 then C.close(self.fd) self.fd = -1 end
end

return M
