--- The `ptx` namespace: the instruction builder `ptx.inst.<op>.<mod>...(...)`,
-- special registers, guards, labels and branches, structured control flow,
-- and typed wrappers that infer the type suffix from their registers.
-- Every call that names one instruction appends exactly one.
local ffi = require "ffi"
local core = require "pyptx.core"
local trace = require "pyptx.trace"
local types = require "pyptx.types"
local reg = require "pyptx.reg"
local operands = require "pyptx.operands"
local argcheck = require "pyptx.args"
local flow = require "pyptx.flow"
local devlib = require "pyptx.devlib"
local ptxparse = require "pyptx.ptxparse"
local ampere = require "pyptx.ampere"
local async = require "pyptx.async"
local hopper = require "pyptx.hopper"
local blackwell = require "pyptx.blackwell"

local M = {}
local F = reg.form

M.addr, M.imm, M.sink, M.pipe, M.paren = operands.addr, operands.imm, operands.sink, operands.pipe, operands.paren
M.bracket, M.sym = operands.bracket, operands.sym
M["_"] = operands.sink

-- Video-instruction operands: a register with a byte/half selector
-- (ptx.vsel(r, "b0") -> %r1.b0) and vmad's negated source (ptx.vneg(r) -> -%r1).
local VideoOpd, REG_NEG = {}, tonumber(ffi.C.LPX_REG_NEG)
VideoOpd.__operand = function(v, o, t, k)
  if v.reg.trace ~= t then trace.fail("register " .. tostring(v.reg) .. " belongs to another kernel trace", 4) end
  o.kind, o.type, o.id, o.aux, o.ival, o.fval = trace.OPD.REG, v.reg.type.id, v.reg.id, v.neg and REG_NEG or 0, v.sel, 0
  return k + 1
end
VideoOpd.__source_type = function(v) return v.reg.type end

--- The register view a video operand helper wraps, or a failure naming who.
local function video_reg(r, who)
  if getmetatable(r) == VideoOpd then return r end
  if not reg.is(r) then trace.fail(who .. ": expected a register, got " .. tostring(r), 3) end
  return { reg = r, sel = 0, neg = false }
end

--- r with a video selector: "b0".."b3", "h0"/"h1", "h10", "b3210", "b7654" ...
function M.vsel(r, sel)
  local v = video_reg(r, "ptx.vsel")
  local code = type(sel) == "string" and core.rules_selector(sel) or 0
  if code == 0 then
    trace.fail("ptx.vsel: " .. tostring(sel) .. " is not a video selector (a b or h and 1-4 digits: \"b0\", \"h1\", \"h10\", \"b3210\")", 2)
  end
  return setmetatable({ reg = v.reg, sel = code, neg = v.neg }, VideoOpd)
end

--- r negated, as vmad's sources take it (-%r1).
function M.vneg(r)
  local v = video_reg(r, "ptx.vneg")
  return setmetatable({ reg = v.reg, sel = v.sel, neg = true }, VideoOpd)
end

-- ----------------------------------------------------------- the builder

-- Spellings Lua cannot index with a dot, and their PTX modifiers.
local ALIASES = {
  and_ = "and", or_ = "or", xor_ = "xor", not_ = "not", local_ = "local",
  const_ = "const", global_ = "global", async_ = "async", ["return"] = "ret",
}
-- Prefixes whose first "_" stands for "::" (shared_cta -> shared::cta).
local COLON_PREFIXES = { "shared_", "L1_", "L2_", "param_", "cta_group_", "async_shared_", "async_global_" }

