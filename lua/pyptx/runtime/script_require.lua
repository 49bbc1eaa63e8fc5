--- Where a script's own modules come from: `require "examples.lib.runner"`
-- in /x/examples/hopper/rms_norm.lua finds /x/examples/lib/runner.lua from
-- any working directory. The searcher looks beside the file that calls
-- require and in each directory above it; nothing is added to
-- package.path, so each script's requires resolve from its own tree.
local sys = require "pyptx.core.sys"
local core = require "pyptx.core"

local M = {}


--- The directory of the Lua file that called require: the first frame above
-- the searcher running a file chunk that is not luaptx's own; nil if none.
local function requiring_dir()
  for level = 3, 100 do
    local info = debug.getinfo(level, "S")
    if not info then return nil end
    local src = info.source
    if src:sub(1, 1) == "@" and core.own_source(src) ~= "module" and core.own_source(src) ~= "cli" then return src:sub(2):match("^(.*)/[^/]*$") or "." end
  end
end

--- The directory above an absolute one ("/x/y" -> "/x" -> "/" -> nil).
local function parent(dir)
  if dir == "/" then return nil end
  local up = dir:match("^(.*)/[^/]+$")
  return (up == nil or up == "") and "/" or up
end

--- package.loaders entry: module name as name.lua or name/init.lua (dots as
-- slashes) beside the requiring file or in a directory above it.
local function beside_requirer(name)
  local dir = requiring_dir()
  local abs = dir and sys.real_path(dir)
  if not abs then return nil end
  local rel = name:gsub("%.", "/")
  local d = abs
  while d do
    local base = d == "/" and "" or d
    for _, file in ipairs { base .. "/" .. rel .. ".lua", base .. "/" .. rel .. "/init.lua" } do
      if sys.kind(file) == "file" then
        local fn, err = loadfile(file)
        if not fn then error(err, 0) end
        return fn
      end
    end
    d = parent(d)
  end
  return ("\n\tno file '%s.lua' in %s or a directory above it (the requiring file's tree)"):format(rel, abs)
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
