--- Programs and files without a shell: `run` spawns an argv (posix_spawn
-- in C) and captures its output; directories and files are created private
-- (0700 / 0600), temporaries with mkstemp, writes atomically. Every path is
-- passed to the kernel as bytes, so no quote or `$` in it is ever parsed.
local ffi = require "ffi"
local core = require "pyptx.core"

local M = {}

pcall(ffi.cdef, "typedef struct _IO_FILE FILE; extern FILE *stdout; int ferror(FILE *stream);")
pcall(ffi.cdef, "long read(int fd, void *buf, size_t n);")
pcall(ffi.cdef, "int close(int fd);")

local kinds = { [0] = nil, "file", "directory", "link", "other" }

--- A NULL-terminated const char *[] for a Lua list of strings (kept alive by keep).
local function cstrings(list, keep, what)
  local arr = ffi.new("const char *[?]", #list + 1)
  for i, s in ipairs(list) do
    if type(s) ~= "string" then
      error(("%s: entry %d is a %s; expected a string"):format(what, i, type(s)), 3)
    end
    keep[#keep + 1] = s
    arr[i - 1] = s
  end
  return arr
end

--- Environment edits { NAME = "value" | false } as "NAME=value" / "NAME" strings.
local function env_edits(env)
  local out = {}
  for name, value in pairs(env or {}) do
    out[#out + 1] = value == false and name or (name .. "=" .. tostring(value))
  end
  table.sort(out)
  return out
end

--- Run a program: argv is a list { program, arg1, ... } (the program is
-- searched on PATH when it has no '/'). opts: env (edits: NAME = value, or
-- false to unset), cwd, input (bytes for its stdin), merge (stderr into
-- stdout), timeout (seconds; the program's process group is killed after).
-- Returns { status, stdout, stderr, timed_out }, or nil and a message when
-- the program cannot be started.
function M.run(argv, opts)
  opts = opts or {}
  if type(argv) ~= "table" or type(argv[1]) ~= "string" then
    error("sys.run: argument 1 must be a list of strings { program, args... }", 2)
  end
  local keep = {}
  local c_argv = cstrings(argv, keep, "sys.run argv")
  local c_env = cstrings(env_edits(opts.env), keep, "sys.run env")
  local input = opts.input or ""
  local p = core.proc_run(core.ctx, c_argv, c_env, opts.cwd, input, #input, opts.merge and 1 or 0, opts.timeout or 0)
  if p == nil then return nil, core.error_message() end
  local len = ffi.new("size_t[1]")
  local out = core.proc_output(p, 1, len)
  local res = { status = core.proc_status(p), timed_out = core.proc_timed_out(p) == 1 }
  res.stdout = ffi.string(out, len[0])
  out = core.proc_output(p, 2, len)
  res.stderr = ffi.string(out, len[0])
  core.proc_free(p)
  return res
end

--- What a path is, not following a final link: "file", "directory",
-- "link", "other" (FIFO, device, socket) or nil when missing.
function M.kind(path)
  return kinds[core.fs_kind(path)]
end

--- Raise a Lua error with the core's message when a status is non-zero.
local function check(rc, level)
  if rc ~= 0 then error(core.error_message(), level + 1) end
  return true
end

--- Create a directory and its parents (mode default 0700); errors on failure.
function M.mkdirs(path, mode)
  return check(core.fs_mkdirs(core.ctx, path, mode or tonumber("700", 8)), 2)
end

--- Create or check a directory only the current user may write (0700, ours,
-- not a link). Returns true, or nil and the reason.
function M.private_dir(path)
  if core.fs_private_dir(core.ctx, path) ~= 0 then return nil, core.error_message() end
  return true
end

--- Is the file or directory at path safe to load code from (ours or
-- root's, writable by no other user)? true, or nil and why.
function M.trusted_code(path)
  if core.fs_trusted_code(core.ctx, path) ~= 0 then return nil, core.error_message() end
  return true
end

--- Write data to path atomically (temporary beside it, then rename) with
-- mode (default 0600). Errors on failure.
function M.write_file(path, data, mode)
  return check(core.fs_write_file(core.ctx, path, data, #data, mode or tonumber("600", 8)), 2)
end

--- Write data to a path the user named (an -o, --json, --html, --csv,
-- --plot or :save path), the one way the CLI writes them (lpx_fs_out_open):
-- a regular file is replaced atomically through a temporary beside it (0600
-- when new, its own mode when it is ours); an existing FIFO or character
-- device is written in place; a symbolic link is refused, never followed.
-- Every write and the close are checked. Errors "cannot write PATH: why".
-- Path nil is standard output (what Lua buffered for it goes first).
function M.write_output(path, data)
  if path == nil then io.stdout:flush() end
  if core.fs_write_output(core.ctx, path, data, #data) ~= 0 then error(core.error_message(), 0) end
  return true
end

--- Check, creating nothing, that write_output(path) would accept path (not
-- a link, a directory or a socket; its directory exists and is writable):
-- true, or nil and "cannot write PATH: why". For checking flags before work.
function M.check_output(path)
  if core.fs_out_check(core.ctx, path) ~= 0 then return nil, core.error_message() end
  return true
end

--- Flush standard output and check that everything written to it arrived
-- (a full disk, /dev/full, a closed pipe): true, or nil and the reason.
function M.stdout_ok()
  local ok, err = io.stdout:flush()
  if ok and ffi.C.ferror(ffi.C.stdout) ~= 0 then ok, err = nil, "a write to it failed" end
  if not ok then return nil, "cannot write standard output: " .. tostring(err) end
  return true
end

--- The text of a regular file, opened without following a link or blocking
-- on a FIFO (lpx_fs_open_regular); with check_owner it must be ours and not
-- writable by others. Returns the text; false when path does not exist;
-- nil and the reason when it is refused or cannot be read.
function M.read_regular(path, check_owner)
  local fd = core.fs_open_regular(core.ctx, path, check_owner and 1 or 0)
  if fd == -2 then return false end
  if fd < 0 then return nil, core.error_message() end
  local parts, buf = {}, ffi.new("char[65536]")
  while true do
    local n = tonumber(ffi.C.read(fd, buf, 65536))
    if n == 0 then break end
    if n > 0 then parts[#parts + 1] = ffi.string(buf, n)
    elseif ffi.errno() ~= 4 then ffi.C.close(fd) return nil, "cannot read " .. path end
  end
  ffi.C.close(fd)
  return table.concat(parts)
end

--- A fresh 0600 temporary file holding text; returns its path.
function M.temp_file(text, suffix)
  local buf = ffi.new("char[4096]")
  text = text or ""
  check(core.fs_temp_file(core.ctx, suffix or "", text, #text, buf, 4096), 2)
  return ffi.string(buf)
end

--- A fresh 0700 temporary directory; returns its path.
function M.temp_dir()
  local buf = ffi.new("char[4096]")
  check(core.fs_temp_dir(core.ctx, buf, 4096), 2)
  return ffi.string(buf)
end

--- The directory holding the running program (links resolved), or nil
-- and the reason.
function M.exe_dir()
  local buf = ffi.new("char[4096]")
  if core.fs_exe_dir(core.ctx, buf, 4096) ~= 0 then return nil, core.error_message() end
  return ffi.string(buf)
end

--- The absolute path of an existing file or directory (links resolved), or
-- nil and the reason.
function M.real_path(path)
  local buf = ffi.new("char[4096]")
  if core.fs_real_path(core.ctx, path, buf, 4096) ~= 0 then return nil, core.error_message() end
  return ffi.string(buf)
end

--- Remove a file or a directory tree (links removed, never followed).
function M.remove_tree(path)
  return check(core.fs_remove_tree(core.ctx, path), 2)
end

return M
