--- PTX data types as Lua values: `types.f32`, `types.u32`, ...
-- Each type knows its C id, its width and its kind: "u" unsigned,
-- "s" signed, "b" bits, "f" float, "h" packed float, "p" predicate.
local core = require "pyptx.core"
local trace = require "pyptx.trace"

local M = {}

local Type = {}
Type.__index = Type
Type.__tostring = function(t) return t.name end

local kinds = {
  pred = "p", b8 = "b", b16 = "b", b32 = "b", b64 = "b", b128 = "b",
  u8 = "u", u16 = "u", u32 = "u", u64 = "u", s8 = "s", s16 = "s", s32 = "s", s64 = "s",
  f16 = "f", bf16 = "f", tf32 = "f", f32 = "f", f64 = "f", e4m3 = "f", e5m2 = "f",
  f16x2 = "h", bf16x2 = "h", e4m3x2 = "h", e5m2x2 = "h",
}

M.all = {}
for name, kind in pairs(kinds) do
  local t = setmetatable({ name = name, id = core.type_lookup(name), bits = core.type_bits(core.type_lookup(name)), kind = kind }, Type)
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

--- Fail at the user's line unless t is a type (what names the helper).
local function need_type(t, what)
  if getmetatable(t) ~= Type then
    trace.fail(("%s: argument 1 (t) must be a pyptx type (u32, f32, ...); got %s"):format(what, type(t)), 3)
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
