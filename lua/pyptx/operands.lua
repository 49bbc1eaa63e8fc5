--- Operand values that are not registers: special registers, addresses,
-- labels, typed immediates, the sink `_`, `d|p` pipes and `(a, b)` lists.
local ffi = require "ffi"
local trace = require "pyptx.trace"
local types = require "pyptx.types"
local core = require "pyptx.core"
local argcheck = require "pyptx.args"
local reg = require "pyptx.reg"
local RID, RTYPE, RTRACE = reg.ID, reg.TYPE, reg.TRACE   -- a register's slots

local M = {}
local OPD = trace.OPD

-- ------------------------------------------------------- special registers

local Special = {}
Special.__index = Special
Special.__tostring = function(s) return s.name end
function Special.__operand(s, o, _, k)
  o.kind, o.type, o.id, o.aux, o.ival, o.fval = OPD.SPECIAL, s.type.id, s.id, 0, 0, 0
  return k + 1
end
function Special.__source_type(s) return s.type end

--- The special register spelled name ("%tid.x"), or nil.
function M.special(name)
  local id = core.special_lookup(name)
  if id < 0 then return nil end
  local ty
  for _, t in ipairs(types.all) do if t.id == core.special_type(id) then ty = t end end
  return setmetatable({ name = name, id = id, type = ty }, Special)
end

-- ---------------------------------------------------------------- addresses

local Addr = {}
Addr.__index = Addr
Addr.__tostring = function(a)
  if a.base == false then return "[" .. a.offset .. "]" end
  return "[" .. tostring(a.base) .. "+" .. a.offset .. "]"
end

--- Pack [base+offset]: base is a register or a symbol name.
function Addr.__operand(a, o, t, k)
  local base = a.base
  if type(base) == "string" then
    o.kind, o.type, o.id, o.aux, o.ival, o.fval = OPD.ADDR, -1, trace.sym(t, base), OPD.SYM, a.offset, 0
  elseif base == false then   -- an absolute address [offset]
    o.kind, o.type, o.id, o.aux, o.ival, o.fval = OPD.ADDR, -1, -1, 0, a.offset, 0
  else
    if base[RTRACE] ~= t then trace.fail("address register belongs to another kernel trace") end
    o.kind, o.type, o.id, o.aux, o.ival, o.fval = OPD.ADDR, -1, base[RID], OPD.REG, a.offset, 0
  end
  return k + 1
end

--- addr + n: the same base with a larger immediate offset.
Addr.__add = function(a, n)
  if type(a) == "number" then a, n = n, a end
  if type(n) ~= "number" then trace.fail("an address offset must be a number") end
  return setmetatable({ base = a.base, offset = a.offset + n }, Addr)
end

--- An address operand [base+offset]; base is a register, a symbol name,
-- anything with an :address() method (smem allocations, tensor params), or
-- an integer: the absolute address [base+offset].
function M.addr(base, offset)
  offset = offset or 0
  if type(offset) ~= "number" or offset ~= math.floor(offset) then
    trace.fail("ptx.addr: the offset must be an integer number of bytes, got " .. tostring(offset))
  end
  if type(base) == "number" or type(base) == "cdata" then
    local n = tonumber(base)
    if n ~= math.floor(n) then trace.fail("ptx.addr: an absolute address must be an integer, got " .. tostring(base)) end
    return setmetatable({ base = false, offset = n + offset }, Addr)
  end
  if type(base) == "table" and getmetatable(base) ~= reg.Reg and base.address then
    local a = base:address()
    return setmetatable({ base = a.base, offset = a.offset + offset }, Addr)
  end
  if not (type(base) == "string" or reg.is(base)) then
    trace.fail("ptx.addr: the base must be a register or a symbol name, got " .. tostring(base))
  end
  if reg.is(base) and base[RTYPE].bits ~= 64 and base[RTYPE].bits ~= 32 then
    trace.fail("ptx.addr: the base register must be 32 or 64 bits, got " .. base.type.name)
  end
  return setmetatable({ base = base, offset = offset }, Addr)
end
M.Addr = Addr

--- A reusable address operand for one operand position of a wrapper
-- that packs it at once (a fresh table per instruction is garbage).
function M.scratch_addr() return setmetatable({ base = false, offset = 0 }, Addr) end

--- scratch made [v] when v is a 32- or 64-bit register, else nil (the
-- caller makes its address some other way). The caller packs scratch
-- before setting it again and clears scratch.base after, so that it
-- keeps no trace alive.
function M.reg_addr(scratch, v)
  if reg.is(v) and (v[RTYPE].bits == 32 or v[RTYPE].bits == 64) then
    scratch.base = v
    return scratch
  end
  return nil
end

-- ------------------------------------------------------------------ labels

