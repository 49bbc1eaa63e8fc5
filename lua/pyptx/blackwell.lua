--- Blackwell (sm_100a/sm_101a/sm_103a): the tcgen05 family and its
-- descriptors.
--
-- `ptx.tcgen05.<op>{...}` takes a keyword table and appends exactly one
-- instruction; the opcode's modifiers come from the keywords. The wrappers
-- only spell: the modifiers, operand kinds and counts and the one
-- CTA-group size per kernel are checked by the C validator
-- (src/lpx_validate.c, tcgen05_check) and arch gates by the table rows
-- (src/lpx_isa.def), for ptx.inst and parsed PTX alike.
-- `idesc{...}` and `smem_desc{...}` pack descriptors at trace time (pure
-- Lua, PTX ISA layouts); `smem_desc_reg` builds one from a runtime shared
-- address (four instructions). The emulator runs tcgen05 (docs/emulator.md).
local bit = require "bit"
local trace = require "pyptx.trace"
local reg = require "pyptx.reg"
local types = require "pyptx.types"
local operands = require "pyptx.operands"
local isa = require "pyptx.isa"
local argcheck = require "pyptx.args"

local M = {}
local tc = {}
M.tcgen05 = tc

local F = reg.form
local emit, emit_n, emit_up = trace.emit, trace.emit_n, trace.emit_up

-- ------------------------------------------------------------ helpers

--- Raise at the user's line with the wrapper's name.
local function fail(what, msg) trace.fail("ptx.tcgen05." .. what .. ": " .. msg) end

--- Check that a keyword table was given; name the wrapper otherwise.
local function args_of(what, a)
  if type(a) ~= "table" or getmetatable(a) ~= nil then
    fail(what, "takes a keyword table: ptx.tcgen05." .. what .. "{ ... }")
  end
  return a
end

--- ".cta_group::N" from a keyword (1 by default).
local function cta_group(a)
  return ".cta_group::" .. tostring(a.cta_group or 1)
end

--- A required keyword or an error naming it.
local function need(what, a, key, hint)
  local v = a[key]
  if v == nil then fail(what, "needs " .. key .. (hint and (" (" .. hint .. ")") or "")) end
  return v
end

--- An address operand: registers and shared allocations become [x]; an
-- existing ptx.addr passes through.
local function as_addr(v)
  if getmetatable(v) == operands.Addr then return v end
  return operands.addr(v)
end

--- as_addr(v), written into scratch (operands.scratch_addr) when v is a
-- 32/64-bit register; the caller clears scratch.base after packing.
local function addr_in(scratch, v)
  return operands.reg_addr(scratch, v) or as_addr(v)
end

--- Is v a 32-bit register (a shared-window or tensor-memory address)?
local function is_r32(v) return reg.is(v) and v[reg.TYPE].bits == 32 end

--- Is v a shared-memory address: an allocation, an address built on one,
-- or a 32-bit register?
local function is_shared_addr(v)
  if is_r32(v) then return true end
  if type(v) == "table" and v.address then return true end
  local mt = getmetatable(v)
  return mt == operands.Addr and (type(v.base) == "string" or is_r32(v.base))
end

-- ------------------------------------------------- allocation (warp-wide)

--- tcgen05.alloc.cta_group::N.sync.aligned[.shared::cta].b32 [dst], ncols:
-- the TMEM base address is written to shared memory at dst (a shared
-- allocation or 32-bit register: .shared::cta; a 64-bit register: generic).
function tc.alloc(a)
  args_of("alloc", a)
  local dst = need("alloc", a, "dst", "a shared slot for the TMEM address")
  local space = is_shared_addr(dst) and ".shared::cta" or ""
  local op = "tcgen05.alloc" .. cta_group(a) .. ".sync.aligned" .. space .. ".b32"
  return emit_n(F(op), 2, as_addr(dst), a.ncols or 32)
end

--- tcgen05.dealloc.cta_group::N.sync.aligned.b32 taddr, ncols
function tc.dealloc(a)
  args_of("dealloc", a)
  local op = "tcgen05.dealloc" .. cta_group(a) .. ".sync.aligned.b32"
  return emit_n(F(op), 2, need("dealloc", a, "taddr"), a.ncols or 32)
