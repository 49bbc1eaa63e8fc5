--- Argument checks for luaptx's public helpers. A helper called with an
-- argument of the wrong kind fails at the caller's line, naming the
-- helper, the argument and what it expects, never with a Lua error from
-- inside luaptx ("attempt to perform arithmetic on a nil value").
--
--   args.sign(M, "hopper", {
--     choose_layout = { "kbytes: integer" },
--     desc_bits = { "layout: string", "lbo: integer", "sbo: integer", "base_offset: integer?" },
--   })
--
-- A parameter is "name: kind" with kinds joined by "|" and a trailing "?"
-- when it may be nil. Every signed function is listed in M.signed.
local trace = require "pyptx.trace"
local types = require "pyptx.types"

local M = {}

--- Kind name -> { what it is called in a message, predicate }.
local KINDS = {
  any = { "any value", function() return true end },
  number = { "a number", function(v) return type(v) == "number" end },
  integer = { "an integer", function(v) return type(v) == "number" and v % 1 == 0 end },
  string = { "a string", function(v) return type(v) == "string" end },
  table = { "a table", function(v) return type(v) == "table" end },
  ["function"] = { "a function", function(v) return type(v) == "function" end },
  boolean = { "a boolean", function(v) return type(v) == "boolean" end },
  cdata = { "an FFI value", function(v) return type(v) == "cdata" end },
  type = { "a pyptx type (u32, f32, ...)", types.is },
}

local added = {}   -- kinds modules added, in order: how show names their objects

--- Add a kind: what a message calls it and a predicate (modules add
-- their own objects: "register", "alloc", ...).
function M.kind(name, what, pred)
  KINDS[name] = { what, pred }
  added[#added + 1] = KINDS[name]
end

--- How a message shows a value that did not fit.
local function show(v)
  if type(v) == "string" then return ("a string (%q)"):format(#v > 40 and v:sub(1, 37) .. "..." or v) end
  if type(v) == "number" or v == nil or type(v) == "boolean" then return tostring(v) end
  if types.is(v) then return "the type " .. v.name end
  for _, k in ipairs(added) do
    if k[2](v) then return k[1] end
  end
  return "a " .. type(v)
end

--- Parse "name: kind|kind?" into { name, kinds = {...}, optional, what }.
local function parse(spec, where)
  local name, kinds, opt = spec:match("^%s*([%w_]+)%s*:%s*([%w_|]+)(%??)%s*$")
  if not name then error(where .. ": bad parameter spec '" .. spec .. "'", 3) end
  local p = { name = name, kinds = {}, optional = opt == "?" }
  local names = {}
  for k in kinds:gmatch("[^|]+") do
    if not KINDS[k] then error(where .. ": unknown kind '" .. k .. "' in '" .. spec .. "'", 3) end
    p.kinds[#p.kinds + 1] = k
    names[#names + 1] = KINDS[k][1]
  end
  p.what = table.concat(names, " or ") .. (p.optional and " (or nil)" or "")
  return p
end

--- Does v fit parameter p?
local function fits(p, v)
  if v == nil and p.optional then return true end
  for _, k in ipairs(p.kinds) do
    if KINDS[k][2](v) then return true end
  end
  return false
end
M.fits = fits

--- The predicate of a parameter as one closure (the JIT inlines it).
local function predicate(p)
  local preds, optional = {}, p.optional
  for i, k in ipairs(p.kinds) do preds[i] = KINDS[k][2] end
  if #preds == 1 and not optional then return preds[1] end
  local n = #preds
  return function(v)
    if v == nil and optional then return true end
    for i = 1, n do
      if preds[i](v) then return true end
    end
    return false
  end
end

--- Fail at the user's line: argument i of fname does not fit.
local function reject(fname, params, i, v)
  local p = params[i]
  trace.fail(("%s: argument %d (%s) must be %s; got %s"):format(fname, i, p.name, p.what, show(v)))
end

-- Wrappers are generated per arity with fixed parameters: a vararg loop
-- over select(i, ...) would keep the JIT from compiling hot callers.
local wrappers = {}

--- The wrapper maker for n checked parameters.
local function wrapper_maker(n)
  if wrappers[n] then return wrappers[n] end
  local names, checks = {}, {}
  for i = 1, n do
    names[i] = "a" .. i
    checks[i] = ("if not ok[%d](a%d) then reject(fname, params, %d, a%d) end"):format(i, i, i, i)
  end
  local list = table.concat(names, ", ")
  local src = ("local fn, ok, reject, fname, params = ...\nreturn function(%s, ...)\n%s\nreturn fn(%s, ...)\nend")
    :format(list, table.concat(checks, "\n"), list)
  -- named as this file was loaded, so locating the user's line skips the wrapper's frame
  wrappers[n] = assert(loadstring(src, debug.getinfo(1, "S").source))
  return wrappers[n]
end

local parsed = {}   -- field spec string -> parameter

--- Check the fields of an options table t against "name: kind" specs;
-- fail at the user's line naming the field and what it expects.
function M.fields(fname, t, specs)
  for _, spec in ipairs(specs) do
    local p = parsed[spec] or parse(spec, fname)
    parsed[spec] = p
    local v = t[p.name]
    if not fits(p, v) then
      trace.fail(("%s: field %s must be %s; got %s"):format(fname, p.name, p.what, show(v)))
    end
  end
end

M.signed = {}

--- Wrap mod[name] for each name in sigs with a check of its arguments;
-- prefix names the module in messages ("hopper" -> "hopper.desc_bits").
function M.sign(mod, prefix, sigs)
  local names = {}
  for name in pairs(sigs) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    local fn, full = mod[name], prefix .. "." .. name
    if type(fn) ~= "function" then error("args.sign: " .. full .. " is not a function", 2) end
    local params, ok = {}, {}
    for i, spec in ipairs(sigs[name]) do
      params[i] = parse(spec, full)
      ok[i] = predicate(params[i])
    end
    mod[name] = wrapper_maker(#params)(fn, ok, reject, full, params)
    M.signed[#M.signed + 1] = { name = full, params = params, fn = mod[name], unchecked = fn }
  end
end

return M
