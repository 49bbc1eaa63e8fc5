--- Registers: allocation (`reg.scalar`, `reg.array`, `reg.from`, `reg.pred`)
-- and operator overloading, where each operator emits exactly one PTX
-- instruction into a fresh register.
--
-- Type rules of the operators (documented in docs/dsl.md):
--  * the result has the type of the register operand (the left one when both
--    are registers); u/s/b of the same width mix, the non-b type wins;
--  * integers and floats never mix, nor do widths (convert with reg.from);
--  * a Lua number becomes an immediate of the register's type;
--  * comparisons are methods (a:lt(b) ...) returning predicates, because Lua
--    coerces the results of <, <=, == to booleans;
--  * -p on a predicate is a negated view (no instruction), usable as a guard
--    or a predicate source; -x on a number register emits neg.
local trace = require "pyptx.trace"
local types = require "pyptx.types"
local core = require "pyptx.core"
local argcheck = require "pyptx.args"
local floats = require "pyptx.floats"
local table_new = require "table.new"
local emit_up = trace.emit_up

local M = {}
local OPD = trace.OPD

-- A register is one table with its fields in the array part, { id, type,
-- trace }: a traced kernel makes thousands, and fields by name would give
-- each a second allocation (the hash part). Named reads (r.id, r.type,
-- r.trace) go through __index; luaptx's hot paths read the slots.
local Reg = {}
local ID, TYPE, TRACE = 1, 2, 3
local FIELD = { id = ID, type = TYPE, trace = TRACE }
Reg.__index = function(r, k)
  local i = FIELD[k]
  if i then return rawget(r, i) end
  return Reg[k]
end
Reg.__newindex = function(r, k, v) rawset(r, FIELD[k] or k, v) end
M.Reg = Reg
M.ID, M.TYPE, M.TRACE = ID, TYPE, TRACE

--- A register object: id in trace t's function, of type ty.
local function make(id, ty, t)
  return setmetatable({ id, ty, t }, Reg)
end
M.make = make

local NegPred = {}
NegPred.__index = NegPred
M.NegPred = NegPred

local forms = {}
--- Form id of an opcode string, interned once per Lua state.
local function F(op)
  local id = forms[op]
  if not id then
    id = trace.form(op, true)
    forms[op] = id
  end
  return id
end
M.form = F

--- cache[a][b], made by build(a, b) the first time: the forms of the
-- operators, interned without building their opcode string again on every
-- call (the operators run once per instruction).
local function memo2(cache, a, b, build)
  local by_a = cache[a]
  if not by_a then
    by_a = {}
    cache[a] = by_a
  end
  local v = by_a[b]
  if v == nil then
    v = build(a, b)
    by_a[b] = v
  end
  return v
end

M.memo2 = memo2

local typed_forms = {}   -- opcode prefix -> type -> form id
local function typed_form(prefix, ty) return F(prefix .. "." .. ty.name) end
--- Form id of prefix .. "." .. the type's name.
local function TF(prefix, ty) return memo2(typed_forms, prefix, ty, typed_form) end

--- The active trace; what (a function returning the operation's name, so
-- no message string is built on the hot path) names it in the error.
local function active(what)
  return trace.current() or trace.need(what())
end

--- Pack a register into an operand slot.
--- Mark register id of trace t used (no longer an unused predicate). It
-- reads before it clears: storing nil under an absent key, the common
-- case, takes the table's slow path, once per register operand.
local function mark_used(t, id)
  local u = t.unused_preds
  if u and u[id] then u[id] = nil end
end

function Reg.__operand(r, o, t, k)
  if r[TRACE] ~= t then trace.fail("register " .. tostring(r) .. " belongs to another kernel trace") end
  local id = r[ID]
  mark_used(t, id)
  o.kind, o.type, o.id, o.aux, o.ival, o.fval = OPD.REG, r[TYPE].id, id, 0, 0, 0
  return k + 1
end

--- Pack a negated predicate view (!%p1).
function NegPred.__operand(n, o, t, k)
  local r = n.reg
  if r[TRACE] ~= t then trace.fail("predicate belongs to another kernel trace") end
  local id = r[ID]
  mark_used(t, id)
  o.kind, o.type, o.id, o.aux, o.ival, o.fval = OPD.REG, r[TYPE].id, id, 1, 0, 0
  return k + 1
