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

-- ------------------------------------------------ -D NAME=VALUE (the CLI)

--- The value of a -D text: a number when it reads as one, true/false,
-- else the word itself.
local function define_value(text)
  if text == "true" then return true elseif text == "false" then return false end
  return tonumber(text) or text
end

--- Parse the CLI's -D texts ("NAME=VALUE", repeatable) into { NAME = value };
-- a malformed or repeated one is an error naming it.
function M.defines(list)
  local out = {}
  for _, d in ipairs(list or {}) do
    local name, value = d:match("^([%a_][%w_]*)=(.+)$")
    if not name then error(("-D %s: expected NAME=VALUE, e.g. -D B=1024"):format(d), 0) end
    if out[name] ~= nil then error(("-D %s: %s is given twice"):format(d, name), 0) end
    out[name] = define_value(value)
  end
  return out
end

--- What kernel k takes by name: { NAME = "dim" | default } for its
-- symbolic dims and its template values (params).
local function takes(k)
  local out = {}
  for name, default in pairs(k.params or {}) do out[name] = default end
  for _, list in ipairs { k.in_specs or {}, k.out_specs or {} } do
    for _, spec in ipairs(list) do
      for _, d in ipairs(spec:symbols()) do out[d] = "dim" end
    end
  end
  return out
end

--- Why value v cannot be name for kernel k (what k takes there says), or nil.
local function define_error(k, name, what, v)
  if what == "dim" then
    if type(v) ~= "number" or v < 1 or v ~= math.floor(v) then
      return ("-D %s=%s: %s is a dimension of kernel \"%s\"; valid: a positive integer"):format(name, tostring(v), name, k.name)
    end
  elseif type(what) ~= type(v) then
    return ("-D %s=%s: kernel \"%s\"'s %s is a %s (default %s); valid: a %s"):format(name, tostring(v), k.name, name,
      type(what), tostring(what), type(what))
  end
end

--- Give each entry ({ kernel, values }, as M.entries makes) the -D values
-- its kernel takes (over the script's own); a name no kernel takes, or a
-- value of the wrong kind, is an error naming what the kernels take.
function M.apply_defines(entries, defs, path)
  local used, known = {}, {}
  for _, e in ipairs(entries) do
    local t = takes(e.kernel)
    for name in pairs(t) do known[name] = true end
    for name, v in pairs(defs) do
      if t[name] ~= nil then
        local err = define_error(e.kernel, name, t[name], v)
        if err then error(path .. ": " .. err, 0) end
        e.values[name], used[name] = v, true
      end
    end
  end
  for name, v in pairs(defs) do
    if not used[name] then
      local names = {}
      for n in pairs(known) do names[#names + 1] = n end
      table.sort(names)
      error(("%s: -D %s=%s: no kernel of the script takes %s; valid: %s (template values and symbolic dims)")
        :format(path, name, tostring(v), name, #names > 0 and table.concat(names, ", ") or "none"), 0)
    end
  end
  return entries
end

--- The -D values as the defaults of a script's kernels (what its main's
-- launches then use), checked as apply_defines checks them.
function M.default_defines(script, defs, path)
  for _, e in ipairs(M.apply_defines(M.entries(script), defs, path)) do
    for name in pairs(defs) do
      if e.values[name] ~= nil then e.kernel.params[name] = e.values[name] end
    end
  end
end

return M
