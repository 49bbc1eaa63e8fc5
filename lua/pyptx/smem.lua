--- Shared memory: allocations carved from one per-kernel buffer, mbarrier
-- slots, base addresses, and the B32/B64/B128 XOR swizzles.
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

local M = {}
local OPD = trace.OPD

M.STATIC_LIMIT = 48 * 1024
M.B32, M.B64, M.B128 = 32, 64, 128

local Alloc = {}

--- sA[i]: the address of element i ([sym+offset+i*elem]).
Alloc.__index = function(a, k)
  if type(k) == "number" then
    return operands.addr(a.sym, a.offset + k * a.type.bytes)
  end
  return Alloc[k]
end

--- As an operand an allocation is its address (for mov/cvta).
function Alloc.__operand(a, o, t, k)
  o.kind, o.type, o.id, o.aux, o.ival, o.fval = OPD.SYM, -1, trace.sym(t, a.sym), 0, a.offset, 0
  return k + 1
end
Alloc.__tostring = function(a) return ("smem %s+%d (%d bytes)"):format(a.sym, a.offset, a.bytes) end

--- The allocation's address for ptx.addr: its symbol and offset.
function Alloc:address()
  return { base = self.sym, offset = self.offset }
end

--- A u32 register holding the allocation's shared-window address (one mov).
function Alloc:base()
  local reg = require "pyptx.reg"
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
  if not types.is(ty) then trace.fail("smem.alloc: the first argument must be a type", 2) end
  local n = count(shape or 1)
  if n < 1 or n ~= math.floor(n) then trace.fail("smem.alloc: the shape must hold a positive integer count", 2) end
  local align = (opts and opts.align) or math.max(ty.bytes, 4)
  if align < 1 or align ~= 2 ^ math.floor(math.log(align) / math.log(2) + 0.5) then
    trace.fail("smem.alloc: align must be a power of two, got " .. tostring(align), 2)
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

--- A tile in a canonical layout wgmma reads: smem.wgmma_tile(bf16,
-- {rows, K}[, "K" | "MN"]) (pyptx.hopper: swizzle chooser, descriptor fields).
function M.wgmma_tile(ty, shape, major)
  return require("pyptx.hopper").wgmma_tile(ty, shape, major)
end

--- The byte offset with the XOR swizzle of mode (B32/B64/B128) applied,
-- computed at trace time: bits [4, 4+k) ^= bits [7, 7+k), k = log2(mode/16).
function M.swizzle(offset, mode)
  if mode ~= 32 and mode ~= 64 and mode ~= 128 then
    trace.fail("smem.swizzle: mode must be smem.B32, smem.B64 or smem.B128, got " .. tostring(mode), 2)
  end
  local mask = mode / 16 - 1
  local row_bits = math.floor(offset / 128) % (mask + 1)
  local col = math.floor(offset / 16) % (mask + 1)
  return offset + (bit.bxor(col, row_bits) - col) * 16
end

--- Declare the kernel's buffer once the body is traced; returns the
-- dynamic shared-memory size the launch must pass (0 when static).
function M.finish(t, force_dynamic)
  if t.smem_size == 0 and not force_dynamic then return 0 end
  local core = require "pyptx.core"
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
  wgmma_tile = { "ty: type", "shape: table", "major: string?" },
  swizzle = { "offset: integer", "mode: integer" },
})

return M
