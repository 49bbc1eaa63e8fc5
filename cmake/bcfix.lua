--- Put back the keys LuaJIT's bytecode dump drops from table templates.
--
-- A constructor such as `{ id = id, type = ty }` compiles to TDUP of a
-- template table followed by one TSETS per key. Parsed from source, the
-- template holds each key with a nil value, so the TSETS find their slot
-- and the table is built in place. string.dump writes only the entries
-- whose value is not nil, so bytecode loaded from the dump has an empty
-- template: every TSETS then inserts a new key, and LuaJIT rehashes the
-- table on each insert (measured: building such a table costs 2.2 times
-- as many instructions). fix(dump) adds those keys back with nil values,
-- which the dump format can spell and lj_bcread keeps.
--
-- The dump format (LuaJIT 2.x, lj_bcdump.h): a header, then prototypes,
-- each prefixed by its length: a header of sizes, the bytecode, upvalues,
-- GC constants (written from the last index to the first), number
-- constants and debug info. Only the template tables change.
local bit = require "bit"

local M = {}

--- The opcode numbers of TDUP and TSETS in the running LuaJIT.
local function opcodes()
  local names = require("jit.vmdef").bcnames
  local found = {}
  for i = 0, #names / 6 - 1 do
    local name = names:sub(i * 6 + 1, i * 6 + 6):gsub(" ", "")
    if name == "TDUP" or name == "TSETS" then found[name] = i end
  end
  return assert(found.TDUP, "no TDUP opcode"), assert(found.TSETS, "no TSETS opcode")
end

