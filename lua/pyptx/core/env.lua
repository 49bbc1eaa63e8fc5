--- Strict reading of environment variables (the Lua side of src/lpx_env.c):
-- a value that does not parse or lies outside its range is an error
-- naming the variable, the value and what is valid, never a silent
-- default. Unset or empty variables give the default.
local M = {}

--- The variable's value, or nil when it is unset or empty.
function M.get(name)
  local v = os.getenv(name)
  if v == nil or v == "" then return nil end
  return v
end

--- One of the words in valid (a list), or default when unset.
function M.choice(name, valid, default)
  local v = M.get(name)
  if v == nil then return default end
  for _, w in ipairs(valid) do if v == w then return v end end
  error(("%s=%s: valid values are %s"):format(name, v, table.concat(valid, ", ")), 0)
end

--- An integer in lo..hi ("1000000" or "1e6"; not "1.5", "12abc"), or
-- default when unset; what says what the variable sets.
function M.int(name, lo, hi, what, default)
  local v = M.get(name)
  if v == nil then return default end
  local n = v:match("^[%d%+%-%.eE]+$") and tonumber(v)
  local why = (not n or n ~= math.floor(n)) and "not an integer" or (n < lo or n > hi) and "out of range"
  if why then error(("%s=%s: %s; valid: an integer in %.0f..%.0f (%s)"):format(name, v, why, lo, hi, what), 0) end
  return n
end

--- "0" or "1" as a boolean, or default when unset.
function M.flag(name, default)
  local v = M.get(name)
  if v == nil then return default end
  if v ~= "0" and v ~= "1" then error(("%s=%s: valid: 0 (off) or 1 (on)"):format(name, v), 0) end
  return v == "1"
end

return M
