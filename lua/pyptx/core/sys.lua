--- Programs and files without a shell: `run` spawns an argv (posix_spawn
-- in C) and captures its output; directories and files are created private
-- (0700 / 0600), temporaries with mkstemp, writes atomically. Every path is
-- passed to the kernel as bytes, so no quote or `$` in it is ever parsed.
local ffi = require "ffi"
local core = require "pyptx.core"

local M = {}

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