local Label = {}
Label.__index = Label
Label.__tostring = function(l) return l.name end
function Label.__operand(l, o, t, k)
  local id = l.trace == t and l.sym or trace.sym(t, l.name)
  o.kind, o.type, o.id, o.aux, o.ival, o.fval = OPD.LABEL, -1, id, 0, 0, 0
  return k + 1
end

--- A label reference by name (placing is ptx.label's job).
function M.label_ref(name)
  return setmetatable({ name = name, sym = false, trace = false }, Label)
end

--- A reference to a fresh label of trace t whose symbol id is known (the
-- structured control flow's labels): packing it looks nothing up.
function M.fresh_ref(t, name, sym)
  return setmetatable({ name = name, sym = sym, trace = t }, Label)
end

-- -------------------------------------------------------- other operands

local Imm = {}
Imm.__index = Imm
function Imm.__operand(v, o, _, k)
  local ty = v.type
  if ty == types.f32 or ty == types.f64 then
    local bits
    if ty == types.f32 then bits = ffi.cast("uint32_t*", ffi.new("float[1]", v.value))[0]
    else bits = ffi.cast("int64_t*", ffi.new("double[1]", v.value))[0] end
    o.kind, o.type, o.id, o.aux, o.ival, o.fval = OPD.FIMM, ty.id, 0, 0, bits, 0
  else
    o.kind, o.type, o.id, o.aux, o.ival, o.fval = OPD.IMM, ty.id, 0, 0, v.value, 0
  end
  return k + 1
end
function Imm.__source_type(v) return v.type end

--- A typed immediate: ptx.imm(f32, 1.5) emits 0f3FC00000.
function M.imm(ty, value)
  if not types.is(ty) then trace.fail("ptx.imm: the first argument must be a type") end
  if types.is_int(ty) and value ~= math.floor(value) then trace.fail("ptx.imm: " .. tostring(value) .. " is not an integer") end
  if types.is_float(ty) and ty ~= types.f32 and ty ~= types.f64 then
    trace.fail("ptx.imm: PTX has no ." .. ty.name .. " immediates; use ptx.imm(b" .. ty.bits .. ", bits)")
  end
  return setmetatable({ type = ty, value = value }, Imm)
end

local Sink = setmetatable({}, {
  __operand = function(_, o, _, k)
    o.kind, o.type, o.id, o.aux, o.ival, o.fval = OPD.SINK, -1, 0, 0, 0, 0
    return k + 1
  end,
  __tostring = function() return "_" end,
})
--- The sink operand `_` (a destination whose value is discarded).
M.sink = Sink

local Pipe = {}
function Pipe.__operand(v, o, t, k, put)
  o.kind, o.type, o.id, o.aux, o.ival, o.fval = OPD.PIPE, -1, 0, 2, 0, 0
  return put(t, put(t, k + 1, v[1]), v[2])
end
--- The dual destination `d|p` (shfl.sync, setp, elect.sync).
function M.pipe(d, p) return setmetatable({ d, p }, Pipe) end

--- The metatable of an operand list of one kind: the list, then its items.
local function list_kind(kind)
  return { __operand = function(v, o, t, k, put)
    o.kind, o.type, o.id, o.aux, o.ival, o.fval = kind, -1, 0, v.n, 0, 0
    k = k + 1
    for i = 1, v.n do k = put(t, k, v[i]) end
    return k
  end }
end
local Paren, Bracket = list_kind(OPD.PAREN), list_kind(OPD.BRACKET)

--- A parenthesised operand list `(a, b)` as call takes.
function M.paren(...) return setmetatable({ n = select("#", ...), ... }, Paren) end

--- A bracketed operand list `[a, {b, c}]` (tex, surface and tensor operands).
function M.bracket(...) return setmetatable({ n = select("#", ...), ... }, Bracket) end

local SymOff = {}
function SymOff.__operand(v, o, t, k)
  o.kind, o.type, o.id, o.aux, o.ival, o.fval = OPD.SYM, -1, trace.sym(t, v.name), 0, v.offset, 0
  return k + 1
end
SymOff.__tostring = function(v) return v.name .. "+" .. v.offset end
--- A symbol's address plus a byte offset as a value (`mov.u64 %rd1, tbl+8;`).
function M.sym(name, offset)
  if type(name) ~= "string" then trace.fail("ptx.sym: expected a symbol name, got " .. tostring(name)) end
  if type(offset) ~= "number" or offset ~= math.floor(offset) then
    trace.fail("ptx.sym: the offset must be an integer number of bytes, got " .. tostring(offset))
  end
  return setmetatable({ name = name, offset = offset }, SymOff)
end

argcheck.sign(M, "ptx", {
  special = { "name: string" },
  label_ref = { "name: string" },
})

return M