end
NegPred.__unm = function(n) return n.reg end
NegPred.__tostring = function(n) return "!" .. tostring(n.reg) end

local ffi = require "ffi"

--- The printed PTX name of register id in trace t ("%r3", "acc").
local function reg_name(t, id)
  local p, n = ffi.new("const char *[1]"), ffi.new("size_t[1]")
  if core.reg_name(t.mod, t.fn, id, p, n) ~= 0 then return "?" end
  return ffi.string(p[0], n[0])
end

--- Has reg.range or reg.named (or a .reg parameter) declared the name in trace t?
local function claimed(t, name)
  if t.reg_names[name] then return true end
  for _, r in ipairs(t.reg_ranges) do
    local prefix = r[1]
    if name:sub(1, #prefix) == prefix then
      local digits = name:sub(#prefix + 1)
      if digits:match("^%d+$") and (digits == "0" or digits:sub(1, 1) ~= "0") and tonumber(digits) < r[2] then return true end
    end
  end
  return false
end

--- A register's PTX name ("%r3", "acc"), as the emitted PTX prints it.
Reg.__tostring = function(r)
  local name = r.trace.fn >= 0 and reg_name(r.trace, r.id) or "?"
  if name == "?" then return ("%s register #%d"):format(r.type.name, r.id) end
  return name
end

--- Lua turns <, <=, >, >= into booleans, so they cannot trace a comparison.
local function no_compare(a, b)
  local r = M.is(a) and a or b
  trace.fail(("<, <=, >, >= on register %s cannot emit PTX (Lua needs a boolean now); use a:lt(b), a:le(b), a:gt(b), a:ge(b)")
    :format(tostring(r)))
end
Reg.__lt, Reg.__le = no_compare, no_compare

--- Allocate a register of type t in the active trace.
local function new(t, ty)
  if not types.is(ty) then trace.fail("expected a type (pyptx.types.u32, ...), got " .. tostring(ty)) end
  local id = core.reg_new(t.mod, t.fn, ty.id)
  if id < 0 then trace.fail(core.error_message()) end
  if t.reg_names then   -- named registers may have taken this class's name
    local name = reg_name(t, id)
    if claimed(t, name) then
      trace.fail(("register %s of the %s class is already declared by reg.range/reg.named; use another prefix there")
        :format(name, ty.name))
    end
  end
  return make(id, ty, t)
end
M.new = new

--- Is v a register?
function M.is(v) return getmetatable(v) == Reg end
argcheck.kind("register", "a register", M.is)

--- Is v a predicate register or negated predicate view?
function M.is_pred(v)
  return (getmetatable(v) == Reg and v.type == types.pred) or getmetatable(v) == NegPred
end

-- ------------------------------------------------------------ allocation

--- The type suffix mov uses for a register type: PTX has no mov.f16,
-- mov.bf16x2, ... so half and packed floats move as .b16/.b32.
local function mov_name(ty)
  if ty.kind == "h" or (ty.kind == "f" and ty.bits ~= 32 and ty.bits ~= 64) then return "b" .. ty.bits end
  return ty.name
end
M.mov_name = mov_name

local mov_forms = {}   -- type -> form of its mov
--- The form of the mov into a register of type ty (interned once per type).
local function mov_form(ty)
  local id = mov_forms[ty]
  if not id then
    id = F("mov." .. mov_name(ty))
    mov_forms[ty] = id
  end
  return id
end


-- Encoders of a Lua number into the bits of a half or fp8 register type:
-- PTX has no .f16/.bf16/fp8 immediates, so mov moves the encoded bits.
local ENCODE = {
  f16 = floats.to_f16, bf16 = floats.to_bf16, e4m3x2 = floats.to_e4m3, e5m2x2 = floats.to_e5m2,
  f16x2 = floats.to_f16, bf16x2 = floats.to_bf16,
}

--- The mov source for value v into a register of type ty: a number into a
-- half or fp8 register is a value, encoded to its bits (both halves of a
-- packed pair hold it); anything else (registers, ptx.imm(b16, bits)) as is.
local function constant(ty, v)
  if type(v) ~= "number" or ty.kind ~= "h" and (ty.kind ~= "f" or ty.bits == 32 or ty.bits == 64) then return v end
  local enc = ENCODE[ty.name]
  if not enc then
    trace.fail(("luaptx cannot encode %s constants; give the bits: ptx.imm(pyptx.types.b%d, bits)"):format(ty.name, ty.bits))
  end
  local bits = enc(v)
  if ty.name:find("x2$") then bits = bits * 2 ^ (ty.bits / 2) + bits end
  return bits
end

--- A new register of type ty; with init, also `mov` init into it (a
-- number into a half/fp8 register as its encoded bits).
function M.scalar(ty, init)
  local r = new(trace.need("reg.scalar"), ty)
  if init ~= nil then emit_up(mov_form(ty), 2, r, constant(ty, init)) end
  return r
end

--- n new registers of type ty, indexed 0..n-1 (PTX style); .n is the count.
function M.array(ty, n)
  local t = trace.need("reg.array")
  if type(n) ~= "number" or n < 1 or n ~= math.floor(n) then trace.fail("reg.array: count must be a positive integer, got " .. tostring(n)) end
  local a = { n = n }
  for i = 0, n - 1 do a[i] = new(t, ty) end
  return a
end

--- Check a register type for reg.named/reg.range/.reg parameters.
local function check_type(ty, what)
  if not types.is(ty) or ty == types.b8 then trace.fail(what .. ": expected a register type (pyptx.types.u32, ...), got " .. tostring(ty)) end
end

--- Start tracking names declared by reg.range/reg.named in trace t (the
-- automatic registers made from then on must not take one).
local function track_names(t)
  if not t.reg_names then t.reg_names, t.reg_ranges = {}, {} end
end

--- Check a register type and claim PTX register names for trace t.
local function claim(t, ty, names, what)
  check_type(ty, what)
  track_names(t)
  for _, name in ipairs(names) do
    if not name:match("^[%%%a_$][%w_$]*$") then trace.fail(what .. ": '" .. name .. "' is not a PTX register name") end
    -- the same name again is PTX scoping ({ .reg .b32 %tmp; } blocks): ptxas judges it
    if core.reg_auto(t.mod, t.fn, name) >= 0 then
      trace.fail(what .. ": register " .. name .. " is already one of the automatic registers of this function")
    end
    t.reg_names[name] = true
  end
end

--- The register a .func's `.reg` parameter names (declared by the header).
function M.param(t, ty, name)
  claim(t, ty, { name }, "a .reg parameter")
  local id = core.reg_named(t.mod, t.fn, ty.id, name)
  if id < 0 then trace.fail(core.error_message()) end
  return make(id, ty, t)
end

--- Registers of one type with their own names, declared on one `.reg`
-- line at this point of the body: reg.named(T.b32, "acc") is a register,
-- reg.named(T.b32, {"acc", "%tmp"}) a table of them in order.
function M.named(ty, names)
  local t = trace.need("reg.named")
  local list = type(names) == "table" and names or { names }
  if type(list[1]) ~= "string" then trace.fail("reg.named: expected a name or a list of names") end
  claim(t, ty, list, "reg.named")
  local out = {}
  for i, name in ipairs(list) do
    local id = core.reg_named(t.mod, t.fn, ty.id, name)
    if id < 0 then trace.fail(core.error_message()) end
    out[i] = make(id, ty, t)
  end
  if core.append_raw(t.mod, t.fn, ".reg ." .. ty.name .. " \t" .. table.concat(list, ", ") .. ";") ~= 0 then trace.fail(core.error_message()) end
  return type(names) == "table" and out or out[1]
end

--- A PTX register range declared at this point of the body:
-- reg.range(T.b32, "%f", 6) is `.reg .b32 %f<6>;`; r[0] .. r[5] are
-- %f0 .. %f5 (r.n is the count). The names must not collide with the
-- automatic ones (%r1, %rd1, ... of reg.scalar/array).
function M.range(ty, prefix, n)
  local t = trace.need("reg.range")
  if type(prefix) ~= "string" or not prefix:match("^%%?[%a_$][%w_$]*$") then
    trace.fail("reg.range: the prefix must be a PTX name such as \"%f\", got " .. tostring(prefix))
  end
  if type(n) ~= "number" or n < 1 or n ~= math.floor(n) or n > 0x7fffffff then
    trace.fail("reg.range: count must be a positive integer, got " .. tostring(n))
  end
  check_type(ty, "reg.range")
  track_names(t)
  -- the names are made in C: a range of an nvcc kernel has thousands
  local first = core.reg_range(t.mod, t.fn, ty.id, prefix, n)
  if first < 0 then trace.fail("reg.range: " .. core.error_message()) end
  t.reg_ranges[#t.reg_ranges + 1] = { prefix, n }
  local a = table_new(n, 1)
  a.n = n
  for i = 0, n - 1 do a[i] = make(first + i, ty, t) end
  if core.append_raw(t.mod, t.fn, ".reg ." .. ty.name .. " \t" .. prefix .. "<" .. n .. ">;") ~= 0 then trace.fail(core.error_message()) end
  return a
end

--- Accumulator fragments for mma/wgmma: an array, optionally zeroed with mov.
function M.fragments(ty, n, zero)
  local a = M.array(ty, n)
  if zero then for i = 0, n - 1 do emit_up(mov_form(ty), 2, a[i], 0) end end
  return a
end

--- A new predicate register.
function M.pred()
  return new(trace.need("reg.pred"), types.pred)
end

--- The cvt opcode that turns a value of type from into type to.
local function cvt_opcode(to, from)
  local fi, ti = types.is_float(from), types.is_float(to)
  -- cvt has no .bN types: bit types convert as unsigned
  local tn = to.kind == "b" and ("u" .. to.bits) or to.name
  local fn = from.kind == "b" and ("u" .. from.bits) or from.name
  if fi and not ti then return "cvt.rzi." .. tn .. "." .. fn end
  if fi and ti and to.bits < from.bits then return "cvt.rn." .. tn .. "." .. fn end
  if not fi and ti then return "cvt.rn." .. tn .. "." .. fn end
  return "cvt." .. tn .. "." .. fn
end

local cvt_forms = {}   -- to -> from -> form of the cvt between them
local function make_cvt_form(to, from) return F(cvt_opcode(to, from)) end
--- The form of the cvt from type `from` to type `to` (interned once per pair).
local function cvt_form(to, from) return memo2(cvt_forms, to, from, make_cvt_form) end

--- The type a source value carries, if any (registers, specials, typed imms).
local function source_type(src)
  local mt = getmetatable(src)
  if mt == Reg then return src[TYPE] end
  if mt and mt.__source_type then return mt.__source_type(src) end
  return nil
end
M.source_type = source_type

--- A new register of type ty holding src: `mov` when the bits carry over
-- unchanged, `cvt` when the value must be converted (one instruction).
function M.from(src, ty)
  local t = trace.need("reg.from")
  local st = source_type(src)
  ty = ty or st
  if not ty then trace.fail("reg.from: give a type for an untyped source") end
  local r = new(t, ty)
  local same = not st or st == ty or (st.bits == ty.bits and types.is_int(st) and types.is_int(ty))
    or (st.bits == ty.bits and (st.kind == "b" or ty.kind == "b"))
  emit_up(same and mov_form(ty) or cvt_form(ty, st), 2, r, src)
  return r
end

--- Emit `mov` of v into this register (in-place update, one instruction).
function Reg:set(v)
  emit_up(mov_form(self.type), 2, self, constant(self.type, v))
  return self
end

-- -------------------------------------------------------------- operators

local arith_of = {}   -- type -> the type arithmetic spells it with
--- The PTX type suffix arithmetic uses for a register type (b -> u).
local function arith_type(ty)
  local at = arith_of[ty]
  if not at then
    at = ty.kind == "b" and types["u" .. ty.bits] or ty
    arith_of[ty] = at
  end
  return at
end

--- Is the type an integer (u, s, b) / a float (scalar or packed)?
local function is_int(ty) local k = ty.kind return k == "u" or k == "s" or k == "b" end
local function is_float(ty) local k = ty.kind return k == "f" or k == "h" end

--- Result type of a binary operation between a and b (one is a register).
local function join(op, a, b)
  local ta, tb = source_type(a), source_type(b)
  if not ta then return tb end
  if not tb or ta == tb then return ta end
  if ta.bits ~= tb.bits or is_float(ta) ~= is_float(tb) or ta.kind == "p" or tb.kind == "p" then
    trace.fail(("operator %s mixes %s and %s; convert one side first with reg.from(x, %s)")
      :format(op, ta.name, tb.name, ta.name))
  end
  if is_float(ta) then
    trace.fail(("operator %s mixes %s and %s"):format(op, ta.name, tb.name))
  end
  return ta.kind == "b" and tb or ta
end

--- An operator: `op.<type> d, a, b` into a fresh register of the joined
-- type; int and float are the opcode before the type for each kind.
local function binop(int, float, sym)
  local what = function() return "operator " .. sym end
  return function(a, b)
    local ty = join(sym, a, b)
    local at = arith_type(ty)
    local d = new(active(what), ty)
    emit_up(TF(is_int(at) and int or float, at), 3, d, a, b)
    return d
  end
end

Reg.__add = binop("add", "add", "+")
Reg.__sub = binop("sub", "sub", "-")
Reg.__mul = binop("mul.lo", "mul", "*")
Reg.__div = binop("div", "div.rn", "/")
local rem = binop("rem", "rem", "%")
Reg.__mod = function(a, b)
  local ty = join("%", a, b)
  if not is_int(ty) then trace.fail("operator % needs integer registers, got " .. ty.name) end
  return rem(a, b)
end

--- -x: neg for numbers; a negated view for predicates (no instruction).
Reg.__unm = function(a)
  if a.type == types.pred then return setmetatable({ reg = a }, NegPred) end
  local at = arith_type(a.type)
  if at.kind == "u" then at = types["s" .. at.bits] end
  local d = new(trace.need("operator -"), a.type)
  emit_up(TF("neg", at), 2, d, a)
  return d
end

--- Remember predicate p, just computed by `how` at the user's line, until
-- an instruction uses it (a guard, branch or operand): a Lua `if p then`
-- tests a table, always true, and traces its body for every lane.
local function fresh_pred(t, p, how)
  local u = t.unused_preds
  if not u then u = {}; t.unused_preds = u end
  local src, line = trace.where(2)
  u[p.id] = { reg = p, how = how, src = src, line = line }
end

--- Mark predicate p (or -p) used: a guard made from it reaches no operand slot.
function M.use_pred(t, p)
  mark_used(t, (M.is(p) and p or p.reg)[ID])
end

--- Warn once per predicate the function just traced computed and never
-- used (the trap of `if a:lt(b) then ... end`); then forget them.
function M.warn_unused_preds(t)
  local u = t.unused_preds
  t.unused_preds = nil
  if not u then return end
  local list = {}
  for _, e in pairs(u) do list[#list + 1] = e end
  table.sort(list, function(a, b) return a.line < b.line end)
  for _, e in ipairs(list) do
    io.stderr:write(trace.format_where(e.src, e.line), ": warning: predicate ", tostring(e.reg), " from :", e.how,
      " is never used as a guard, branch or operand (a Lua `if` on it is always true); use ptx.if_(p, fn) or ptx.at(p)\n")
  end
end

--- Guarded comparisons: Lua turns < and == into booleans, so use methods.
local function compare(cmp)
  local what, prefix = function() return "comparison :" .. cmp end, "setp." .. cmp
  return function(a, b)
    local ty = arith_type(join(cmp, a, b))
    local t = active(what)
    local p = new(t, types.pred)
    emit_up(TF(prefix, ty), 3, p, a, b)
    fresh_pred(t, p, cmp)
    return p
  end
end
for _, c in ipairs { "eq", "ne", "lt", "le", "gt", "ge" } do Reg[c] = compare(c) end

--- Emit a bitwise operation on b-typed PTX (and/or/xor).
local sized = { b = {}, u = {} }   -- kind -> type -> the type of its width and that kind (false: none)

--- The form of `opname.<kind><N>` for a register type of N bits (shl.b32,
-- shr.u64), or with logical = true `opname.pred` for a predicate (and.pred).
local function sized_form(opname, kind, ty, logical)
  if logical and ty == types.pred then return TF(opname, ty) end
  local st = sized[kind][ty]
  if st == nil then
    st = types[kind .. ty.bits] or false
    sized[kind][ty] = st
  end
  if st then return TF(opname, st) end
  return F(opname .. "." .. kind .. ty.bits)   -- no such type: the core names what is wrong
end

local function bitop(opname)
  local what = function() return ":" .. opname end
  return function(a, b)
    local ty = join(opname, a, b)
    local d = new(active(what), ty)
    emit_up(sized_form(opname, "b", ty, true), 3, d, a, b)
    if ty == types.pred then fresh_pred(d.trace, d, opname) end
    return d
  end
end
Reg.band, Reg.bor, Reg.bxor = bitop("and"), bitop("or"), bitop("xor")
Reg.and_, Reg.or_, Reg.xor = Reg.band, Reg.bor, Reg.bxor

--- Bitwise / logical not.
function Reg:bnot()
  local d = new(trace.need(":bnot"), self.type)
  emit_up(sized_form("not", "b", self.type, true), 2, d, self)
  if self.type == types.pred then fresh_pred(d.trace, d, "bnot") end
  return d
end
Reg.not_ = Reg.bnot

--- Shift left by n bits.
function Reg:shl(n)
  local d = new(trace.need(":shl"), self.type)
  emit_up(sized_form("shl", "b", self.type), 3, d, self, n)
  return d
end

--- Shift right (arithmetic for signed registers, logical otherwise).
function Reg:shr(n)
  local d = new(trace.need(":shr"), self.type)
  emit_up(self.type.kind == "s" and TF("shr", self.type) or sized_form("shr", "u", self.type), 3, d, self, n)
  return d
end

--- Emit a unary or binary typed instruction (min, max, abs, ...).
local function typed(opname, float_mods)
  local what, float = function() return ":" .. opname end, opname .. float_mods
  return function(a, b)
    local ty = arith_type(b ~= nil and join(opname, a, b) or a.type)
    local d = new(active(what), a.type)
    local op = TF(is_float(ty) and float or opname, ty)
    if b ~= nil then emit_up(op, 3, d, a, b) else emit_up(op, 2, d, a) end
    return d
  end
end
Reg.min, Reg.max, Reg.abs = typed("min", ""), typed("max", ""), typed("abs", "")

--- self * b + c in one instruction (fma.rn for floats, mad.lo for integers).
function Reg:fma(b, c)
  local ty = arith_type(join("fma", self, b))
  local d = new(trace.need(":fma"), self.type)
  emit_up(TF(is_float(ty) and "fma.rn" or "mad.lo", ty), 4, d, self, b, c)
  return d
end

--- 32x32 -> 64-bit product (mul.wide): the way to offset a 64-bit pointer.
function Reg:mul_wide(b)
  local ty = arith_type(self.type)
  if ty.bits ~= 32 and ty.bits ~= 16 or not types.is_int(ty) then
    trace.fail(":mul_wide needs a 16- or 32-bit integer register, got " .. self.type.name)
  end
  local d = new(trace.need(":mul_wide"), types[ty.kind .. (ty.bits * 2)])
  emit_up(F("mul.wide." .. ty.name), 3, d, self, b)
  return d
end

--- The 64-bit integer of a 16- or 32-bit one, sign-extended for signed
-- registers (cvt.u64.u32 / cvt.s64.s32): the visible step before 64-bit
-- address arithmetic (`p + i:widen():shl(2)`).
function Reg:widen()
  local ty = self.type
  if not types.is_int(ty) or (ty.bits ~= 16 and ty.bits ~= 32) then
    trace.fail(":widen needs a 16- or 32-bit integer register, got " .. ty.name .. (ty.bits == 64 and " (already 64-bit)" or ""))
  end
  local to = ty.kind == "s" and types.s64 or types.u64
  local d = new(trace.need(":widen"), to)
  trace.emit(F("cvt." .. to.name .. "." .. (ty.kind == "s" and ty.name or ("u" .. ty.bits))), d, self)
  return d
end

--- reg.widen(r) is r:widen().
function M.widen(r)
  if not M.is(r) then trace.fail("reg.widen: expected a register, got " .. tostring(r)) end
  return r:widen()
end

--- Convert to another type (cvt or mov, one instruction): x:to(f32).
function Reg:to(ty)
  return M.from(self, ty)
end

return M
