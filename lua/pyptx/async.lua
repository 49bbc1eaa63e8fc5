--- Asynchronous copies and their synchronisation: Ampere `cp.async`,
-- Hopper `cp.async.bulk`, TMA `cp.async.bulk.tensor` (1-5D, tile and
-- im2col mode), bulk prefetches and reductions (`cp.reduce.async.bulk`),
-- tensor-map edits (`tensormap.replace`, `tensormap.cp_fenceproxy`), `mbarrier`, `fence` and cluster
-- helpers, reached as `ptx.cp`, `ptx.mbarrier`, `ptx.fence`, `ptx.cluster`
-- and `ptx.tensormap`.
--
-- Every function appends exactly one instruction unless its comment says
-- otherwise. Arguments are positional or one keyword table:
--   ptx.cp.async.bulk.tensor_2d{ dst = sA[0], src = A:tma_desc{box = {64, 64}},
--                                coord = {x, y}, mbar = bar[0] }
local bit = require "bit"
local trace = require "pyptx.trace"
local types = require "pyptx.types"
local reg = require "pyptx.reg"
local operands = require "pyptx.operands"
local flow = require "pyptx.flow"
local tma = require "pyptx.tma"
local argcheck = require "pyptx.args"

local M = {}
local F = reg.form

-- ------------------------------------------------------------ helpers

--- Append opcode with operands (forms are interned once per spelling).
local function emit(opcode, ...)
  return trace.emit(F(opcode), ...)
end

--- Fail at the user's line.
local fail = trace.fail

--- A fresh register of type ty in the active trace.
local function fresh(ty, what)
  return reg.new(trace.need(what), ty)
end

--- Is v a plain keyword table (not a register, address or allocation)?
local function is_kw(v)
  return type(v) == "table" and getmetatable(v) == nil and v[1] == nil and next(v) ~= nil
end

--- An address operand from an address, an allocation, a register or a symbol name.
local function as_addr(v, what)
  if v == nil then fail(what .. ": missing address operand") end
  if getmetatable(v) == operands.Addr then return v end
  return operands.addr(v)
end

--- A [a, {b, c}] operand (TMA tensor coordinates).
local Bracket = {}
Bracket.__index = Bracket
function Bracket.__operand(v, o, t, k, put)
  o.kind, o.type, o.id, o.aux, o.ival, o.fval = trace.OPD.BRACKET, -1, 0, 2, 0, 0
  k = k + 1
  k = put(t, k, v.base)
  return put(t, k, v.list)
end
M.Bracket = Bracket