end

--- tcgen05.relinquish_alloc_permit.cta_group::N.sync.aligned
function tc.relinquish_alloc_permit(a)
  a = args_of("relinquish_alloc_permit", a or {})
  return emit_n(F("tcgen05.relinquish_alloc_permit" .. cta_group(a) .. ".sync.aligned"), 0)
end

-- ------------------------------------------------------------------ mma


--- tcgen05.mma[.sp].cta_group::N.kind::K[.collector::a::C]
--   [d], a, b[, [sp_meta]], idesc[, {disable_output_lane}], enable_d[, scale_d]
-- a: a 64-bit SMEM descriptor, or a 32-bit TMEM address (A from tensor
-- memory, emitted as [a]); b: a 64-bit SMEM descriptor; idesc: 32-bit;
-- enable_d: a predicate (false: D = A*B, true: D += A*B); sp_meta: the
-- sparsity metadata's TMEM address (adds .sp); disable_output_lane: 4
-- (cta_group 1) or 8 (cta_group 2) 32-bit registers; scale_d: 0..15.
local mma_forms = {}   -- opcode spelling keys -> form id (the opcode is built once per spelling)

--- The interned form of tcgen05.mma for a keyword table's spelling keys.
local function mma_form(a)
  local sp, cta, kind, col = a.sp_meta and 1 or 0, a.cta_group or 1, a.kind or "f16", a.collector or false
  if cta ~= cta or kind ~= kind or col ~= col then   -- NaN is no table key: spell it, F reports it
    return F("tcgen05.mma" .. (sp == 1 and ".sp" or "") .. cta_group(a) .. ".kind::" .. tostring(kind)
      .. (col and (".collector::a::" .. tostring(col)) or ""))
  end
  local by_cta = mma_forms[sp] or {}
  mma_forms[sp] = by_cta
  local by_kind = by_cta[cta] or {}
  by_cta[cta] = by_kind
  local by_col = by_kind[kind] or {}
  by_kind[kind] = by_col
  local form = by_col[col]
  if form then return form end
  local op = "tcgen05.mma" .. (sp == 1 and ".sp" or "") .. cta_group(a) .. ".kind::" .. tostring(kind)
  if col then op = op .. ".collector::a::" .. tostring(col) end
  form = F(op)
  by_col[col] = form
  return form
end

local mma_d, mma_a = operands.scratch_addr(), operands.scratch_addr()

