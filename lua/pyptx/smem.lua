--- Shared memory: allocations carved from one per-kernel buffer, mbarrier
-- slots, base addresses, tiles in the canonical layouts wgmma reads
-- (smem.wgmma_tile), and the B32/B64/B128 XOR swizzles.
--
-- Every allocation is an offset into the kernel's buffer `<kernel>_smem`.
-- When the total stays within 48 KB the buffer is a static `.shared`
-- array; above that (or with extern_smem) it becomes `.extern .shared`
-- and the launch passes its size as dynamic shared memory. Operands are
-- `sym+offset`, so the switch changes no instruction.
local trace = require "pyptx.trace"
local types = require "pyptx.types"
local operands = require "pyptx.operands"
local argcheck = require "pyptx.args"
local core = require "pyptx.core"
local reg = require "pyptx.reg"
local wgmma_layout = require "pyptx.wgmma_layout"

local M = {}
local OPD = trace.OPD

M.STATIC_LIMIT = 48 * 1024
M.B32, M.B64, M.B128 = 32, 64, 128

local Alloc = {}

--- sA[i]: the address of element i ([sym+offset+i*elem], or [r+i*elem]
-- for a view whose address is in a register, tile:stage(s) with s a register).
Alloc.__index = function(a, k)
  if type(k) == "number" then
    return operands.addr(rawget(a, "reg") or a.sym, a.offset + k * a.type.bytes)
  end
  return Alloc[k]
end

--- As an operand an allocation is its address (for mov/cvta).
function Alloc.__operand(a, o, t, k)
  local r = rawget(a, "reg")
  if r then return getmetatable(r).__operand(r, o, t, k) end
  o.kind, o.type, o.id, o.aux, o.ival, o.fval = OPD.SYM, -1, trace.sym(t, a.sym), 0, a.offset, 0
  return k + 1
end
Alloc.__tostring = function(a)
  local r = rawget(a, "reg")
  if r then return ("smem view at %s (%d bytes)"):format(tostring(r), a.bytes) end
  return ("smem %s+%d (%d bytes)"):format(a.sym, a.offset, a.bytes)
end

--- The allocation's address for ptx.addr: its symbol (or register) and offset.
function Alloc:address()
  return { base = rawget(self, "reg") or self.sym, offset = self.offset }
end

--- A u32 register holding the allocation's shared-window address (one
-- mov; a view in a register gives that register, no instruction).
function Alloc:base()
  local v = rawget(self, "reg")
  if v then return v end
  local r = reg.new(trace.need("smem:base"), types.u32)
  trace.emit(reg.form("mov.u32"), r, self)
  return r
end

--- Number of elements in a shape (a number or a list of numbers).
local function count(shape)
  if type(shape) == "number" then return shape end
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  return n
end

--- Reserve shape elements of type ty; opts.align (bytes, power of two).
function M.alloc(ty, shape, opts)
  local t = trace.need("smem.alloc")
  if not types.is(ty) then trace.fail("smem.alloc: the first argument must be a type") end
  local n = count(shape or 1)
  if n < 1 or n ~= math.floor(n) then trace.fail("smem.alloc: the shape must hold a positive integer count") end
  local align = (opts and opts.align) or math.max(ty.bytes, 4)
  if align < 1 or align ~= 2 ^ math.floor(math.log(align) / math.log(2) + 0.5) then
    trace.fail("smem.alloc: align must be a power of two, got " .. tostring(align))
  end
  local off = math.ceil(t.smem_size / align) * align
  t.smem_size = off + n * ty.bytes
  t.smem_align = math.max(t.smem_align, align)
  return setmetatable({ sym = t.name .. "_smem", offset = off, bytes = n * ty.bytes, type = ty,
                        shape = shape, count = n }, Alloc)
end
M.array = M.alloc

--- n 8-byte mbarrier slots (8-byte aligned); slot i is bars[i].
function M.mbarrier(n)
  return M.alloc(types.b64, n or 1, { align = 8 })
end

-- The layouts a tile may ask for (pyptx.Layout.TMA_128B ...) and their spans.
local LAYOUT_SPAN = { ["128B"] = 128, ["64B"] = 64, ["32B"] = 32, interleave = 0 }