--- The tensor-map operand of a TMA copy: [desc, {c0, c1, ...}]. rank
-- nil: a mode with its own coordinate count (tile::gather4), which the
-- validator checks.
-- into: a Bracket to fill instead of a new one (the caller packs it at once).
local function tensor_operand(desc, coord, rank, what, into)
  if type(coord) ~= "table" or (rank and #coord ~= rank) then
    fail(("%s: coord must list %s coordinate(s) (innermost first), got %s"):format(what, rank or "the mode's",
      type(coord) == "table" and #coord or tostring(coord)))
  end
  local base = desc
  if getmetatable(desc) == operands.Addr then base = desc.base end
  if base == nil then fail(what .. ": missing the tensor map (X:tma_desc{...} or a 64-bit address register)") end
  if into then
    into.base, into.list = base, coord
    return into
  end
  return setmetatable({ base = base, list = coord }, Bracket)
end

-- The tensor operand of the plain load, filled and packed once per copy.
local load_tmap = setmetatable({ base = false, list = false }, Bracket)

--- Is v a TMA descriptor operand (what X:tma_desc returns)?
local function is_tma(v)
  return type(v) == "table" and rawget(v, "tma") ~= nil
end

-- ------------------------------------------------------ Ampere cp.async

local cp_async = {}

--- cp.async.{ca,cg}.shared.global [dst], [src], size{, src_size}. size 4, 8
-- or 16 (.cg only takes 16); src_size < size zero-fills the rest.
local function cp_async_copy(cache, dst, src, size, src_size)
  if is_kw(dst) then
    local a = dst
    return cp_async_copy(a.cache or cache, a.dst, a.src, a.size, a.src_size)
  end
  size = size or 16
  if size ~= 4 and size ~= 8 and size ~= 16 then fail("cp.async: size must be 4, 8 or 16 bytes, got " .. tostring(size)) end
  cache = cache or (size == 16 and "cg" or "ca")
  if cache ~= "ca" and cache ~= "cg" then fail("cp.async: cache must be \"ca\" or \"cg\", got " .. tostring(cache)) end
  if cache == "cg" and size ~= 16 then fail("cp.async.cg copies 16 bytes; got size " .. size .. " (use .ca)") end
  local op = "cp.async." .. cache .. ".shared.global"
  if src_size ~= nil then
    return emit(op, as_addr(dst, "cp.async dst"), as_addr(src, "cp.async src"), size, src_size)
  end
  return emit(op, as_addr(dst, "cp.async dst"), as_addr(src, "cp.async src"), size)
end

--- ptx.cp.async.ca(dst, src, size[, src_size]) / .cg(...).
function cp_async.ca(...) return cp_async_copy("ca", ...) end
function cp_async.cg(...) return cp_async_copy("cg", ...) end

--- cp.async.commit_group.
function cp_async.commit_group() return emit("cp.async.commit_group") end

--- cp.async.wait_group n.
function cp_async.wait_group(n) return emit("cp.async.wait_group", n or 0) end

--- cp.async.wait_all.
function cp_async.wait_all() return emit("cp.async.wait_all") end

-- ------------------------------------------------ cp.async.bulk (Hopper)

local bulk = {}

--- cp.async.bulk: with mbar, global -> shared::cluster completing `size`
-- bytes on the barrier; without, shared::cta -> global in a bulk group.
local function bulk_copy(dst, src, size, mbar)
  if is_kw(dst) then
    local a = dst
    return bulk_copy(a.dst, a.src, a.size, a.mbar)
  end
  if type(size) == "number" and (size <= 0 or size % 16 ~= 0) then
    fail("cp.async.bulk: size must be a positive multiple of 16 bytes, got " .. tostring(size))
  end
  if size == nil then fail("cp.async.bulk: missing size") end
  if mbar ~= nil then
    return emit("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes",
      as_addr(dst, "cp.async.bulk dst"), as_addr(src, "cp.async.bulk src"), size, as_addr(mbar, "cp.async.bulk mbar"))
  end
  return emit("cp.async.bulk.global.shared::cta.bulk_group", as_addr(dst, "cp.async.bulk dst"),
    as_addr(src, "cp.async.bulk src"), size)
end

--- cp.async.bulk.commit_group.
function bulk.commit_group() return emit("cp.async.bulk.commit_group") end

--- cp.async.bulk.wait_group n (read = true: .read, wait until the sources may be reused).
function bulk.wait_group(n, read)
  if type(n) == "table" then n, read = n.n or n[1], n.read end
  return emit(read and "cp.async.bulk.wait_group.read" or "cp.async.bulk.wait_group", n or 0)
end

--- cp.async.bulk.wait_group.read n.
function bulk.wait_group_read(n) return emit("cp.async.bulk.wait_group.read", n or 0) end

--- The load mode of a tensor copy: "im2col" when the map (an X:tma_desc)
-- was built for it or the arguments say so (mode = "im2col" or offsets
-- given), else "tile"; a mismatch fails. Any other mode is a spelling of
-- the ISA table's (mode = "tile::gather4"), spelled as given and checked
-- by the validator.
local function load_mode(desc, a, what)
  local built = type(desc) == "table" and rawget(desc, "tma") and desc.tma.opts.mode
  local mode = a.mode or built or (a.offsets ~= nil and "im2col") or "tile"
  if mode == "tiled" then mode = "tile" end
  if built and (built == "tiled" and "tile" or built) ~= tostring(mode):match("^[^:]*") then
    fail(("%s: the tensor map was built for %s mode, but the copy asks for %s"):format(what, built, mode))
  end
  if type(mode) ~= "string" then fail(what .. ": mode must be a string (\"tile\", \"im2col\", \"tile::gather4\", ...)") end
  return mode
end

--- The im2col offsets operand: rank - 2 values (W first), each a number or a
-- 16-bit register.
local function im2col_offsets(offsets, rank, what)
  if type(offsets) ~= "table" or #offsets ~= rank - 2 or getmetatable(offsets) ~= nil then
    fail(("%s: im2col needs offsets = {...} with %d value(s) (W first), got %s"):format(what, rank - 2,
      type(offsets) == "table" and getmetatable(offsets) == nil and #offsets or tostring(offsets)))
  end
  for i, o in ipairs(offsets) do
    if reg.is(o) and o.type.bits ~= 16 then
      fail(("%s: im2col offset %d must be a 16-bit register (u16) or a number, got a .%s register"):format(what, i, o.type.name))
    end
  end
  return offsets
end

--- The coordinate count a mode takes when it is the rank (tile, im2col).
local function own_rank(mode, rank)
  return (mode == "tile" or mode == "im2col") and rank or nil
end

--- cp.async.bulk.tensor.<r>d: a load (global -> shared::cluster, completing
-- on mbar, optionally multicast to the CTAs in the u16 mask; cta_group = 2
-- lets mbar be the peer CTA's, sm_100a) when mbar is
-- given, a store (shared::cta -> global, bulk group) otherwise. im2col maps
-- (tma_desc{mode = "im2col"}) load with `offsets` and store .im2col_no_offs.
local TENSOR_WHAT = {}   -- rank -> "cp.async.bulk.tensor.<rank>d"
for r = 1, 5 do TENSOR_WHAT[r] = ("cp.async.bulk.tensor.%dd"):format(r) end
local load_forms = {}    -- rank -> mode -> cta_group (false: none) -> form of the plain load

--- The form of the load that takes no multicast, cache hint or offsets
-- (the copy of every k-block), interned once per rank, mode and cta_group.
local function plain_load_form(rank, what, mode, cta_group)
  local by_mode = load_forms[rank] or {}
  load_forms[rank] = by_mode
  local by_cta = by_mode[mode] or {}
  by_mode[mode] = by_cta
  local key = cta_group
  if key == nil then key = false end
  local form = by_cta[key]
  if not form then
    local op = what .. ".shared::cluster.global." .. mode .. ".mbarrier::complete_tx::bytes"
    if cta_group ~= nil then op = op .. ".cta_group::" .. tostring(cta_group) end
    form = F(op)
    by_cta[key] = form
  end
  return form
end

local function tensor_copy(rank, a)
  local what = TENSOR_WHAT[rank]
  if a.mbar ~= nil then
    local mode = load_mode(a.src, a, what)
    local dst = a.dst == nil and as_addr(nil, what .. " dst") or as_addr(a.dst)
    local cg = a.cta_group
    local plain = mode ~= "im2col" and a.multicast == nil and a.cache_hint == nil and cg == cg
    local tmap = tensor_operand(a.src, a.coord, own_rank(mode, rank), what, plain and load_tmap or nil)
    local mbar = as_addr(a.mbar)
    if plain then
      local rc = trace.emit_up(plain_load_form(rank, what, mode, cg), 3, dst, tmap, mbar)
      load_tmap.base, load_tmap.list = false, false
      return rc
    end
    local op = what .. ".shared::cluster.global." .. mode .. ".mbarrier::complete_tx::bytes"
    local args = { dst, tmap, mbar }
    if mode == "im2col" then args[#args + 1] = im2col_offsets(a.offsets, rank, what) end
    if a.multicast ~= nil then
      op = op .. ".multicast::cluster"
      args[#args + 1] = a.multicast
    end
    if a.cta_group ~= nil then op = op .. ".cta_group::" .. tostring(a.cta_group) end
    if a.cache_hint ~= nil then
      op = op .. ".L2::cache_hint"
      args[#args + 1] = a.cache_hint
    end
    return emit(op, unpack(args))
  end
  if is_tma(a.src) and not is_tma(a.dst) then
    fail(what .. ": a load (src is a tensor map) needs mbar = <barrier>; a store takes dst = X:tma_desc{...}")
  end
  local mode = load_mode(a.dst, a, what)
  if a.offsets ~= nil then fail(what .. ": a store takes no im2col offsets (it is .im2col_no_offs)") end
  local tmap = tensor_operand(a.dst, a.coord, own_rank(mode, rank), what)
  local op = what .. ".global.shared::cta." .. (mode == "im2col" and "im2col_no_offs" or mode) .. ".bulk_group"
  if a.cache_hint ~= nil then
    return emit(op .. ".L2::cache_hint", tmap, as_addr(a.src, what .. " src"), a.cache_hint)
  end
  return emit(op, tmap, as_addr(a.src, what .. " src"))
end

--- cp.async.bulk.prefetch.tensor.<r>d.L2.global.<mode> [tmap, {coords}]{, {offsets}}
-- (mode "tile", "im2col" or another of the ISA's, such as "tile::gather4").
local function tensor_prefetch(rank, a)
  local what = ("cp.async.bulk.prefetch.tensor.%dd"):format(rank)
  local src = a.src or a.desc
  local mode = load_mode(src, a, what)
  local tmap = tensor_operand(src, a.coord, own_rank(mode, rank), what)
  if mode == "im2col" then return emit(what .. ".L2.global.im2col", tmap, im2col_offsets(a.offsets, rank, what)) end
  return emit(what .. ".L2.global." .. mode, tmap)
end

--- cp.async.bulk.prefetch.L2.global [src], size: a hint to pull size bytes into L2.
local function bulk_prefetch(src, size)
  if is_kw(src) then return bulk_prefetch(src.src, src.size) end
  if size == nil then fail("cp.async.bulk.prefetch: missing size") end
  if type(size) == "number" and (size <= 0 or size % 16 ~= 0) then
    fail("cp.async.bulk.prefetch: size must be a positive multiple of 16 bytes, got " .. tostring(size))
  end
  return emit("cp.async.bulk.prefetch.L2.global", as_addr(src, "cp.async.bulk.prefetch src"), size)
end

local tensor = {}
local prefetch = {}
for r = 1, 5 do
  local key = "tensor_" .. r .. "d"
  --- tensor_Nd{dst=, src=, coord=, mbar=[, multicast=][, cta_group=][, cache_hint=]} or (dst, src, coord[, mbar]).
  tensor[key] = function(dst, src, coord, mbar)
    if is_kw(dst) then return tensor_copy(r, dst) end
    return tensor_copy(r, { dst = dst, src = src, coord = coord, mbar = mbar })
  end
  bulk[key] = tensor[key]
  --- prefetch.tensor_Nd{src = desc, coord = {...}[, offsets = {...}]}.
  prefetch[key] = function(src, coord, offsets)
    if is_kw(src) then return tensor_prefetch(r, src) end
    return tensor_prefetch(r, { src = src, coord = coord, offsets = offsets })
  end
end
bulk.tensor = setmetatable(tensor, { __index = function(_, k)
  local r = tostring(k):match("^_?(%d)d$")
  return r and tensor["tensor_" .. r .. "d"] or nil
end })
bulk.prefetch = setmetatable(prefetch, { __call = function(_, ...) return bulk_prefetch(...) end })

cp_async.bulk = setmetatable(bulk, { __call = function(_, ...) return bulk_copy(...) end })
M.cp = { async = setmetatable(cp_async, { __call = function(_, ...) return cp_async_copy(nil, ...) end }) }

-- ------------------------------------------- cp.reduce.async.bulk (Hopper)

local REDOPS = { add = true, min = true, max = true, inc = true, dec = true, ["and"] = true, ["or"] = true, xor = true }

--- The reduction operation of a keyword table, checked.
local function redop(a, what)
  local op = a.op or "add"
  if not REDOPS[op] then fail(what .. ": op must be add, min, max, inc, dec, and, or or xor; got " .. tostring(op)) end
  return op
end

--- cp.reduce.async.bulk: reduce size bytes of shared::cta memory element by
-- element into global memory (bulk group), or with mbar into the shared
-- memory of a CTA of the cluster, completing size bytes on the barrier
-- ({dst, src, size, op, type[, mbar][, cache_hint]}). f16/bf16 .add gets
-- the .noftz the ISA requires.
local function reduce_bulk(a)
  local what = "cp.reduce.async.bulk"
  if not is_kw(a) then fail(what .. " takes a keyword table {dst =, src =, size =, op =, type =}") end
  local ty, op = a.type or types.f32, redop(a, what)
  local tname = type(ty) == "table" and ty.name or tostring(ty)
  local noftz = op == "add" and (tname == "f16" or tname == "bf16") and ".noftz" or ""
  if a.size == nil then fail(what .. ": missing size") end
  local dst, src = as_addr(a.dst, what .. " dst"), as_addr(a.src, what .. " src")
  if a.mbar ~= nil then
    return emit(("%s.shared::cluster.shared::cta.mbarrier::complete_tx::bytes.%s.%s"):format(what, op, tname),
      dst, src, a.size, as_addr(a.mbar, what .. " mbar"))
  end
  if a.cache_hint ~= nil then
    return emit(("%s.global.shared::cta.bulk_group.L2::cache_hint.%s%s.%s"):format(what, op, noftz, tname),
      dst, src, a.size, a.cache_hint)
  end
  return emit(("%s.global.shared::cta.bulk_group.%s%s.%s"):format(what, op, noftz, tname), dst, src, a.size)
end

local reduce_bulk_t = {}
for r = 1, 5 do
  --- tensor_Nd{dst = X:tma_desc{...}, src = smem, coord = {...}, op = "add"[, mode][, cache_hint]}: reduce a
  -- box into the tensor (element type from the map; .im2col_no_offs for an im2col map;
  -- mode = "tile::scatter4": four rows, coord = {x, y0, y1, y2, y3}).
  reduce_bulk_t["tensor_" .. r .. "d"] = function(a)
    local what = ("cp.reduce.async.bulk.tensor.%dd"):format(r)
    if not is_kw(a) then fail(what .. " takes a keyword table {dst =, src =, coord =, op =}") end
    local mode = load_mode(a.dst, a, what)
    local op = ("%s.global.shared::cta.%s.%s.bulk_group"):format(what, redop(a, what), mode == "im2col" and "im2col_no_offs" or mode)
    local tmap, src = tensor_operand(a.dst, a.coord, own_rank(mode, r), what), as_addr(a.src, what .. " src")
    if a.cache_hint ~= nil then return emit(op .. ".L2::cache_hint", tmap, src, a.cache_hint) end
    return emit(op, tmap, src)
  end
end
M.cp.reduce = { async = { bulk = setmetatable(reduce_bulk_t, { __call = function(_, a) return reduce_bulk(a) end }) } }

-- ------------------------------------------------------------- mbarrier

local mbarrier = {}
local B64 = ".shared::cta.b64"

--- mbarrier.init.shared::cta.b64 [bar], count.
function mbarrier.init(bar, count)
  if type(count) == "number" and (count < 1 or count > 0xfffff) then
    fail("mbarrier.init: count must be 1..1048575, got " .. count)
  end
  return emit("mbarrier.init" .. B64, as_addr(bar, "mbarrier.init"), count or 1)
end

--- mbarrier.inval.shared::cta.b64 [bar].
function mbarrier.inval(bar) return emit("mbarrier.inval" .. B64, as_addr(bar, "mbarrier.inval")) end

--- mbarrier.arrive.shared::cta.b64 state, [bar]{, count}; returns the b64 state.
function mbarrier.arrive(bar, count)
  local st = fresh(types.b64, "ptx.mbarrier.arrive")
  if count ~= nil then emit("mbarrier.arrive" .. B64, st, as_addr(bar, "mbarrier.arrive"), count)
  else emit("mbarrier.arrive" .. B64, st, as_addr(bar, "mbarrier.arrive")) end
  return st
end

local ARRIVE_SEM, ARRIVE_SCOPE = { release = true, relaxed = true }, { cta = true, cluster = true }

--- The .sem.scope of a remote arrival from opts ({ sem =, scope = }): ""
-- (the ISA's default, .release.cta) when neither is given.
local function arrive_order(opts, what)
  if opts == nil then return "" end
  if not is_kw(opts) and not (type(opts) == "table" and getmetatable(opts) == nil and next(opts) == nil) then
    fail(("%s: opts must be a table { sem =, scope = }; got %s"):format(what, type(opts) == "table" and "a table with items"
      or type(opts)))
  end
  argcheck.fields(what, opts, { "sem: string?", "scope: string?" })
  for k in pairs(opts) do
    if k ~= "sem" and k ~= "scope" then fail(("%s: unknown option %s (valid: sem, scope)"):format(what, tostring(k))) end
  end
  if opts.sem == nil and opts.scope == nil then return "" end
  local sem, scope = opts.sem or "release", opts.scope or "cta"
  if not ARRIVE_SEM[sem] then fail(what .. ": sem must be \"release\" or \"relaxed\"; got " .. tostring(sem)) end
  if not ARRIVE_SCOPE[scope] then fail(what .. ": scope must be \"cta\" or \"cluster\"; got " .. tostring(scope)) end
  local t = trace.need(what)
  if sem == "relaxed" and t.version and t.version < 86 then
    fail(("%s: sem = \"relaxed\" needs PTX ISA 8.6 (the kernel's version = \"8.6\"); this kernel is %d.%d"):format(what,
      math.floor(t.version / 10), t.version % 10))
  end
  return "." .. sem .. "." .. scope
end
M.arrive_order = arrive_order

--- mbarrier.arrive{.sem.scope}.shared::cluster.b64 _, [bar]{, count}: an
-- arrival on a barrier of another CTA of the cluster (bar: a mapa address).
-- By default the ISA's .release.cta, the form CUTLASS's ClusterBarrier
-- uses (ptxas: one SYNCS.ARRIVE, no fence); opts = { sem = "release" |
-- "relaxed", scope = "cta" | "cluster" } asks for another (.release.cluster
-- costs MEMBAR.ALL.CTA + MEMBAR.ALL.GPU + ERRBAR + CGAERRBAR per arrival).
function mbarrier.arrive_remote(bar, count, opts)
  if opts == nil and is_kw(count) then count, opts = nil, count end
  local op = "mbarrier.arrive" .. arrive_order(opts, "mbarrier.arrive_remote") .. ".shared::cluster.b64"
  if count ~= nil then return emit(op, operands.sink, as_addr(bar, "mbarrier.arrive_remote"), count) end
  return emit(op, operands.sink, as_addr(bar, "mbarrier.arrive_remote"))
end

--- mbarrier.arrive_drop.shared::cta.b64 state, [bar]; returns the state.
function mbarrier.arrive_drop(bar)
  local st = fresh(types.b64, "ptx.mbarrier.arrive_drop")
  emit("mbarrier.arrive_drop" .. B64, st, as_addr(bar, "mbarrier.arrive_drop"))
  return st
end

--- mbarrier.arrive.expect_tx.shared::cta.b64 state, [bar], bytes; returns the state.
function mbarrier.arrive_expect_tx(bar, bytes)
  if bytes == nil then fail("mbarrier.arrive_expect_tx: missing the transaction byte count") end
  local st = fresh(types.b64, "ptx.mbarrier.arrive_expect_tx")
  emit("mbarrier.arrive.expect_tx" .. B64, st, as_addr(bar, "mbarrier.arrive_expect_tx"), bytes)
  return st
end

--- mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [bar], bytes.
function mbarrier.expect_tx(bar, bytes)
  return emit("mbarrier.expect_tx.relaxed.cta" .. B64, as_addr(bar, "mbarrier.expect_tx"), bytes)
end

--- mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [bar], bytes.
function mbarrier.complete_tx(bar, bytes)
  return emit("mbarrier.complete_tx.relaxed.cta" .. B64, as_addr(bar, "mbarrier.complete_tx"), bytes)
end

--- Append try_wait / test_wait into a fresh predicate and return it: with
-- a b64 state register the state form, otherwise the .parity form
-- (parity: 0, 1 or a u32 register). addr is the barrier's address operand.
local function emit_wait(what, addr_what, state_op, parity_op, addr, phase)
  local p = fresh(types.pred, what)
  if reg.is(phase) and phase.type.bits == 64 then
    trace.emit_up(F(state_op), 3, p, addr, phase)
  else
    if phase == nil then fail(addr_what .. ": missing the phase parity (0, 1 or a register)") end
    trace.emit_up(F(parity_op), 3, p, addr, phase)
  end
  return p
end

--- try_wait / test_wait: with a b64 state register the state form,
-- otherwise the .parity form (parity: 0, 1 or a u32 register). Returns a predicate.
local function waiter(kind)
  local what, addr_what = "ptx.mbarrier." .. kind, "mbarrier." .. kind
  local state_op, parity_op = "mbarrier." .. kind .. B64, "mbarrier." .. kind .. ".parity" .. B64
  return function(bar, phase)
    return emit_wait(what, addr_what, state_op, parity_op, as_addr(bar, addr_what), phase)
  end
end
mbarrier.try_wait = waiter("try_wait")
mbarrier.test_wait = waiter("test_wait")

-- The operands mbarrier.wait makes on every call, made once: it packs each
-- before it is set again (a wait per k-block of an unrolled loop would
-- otherwise make three tables for the collector).
local wait_addr = operands.scratch_addr()
local wait_top = operands.fresh_ref(false, "", -1)
local wait_again = setmetatable({ reg = false }, reg.NegPred)
local TRY_STATE, TRY_PARITY = "mbarrier.try_wait" .. B64, "mbarrier.try_wait.parity" .. B64

--- Spin until the phase with the given parity completes: a label, a
-- try_wait.parity and a guarded branch back (three items, two instructions).
function mbarrier.wait(bar, parity)
  local t = trace.need("ptx.mbarrier.wait")
  wait_top.name, wait_top.sym = trace.fresh_sym(t, "mbar_wait")
  wait_top.trace = t
  flow.place_ref(t, wait_top)
  local addr = operands.reg_addr(wait_addr, bar) or as_addr(bar, "mbarrier.try_wait")
  local p = emit_wait("ptx.mbarrier.wait", "mbarrier.wait", TRY_STATE, TRY_PARITY, addr, parity)
  wait_again.reg = p
  flow.set_guard(t, wait_again)
  trace.emit_n_again(F("bra"), 1, wait_top)   -- at try_wait's line
  wait_addr.base, wait_top.trace, wait_again.reg = false, false, false   -- keep no trace alive
end

--- mbarrier.pending_count.b64 count, state; returns the u32 count.
function mbarrier.pending_count(state)
  local n = fresh(types.u32, "ptx.mbarrier.pending_count")
  emit("mbarrier.pending_count.b64", n, state)
  return n
end

M.mbarrier = mbarrier

-- ---------------------------------------------------------------- fences

local fence = {}

--- fence.proxy.async{.shared::cta|.shared::cluster|.global}: orders generic-proxy
-- accesses before async-proxy ones (st.shared before TMA store / wgmma).
function fence.proxy_async(space)
  if space == nil then return emit("fence.proxy.async") end
  return emit("fence.proxy.async." .. space)
end
fence.proxy = { async = fence.proxy_async }

--- fence.mbarrier_init.release.cluster: make mbarrier.init visible to the cluster.
function fence.mbarrier_init() return emit("fence.mbarrier_init.release.cluster") end

--- fence.acq_rel.<scope> (cta, cluster, gpu, sys).
function fence.acq_rel(scope) return emit("fence.acq_rel." .. (scope or "cta")) end

--- fence.sc.<scope>.
function fence.sc(scope) return emit("fence.sc." .. (scope or "cta")) end

local SCOPES = { cta = true, cluster = true, gpu = true, sys = true }

--- A fence scope (default gpu), checked.
local function scope_of(scope, what)
  scope = scope or "gpu"
  if not SCOPES[scope] then fail(what .. ": scope must be cta, cluster, gpu or sys, got " .. tostring(scope)) end
  return scope
end

--- fence.proxy.tensormap::generic.release.<scope>: make this thread's
-- generic-proxy writes of a tensor map (tensormap.replace, st) visible to
-- the tensormap proxy TMA reads maps through.
function fence.tensormap_release(scope)
  return emit("fence.proxy.tensormap::generic.release." .. scope_of(scope, "fence.tensormap_release"))
end

--- fence.proxy.tensormap::generic.acquire.<scope> [map], 128: before a TMA
-- instruction reads the (edited) 128-byte map at map.
function fence.tensormap_acquire(map, scope)
  return emit("fence.proxy.tensormap::generic.acquire." .. scope_of(scope, "fence.tensormap_acquire"),
    as_addr(map, "fence.tensormap_acquire"), 128)
end
fence.proxy.tensormap = { release = fence.tensormap_release, acquire = fence.tensormap_acquire }

M.fence = setmetatable(fence, { __call = function(_, scope) return fence.acq_rel(scope) end })

-- --------------------------------------------------------------- clusters

local cluster = {}

--- barrier.cluster.arrive{.release|.relaxed}.aligned (opts.relaxed, opts.aligned = false).
function cluster.arrive(opts)
  opts = opts or {}
  return emit("barrier.cluster.arrive" .. (opts.relaxed and ".relaxed" or ".release")
    .. (opts.aligned == false and "" or ".aligned"))
end

--- barrier.cluster.wait.acquire.aligned (opts.aligned = false drops .aligned).
function cluster.wait(opts)
  opts = opts or {}
  return emit("barrier.cluster.wait.acquire" .. (opts.aligned == false and "" or ".aligned"))
end

--- arrive then wait (two instructions): a full cluster barrier.
function cluster.sync(opts)
  cluster.arrive(opts)
  return cluster.wait(opts)
end

--- mapa.shared::cluster.u32 d, a, rank: the address of the same shared
-- variable in CTA `rank` of the cluster. a: a u32 register or allocation.
function cluster.mapa(a, rank)
  local ty = reg.is(a) and a.type.bits == 64 and types.u64 or types.u32
  local d = fresh(ty, "ptx.cluster.mapa")
  if reg.is(a) then emit("mapa.shared::cluster." .. ty.name, d, a, rank)
  else emit("mapa.shared::cluster.u32", d, a, rank) end
  return d
end

--- The CTA ranks a multicast names: a u16 mask (a number: bit r is rank
-- r) or a list of ranks (numbers or u32 registers).
local function multicast_ranks(ctas, what)
  if type(ctas) == "number" then
    if ctas < 1 or ctas > 0xffff or ctas % 1 ~= 0 then
      fail(what .. ": the CTA mask must be a 16-bit integer with at least one bit set (bit r: rank r), got " .. tostring(ctas))
    end
    local out = {}
    for r = 0, 15 do if bit.band(ctas, bit.lshift(1, r)) ~= 0 then out[#out + 1] = r end end
    return out
  end
  if type(ctas) ~= "table" or getmetatable(ctas) ~= nil or #ctas == 0 then
    fail(what .. ": ctas must be a 16-bit mask or a list of CTA ranks ({0, 1, rank_reg}), got " .. tostring(ctas))
  end
  for i, r in ipairs(ctas) do
    if not ((type(r) == "number" and r >= 0 and r < 16 and r % 1 == 0) or (reg.is(r) and types.is_int(r.type) and r.type.bits == 32)) then
      fail(("%s: rank %d of the list must be 0..15 or a 32-bit integer register, got %s"):format(what, i, tostring(r)))
    end
  end
  return ctas
end

--- An arrival on the same mbarrier in each CTA of the cluster that ctas
-- names (a u16 mask or a list of ranks): per rank, mapa then
-- mbarrier.arrive.shared::cluster.b64 _, [remote]{, count} (opts: the
-- sem and scope of mbarrier.arrive_remote).
-- bar: the barrier's local shared address (allocation or u32 register).
-- Returns the number of arrivals emitted.
M.multicast_ranks = multicast_ranks
function cluster.arrive_multicast(bar, ctas, count, opts)
  local ranks = multicast_ranks(ctas, "ptx.cluster.arrive_multicast")
  if opts == nil and is_kw(count) then count, opts = nil, count end
  if count ~= nil and (type(count) ~= "number" or count < 1 or count % 1 ~= 0) and not reg.is(count) then
    fail("ptx.cluster.arrive_multicast: count must be a positive integer or a register, got " .. tostring(count))
  end
  arrive_order(opts, "ptx.cluster.arrive_multicast")
  for _, r in ipairs(ranks) do
    mbarrier.arrive_remote(operands.addr(cluster.mapa(bar, r)), count, opts)
  end
  return #ranks
end

--- %cluster_ctarank into a fresh u32 (one mov).
function cluster.ctarank()
  local d = fresh(types.u32, "ptx.cluster.ctarank")
  emit("mov.u32", d, operands.special("%cluster_ctarank"))
  return d
end

argcheck.sign(cluster, "ptx.cluster", {
  arrive = { "opts: table?" }, wait = { "opts: table?" }, sync = { "opts: table?" },
  arrive_multicast = { "bar: any", "ctas: integer|table", "count: integer|register|table?", "opts: table?" },
})
M.cluster = cluster

-- ------------------------------------- tensormap.replace / cp_fenceproxy

-- Fields: class (1: new_val; 2: ordinal and new_val; 3: an immediate in
-- the ISA's numbering) and the new value's type.
local TM_FIELDS = {
  global_address = { 1, "b64" }, rank = { 1, "b32" }, box_dim = { 2, "b32" }, global_dim = { 2, "b32" },
  global_stride = { 2, "b64" }, element_stride = { 2, "b32" }, elemtype = { 3, "b32" }, interleave_layout = { 3, "b32" },
  swizzle_mode = { 3, "b32" }, swizzle_atomicity = { 3, "b32" }, fill_mode = { 3, "b32" },
}
-- Names for the immediate fields' values (the ISA's numbers, not the driver's).
local TM_CODES = {
  elemtype = { u8 = 0, u16 = 1, u32 = 2, s32 = 3, u64 = 4, s64 = 5, f16 = 6, f32 = 7, f32_ftz = 8, f64 = 9, bf16 = 10,
    tf32 = 11, tf32_ftz = 12 },
  interleave_layout = { none = 0, ["16B"] = 1, ["32B"] = 2 },
  swizzle_mode = { none = 0, ["32B"] = 1, ["64B"] = 2, ["128B"] = 3 },
  swizzle_atomicity = { ["16B"] = 0, ["32B"] = 1, ["32B_flip_8B"] = 2, ["64B"] = 3 },
  fill_mode = { zero = 0, nan = 1 },
}

--- The sorted keys of a table, joined (for messages).
local function keys_of(t)
  local out = {}
  for k in pairs(t) do out[#out + 1] = k end
  table.sort(out)
  return table.concat(out, ", ")
end

--- The immediate of an enumerated field: a name (a pyptx type for
-- elemtype) or the ISA's number.
local function tm_code(field, v)
  if type(v) == "number" then return v end
  local key = type(v) == "table" and v.name or v
  local code = TM_CODES[field][key]
  if code == nil then
    fail(("tensormap.replace.%s: %s is not a value of this field; use one of %s, or the ISA's number"):format(field,
      tostring(key), keys_of(TM_CODES[field])))
  end
  return code
end

--- The state-space part of the opcode: .shared::cta for a shared
-- allocation (a symbol address), the given space, else none (generic).
local function tm_space(map, space)
  if space == nil then return type(map.base) == "string" and ".shared::cta" or "" end
  if space == "generic" then return "" end
  if space ~= "global" and space ~= "shared::cta" then
    fail("tensormap.replace: space must be \"global\", \"shared::cta\" or \"generic\", got " .. tostring(space))
  end
  return "." .. space
end

--- tensormap.replace.tile.<field>{.space}.b1024.<b32|b64> [map], {ord,} new_val
-- ({map, field, ord, value, space}): edit one field of the 128-byte tensor
-- map at map (in global or shared::cta memory; rank's value is the rank
-- minus one, as the ISA has it).
local function tm_replace(a)
  local f = TM_FIELDS[a.field]
  if not f then fail(("tensormap.replace: field must be one of %s; got %s"):format(keys_of(TM_FIELDS), tostring(a.field))) end
  local what = "tensormap.replace." .. a.field
  if a.map == nil then fail(what .. ": missing the map (its address)") end
  if a.value == nil then fail(what .. ": missing value") end
  local map = as_addr(a.map, what)
  local op = ("tensormap.replace.tile.%s%s.b1024.%s"):format(a.field, tm_space(map, a.space), f[2])
  if f[1] == 2 then
    if type(a.ord) ~= "number" or a.ord < 0 or a.ord > 4 or a.ord % 1 ~= 0 then
      fail(what .. ": ord (the dimension, innermost first) must be a number 0..4, got " .. tostring(a.ord))
    end
    return emit(op, map, a.ord, a.value)
  end
  return emit(op, map, f[1] == 3 and tm_code(a.field, a.value) or a.value)
end

local replace = {}
for field, f in pairs(TM_FIELDS) do
  --- replace.<field>(map, [ord,] value[, space]).
  replace[field] = function(map, x, y, z)
    if f[1] == 2 then return tm_replace { map = map, field = field, ord = x, value = y, space = z } end
    return tm_replace { map = map, field = field, value = x, space = y }
  end
end

--- tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.<scope>.sync.aligned
-- [dst], [src], 128 ({dst, src, size = 128, scope = "gpu"}, or (dst, src[,
-- scope])): the whole warp copies the 128-byte tensor map at src
-- (shared::cta) to dst (global) and release-fences the copy for the
-- tensormap proxy TMA reads maps through.
local function tm_cp_fenceproxy(a, src, scope)
  if not is_kw(a) then a = { dst = a, src = src, scope = scope } end
  local what = "tensormap.cp_fenceproxy"
  if (a.size or 128) ~= 128 then fail(what .. ": size must be 128 (a tensor map's bytes), got " .. tostring(a.size)) end
  local op = ("%s.global.shared::cta.tensormap::generic.release.%s.sync.aligned"):format(what, scope_of(a.scope, what))
  return emit(op, as_addr(a.dst, what .. ": dst"), as_addr(a.src, what .. ": src"), 128)
end

M.tensormap = { replace = setmetatable(replace, { __call = function(_, a)
  if not is_kw(a) then fail("tensormap.replace takes a keyword table {map =, field =, ord =, value =, space =}") end
  return tm_replace(a)
end }), cp_fenceproxy = tm_cp_fenceproxy }

-- ------------------------------------------------------------ TMA params

local ffi = require "ffi"
local core = require "pyptx.core"

local TMA_OPTS = { "box", "swizzle", "interleave", "l2", "oob", "elem_strides", "mode", "lower_corner", "upper_corner",
  "channels_per_pixel", "pixels_per_column" }
local TMA_KNOWN = {}
for _, k in ipairs(TMA_OPTS) do TMA_KNOWN[k] = true end

--- An option value as tma_key writes it.
local function opt_text(v)
  return type(v) == "table" and table.concat(v, "x") or tostring(v)
end

--- A stable key of X:tma_desc options (the same options share one param).
local function tma_key(opts)
  local parts = {}
  for _, k in ipairs(TMA_OPTS) do parts[#parts + 1] = k .. "=" .. opt_text(opts[k]) end
  return table.concat(parts, ";")
end

--- Do two option tables have the same tma_key? Compared field by field,
-- without building the key: X:tma_desc{...} runs once per copy.
local function same_opts(a, b)
  for _, k in ipairs(TMA_OPTS) do
    local x, y = a[k], b[k]
    if x ~= y then
      local same = type(x) == "table" and type(y) == "table" and #x == #y
      if same then
        for i = 1, #x do
          if x[i] ~= y[i] and tostring(x[i]) ~= tostring(y[i]) then same = false end
        end
      end
      if not same and opt_text(x) ~= opt_text(y) then return false end
    end
  end
  return true
end

--- The description table tma.describe takes, for shape/dtype/address/strides.
local function tma_fields(d, address, shape, dtype, strides)
  local o = d.opts
  return { address = address, shape = shape, dtype = dtype, strides = strides, box = o.box,
    elem_strides = o.elem_strides, swizzle = o.swizzle, interleave = o.interleave, l2 = o.l2, oob = o.oob,
    mode = o.mode, lower_corner = o.lower_corner, upper_corner = o.upper_corner,
    channels_per_pixel = o.channels_per_pixel, pixels_per_column = o.pixels_per_column }
end

--- Build and validate a description; errors name the tensor.
local function tma_build(d, address, shape, dtype, strides)
  local desc = tma.describe(tma_fields(d, address, shape, dtype, strides))
  tma.validate(desc, d.tensor)
  return desc
end

--- Declare the param of a new tensor map, validated against the spec's
-- shape at trace time (a placeholder address; the real one comes at launch).
local function declare_tma(t, spec, opts, key)
  local n = 0
  for _, e in ipairs(t.tma) do if e.index == spec.index then n = n + 1 end end
  local d = { key = key, index = spec.index, opts = opts, tensor = spec.param,
    name = spec.param .. "_tma" .. (n > 0 and ("_" .. n) or "") }
  local ok, desc = pcall(tma_build, d, 1024, spec.shape, spec.dtype, nil)
  if not ok then fail((tostring(desc):gsub("^[^:]*:%d+: ", ""))) end
  d.bytes = tma.box_bytes(desc)
  if core.func_param(t.mod, t.fn, d.name, types.b8.id, 64, 128) < 0 then fail(core.error_message()) end
  t.tma[#t.tma + 1] = d
  return d
end

--- Do two option values agree as given: the same value, or lists with
-- the same first five items and no sixth (a box has at most five)? A
-- quick test: false only means "ask same_opts".
local function same_given(x, y)
  if x == y then return true end
  return type(x) == "table" and type(y) == "table" and x[1] == y[1] and x[2] == y[2] and x[3] == y[3]
    and x[4] == y[4] and x[5] == y[5] and x[6] == nil and y[6] == nil
end

--- Do two option tables agree on every option, as given? Straight-line
-- code, no loop: X:tma_desc{...} runs once per copy, and a loop here
-- keeps the JIT from compiling it into its caller's trace. Checked at
-- load against TMA_OPTS below.
local function same_given_opts(a, b)
  return same_given(a.box, b.box) and a.swizzle == b.swizzle and a.interleave == b.interleave and a.l2 == b.l2
    and a.oob == b.oob and same_given(a.elem_strides, b.elem_strides) and a.mode == b.mode
    and same_given(a.lower_corner, b.lower_corner) and same_given(a.upper_corner, b.upper_corner)
    and a.channels_per_pixel == b.channels_per_pixel and a.pixels_per_column == b.pixels_per_column
end
for _, k in ipairs(TMA_OPTS) do   -- an option same_given_opts forgot would make two maps one
  assert(not same_given_opts({ [k] = 1 }, {}), "same_given_opts does not compare " .. k)
end

--- The first key of opts that is not a tma_desc option, or nil. The first
-- four keys (box and swizzle, usually) are looked at without a loop.
local function unknown_option(opts)
  local k = next(opts)
  if k == nil then return nil elseif not TMA_KNOWN[k] then return k end
  k = next(opts, k)
  if k == nil then return nil elseif not TMA_KNOWN[k] then return k end
  k = next(opts, k)
  if k == nil then return nil elseif not TMA_KNOWN[k] then return k end
  k = next(opts, k)
  if k == nil then return nil elseif not TMA_KNOWN[k] then return k end
  for rest in next, opts, k do
    if not TMA_KNOWN[rest] then return rest end
  end
  return nil
end

--- The declared map of tensor spec with options opts, declared now if new.
local function tma_of(t, spec, opts)
  t.tma = t.tma or {}
  t.tma_last = t.tma_last or {}
  local d = t.tma_last[spec.param]   -- the map this tensor's last X:tma_desc named: usually this one again
  if d and same_given_opts(d.opts, opts) then return d end
  d = nil
  for _, e in ipairs(t.tma) do if e.tensor == spec.param and same_opts(e.opts, opts) then d = e end end
  if not d then d = declare_tma(t, spec, opts, spec.param .. "|" .. tma_key(opts)) end
  t.tma_last[spec.param] = d
  return d
end

--- X:tma_desc{...} (see tile.lua): declare the 128-byte tensor-map param
-- once per tensor and options, validate the box against the spec's shape at
-- trace time, and return its operand (`.bytes` = bytes one box moves).
function M.tma_param(spec, opts)
  local t = trace.need("X:tma_desc")
  if type(opts) ~= "table" then fail("X:tma_desc takes an options table {box = {...}, swizzle = ...}") end
  local bad = unknown_option(opts)
  if bad ~= nil then
    fail(("X:tma_desc: unknown option %s (valid: %s)"):format(tostring(bad), table.concat(TMA_OPTS, ", ")))
  end
  if opts.mode == "im2col" and opts.box ~= nil then
    fail("X:tma_desc: an im2col map has no box; it takes channels_per_pixel, pixels_per_column and the pixel-box corners")
  end
  local d = tma_of(t, spec, opts)
  -- the map's generic address in a register, which the tensor-map operand
  -- takes: a parameter's own .param address faults on a GPU (cvta.param)
  local r = reg.new(t, types.u64)
  trace.emit_up(F("mov.u64"), 2, r, d.name)
  trace.emit_n_again(F("cvta.param.u64"), 2, r, r)
  -- fields made by the constructor's template, set below: no new key is inserted
  local a = setmetatable({ base = false, offset = 0, tma = false, bytes = 0 }, operands.Addr)
  a.base, a.tma, a.bytes = r, d, d.bytes
  return a
end

--- The 128 launch bytes of tensor map d for the runtime tensor x (or a
-- host's view of one: ptr, shape, strides in elements, elem_size, dtype,
-- device): the description built from x and d's options, validated and
-- encoded by x's device (Device:tma_encode: the driver's map on CUDA, the
-- emulator's record on emu; one path for both). Encoded maps are kept by
-- device, shape, strides and dtype: a launch on a tensor that differs only
-- in its address patches the map instead of encoding it again. Returns
-- the bytes, or nil and the reason (naming the tensor).
local encoded = setmetatable({}, { __mode = "k" })   -- d -> device -> key -> { map, address }

function M.tma_bytes(d, x)
  local strides = {}
  for i, st in ipairs(x.strides) do strides[i] = st * x.elem_size end
  local dev = x.device
  local by_dev = encoded[d] or setmetatable({}, { __mode = "k" })
  encoded[d] = by_dev
  local per = by_dev[dev] or {}
  by_dev[dev] = per
  local key = table.concat(x.shape, "x") .. "|" .. table.concat(strides, ",") .. "|" .. x.dtype.name
  local hit, ok, err = per[key], true, nil
  if not hit then
    local desc = tma.describe(tma_fields(d, x.ptr, x.shape, x.dtype, strides))
    ok, err = pcall(dev.tma_encode, dev, desc, d.tensor)
    if ok then hit = { map = err, address = x.ptr }; per[key] = hit end
  elseif hit.address ~= x.ptr then
    ok, err = pcall(dev.tma_replace_address, dev, hit.map, x.ptr, d.tensor)
    if ok then hit.address = x.ptr end
  end
  if not ok then return nil, err end
  return ffi.string(hit.map, 128)
end

return M
