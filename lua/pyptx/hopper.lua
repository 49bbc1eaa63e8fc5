--- Hopper warpgroup instructions: wgmma.mma_async with shared-memory
-- matrix descriptors, wgmma.fence / commit_group / wait_group, the
-- accumulator and A register fragment layouts, `smem.wgmma_tile`
-- (canonical K-major and, for f16/bf16, MN-major layouts: interleave, 32B,
-- 64B, 128B swizzle), elect.sync, setmaxnreg and griddepcontrol.
-- Reached as `ptx.wgmma`, `ptx.elect`, `ptx.setmaxnreg` and
-- `ptx.griddepcontrol`.
--
--   local sA = smem.wgmma_tile(bf16, {64, 64})          -- 128B swizzle, K-major
--   local da = ptx.wgmma.desc(sA)                        -- u64 descriptor (4 instructions)
--   ptx.wgmma.mma_async{ shape = {64, 128, 16}, d = acc, a = da, b = db, atype = bf16, scale_d = 1 }
local bit = require "bit"
local trace = require "pyptx.trace"
local types = require "pyptx.types"
local reg = require "pyptx.reg"
local isa = require "pyptx.isa"
local smem = require "pyptx.smem"
local wgmma_layout = require "pyptx.wgmma_layout"
local operands = require "pyptx.operands"
local argcheck = require "pyptx.args"

local M = {}

--- Append opcode with operands (forms interned once per spelling).
local function emit(opcode, ...)
  return trace.emit(reg.form(opcode), ...)
end

--- Fail at the user's line.
local fail = trace.fail

-- ------------------------------------------------ canonical SMEM layouts

-- The layouts (pyptx.wgmma_layout) and tiles allocated in them (smem), as hopper.*.
M.LAYOUT, M.SPAN, M.choose_layout = wgmma_layout.LAYOUT, wgmma_layout.SPAN, wgmma_layout.choose_layout
M.tile_offset = wgmma_layout.tile_offset

