--- Where a script's own modules come from: `require "examples.lib.runner"`
-- in /x/examples/hopper/rms_norm.lua finds /x/examples/lib/runner.lua from
-- any working directory. The searcher looks beside the file that calls
-- require and in each directory above it within that file's project: it
-- stops after a marked project root (a directory holding .git or
-- .luaptx-root) and before any directory another user could write to (so
-- nothing planted in /tmp or a shared folder shadows a module), and it
-- loads only files no other user can change. Nothing is added to
-- package.path, so each script's requires resolve from its own tree.
local sys = require "pyptx.core.sys"
local core = require "pyptx.core"

local M = {}

local ROOT_MARKERS = { ".git", ".luaptx-root" }

--- The directory of the Lua file that called require: the first frame above
-- the searcher running a file chunk that is not luaptx's own; nil if none.
local function requiring_dir()
  for level = 3, 100 do
    local info = debug.getinfo(level, "S")
    if not info then return nil end
    local src, own = info.source, core.own_source(info.source)
    if src:sub(1, 1) == "@" and own ~= "module" and own ~= "cli" then return src:sub(2):match("^(.*)/[^/]*$") or "." end
  end
end

--- The directory above an absolute one ("/x/y" -> "/x" -> "/" -> nil).
local function parent(dir)
  if dir == "/" then return nil end
  local up = dir:match("^(.*)/[^/]+$")
  return (up == nil or up == "") and "/" or up
end

--- Is dir a marked project root?
local function is_root(dir)
  for _, mark in ipairs(ROOT_MARKERS) do
    if sys.kind((dir == "/" and "" or dir) .. "/" .. mark) then return true end
  end
  return false
end

--- Load file (found under dir as rel's file): every directory from dir down
-- to it, and the file, must be safe to load code from; errors otherwise.
local function load_trusted(dir, file)
  local path = dir == "/" and "" or dir
  for part in file:sub(#path + 2):gmatch("[^/]+") do
    path = path .. "/" .. part
    local ok, why = sys.trusted_code(path)
    if not ok then error(("refusing to load %s: %s (a script's modules must be files no other user can change)"):format(file, why), 0) end
  end
  local fn, err = loadfile(file)
  if not fn then error(err, 0) end
  return fn
end

--- The module's file in dir (name.lua or name/init.lua), or nil.
local function file_in(dir, rel)
  local base = dir == "/" and "" or dir
  for _, file in ipairs { base .. "/" .. rel .. ".lua", base .. "/" .. rel .. "/init.lua" } do
    if sys.kind(file) == "file" then return file end
  end
end

--- package.loaders entry: module name as name.lua or name/init.lua (dots as
-- slashes) beside the requiring file or in a directory above it, within
-- its project (see the top of this file).
local function beside_requirer(name)
  local dir = requiring_dir()
  local abs = dir and sys.real_path(dir)
  if not abs then return nil end
  local rel = name:gsub("%.", "/")
  local d, last, stop = abs, nil, nil
  while d do
    local ok, why = sys.trusted_code(d)
    if not ok then stop = why break end
    local file = file_in(d, rel)
    if file then return load_trusted(d, file) end
    last = d
    if is_root(d) then stop = d .. " is the project root" break end
    d = parent(d)
  end
  local where = last and ("%s or a directory above it up to %s"):format(abs, last) or abs
  return ("\n\tno file '%s.lua' in %s (the requiring file's project%s)"):format(rel, where, stop and "; stopped: " .. stop or "")
end

--- Install the searcher once, after luaptx's own modules' searcher and
-- ahead of package.path's ./?.lua (a script's own helpers win over the
-- working directory's).
function M.install()
  local loaders = package.loaders
  for _, f in ipairs(loaders) do if f == beside_requirer then return end end
  table.insert(loaders, math.min(3, #loaders + 1), beside_requirer)
end

return M
