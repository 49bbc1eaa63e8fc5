--- Old module names kept for one release after a rename (docs/api.md,
-- "Deprecated names"): each shim file under its old name calls warn and
-- returns the new module, so a script written against the old name keeps
-- working and is told once, on stderr, what to require instead.
local M = {}

-- The release in which the deprecated names stop working.
M.REMOVED_IN = "0.2.0"

local warned = {}

--- The "file:line: " of the first frame above the shim that is not Lua's
-- require or luaptx's own code: the user's require line ("" if none).
local function user_line()
  for level = 3, 30 do
    local info = debug.getinfo(level, "Sl")
    if not info then break end
    local src = info.source
    if info.what ~= "C" and not src:match("^@lua/pyptx/") and not src:match("/lua/pyptx/") then
      return src:gsub("^@", "") .. ":" .. (info.currentline or 0) .. ": "
    end
  end
  return ""
end

--- Say once per process, on stderr, that module old is now module new.
function M.warn(old, new)
  if warned[old] then return end
  warned[old] = true
  io.stderr:write(("luaptx: %smodule '%s' is deprecated: use require \"%s\" (the old name goes in %s)\n")
    :format(user_line(), old, new, M.REMOVED_IN))
end

return M