--- The PTX spelling of a Lua key in an opcode chain.
local function spell(key)
  local a = ALIASES[key]
  if a then return a end
  if key:match("^_%d") then return key:sub(2) end
  local t = key:match("^tensor_(%d+d)$")
  if t then return "tensor." .. t end
  for _, p in ipairs(COLON_PREFIXES) do
    if key:sub(1, #p) == p then
      return key:sub(1, #p - 1) .. "::" .. key:sub(#p + 1)
    end
  end
  return (key:gsub("_$", ""))
end
M.spell = spell

local Node = {}

--- ptx.inst.ld.global: extend the opcode; nodes are memoized per spelling.
Node.__index = function(node, key)
  if type(key) ~= "string" then return nil end
  local base = rawget(node, "opcode")
  local child = setmetatable({ opcode = base and (base .. "." .. spell(key)) or spell(key) }, Node)
  rawset(node, key, child)
  return child
end

local raw_forms = {}   -- opcode text -> form id, for opcodes of the table (others warn each time)

--- ptx.inst.add.u32(d, a, b): intern the form once, then append.
Node.__call = function(node, ...)
  if not rawget(node, "opcode") then
    -- ptx.inst("ld.global.nc.v4.f32", dst, addr): the raw escape hatch.
    local opcode = ...
    local form = raw_forms[opcode]
    if form then return trace.emit(form, select(2, ...)) end
    if type(opcode) ~= "string" then trace.fail("ptx.inst(opcode, ...) needs the opcode as a string") end
    local info
    form, info = trace.form(opcode, false)
    if info.op >= 0 then raw_forms[opcode] = form end
    return trace.emit(form, select(2, ...))
  end
  local form = rawget(node, "form")
  if not form then
    form = trace.form(node.opcode, true)
    rawset(node, "form", form)
  end
  return trace.emit(form, ...)
end

M.inst = setmetatable({}, Node)

-- Families that live in their own modules:
-- ptx.mma / ptx.ldmatrix / ptx.cp / ptx.wgmma / ptx.mbarrier / ptx.tcgen05 ...
local FAMILIES = {
  [ampere] = { "mma", "ldmatrix", "stmatrix", "movmatrix" },
  [async] = { "cp", "mbarrier", "fence", "cluster", "tensormap" },
  [hopper] = { "wgmma", "elect", "setmaxnreg", "griddepcontrol" },
  [blackwell] = { "tcgen05" },
}
for mod, keys in pairs(FAMILIES) do
  for _, key in ipairs(keys) do M[key] = mod[key] end
end

--- A view of v (a function, builder node or wrapper table) whose calls
-- guard the instruction they append. The guard is set when the call is
-- made, after its arguments are evaluated, so operators inside the
-- arguments (ptx.at(p).inst.st.shared.f32(ptx.addr(a + 4), x)) stay unguarded.
local function guarded(v, t, p)
  if type(v) == "function" then
    return function(...) t.at_where = nil; flow.set_guard(t, p); return v(...) end
  end
  if type(v) ~= "table" then return v end
  return setmetatable({}, {
    __index = function(_, k) return guarded(v[k], t, p) end,
    __call = function(_, ...) t.at_where = nil; flow.set_guard(t, p); return v(...) end,
  })
end

--- Guard one instruction: ptx.at(p).inst.bra(l) emits `@p bra l`;
-- ptx.at(-p).ret() emits `@!p ret`. Returns a guarded view of the ptx
-- namespace: the instruction called through it carries the guard.
function M.at(p)
  local t = trace.need("ptx.at")
  if not reg.is_pred(p) then trace.fail("ptx.at needs a predicate register (or -p), got " .. tostring(p)) end
  if t.at_where then
    trace.fail("the ptx.at at " .. t.at_where .. " guards nothing; call the instruction through it: ptx.at(p).inst.op(...)")
  end
  t.at_where = trace.format_where(trace.where(2))
  return guarded(M, t, p)
end

-- ------------------------------------------- labels, branches, structured control

M.label, M.bra, M.bra_uni, M.ret, M.exit = flow.label, flow.bra, flow.bra_uni, flow.ret, flow.exit
M.if_, M.loop, M.range = flow.if_, flow.loop, flow.range

-- ------------------------------------------------------- special registers

--- ptx.special.tid.x() / ptx.special.laneid(): special register operands,
-- one per row of the C core's table (LPX_SPECIALS in src/lpx_isa.def).
M.special = {}
for id = 0, core.special_count() - 1 do
  local spelling = ffi.string(core.special_name(id))
  local s = operands.special(spelling)
  local name, dim = spelling:match("^%%([%w_]+)%.(%a)$")
  if name then
    M.special[name] = M.special[name] or {}
    M.special[name][dim] = function() return s end
  else
    M.special[spelling:sub(2)] = function() return s end
  end
end

--- Parse PTX text (instructions, labels, .reg declarations, { } blocks)
-- and append it to the trace, each instruction validated like a traced one;
-- %{x} in the text is replaced by env.x (a register's PTX name).
function M.raw(text, env) return ptxparse.append(text, env) end

--- Module-level PTX (globals with initializers, .extern declarations).
function M.raw_module(text) return ptxparse.append_module(text) end

--- CUDA's printf from a kernel (pyptx.devlib): ptx.printf("x = %d\n", r).
function M.printf(fmt, ...) return devlib.printf(fmt, ...) end

--- CUDA's assert (pyptx.devlib): threads where pred is false stop the launch with msg.
function M.assert(pred, msg) return devlib.assert(pred, msg) end

--- Wrap body's instructions in a PTX { } block.
function M.scope(body)
  trace.raw_line("{")
  body()
  trace.raw_line("}")
end

-- -------------------------------------------------------- typed wrappers

--- The element type of a value: a register, or the first of a vector.
local function value_type(v, what)
  if type(v) == "table" and getmetatable(v) == nil then v = v[1] end
  local ty = reg.source_type(v)
  if not ty then trace.fail(what .. ": cannot infer the type; pass a register") end
  return ty
end

--- A memory chain (ptx.ld.global.nc(dst, addr)) that adds .vN and the type.
local function memory_chain(base, data_arg)
  local Chain = {}
  Chain.__index = function(node, key)
    local child = setmetatable({ opcode = node.opcode .. "." .. spell(key), forms = {} }, Chain)
    rawset(node, key, child)
    return child
  end
  Chain.__call = function(node, ...)
    local v = select(data_arg, ...)
    local ty = value_type(v, node.opcode)
    local vec = type(v) == "table" and getmetatable(v) == nil and #v or 1
    local key = vec * 1000 + ty.id
    local form = node.forms[key]
    if not form then
      local name = ty.kind == "p" and "pred" or ty.name
      if ty.kind == "h" or (ty.kind == "f" and ty.bits ~= 32 and ty.bits ~= 64) then name = "b" .. ty.bits end
      form = F(node.opcode .. (vec > 1 and (".v" .. vec) or "") .. "." .. name)
      node.forms[key] = form
    end
    return trace.emit(form, ...)
  end
  return setmetatable({ opcode = base, forms = {} }, Chain)
end

--- ptx.ld.global(dst, addr), ptx.st.shared(addr, src), ptx.ldu.global(...):
-- the type and vector width come from the register(s).
M.ld = memory_chain("ld", 1)
M.ldu = memory_chain("ldu", 1)
M.st = memory_chain("st", 2)

--- mov.<type of d> d, s
function M.mov(d, s)
  return trace.emit(F("mov." .. reg.mov_name(value_type(d, "ptx.mov"))), d, s)
end

--- cvt with the types of d and s; rnd ("rn", "rzi", ...) when needed.
function M.cvt(d, s, rnd)
  local dt, st = value_type(d, "ptx.cvt"), value_type(s, "ptx.cvt")
  return trace.emit(F("cvt." .. (rnd and rnd .. "." or "") .. dt.name .. "." .. st.name), d, s)
end

--- bar.sync id[, count]
function M.bar_sync(id, count)
  if count then return trace.emit(F("bar.sync"), id or 0, count) end
  return trace.emit(F("bar.sync"), id or 0)
end

--- shfl.sync.<mode>.b32 d, a, b, c, mask (mask defaults to all lanes).
function M.shfl_sync(mode, d, a, b, c, mask)
  return trace.emit(F("shfl.sync." .. mode .. ".b32"), d, a, b, c, mask or 0xffffffff)
end

--- vote.sync.<mode> d, p, mask (ballot gives b32, others a predicate).
function M.vote_sync(mode, d, p, mask)
  return trace.emit(F("vote.sync." .. mode .. (mode == "ballot" and ".b32" or ".pred")), d, p, mask or 0xffffffff)
end

--- redux.sync.<op>.<type of d> d, a, mask
function M.redux_sync(op, d, a, mask)
  return trace.emit(F("redux.sync." .. op .. "." .. value_type(d, "ptx.redux_sync").name), d, a, mask or 0xffffffff)
end

--- atom.<space>.<op>.<type> d, [addr], v (space defaults to global).
function M.atom(op, d, addr, v, space)
  local ty = value_type(d, "ptx.atom")
  return trace.emit(F("atom." .. (space or "global") .. "." .. op .. "." .. ty.name), d, addr, v)
end

--- red.<space>.<op>.<type> [addr], v
function M.red(op, addr, v, space)
  local ty = value_type(v, "ptx.red")
  return trace.emit(F("red." .. (space or "global") .. "." .. op .. "." .. ty.name), addr, v)
end

--- The suffix selp and mad spell for a type: halves as bits, b as u.
local function select_suffix(ty, what)
  if ty.kind == "p" then trace.fail(what .. ": predicates have no ." .. what:match("%.(%w+)") .. "; combine them with p:band(q) / p:bor(q)") end
  if ty.kind == "h" or (ty.kind == "f" and ty.bits ~= 32 and ty.bits ~= 64) then return "b" .. ty.bits end
  return ty.name
end

--- selp.<type of d> d, a, b, p: d = p ? a : b (p a predicate or -p).
function M.selp(d, a, b, p)
  if not reg.is_pred(p) then trace.fail("ptx.selp: the condition (argument 4) must be a predicate (or -p), got " .. tostring(p)) end
  return trace.emit(F("selp." .. select_suffix(value_type(d, "ptx.selp"), "ptx.selp")), d, a, b, p)
end

--- mad.<lo|hi|wide>.<type of a> d, a, b, c for integers: d = a*b + c with
-- the low or high half of the product, or the whole (wide: 16/32-bit a, d
-- twice as wide).
local function mad_int(half)
  local what = "ptx.mad." .. half
  return function(d, a, b, c)
    local ty = value_type(a, what)
    if not types.is_int(ty) then trace.fail(what .. " needs integer registers, got " .. ty.name .. "; use ptx.mad(d, a, b, c) for floats") end
    local name = ty.kind == "b" and ("u" .. ty.bits) or ty.name
    return trace.emit(F("mad." .. half .. "." .. name), d, a, b, c)
  end
end

--- ptx.mad(d, a, b, c): mad.lo for integer registers, mad.rn for f32/f64;
-- ptx.mad.lo / .hi / .wide name the integer half.
M.mad = setmetatable({ lo = mad_int("lo"), hi = mad_int("hi"), wide = mad_int("wide") }, {
  __call = function(self, d, a, b, c)
    local ty = value_type(a, "ptx.mad")
    if types.is_int(ty) then return self.lo(d, a, b, c) end
    if ty ~= types.f32 and ty ~= types.f64 then trace.fail("ptx.mad: no mad for " .. ty.name .. "; use ptx.inst.fma.rn." .. ty.name) end
    return trace.emit(F("mad.rn." .. ty.name), d, a, b, c)
  end,
})

-- ------------------------------------------------------------- params

--- ld.param.u64 of a tensor parameter's pointer (or any named param).
function M.param(spec, ty)
  local t = trace.need("ptx.param")
  local name = type(spec) == "table" and spec.param or spec
  ty = ty or (type(spec) == "table" and spec.param_type) or types.u64
  local r = reg.new(t, ty)
  trace.emit(F("ld.param." .. ty.name), r, operands.addr(name))
  return r
end

--- Global-space pointers of tensor params: ld.param + cvta.to.global each.
function M.global_ptrs(...)
  local out = {}
  for i = 1, select("#", ...) do
    local spec = select(i, ...)
    local p = M.param(spec, types.u64)
    local g = reg.new(trace.need("ptx.global_ptrs"), types.u64)
    trace.emit(F("cvta.to.global.u64"), g, p)
    out[i] = g
  end
  return unpack(out, 1, select("#", ...))
end

-- -------------------------------------------------------- warp helpers

M.warp = {}

--- Butterfly reduction of a 32-bit register across width lanes (in place):
-- log2(width) shfl.sync.bfly + op pairs; every lane ends with the result.
local function warp_reduce(opname, public)
  return function(x, width)
    width = width or 32
    if not reg.is(x) or x.type.bits ~= 32 then trace.fail("ptx.warp." .. public .. " needs a 32-bit register") end
    local t = trace.need("ptx.warp." .. public)
    local ty = x.type.kind == "b" and types.u32 or x.type
    local op = F(opname .. "." .. ty.name)
    local shfl = F("shfl.sync.bfly.b32")
    local tmp = reg.new(t, x.type)
    local off = width / 2
    while off >= 1 do
      trace.emit(shfl, tmp, x, off, 0x1f, 0xffffffff)
      trace.emit(op, x, x, tmp)
      off = off / 2
    end
    return x
  end
end
M.warp.reduce_sum = warp_reduce("add", "reduce_sum")
M.warp.reduce_max = warp_reduce("max", "reduce_max")
M.warp.reduce_min = warp_reduce("min", "reduce_min")

argcheck.sign(M, "ptx", {
  if_ = { "p: any", "then_fn: function", "else_fn: function?" },
  loop = { "body: function", "opts: table?" },
  scope = { "body: function" },
  shfl_sync = { "mode: string" },
  vote_sync = { "mode: string" },
  redux_sync = { "op: string" },
  atom = { "op: string" },
  red = { "op: string" },
  cvt = { "d: any", "s: any", "rnd: string?" },
})

return M