function tc.mma(a)
  args_of("mma", a)
  local am = need("mma", a, "a", "a 64-bit SMEM descriptor or a 32-bit TMEM address")
  if is_r32(am) then am = addr_in(mma_a, am) end
  local d, b = addr_in(mma_d, need("mma", a, "d", "the accumulator's TMEM address")), need("mma", a, "b")
  if not (a.sp_meta or a.disable_output_lane or a.scale_d) then   -- the common form: no operand list to build
    local idesc = need("mma", a, "idesc", "pyptx.blackwell.idesc{...} in a 32-bit register")
    local en = need("mma", a, "enable_d", "a predicate: false overwrites D, true accumulates")
    if type(en) == "boolean" then fail("mma", "enable_d must be a predicate register (PTX has no immediate here)") end
    local rc = emit_up(mma_form(a), 5, d, am, b, idesc, en)
    mma_d.base, mma_a.base = false, false
    return rc
  end

  local ops = { d, am, b }
  if a.sp_meta then ops[#ops + 1] = as_addr(a.sp_meta) end
  ops[#ops + 1] = need("mma", a, "idesc", "pyptx.blackwell.idesc{...} in a 32-bit register")
  if a.disable_output_lane then ops[#ops + 1] = a.disable_output_lane end
  local en = need("mma", a, "enable_d", "a predicate: false overwrites D, true accumulates")
  if type(en) == "boolean" then fail("mma", "enable_d must be a predicate register (PTX has no immediate here)") end
  ops[#ops + 1] = en
  if a.scale_d then ops[#ops + 1] = a.scale_d end
  local rc
  if #ops <= 8 then rc = emit_n(mma_form(a), #ops, unpack(ops, 1, #ops)) else rc = emit(mma_form(a), unpack(ops)) end
  mma_d.base, mma_a.base = false, false
  return rc
end

-- --------------------------------------------------------------- ld / st

-- 32-bit registers per .x1 of each ld/st shape: the C table's (LPX_TC_SHAPES).
local SHAPE_REGS = isa.tc_shape_regs
M.SHAPE_REGS = SHAPE_REGS

--- The .xN of a register count for a shape, or an error.
local function num_of(what, shape, n, given)
  local per = SHAPE_REGS[shape]
  if not per then
    fail(what, ("shape must be one of %s, got %s"):format(table.concat(isa.modifiers("TCSHAPE"), " "), tostring(shape)))
  end
  local num = given or n / per
  if num ~= math.floor(num) or num < 1 or num > 128 or bit.band(num, num - 1) ~= 0 then
    fail(what, ("%d registers do not make a .%s.xN (N a power of 2, %d registers per .x1)"):format(n, shape, per))
  end
  return num
end

--- The vector of registers a ld/st moves (a list table).
local function regs_of(what, a, key)
  local v = need(what, a, key, "a list of 32-bit registers")
  if type(v) ~= "table" or getmetatable(v) ~= nil or #v == 0 then fail(what, key .. " must be a list of 32-bit registers") end
  return v
end

--- tcgen05.ld.sync.aligned.<shape>.xN[.pack::16b].b32 {dst...}, [taddr][, split]
-- N comes from #dst (or num); split (16x32bx2 only) is the half's column offset.
function tc.ld(a)
  args_of("ld", a)
  local shape = a.shape or "32x32b"
  local dst = regs_of("ld", a, "dst")
  local num = num_of("ld", shape, #dst, a.num)
  local op = ("tcgen05.ld.sync.aligned.%s.x%d%s.b32"):format(shape, num, a.pack and ".pack::16b" or "")
  local taddr = as_addr(need("ld", a, "taddr"))
  if shape == "16x32bx2" then return emit_n(F(op), 3, dst, taddr, need("ld", a, "split", "the immHalfSplitoff column")) end
  return emit_n(F(op), 2, dst, taddr)
end

--- tcgen05.st.sync.aligned.<shape>.xN[.unpack::16b].b32 [taddr][, split], {src...}
function tc.st(a)
  args_of("st", a)
  local shape = a.shape or "32x32b"
  local src = regs_of("st", a, "src")
  local num = num_of("st", shape, #src, a.num)
  local op = ("tcgen05.st.sync.aligned.%s.x%d%s.b32"):format(shape, num, a.unpack and ".unpack::16b" or "")
  local taddr = as_addr(need("st", a, "taddr"))
  if shape == "16x32bx2" then return emit_n(F(op), 3, taddr, need("st", a, "split", "the immHalfSplitoff column"), src) end
  return emit_n(F(op), 2, taddr, src)
end

-- ------------------------------------------------------ commit, cp, shift

--- tcgen05.commit.cta_group::N.mbarrier::arrive::one[.shared::cluster]
--   [.multicast::cluster].b64 [mbar][, cta_mask]: the mbarrier gets one
-- arrive when the thread's earlier async tcgen05 operations complete. A
-- shared mbar (allocation or 32-bit register) uses .shared::cluster;
-- multicast = a 16-bit CTA mask signals the same offset in those CTAs.
local commit_forms = {}   -- cta_group -> variant -> form

--- The form of one commit variant: +1 .shared::cluster, +2 .multicast::cluster.
local function make_commit_form(cta, variant)
  return F("tcgen05.commit.cta_group::" .. tostring(cta) .. ".mbarrier::arrive::one"
    .. (variant % 2 == 1 and ".shared::cluster" or "") .. (variant >= 2 and ".multicast::cluster" or "") .. ".b64")
end

--- The form of tcgen05.commit for a CTA group, address space and multicast
-- (its opcode spelled once per combination, not per k-block).
local function commit_form(a, shared)
  local cta = a.cta_group or 1
  if cta ~= cta then return F("tcgen05.commit" .. cta_group(a)) end   -- NaN is no table key: F reports it
  return reg.memo2(commit_forms, cta, (shared and 1 or 0) + (a.multicast ~= nil and 2 or 0), make_commit_form)
end

local commit_bar = operands.scratch_addr()

function tc.commit(a)
  args_of("commit", a)
  local mbar = need("commit", a, "mbar")
  local form = commit_form(a, is_shared_addr(mbar))
  local rc
  if a.multicast then rc = emit_up(form, 2, addr_in(commit_bar, mbar), a.multicast)
  else rc = emit_up(form, 1, addr_in(commit_bar, mbar)) end
  commit_bar.base = false
  return rc
end


--- tcgen05.cp.cta_group::N.<shape>[.<multicast>][.b8x16.<src_fmt>] [taddr], s_desc:
-- copy a matrix from shared memory (described by a 64-bit SMEM descriptor)
-- into tensor memory. multicast: "warpx2::02_13", "warpx2::01_23" (64x128b)
-- or "warpx4" (32x128b); src_fmt "b6x16_p32" / "b4x16_p64" decompresses to b8x16.
function tc.cp(a)
  args_of("cp", a)
  local shape = a.shape or "128x256b"
  local op = "tcgen05.cp" .. cta_group(a) .. "." .. tostring(shape) .. (a.multicast and ("." .. a.multicast) or "") ..
    (a.src_fmt and (".b8x16." .. a.src_fmt) or "")
  return emit_n(F(op), 2, as_addr(need("cp", a, "taddr")), need("cp", a, "desc", "a 64-bit SMEM descriptor"))
end

--- tcgen05.shift.cta_group::N.down [taddr]: shift 32-byte rows down one lane.
function tc.shift(a)
  args_of("shift", a)
  return emit_n(F("tcgen05.shift" .. cta_group(a) .. ".down"), 1, as_addr(need("shift", a, "taddr")))
end

-- ---------------------------------------------------------- fence, wait

local FENCES = { before = "tcgen05.fence::before_thread_sync", after = "tcgen05.fence::after_thread_sync" }
local WAITS = { ld = "tcgen05.wait::ld.sync.aligned", st = "tcgen05.wait::st.sync.aligned" }

--- tcgen05.fence::before_thread_sync / ::after_thread_sync: which = "before" | "after".
function tc.fence(which)
  local op = FENCES[which]
  if not op then fail("fence", 'takes "before" or "after" (before_thread_sync / after_thread_sync)') end
  return emit_n(F(op), 0)
end
function tc.fence_before_thread_sync() return emit_n(F(FENCES.before), 0) end
function tc.fence_after_thread_sync() return emit_n(F(FENCES.after), 0) end

--- tcgen05.wait::ld / ::st .sync.aligned: which = "ld" | "st".
function tc.wait(which)
  local op = WAITS[which]
  if not op then fail("wait", 'takes "ld" or "st"') end
  return emit_n(F(op), 0)
end
function tc.wait_st() return emit_n(F(WAITS.st), 0) end

-- ----------------------------------------------- instruction descriptor

-- Matrix type codes per kind (PTX ISA, "Instruction descriptor" table for
-- .kind::tf32/f16/f8f6f4/i8); D: f16 = 0, f32 = 1, s32 = 2.
local AB_CODES = {
  f16 = { f16 = 0, bf16 = 1 },
  tf32 = { tf32 = 2 },
  f8f6f4 = { e4m3 = 0, e5m2 = 1, e2m3 = 3, e3m2 = 4, e2m1 = 5 },
  i8 = { u8 = 0, s8 = 1 },
}
local D_CODES = { f16 = { f16 = 0, f32 = 1 }, tf32 = { f32 = 1 }, f8f6f4 = { f16 = 0, f32 = 1 }, i8 = { s32 = 2 } }

local tname = types.name_of

--- Check a field fits in bits; error names the field.
local function field(name, v, bits)
  if type(v) ~= "number" or v ~= math.floor(v) or v < 0 or v >= 2 ^ bits then
    error(("pyptx.blackwell: %s must be an integer in [0, %d], got %s"):format(name, 2 ^ bits - 1, tostring(v)), 4)
  end
  return v
end

--- The M/N shape rules of tcgen05.mma (dense; sparse has the same M/N).
local function check_mn(m, n, cta2)
  local ms = cta2 and { [128] = true, [256] = true } or { [64] = true, [128] = true }
  if not ms[m] then
    error(("pyptx.blackwell.idesc: M must be %s for cta_group %d, got %s"):format(cta2 and "128 or 256" or "64 or 128",
      cta2 and 2 or 1, tostring(m)), 3)
  end
  local step = m == 64 and 8 or 16
  if type(n) ~= "number" or n < step or n > 256 or n % step ~= 0 then
    error(("pyptx.blackwell.idesc: N must be a multiple of %d in [%d, 256] for M = %d, got %s"):format(step, step, m,
      tostring(n)), 3)
  end
end

--- The 32-bit instruction descriptor of tcgen05.mma, as a Lua number.
-- o = { kind = "f16", a = "bf16", b = "bf16", d = "f32", M = 128, N = 256,
--       a_major = "K" | "MN", b_major = "K" | "MN", negate_a, negate_b,
--       sparse, sparse_id (0..3), saturate (i8), max_shift (0..3, .ws),
--       cta_group = 1 | 2 (for the M/N check) }
-- Bits: 0-1 sparsity selector, 2 sparse, 3 saturate, 4-5 D type, 7-9 A
-- type, 10-12 B type, 13/14 negate A/B, 15/16 transpose (MN-major) A/B,
-- 17-22 N>>3, 24-28 M>>4, 30-31 max shift.
function M.idesc(o)
  if type(o) ~= "table" then error("pyptx.blackwell.idesc takes a table", 2) end
  local kind = o.kind or "f16"
  local codes = AB_CODES[kind]
  if not codes then error("pyptx.blackwell.idesc: kind must be f16, tf32, f8f6f4 or i8, got " .. tostring(kind), 2) end
  local a, b, d = tname(o.a), tname(o.b or o.a), tname(o.d or (kind == "i8" and "s32" or "f32"))
  if codes[a] == nil or codes[b] == nil then
    local names = {}
    for k in pairs(codes) do names[#names + 1] = k end
    table.sort(names)
    error(("pyptx.blackwell.idesc: .kind::%s takes A/B types %s, got %s/%s"):format(kind, table.concat(names, " "),
      tostring(a), tostring(b)), 2)
  end
  if D_CODES[kind][d] == nil then error(("pyptx.blackwell.idesc: .kind::%s cannot accumulate into %s"):format(kind, tostring(d)), 2) end
  local m, n = o.M or 128, o.N or 128
  check_mn(m, n, o.cta_group == 2)
  local function major(v, which)
    if v == nil or v == "K" then return 0 end
    if v == "MN" then
      if kind == "f8f6f4" and (a == "e2m3" or a == "e3m2" or a == "e2m1") then
        error("pyptx.blackwell.idesc: sub-byte types are K-major only", 3)
      end
      return 1
    end
    error(("pyptx.blackwell.idesc: %s must be \"K\" or \"MN\", got %s"):format(which, tostring(v)), 3)
  end
  if (o.negate_a or o.negate_b) and kind == "i8" then error("pyptx.blackwell.idesc: .kind::i8 cannot negate", 2) end
  local v = field("sparse_id", o.sparse_id or 0, 2)
    + (o.sparse and 4 or 0)
    + (o.saturate and 8 or 0)
    + D_CODES[kind][d] * 16
    + codes[a] * 128
    + codes[b] * 1024
    + (o.negate_a and 8192 or 0)
    + (o.negate_b and 16384 or 0)
    + major(o.a_major, "a_major") * 32768
    + major(o.b_major, "b_major") * 65536
    + (n / 8) * 131072
    + (m / 16) * 16777216
    + field("max_shift", o.max_shift or 0, 2) * 1073741824
  return v
end

-- -------------------------------------------------- shared-memory descriptor

-- Swizzle codes, bits 61-63 of the SMEM descriptor.
local SWIZZLES = { none = 0, ["128B_base32B"] = 1, ["128B"] = 2, ["64B"] = 4, ["32B"] = 6 }
M.SWIZZLES = SWIZZLES

--- The descriptor's constant part (everything except the start address):
-- LBO (bits 16-29, >>4), SBO (32-45, >>4), version 1 (46-47), base offset
-- (49-51), LBO mode (52), swizzle (61-63).
local function desc_high(o, who)
  local sw = SWIZZLES[o.swizzle or "none"]
  if not sw then error(who .. ": swizzle must be none, 128B_base32B, 128B, 64B or 32B, got " .. tostring(o.swizzle), 3) end
  local lbo, sbo = o.lbo or 16, o.sbo or 0
  for name, val in pairs { lbo = lbo, sbo = sbo } do
    if type(val) ~= "number" or val % 16 ~= 0 or val < 0 or val >= 2 ^ 18 then
      error(("%s: %s must be a multiple of 16 bytes below 256 KiB, got %s"):format(who, name, tostring(val)), 3)
    end
  end
  local base = field("base_offset", o.base_offset or 0, 3)
  local mode = field("lbo_mode", o.lbo_mode or 0, 1)
  local lo = lbo / 16 * 2 ^ 16
  local hi = sbo / 16 + 2 ^ 14 + base * 2 ^ 17 + mode * 2 ^ 20 + sw * 2 ^ 29
  return (0ULL + hi) * 4294967296ULL + lo
end

--- A 64-bit SMEM matrix descriptor for tcgen05.mma/cp, as uint64 cdata.
-- o = { addr = shared byte address (a number, 16-byte aligned; 0 when the
--       address is added at run time), lbo = bytes, sbo = bytes,
--       swizzle = "none" | "128B_base32B" | "128B" | "64B" | "32B",
--       base_offset = 0..7, lbo_mode = 0 | 1 }
function M.smem_desc(o)
  if type(o) ~= "table" then error("pyptx.blackwell.smem_desc takes a table", 2) end
  local addr = o.addr or 0
  if type(addr) ~= "number" or addr % 16 ~= 0 or addr < 0 or addr >= 2 ^ 18 then
    error("pyptx.blackwell.smem_desc: addr must be a 16-byte aligned shared address below 256 KiB, got " .. tostring(addr), 2)
  end
  return desc_high(o, "pyptx.blackwell.smem_desc") + addr / 16
end

--- Build an SMEM descriptor in a new b64 register from a runtime shared
-- address (a u32/b32 register or a shared allocation): four instructions,
-- shr.u32 + and.b32 + cvt.u64.u32 + or.b64 with the constant part of o.
function M.smem_desc_reg(addr, o)
  local t = trace.need("pyptx.blackwell.smem_desc_reg")
  o = o or {}
  local hi = desc_high(o, "pyptx.blackwell.smem_desc_reg")
  if not reg.is(addr) then
    if type(addr) == "table" and addr.base then addr = addr:base()
    else trace.fail("pyptx.blackwell.smem_desc_reg: addr must be a 32-bit register or a shared allocation") end
  end
  local s = reg.new(t, types.u32)
  emit_n(F("shr.u32"), 3, s, addr, 4)
  emit_n(F("and.b32"), 3, s, s, 0x3fff)
  local d = reg.new(t, types.b64)
  emit_n(F("cvt.u64.u32"), 2, d, s)
  emit_n(F("or.b64"), 3, d, d, hi)
  return d
end

--- A TMEM address (lane in bits 31-16, column in 15-0) as a number, for
-- adding to the allocated base at trace time: taddr + M.tmem_offset(l, c).
function M.tmem_offset(lane, col)
  return field("lane", lane, 16) * 65536 + field("col", col, 16)
end

argcheck.sign(M, "blackwell", {
  idesc = { "o: table" },
  smem_desc = { "o: table" },
  smem_desc_reg = { "addr: register|alloc", "o: table?" },
})

return M
