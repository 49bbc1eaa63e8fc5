--- Kernel scripts (docs/getting-started.md): a chunk returning a kernel, a
-- list of kernels, or a table with `kernels` and `main`.
local kernel = require "pyptx.kernel"

local M = {}

--- Normalise what a script returned into { kernels = {...}, main, module }.
function M.normalize(ret, name)
  if kernel.is(ret) then return { kernels = { ret } } end
  if type(ret) ~= "table" then
    error(name .. ": a kernel script must return a kernel, a list of kernels, or a table with `kernels`/`main`", 0)
  end
  if ret.kernels or ret.main then return { kernels = ret.kernels or {}, main = ret.main, module = ret } end
  for i, k in ipairs(ret) do
    if not kernel.is(k) then error(("%s: item %d of the returned list is not a kernel"):format(name, i), 0) end
  end
  return { kernels = ret }
end

--- Load a script file with `arg` set as luajit would; returns the normalised table.
function M.load_file(path, args)
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
