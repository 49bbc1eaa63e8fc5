--- Ampere tensor-core instructions: typed wrappers for mma.sync, ldmatrix,
-- stmatrix and movmatrix (each call appends exactly one instruction) and
-- fragment layout helpers telling which tile element each register of each
-- lane holds, from the PTX ISA's figures.
--
--   ptx.mma{ shape = "m16n8k16", atype = bf16, d = acc, a = fa, b = fb, c = acc }
--   ptx.ldmatrix{ d = fa, addr = ptx.addr(p), trans = false }   -- .x4 from #d
--   ampere.layout("m16n8k16", bf16, "a").coord(lane, r, e) --> row, col
local trace = require "pyptx.trace"
local types = require "pyptx.types"
local operands = require "pyptx.operands"
local reg = require "pyptx.reg"
local isa = require "pyptx.isa"
local argcheck = require "pyptx.args"

local M = {}

-- -------------------------------------------------------------- the table

-- Every mma.sync shape/type pair of the C table (src/lpx_isa.def,
-- LPX_MMA_SHAPES), keyed "m16n8k16.f16": m, n, k, the A/B fragment
-- registers (a, b), sm, the accumulator types (acc) and quad / same_acc.
local SHAPES = isa.mma_shapes
-- A/B element types that share a row of SHAPES.
local FAMILY = isa.mma_family_of
M.SHAPES = SHAPES

local tname = types.name_of