--- The hardware swizzle of a shared byte address (wgmma_layout's): at
-- trace time for a number, as instructions for a register.
function M.swizzle_address(a, span, base_offset)
  if not reg.is(a) then return wgmma_layout.swizzle_address(a, span, base_offset) end
  if span ~= 0 and span ~= 32 and span ~= 64 and span ~= 128 then
    trace.fail("hopper.swizzle_address: span must be 0, 32, 64 or 128 (bytes), got " .. tostring(span))
  end
  if not types.is_int(a.type) or a.type.bits < 32 then
    trace.fail("hopper.swizzle_address: the address register must be a 32- or 64-bit integer, got " .. a.type.name)
  end
  if span == 0 then return a end
  return smem.swizzle_register(a, span / 16 - 1, base_offset)
end
M.wgmma_tile = smem.wgmma_tile

--- The 64-bit constant part of a descriptor (everything but the start
-- address): LBO, SBO, the matrix base offset (bits 49-51; swizzled
-- layouts only, as the ISA defines it) and the layout.
function M.desc_bits(layout, lbo, sbo, base_offset)
  local code = M.LAYOUT[layout]
  if not code then fail("wgmma descriptor: unknown layout " .. tostring(layout)) end
  base_offset = base_offset or 0
  if type(base_offset) ~= "number" or base_offset < 0 or base_offset > 7 or base_offset % 1 ~= 0 then
    fail("wgmma descriptor: base_offset must be an integer 0..7 ((pattern start >> 7) & 7), got " .. tostring(base_offset))
  end
  if base_offset ~= 0 and code == 0 then
    fail("wgmma descriptor: base_offset applies to the swizzled layouts (32B, 64B, 128B), not " .. layout)
  end
  return bit.lshift(0ULL + bit.band(lbo / 16, 0x3fff), 16) + bit.lshift(0ULL + bit.band(sbo / 16, 0x3fff), 32)
    + bit.lshift(0ULL + base_offset, 49) + bit.lshift(0ULL + code, 62)
end

--- A u64 register holding the descriptor of a wgmma tile (or of a u32
-- shared address register with opts.layout/lbo/sbo): cvt, shr, and, or
-- (four instructions; one more mov for an allocation's address).
-- opts.base_offset (default 0: the pattern of TMA and of wgmma_tile, which
-- starts at a span * 8-byte boundary wherever the tile lies) is for data
-- swizzled with a pattern that starts elsewhere: (pattern start >> 7) & 7.
function M.desc(tile, opts)
  opts = opts or {}
  local addr = tile
  local layout, lbo, sbo = opts.layout or tile.layout, opts.lbo or tile.lbo, opts.sbo or tile.sbo
  if not reg.is(tile) then
    if not (type(tile) == "table" and tile.base) then fail("ptx.wgmma.desc needs a wgmma tile or a u32 address register") end
    addr = tile:base()
    if opts.offset and opts.offset ~= 0 then addr = addr + opts.offset end
  end
  if not (layout and lbo and sbo) then fail("ptx.wgmma.desc: a register address needs layout, lbo and sbo") end
  local t = trace.need("ptx.wgmma.desc")
  local d = reg.new(t, types.u64)
  emit("cvt.u64.u32", d, addr)
  emit("shr.u64", d, d, 4)
  emit("and.b64", d, d, 0x3fff)
  emit("or.b64", d, d, M.desc_bits(layout, lbo, sbo, opts.base_offset))
  return d
end

-- ---------------------------------------------------------------- wgmma

local wgmma = {}

--- wgmma.fence.sync.aligned.
function wgmma.fence() return emit("wgmma.fence.sync.aligned") end

--- wgmma.commit_group.sync.aligned.
function wgmma.commit_group() return emit("wgmma.commit_group.sync.aligned") end

--- wgmma.wait_group.sync.aligned n.
function wgmma.wait_group(n) return emit("wgmma.wait_group.sync.aligned", n or 0) end

-- Input families by A/B type, the C table's (LPX_WGMMA_FAMILIES, read by
-- pyptx.isa): K per instruction, element bits, the accumulator types
-- (default_acc first), which immediates follow scale-d (scale-a/b,
-- trans-a/b), the .b1 operation (op). The wrapper reads them only to spell
-- the call; every rule (type pairs, N steps, accumulators, transposes,
-- .satfinite, sparsity selectors, PTX versions) is the C validator's
-- (lpx_wgmma_form_check and hp_wgmma in src/), which reports at the
-- caller's line.
local FAMILY = isa.wgmma_families
M.FAMILY = FAMILY

local tname = types.name_of

--- The registers of a list (0- or 1-based), or fail with what it must be.
local function reg_list(d, what)
  if type(d) ~= "table" or reg.is(d) then fail("wgmma.mma_async: " .. what) end
  local list, i = {}, d[0] ~= nil and 0 or 1
  while d[i] ~= nil do
    list[#list + 1] = d[i]
    i = i + 1
  end
  return list
end

--- The spelling of opts.shape ({64, N[, K]} or "m64nNkK"); K defaults to k.
local function shape_of(shape, k)
  shape = shape or { 64, 64 }
  if type(shape) == "string" then return shape end
  if type(shape) ~= "table" or type(shape[1]) ~= "number" or type(shape[2]) ~= "number"
    or (shape[3] ~= nil and type(shape[3]) ~= "number") then
    fail("wgmma.mma_async: shape must be {64, N[, K]} or \"m64nNkK\", got " .. tostring(shape))
  end
  return ("m%dn%dk%d"):format(shape[1], shape[2], shape[3] or k)
end

--- The operands {meta, sel} of opts.sparse (nil: the dense form).
local function sparse_of(sp)
  if sp == nil or sp == false then return nil end
  if type(sp) ~= "table" or sp.meta == nil then fail("wgmma.mma_async: sparse must be { meta = <.b32 register>, sel = 0|1 }") end
  return { sp.meta, sp.sel or 0 }
end

--- The immediates after scale-d: imm-scale-a/-b for the families that
-- take them, imm-trans-a/-b for f16/bf16 (no imm-trans-a with A from
-- registers); given transposes are always spelled, so the validator
-- refuses them where PTX does.
local function immediates(args, opts, fam, areg)
  local ta, tb = opts.trans_a or 0, opts.trans_b or 0
  local trans = fam.trans or ta ~= 0 or tb ~= 0
  if fam.scale or trans or opts.scale_a or opts.scale_b then
    args[#args + 1] = opts.scale_a or 1
    args[#args + 1] = opts.scale_b or 1
  end
  if trans and (not areg or ta ~= 0) then args[#args + 1] = ta end
  if trans then args[#args + 1] = tb end
end

--- wgmma.mma_async.sync.aligned.m64nNk<K>.<d>.<a>.<b> d, a, b-desc, scale-d
-- {, imm-scale-a, imm-scale-b {, imm-trans-a, imm-trans-b}}. opts: shape
-- ({64, N, K} or "m64nNkK"; K defaults from the type), d (accumulators: N/2
-- f32/s32 or N/4 packed f16x2 registers), a (u64 descriptor, or the A
-- registers), b (u64 descriptor), atype/btype (f16, bf16, tf32, e4m3, e5m2,
-- s8, u8, "b1"), dtype (the family's first accumulator by default: f32, or
-- s32 for integers and b1; f16 possible), scale_d (0/1 or a predicate;
-- default 1), scale_a/scale_b (1/-1), trans_a/trans_b (0/1, f16 and bf16
-- only: MN-major operands), satfinite (s8/u8).
-- sparse = { meta = r, sel = 0 } emits wgmma.mma_async.sp (A 2:4 sparse,
-- 1:2 for tf32, stored compressed; K twice the dense K): the .b32
-- metadata register and the selector (0 or 1; 0 for 8-bit inputs) go
-- after b-desc.
--- Is v a wgmma tile (smem.wgmma_tile)?
local function is_wgmma_tile(v)
  return type(v) == "table" and not reg.is(v) and v.layout ~= nil and v.lbo ~= nil and v.base ~= nil
end

--- The descriptor operand `which` ("a"/"b") of mma_async opts: a wgmma
-- tile becomes its descriptor at K element opts.k (default 0); a u64
-- descriptor with opts.<which>_tile moves to K element opts.k by adding
-- the slice's byte offset >> 4; anything else as given.
local function operand_desc(opts, which)
  local v, k = opts[which], opts.k
  if k ~= nil and (type(k) ~= "number" or k < 0 or k % 1 ~= 0) then
    fail("wgmma.mma_async: k must be a K element offset (an integer >= 0), got " .. tostring(k))
  end
  local tile = is_wgmma_tile(v) and v or opts[which .. "_tile"]
  if not is_wgmma_tile(tile) or (tile ~= v and not k) then return v end
  local off = tile:k_offset(k or 0)
  if off % 16 ~= 0 then
    fail(("wgmma.mma_async: K element %d of %s's tile starts at byte %d, not on a 16-byte boundary"):format(k, which, off))
  end
  if tile == v then return M.desc(tile, { offset = off }) end
  if off == 0 then return v end
  return v + off / 16
end

function wgmma.mma_async(opts)
  local an = tname(opts.atype or types.bf16)
  local bn = tname(opts.btype) or an
  local fam = FAMILY[an] or {}
  local sp = sparse_of(opts.sparse)
  local shape = shape_of(opts.shape, (fam.k or 16) * (sp and 2 or 1))
  local dt = tname(opts.dtype) or fam.default_acc or "f32"
  local list = reg_list(opts.d, "d must list the accumulator registers")
  if opts.a == nil or opts.b == nil then fail("wgmma.mma_async: a and b are required") end
  local a, b = operand_desc(opts, "a"), operand_desc(opts, "b")
  local areg = type(a) == "table" and not reg.is(a)
  if areg then a = reg_list(opts.a, "a must be a u64 descriptor or the list of A registers") end
  local sd = opts.scale_d == nil and 1 or opts.scale_d
  if sd == true then sd = 1 elseif sd == false then sd = 0 end
  local op = ("wgmma.mma_async%s.sync.aligned.%s%s.%s.%s.%s%s"):format(sp and ".sp" or "", shape,
    opts.satfinite and ".satfinite" or "", tostring(dt), tostring(an), tostring(bn), fam.op or "")
  local args = { list, a, b }
  if sp then args[4], args[5] = sp[1], sp[2] end
  args[#args + 1] = sd
  immediates(args, opts, fam, areg)
  return emit(op, unpack(args))
end

--- The accumulator fragment layout of m64nNkK: element i (0..N/2-1) of
-- thread t (0..127 of the warpgroup) holds D[row][col] (0-based). f32/s32
-- accumulators: element i is register i; f16: half i%2 (low first) of
-- register floor(i/2).
function wgmma.coord(t, i)
  local w, lane = math.floor(t / 32), t % 32
  local nb, rest = math.floor(i / 4), i % 4
  local row = 16 * w + math.floor(lane / 4) + 8 * math.floor(rest / 2)
  local col = 8 * nb + 2 * (lane % 4) + rest % 2
  return row, col
end

--- The A register fragment: element e (p = 32/bits per register, low bits
-- first) of register r (0..3) of thread t holds A[16w + row][k], w = t/32.
-- atype (default f16/bf16: pairs) picks p: tf32 1, e4m3/e5m2/s8/u8 4, b1 32.
-- Returns row, k.
function wgmma.a_coord(t, r, e, atype)
  local fam = FAMILY[tname(atype) or "f16"]
  if not fam then fail("wgmma.a_coord: unknown A type " .. tostring(tname(atype))) end
  local p = 32 / fam.bits
  local w, lane = math.floor(t / 32), t % 32
  return 16 * w + math.floor(lane / 4) + 8 * (r % 2), p * (lane % 4) + e + 4 * p * math.floor(r / 2)
end

--- Fresh accumulator registers for an m64nNk*: N/2 f32 (default) or s32,
-- or N/4 packed f16x2 .b32 for dtype f16; zeroed when zero.
function wgmma.fragments(n, zero, dtype)
  local dt = tname(dtype) or "f32"
  if dt == "f16" then return reg.fragments(types.b32, n / 4, zero) end
  return reg.fragments(types[dt], n / 2, zero)
end

wgmma.desc = M.desc
wgmma.tile_offset = M.tile_offset
M.wgmma = wgmma

-- ------------------------------------------------------ elect, setmaxnreg

local elect = {}

--- elect.sync _|p, membermask: a predicate true in one lane of the mask.
function elect.sync(mask)
  local p = reg.new(trace.need("ptx.elect.sync"), types.pred)
  emit("elect.sync", operands.pipe(operands.sink, p), mask or 0xffffffff)
  return p
end
M.elect = setmetatable(elect, { __call = function(_, mask) return elect.sync(mask) end })

local setmaxnreg = {}

--- setmaxnreg.inc.sync.aligned.u32 n (n: 24..256, a multiple of 8).
local function maxnreg(dir)
  return function(n)
    if type(n) ~= "number" or n < 24 or n > 256 or n % 8 ~= 0 then
      fail("setmaxnreg: the count must be 24..256 and a multiple of 8, got " .. tostring(n))
    end
    return emit("setmaxnreg." .. dir .. ".sync.aligned.u32", n)
  end
end
setmaxnreg.inc, setmaxnreg.dec = maxnreg("inc"), maxnreg("dec")
M.setmaxnreg = setmaxnreg

-- --------------------------------------------------------- griddepcontrol

local griddepcontrol = {}

--- griddepcontrol.launch_dependents: the grids launched after this one as
-- its dependents (programmatic dependent launch) may start now (sm_90+).
function griddepcontrol.launch_dependents() return emit("griddepcontrol.launch_dependents") end

--- griddepcontrol.wait: wait until the grids this one depends on have
-- completed and their memory operations are visible (sm_90+).
function griddepcontrol.wait() return emit("griddepcontrol.wait") end

M.griddepcontrol = griddepcontrol

argcheck.sign(M, "hopper", {
  choose_layout = { "kbytes: integer" },
  tile_offset = { "tile: alloc|table", "r: integer", "k: integer" },
  swizzle_address = { "a: integer|register", "span: integer", "base_offset: integer?" },
  wgmma_tile = { "dtype: type", "shape: table", "major: string|table?" },
  desc_bits = { "layout: string", "lbo: integer", "sbo: integer", "base_offset: integer?" },
  desc = { "tile: alloc|register", "opts: table?" },
})
argcheck.sign(wgmma, "ptx.wgmma", {
  wait_group = { "n: integer?" },
  mma_async = { "opts: table" },
  coord = { "t: integer", "i: integer" },
  a_coord = { "t: integer", "r: integer", "e: integer", "atype: type|string?" },
  fragments = { "n: integer", "zero: boolean|number?", "dtype: type|string?" },
  desc = { "tile: alloc|register", "opts: table?" },
  tile_offset = { "tile: alloc|table", "r: integer", "k: integer" },
})

return M
