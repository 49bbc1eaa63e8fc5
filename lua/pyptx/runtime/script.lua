--- Kernel scripts (docs/getting-started.md): a chunk returning a kernel, a
-- list of kernels, or a table with `kernels` and `main`.
local kernel = require "pyptx.kernel"

local M = {}

--- Check a list of kernels (each a kernel or a { kernel, values } pair);
-- what names it in errors ("`kernels`"). Returns the list.
local function check_list(list, name, what)
  if type(list) ~= "table" or kernel.is(list) then
    error(("%s: %s is %s; it must be a list of kernels (or { kernel, values } pairs)")
      :format(name, what, kernel.is(list) and "one kernel" or "a " .. type(list)), 0)
  end
  for i, k in ipairs(list) do
    local pair = type(k) == "table" and not getmetatable(k)
    if not kernel.is(pair and k[1] or k) or pair and k[2] ~= nil and type(k[2]) ~= "table" then
      error(("%s: item %d of %s is not a kernel or a { kernel, values } pair"):format(name, i, what), 0)
    end
  end
  return list
end

--- Normalise what a script returned into { kernels = {...}, main, module }.
function M.normalize(ret, name)
  if kernel.is(ret) then return { kernels = { ret } } end
  if type(ret) ~= "table" then
    error(name .. ": a kernel script must return a kernel, a list of kernels, or a table with `kernels`/`main`", 0)
  end
  if ret.kernels ~= nil or ret.main ~= nil then
    if ret.main ~= nil and type(ret.main) ~= "function" then
      error(("%s: the returned `main` is a %s; it must be a function main(args)"):format(name, type(ret.main)), 0)
    end
    return { kernels = check_list(ret.kernels or {}, name, "`kernels`"), main = ret.main, module = ret }
  end
  return { kernels = check_list(ret, name, "the returned list") }
end

--- Load a script file with `arg` set as luajit would; returns the normalised table.
function M.load_file(path, args)
  if type(path) ~= "string" then error(("load_file: the script path is %s; give a file name"):format(path == nil and "NULL" or "a " .. type(path)), 0) end
  local fn, err = loadfile(path)
  if not fn then error(err, 0) end
  local a = { [0] = path }
  for i, v in ipairs(args or {}) do a[i] = v end
  _G.arg = a
  return M.normalize(fn(), path)
end

--- Load a script from a string with a chunk name.
function M.load_string(chunk, name)
  local fn, err = loadstring(chunk, name)
  if not fn then error(err, 0) end
  return M.normalize(fn(), name)
end

--- Each (kernel, values) pair of a script; entries may be {kernel, values}.
function M.entries(script)
  local out = {}
  for _, entry in ipairs(script.kernels) do
    local k, values = entry, {}
    if type(entry) == "table" and not getmetatable(entry) then k, values = entry[1], entry[2] or {} end
    out[#out + 1] = { kernel = k, values = values }
  end
  return out
end

return M