--- The SHAPES row of (shape, atype), or nil and a message.
local function lookup(shape, atype)
  local a = tname(atype)
  local fam = FAMILY[a]
  if not fam then return nil, ("A/B type %s is not an mma.sync input type (f16 bf16 tf32 f64 s8 u8 s4 u4 b1 e4m3 e5m2)"):format(tostring(a)) end
  local row = SHAPES[tostring(shape) .. "." .. fam]
  if not row then
    local ok = {}
    for key in pairs(SHAPES) do
      local s, f = key:match("^(.-)%.(.*)$")
      if f == fam then ok[#ok + 1] = s end
    end
    table.sort(ok)
    return nil, ("mma.sync has no shape %s for .%s inputs; valid: %s"):format(tostring(shape), a, table.concat(ok, " "))
  end
  return row
end

--- Register counts of one mma form: { a =, b =, c =, d = } (c and d by ctype/dtype).
function M.counts(shape, atype, ctype, dtype)
  local row, err = lookup(shape, atype)
  if not row then error(err, 2) end
  local a = tname(atype)
  ctype, dtype = tname(ctype) or M.default_acc(a), tname(dtype or ctype) or M.default_acc(a)
  local function acc(t)
    if row.quad then return t == "f16" and 4 or 8 end
    return t == "f16" and row.acc_regs / 2 or row.acc_regs   -- f16: f16x2 pairs per lane
  end
  return { a = row.a, b = row.b, c = acc(ctype), d = acc(dtype), m = row.m, n = row.n, k = row.k, sm = row.sm }
end

--- The accumulator type mma uses by default for an input type (its
-- family's first in the C table; f32 for a type mma does not take).
function M.default_acc(a)
  local fam = isa.mma_families[FAMILY[tname(a)]]
  return fam and fam.default_acc or "f32"
end

-- ---------------------------------------------------------- fragment layouts

--- The m8n8k4 .f16 quad-pair layouts (sm_70): quad pair q = (lane%16)/4
-- computes its own 8x8x4 product; logical thread t = lane%4 + 4(lane/16).
-- coord returns row, col and q. major: "row"/"col" (A default row, B col).
local function quad_layout(which, acc_type, major)
  local function lt(lane) return lane % 4 + 4 * math.floor(lane / 16), math.floor((lane % 16) / 4) end
  if which == "a" or which == "b" then
    local kmajor = (major or (which == "a" and "row" or "col")) == (which == "a" and "row" or "col")
    return { regs = 2, elems = 2, rows = which == "a" and 8 or 4, cols = which == "a" and 4 or 8, quad = true,
      coord = function(lane, r, e)
        local t, q = lt(lane)
        local v = 2 * r + e
        local mn, k = t, v                                          -- K-contiguous: t owns a row (A) / column (B)
        if not kmajor then mn, k = 4 * math.floor(t / 4) + v, t % 4 end
        if which == "a" then return mn, k, q end
        return k, mn, q
      end }
  end
  local f32 = (acc_type == nil) or (type(acc_type) == "table" and acc_type.name or acc_type) == "f32"
  return { regs = f32 and 8 or 4, elems = f32 and 1 or 2, rows = 8, cols = 8, quad = true,
    coord = function(lane, r, e)
      local t, q = lt(lane)
      if not f32 then return t, 2 * r + e, q end
      local b = bit.band
      return b(t, 1) + 2 * b(bit.rshift(r, 1), 1) + 4 * b(bit.rshift(t, 2), 1),
             2 * b(bit.rshift(t, 1), 1) + b(r, 1) + 4 * b(bit.rshift(r, 2), 1), q
    end }
end

--- Fragment layout of operand which ("a", "b", "c" or "d") of an mma form:
-- { regs = registers per lane, elems = elements per register, rows, cols,
--   coord = function(lane, r, e) -> row, col }: register r (0-based) of
-- lane, element e (0-based, low bits first) holds tile element (row, col).
-- For the sm_70 m8n8k4 .f16 form coord also returns the quad pair, and
-- major ("row"/"col") gives A's or B's layout.
function M.layout(shape, atype, which, acc_type, major)
  local row, err = lookup(shape, atype)
  if not row then error(err, 2) end
  if row.quad then return quad_layout(which, acc_type, major) end
  local a = tname(atype)
  local unit = a == "f64" and 64 or 32
  local per = unit / isa.mtypes[a].bits      -- A/B elements per register
  local mb = row.m / 8                       -- 8-row blocks of A and C
  local cnt = M.counts(shape, a, acc_type, acc_type)
  if which == "a" then
    return { regs = cnt.a, elems = per, rows = row.m, cols = row.k, coord = function(lane, r, e)
      local g, t = math.floor(lane / 4), lane % 4
      return g + 8 * (r % mb), t * per + e + math.floor(r / mb) * 4 * per
    end }
  elseif which == "b" then
    return { regs = cnt.b, elems = per, rows = row.k, cols = row.n, coord = function(lane, r, e)
      local g, t = math.floor(lane / 4), lane % 4
      return t * per + e + r * 4 * per, g
    end }
  elseif which == "c" or which == "d" then
    local ct = tname(acc_type) or M.default_acc(a)
    if ct == "f16" then
      return { regs = cnt.c, elems = 2, rows = row.m, cols = row.n, coord = function(lane, r, e)
        local g, t = math.floor(lane / 4), lane % 4
        return g + 8 * r, 2 * t + e
      end }
    end
    return { regs = cnt.c, elems = 1, rows = row.m, cols = row.n, coord = function(lane, r)
      local g, t = math.floor(lane / 4), lane % 4
      return g + 8 * math.floor(r / 2), 2 * t + r % 2
    end }
  end
  error("ampere.layout: which must be \"a\", \"b\", \"c\" or \"d\", got " .. tostring(which), 2)
end

--- The ldmatrix layout: lane's register r (matrix r), element e (0/1) of an
-- 8x8 b16 matrix holds (row, col); with trans the pair runs down a column.
function M.ldmatrix_coord(lane, e, trans)
  local row, col = math.floor(lane / 4), 2 * (lane % 4) + e
  if trans then return col, row end
  return row, col
end

--- Which row address lane gives for an ldmatrix .xN: matrix lane/8, row lane%8.
function M.ldmatrix_row(lane)
  return math.floor(lane / 8), lane % 8
end

-- ------------------------------------------------------------- operands

--- A fragment argument as a vector operand table: a reg.array (0-based with
-- .n), a Lua list, or one register (a one-element vector).
local function vec(v, what, want)
  if v == nil then trace.fail(what .. " is missing") end
  if reg.is(v) then v = { v } end
  if type(v) ~= "table" then trace.fail(what .. " must be a register list or reg.array") end
  local out = {}
  if v.n and v[0] ~= nil then
    for i = 0, v.n - 1 do out[i + 1] = v[i] end
  else
    for i = 1, #v do out[i] = v[i] end
  end
  if want and #out ~= want then
    trace.fail(("%s must hold %d registers, got %d"):format(what, want, #out))
  end
  return out
end

--- An address argument: ptx.addr(...), a register or a shared allocation.
local function address(x)
  local mt = getmetatable(x)
  if reg.is(x) or (mt and mt.address) then return operands.addr(x) end
  return x
end

local forms = {}
--- Interned form of an opcode string (the user's line on failure).
local function form(op)
  local id = forms[op]
  if not id then
    id = trace.form(op, true)
    forms[op] = id
  end
  return id
end

-- ------------------------------------------------------------------ mma

--- mma.sync.aligned: D = A * B + C for one warp. opts: shape, atype (btype
-- defaults to atype), ctype/dtype (default f32, f64 or s32 by input), d, a, b,
-- c (register lists or reg.arrays; c may be a number 0 only through
-- explicit zeroed fragments), satfinite (integer), bop ("xor"/"and" for b1),
-- alayout/blayout ("row"/"col", only for m8n8k4 .f16). The wrapper only
-- spells the opcode: the C validator checks the shape, types, layouts,
-- accumulators and fragment counts (src/lpx_validate.c, check_mma).
function M.mma(opts)
  if type(opts) ~= "table" then trace.fail("ptx.mma{ shape = ..., atype = ..., d = , a = , b = , c = }: give a table") end
  local a = tname(opts.atype or opts.type)
  local b = tname(opts.btype) or a
  local ct = tname(opts.ctype) or M.default_acc(a)
  local dt = tname(opts.dtype) or ct
  local parts = { "mma.sync.aligned", tostring(opts.shape), opts.alayout or "row", opts.blayout or "col" }
  if opts.satfinite then parts[#parts + 1] = "satfinite" end
  parts[#parts + 1] = dt .. "." .. tostring(a) .. "." .. tostring(b) .. "." .. ct
  if a == "b1" then parts[#parts + 1] = (opts.bop or "xor") .. ".popc" end
  local op = table.concat(parts, ".")
  return trace.emit(form(op), vec(opts.d, "ptx.mma: d"), vec(opts.a, "ptx.mma: a"), vec(opts.b, "ptx.mma: b"),
    vec(opts.c, "ptx.mma: c"))
end

-- ------------------------------------------------------- ldmatrix / stmatrix

local X = { [1] = "x1", [2] = "x2", [4] = "x4" }

--- ldmatrix.sync.aligned.m8n8.xN{.trans}.shared.b16: opts d (1, 2 or 4
-- b32 registers: .xN from the count), addr (ptx.addr, a u32 shared-window
-- register or an allocation), trans. Positional: ptx.ldmatrix(d, addr[, trans]).
function M.ldmatrix(opts, addr, trans)
  if reg.is(opts) or (type(opts) == "table" and opts.d == nil and (opts[1] or opts[0])) then
    opts = { d = opts, addr = addr, trans = trans }
  end
  local d = vec(opts.d, "ptx.ldmatrix: d")
  if not X[#d] then trace.fail(("ptx.ldmatrix: d must hold 1, 2 or 4 registers (.x1 .x2 .x4), got %d"):format(#d)) end
  local op = ("ldmatrix.sync.aligned.%s.%s%s.shared.%s"):format(opts.shape or "m8n8", X[#d],
    opts.trans and ".trans" or "", tname(opts.type) or "b16")
  if opts.addr == nil then trace.fail("ptx.ldmatrix: addr is missing") end
  return trace.emit(form(op), d, address(opts.addr))
end

--- stmatrix.sync.aligned.m8n8.xN{.trans}.shared.b16 [addr], {s...} (sm_90):
-- opts s (1, 2 or 4 b32 registers), addr, trans. Positional: (addr, s[, trans]).
function M.stmatrix(opts, s, trans)
  if type(opts) ~= "table" or opts.addr == nil then opts = { addr = opts, s = s, trans = trans } end
  local src = vec(opts.s or opts.src, "ptx.stmatrix: s")
  if not X[#src] then trace.fail(("ptx.stmatrix: s must hold 1, 2 or 4 registers (.x1 .x2 .x4), got %d"):format(#src)) end
  local op = ("stmatrix.sync.aligned.%s.%s%s.shared.%s"):format(opts.shape or "m8n8", X[#src],
    opts.trans and ".trans" or "", tname(opts.type) or "b16")
  return trace.emit(form(op), address(opts.addr), src)
end

--- movmatrix.sync.aligned.m8n8.trans.b16 d, a: transpose an 8x8 b16 matrix
-- held one pair per lane (the ldmatrix layout) across the warp.
function M.movmatrix(d, a)
  if type(d) == "table" and not reg.is(d) then d, a = d.d, d.a end
  if not reg.is(d) or a == nil then trace.fail("ptx.movmatrix(d, a) takes two 32-bit registers") end
  return trace.emit(form("movmatrix.sync.aligned.m8n8.trans.b16"), d, a)
end

--- Fresh registers for one mma's fragments: { a =, b =, c = } reg.arrays
-- (b32 for packed inputs, f64 for f64, the accumulator type for c).
function M.fragments(shape, atype, ctype, zero)
  local a = tname(atype)
  local ct = tname(ctype) or M.default_acc(a)
  local cnt = M.counts(shape, a, ct, ct)
  local in_t = a == "f64" and types.f64 or types.b32
  local acc_t = (ct == "f16" and types.b32) or types[ct]
  return { a = reg.array(in_t, cnt.a), b = reg.array(in_t, cnt.b), c = reg.fragments(acc_t, cnt.c, zero) }
end

argcheck.sign(M, "ampere", {
  counts = { "shape: string", "atype: type|string", "ctype: type|string?", "dtype: type|string?" },
  default_acc = { "a: type|string" },
  layout = { "shape: string", "atype: type|string", "which: string", "acc_type: type|string?", "major: string?" },
  ldmatrix_coord = { "lane: integer", "e: integer", "trans: boolean?" },
  ldmatrix_row = { "lane: integer" },
  mma = { "opts: table" },
  ldmatrix = { "opts: table|register" },
  fragments = { "shape: string", "atype: type|string", "ctype: type|string?" },
})

return M