--- A reader over string s from byte position pos.
local function reader(s, pos)
  local r = { s = s, pos = pos }
  function r.byte()
    local b = s:byte(r.pos)
    assert(b, "bytecode dump ends early")
    r.pos = r.pos + 1
    return b
  end
  function r.uleb()
    local v, shift = 0, 0
    repeat
      local b = r.byte()
      v = v + bit.band(b, 0x7f) * 2 ^ shift
      shift = shift + 7
    until b < 0x80
    return v
  end
  function r.bytes(n)
    local out = s:sub(r.pos, r.pos + n - 1)
    assert(#out == n, "bytecode dump ends early")
    r.pos = r.pos + n
    return out
  end
  return r
end

--- The ULEB128 encoding of a non-negative integer.
local function uleb(v)
  local out = {}
  repeat
    local b = v % 128
    v = (v - b) / 128
    out[#out + 1] = string.char(v > 0 and b + 128 or b)
  until v == 0
  return table.concat(out)
end

--- Skip one table key or value (lj_bcdump.h BCDUMP_KTAB_*); return a
-- string key's text, nil for anything else.
local function ktabk(r)
  local tag = r.uleb()
  if tag >= 5 then return r.bytes(tag - 5) end
  if tag == 3 then r.uleb() elseif tag == 4 then r.uleb(); r.uleb() end
  return nil
end

--- Read one template table: its encoded entries and its string keys.
local function ktab(r)
  local narray, nhash = r.uleb(), r.uleb()
  local from = r.pos
  for _ = 1, narray do ktabk(r) end
  local keys = {}
  for _ = 1, nhash do
    local k = ktabk(r)
    if k then keys[k] = true end
    ktabk(r)
  end
  return { narray = narray, nhash = nhash, body = r.s:sub(from, r.pos - 1), keys = keys }
end

--- Read the GC constants of a prototype, in dump order.
local function kgc(r, n)
  local list = {}
  for i = 1, n do
    local start = r.pos
    local tag = r.uleb()
    local k = { index = n - i }   -- the dump writes the last constant first
    if tag == 1 then k.tab = ktab(r)
    elseif tag >= 5 then k.str = r.bytes(tag - 5)
    elseif tag == 2 or tag == 3 then r.uleb(); r.uleb()
    elseif tag == 4 then for _ = 1, 4 do r.uleb() end end
    k.raw = r.s:sub(start, r.pos - 1)
    list[i] = k
  end
  return list
end

--- The string keys each template should hold: template constant index ->
-- set of keys stored into the table TDUP made, up to the next instruction
-- that writes its register (extra keys are harmless: a nil-valued key is
-- invisible to Lua).
local function wanted_keys(code, nbc, strings, TDUP, TSETS)
  local want = {}
  for pc = 0, nbc - 1 do
    local op, a = code:byte(pc * 4 + 1), code:byte(pc * 4 + 2)
    if op == TDUP then
      local d = code:byte(pc * 4 + 3) + code:byte(pc * 4 + 4) * 256
      local keys = want[d] or {}
      want[d] = keys
      for q = pc + 1, math.min(nbc - 1, pc + 256) do
        local op2, a2, c2, b2 = code:byte(q * 4 + 1, q * 4 + 4)
        if op2 == TSETS and b2 == a then
          if strings[c2] then keys[strings[c2]] = true end
        elseif a2 == a then
          break
        end
      end
    end
  end
  return want
end

--- Re-encode a template with the missing keys added as nil values.
local function encode_tab(t, missing)
  local extra = {}
  for _, k in ipairs(missing) do extra[#extra + 1] = uleb(#k + 5) .. k .. uleb(0) end
  return uleb(1) .. uleb(t.narray) .. uleb(t.nhash + #missing) .. t.body .. table.concat(extra)
end

--- Rewrite one prototype's bytes; returns the new bytes and keys added.
local function fix_proto(p, strip, TDUP, TSETS)
  local r = reader(p, 1)
  local head = r.bytes(4)   -- flags, numparams, framesize, sizeuv
  local nuv = head:byte(4)
  local nkgc = r.uleb()
  r.uleb()   -- the number constants, copied with the rest below
  local nbc = r.uleb()
  if not strip then
    local sizedbg = r.uleb()
    if sizedbg > 0 then r.uleb(); r.uleb() end
  end
  local code = r.bytes(nbc * 4)
  r.bytes(nuv * 2)
  local before_kgc = r.pos - 1
  local consts = kgc(r, nkgc)
  local rest = p:sub(r.pos)   -- number constants and debug info, unchanged
  local strings = {}
  for _, k in ipairs(consts) do if k.str then strings[k.index] = k.str end end
  local want = wanted_keys(code, nbc, strings, TDUP, TSETS)
  local parts, added = { p:sub(1, before_kgc) }, 0
  for _, k in ipairs(consts) do
    local missing = {}
    if k.tab and want[k.index] then
      for key in pairs(want[k.index]) do if not k.tab.keys[key] then missing[#missing + 1] = key end end
      table.sort(missing)   -- a reproducible build
    end
    parts[#parts + 1] = #missing > 0 and encode_tab(k.tab, missing) or k.raw
    added = added + #missing
  end
  parts[#parts + 1] = rest
  return table.concat(parts), added
end

--- fix(dump): the dump with every template's constructor keys put back;
-- also returns the number of keys added.
function M.fix(dump)
  local TDUP, TSETS = opcodes()
  local r = reader(dump, 1)
  assert(r.bytes(3) == "\27LJ", "not a LuaJIT bytecode dump")
  local version = r.byte()
  local flags = r.uleb()
  assert(version == 2 and bit.band(flags, 1) == 0, "unsupported bytecode dump (version or byte order)")
  local strip = bit.band(flags, 2) ~= 0
  if not strip then r.bytes(r.uleb()) end   -- the chunk name
  local out, added = { dump:sub(1, r.pos - 1) }, 0
  while true do
    local len = r.uleb()
    if len == 0 then break end
    local p, n = fix_proto(r.bytes(len), strip, TDUP, TSETS)
    out[#out + 1] = uleb(#p) .. p
    added = added + n
  end
  out[#out + 1] = "\0"
  assert(r.pos == #dump + 1, "trailing bytes after the last prototype")
  return table.concat(out), added
end

return M