--- smem.wgmma_tile(dtype, {rows, cols}[, major | layout | {major =, layout =}]):
-- a shared allocation in a
-- canonical layout wgmma reads (rows = M or N, cols = K). major "K"
-- (default): K-major, the layout chosen from a row's bytes. major "MN"
-- (f16/bf16, read with trans_a/trans_b = 1): M/N-major, the layout chosen
-- from the bytes of M/N (a multiple of 16), K a multiple of 8. Aligned to
-- 1024 bytes; carries .layout, .span, .lbo, .sbo, .major and :k_offset(k).
-- A layout ("128B", "64B", "32B", "interleave": pyptx.Layout.TMA_*) asks
-- for that swizzle instead of the widest one. {stages = S} reserves S
-- such tiles back to back (a ring's buffer); tile:stage(s[, row]) is one.
function M.wgmma_tile(dtype, shape, major)
  local want, stages = nil, 1
  if type(major) == "table" then
    stages = major.stages or 1
    if type(stages) ~= "number" or stages < 1 or stages % 1 ~= 0 then
      trace.fail("smem.wgmma_tile: stages must be a positive integer, got " .. tostring(stages))
    end
    want, major = major.layout, major.major
  elseif major ~= nil and LAYOUT_SPAN[major] then want, major = major, nil end
  major = (major == nil or major == "K" or major == "k") and "K" or (major == "MN" or major == "mn") and "MN" or nil
  if not major then trace.fail("smem.wgmma_tile: major must be \"K\" or \"MN\"") end
  if want ~= nil and LAYOUT_SPAN[want] == nil then
    trace.fail("smem.wgmma_tile: layout must be Layout.TMA_128B, TMA_64B, TMA_32B or INTERLEAVED (\"128B\", \"64B\", "
      .. "\"32B\", \"interleave\"), got " .. tostring(want))
  end
  if major == "MN" and dtype.bytes ~= 2 then
    trace.fail("smem.wgmma_tile: MN-major tiles are f16/bf16 only (wgmma transposes those types only), got " .. dtype.name)
  end
  if type(shape) ~= "table" or #shape ~= 2 then trace.fail("smem.wgmma_tile: shape must be {rows, cols}") end
  local rows, cols = shape[1], shape[2]
  local mn_bytes = major == "MN" and rows * dtype.bytes or cols * dtype.bytes
  if (major == "K" and rows % 8 ~= 0) or (major == "MN" and cols % 8 ~= 0) or mn_bytes % 16 ~= 0 then
    trace.fail(("smem.wgmma_tile: a %s-major tile needs %s a multiple of 8 and %s a multiple of 16 bytes, got %dx%d %s")
      :format(major, major == "K" and "rows" or "K (cols)", major == "K" and "a row" or "M/N (rows)", rows, cols, dtype.name))
  end
  local layout, span = wgmma_layout.choose_layout(mn_bytes)
  if want ~= nil then
    if mn_bytes % math.max(LAYOUT_SPAN[want], 16) ~= 0 then
      trace.fail(("smem.wgmma_tile: a %s layout needs the %s bytes (%d here) to be a multiple of %d")
        :format(want, major == "K" and "row's" or "M/N", mn_bytes, LAYOUT_SPAN[want]))
    end
    layout, span = want, LAYOUT_SPAN[want]
  end
  local a = M.alloc(dtype, stages * rows * cols, { align = 1024 })
  a.layout, a.span, a.rows, a.cols, a.major = layout, span, rows, cols, major
  a.stages, a.stage_bytes, a.stage = stages, rows * cols * dtype.bytes, M.tile_stage
  if major == "MN" and span == 0 then
    a.sbo, a.lbo = 128, (mn_bytes / 16) * 128             -- core matrices: M/N neighbours 128 B apart
  elseif major == "MN" then
    a.lbo, a.sbo = 8 * span, (mn_bytes / span) * 8 * span  -- atoms along M/N first, then K groups
  elseif span == 0 then
    a.lbo, a.sbo = 128, (cols * dtype.bytes / 16) * 128   -- core matrices: K neighbours 128 B apart
  else
    a.lbo, a.sbo = 16, 8 * span                           -- LBO unused for swizzled K-major
  end
  --- Byte offset from the tile start of the slice starting at K element k.
  a.k_offset = function(self, k) return wgmma_layout.tile_offset(self, 0, k) end
  if major == "K" and span > 0 then
    -- the TMA boxes that write this layout: one per span-byte column block
    -- of K, box = {rows, span bytes of K} (outermost first), rows * span bytes apart
    a.tma_box, a.tma_swizzle, a.tma_blocks = { rows, span / dtype.bytes }, layout, mn_bytes / span
    a.tma_box_bytes = rows * span
    --- Box j's destination in the tile and its K coordinate (elements).
    a.tma_block = function(self, j) return self[j * self.tma_box_bytes / dtype.bytes], j * self.tma_box[2] end
  end
  return a
end

--- Is v a 32-bit integer register?
local function is_int32(v) return reg.is(v) and types.is_int(v.type) and v.type.bits == 32 end

--- tile:stage(s[, row]): stage s (0..stages-1: a number, or a u32
-- register such as ring.stage) of a tile from smem.wgmma_tile(..., {stages
-- = S}), from its row `row` on (K-major; a multiple of 8: a number, or a
-- u32 register the caller keeps a multiple of 8). A wgmma tile itself:
-- it has the layout, descriptor strides, k_offset and TMA box of one
-- stage, so ptx.wgmma.mma_async{a = sA:stage(s), k = k} and
-- cp.async.bulk.tensor{dst = sA:stage(s)} take it. Numbers give a
-- [sym+offset] view (no instruction); a register, a view whose address
-- is one register (mad, and mad for a register row).
function M.tile_stage(tile, s, row)
  if type(tile) ~= "table" or not tile.stage_bytes then
    trace.fail("tile:stage: call it with a colon on a wgmma tile, sA:stage(s)")
  end
  if type(s) == "number" then
    if s < 0 or s >= tile.stages or s % 1 ~= 0 then
      trace.fail(("tile:stage: stage %s is outside the tile's stages 0..%d"):format(tostring(s), tile.stages - 1))
    end
  elseif not is_int32(s) then
    trace.fail(("tile:stage: the stage must be an integer 0..%d or a u32 register (ring.stage), got %s")
      :format(tile.stages - 1, tostring(s)))
  end
  row = row or 0
  if row ~= 0 and (tile.major ~= "K" or tile.span == 0) then
    trace.fail("tile:stage: a row offset needs a K-major swizzled tile (its rows are 8-row atoms apart)")
  end
  if type(row) == "number" then
    if row < 0 or row >= tile.rows or row % 8 ~= 0 then
      trace.fail(("tile:stage: row %s must be a multiple of 8 in 0..%d"):format(tostring(row), tile.rows - 8))
    end
  elseif not is_int32(row) then
    trace.fail("tile:stage: the row must be a multiple of 8 or a u32 register, got " .. tostring(row))
  end
  local v = {}
  for k, x in pairs(tile) do v[k] = x end
  v.stages, v.bytes, v.count = 1, tile.stage_bytes, tile.stage_bytes / tile.type.bytes
  local row_bytes = tile.sbo / 8                          -- K-major, swizzled: 8 rows per sbo
  if type(s) == "number" and type(row) == "number" then
    v.offset = tile.offset + s * tile.stage_bytes + row * row_bytes
  else
    local at = tile:base()                                  -- a view in a register: that register
    if type(s) ~= "number" then at = s:fma(tile.stage_bytes, at)
    elseif s > 0 then at = at + s * tile.stage_bytes end
    if type(row) == "number" then
      if row ~= 0 then at = at + row * row_bytes end
    else
      at = row:fma(row_bytes, at)
    end
    v.reg, v.offset = at, 0
  end
  return setmetatable(v, Alloc)
end

--- offset ^ ((((offset >> 7) - base) & mask) << 4) on a register: the
-- XOR swizzle as instructions (shr, [sub,] and, shl, xor), in offset's type.
function M.swizzle_register(offset, mask, base)
  local line = offset:shr(7)
  if base and base ~= 0 then line = line - base end
  return offset:bxor(line:band(mask):shl(4))
end

--- The byte offset with the XOR swizzle of mode (B32/B64/B128) applied:
-- bits [4, 4+k) ^= bits [7, 7+k), k = log2(mode/16). Computed at trace
-- time for a number; for a register, emitted (see M.swizzle_register).
function M.swizzle(offset, mode)
  if mode ~= 32 and mode ~= 64 and mode ~= 128 then
    trace.fail("smem.swizzle: mode must be smem.B32, smem.B64 or smem.B128, got " .. tostring(mode))
  end
  local mask = mode / 16 - 1
  if reg.is(offset) then
    if not types.is_int(offset.type) or offset.type.bits < 32 then
      trace.fail("smem.swizzle: the offset register must be a 32- or 64-bit integer, got " .. offset.type.name)
    end
    return M.swizzle_register(offset, mask)
  end
  local row_bits = math.floor(offset / 128) % (mask + 1)
  local col = math.floor(offset / 16) % (mask + 1)
  return offset + (bit.bxor(col, row_bits) - col) * 16
end

--- Declare the kernel's buffer once the body is traced; returns the
-- dynamic shared-memory size the launch must pass (0 when static).
function M.finish(t, force_dynamic)
  if t.smem_size == 0 and not force_dynamic then return 0 end
  local dynamic = force_dynamic or t.smem_size > M.STATIC_LIMIT
  local rc = core.var_decl(t.mod, -1, "shared", t.name .. "_smem", types.b8.id, t.smem_align,
    dynamic and -1 or t.smem_size, dynamic and 2 or 0)
  if rc < 0 then error(core.error_message(), 0) end
  return dynamic and t.smem_size or 0
end

argcheck.kind("alloc", "a shared allocation (smem.alloc)", function(v) return getmetatable(v) == Alloc end)
argcheck.sign(M, "smem", {
  alloc = { "ty: type", "shape: integer|table?", "opts: table?" },
  array = { "ty: type", "shape: integer|table?", "opts: table?" },
  mbarrier = { "n: integer?" },
  wgmma_tile = { "ty: type", "shape: table", "major: string|table?" },
  swizzle = { "offset: integer|register", "mode: integer" },
  swizzle_register = { "offset: register", "mask: integer", "base: integer?" },
})

return M
