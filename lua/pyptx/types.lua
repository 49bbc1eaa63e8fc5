--- PTX data types as Lua values: `types.f32`, `types.u32`, ...
-- Each type knows its C id, its width and its kind: "u" unsigned,
-- "s" signed, "b" bits, "f" float, "h" packed float, "p" predicate.
local ffi = require "ffi"
local core = require "pyptx.core"
local trace = require "pyptx.trace"

local M = {}

local Type = {}
Type.__index = Type
Type.__tostring = function(t) return t.name end

-- The types are the C core's table (src/lpx_types.def), read at load
-- time, so Lua never holds a copy that could drift.
M.all = {}
for id = 0, core.type_count() - 1 do
  local name = ffi.string(core.type_name(id))
  local t = setmetatable({ name = name, id = id, bits = core.type_bits(id), kind = string.char(core.type_kind(id)):lower() }, Type)
  t.bytes = math.max(1, t.bits / 8)
  M[name] = t
  M.all[#M.all + 1] = t
end
table.sort(M.all, function(a, b) return a.id < b.id end)

--- Is v one of the type values?
function M.is(v)
  return getmetatable(v) == Type
end

--- The type called name ("f32"), or nil.
function M.get(name)
  local t = M[name]
  return M.is(t) and t or nil
end

--- A type's name from a type value or a name ("bf16"); anything else as is.
function M.name_of(t)
  if type(t) == "table" and t.name then return t.name end
  return t
end

--- Fail at the user's line unless t is a type (what names the helper).
local function need_type(t, what)
  if getmetatable(t) ~= Type then
    trace.fail(("%s: argument 1 (t) must be a pyptx type (u32, f32, ...); got %s"):format(what, type(t)))
  end
end

--- Is the type an integer-like type (u, s or b)?
function M.is_int(t)
  need_type(t, "types.is_int")
  return t.kind == "u" or t.kind == "s" or t.kind == "b"
end

--- Is the type a float (scalar or packed)?
function M.is_float(t)
  need_type(t, "types.is_float")
  return t.kind == "f" or t.kind == "h"
end

return M
