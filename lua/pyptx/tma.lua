--- TMA tensor maps: descriptions built from a tensor (or shape) and a box,
-- validated in C against every documented constraint before any driver
-- call, and the kernel-side hook `X:tma_desc{box = ...}`.
local ffi = require "ffi"
local core = require "pyptx.core"

local M = {}

local SWIZZLE = { none = 0, [0] = 0, ["32B"] = 1, [32] = 1, ["64B"] = 2, [64] = 2, ["128B"] = 3, [128] = 3,
  ["128B_atom_32B"] = 4, ["128B_atom_32B_flip_8B"] = 5, ["128B_atom_64B"] = 6 }
local INTERLEAVE = { none = 0, [0] = 0, ["16B"] = 1, [16] = 1, ["32B"] = 2, [32] = 2 }
local L2 = { none = 0, [0] = 0, ["64B"] = 1, [64] = 1, ["128B"] = 2, [128] = 2, ["256B"] = 3, [256] = 3 }
local OOB = { zero = 0, zeros = 0, [0] = 0, nan = 1 }
M.SWIZZLE, M.INTERLEAVE, M.L2, M.OOB = SWIZZLE, INTERLEAVE, L2, OOB

--- Look an option value up in its table, or fail naming the valid ones.
local function pick(tbl, v, field, default)
  if v == nil then return default end
  local code = tbl[v]
  if code then return code end
  local names = {}
  for k in pairs(tbl) do if type(k) == "string" then names[#names + 1] = k end end
  table.sort(names)
  error(("TMA %s: %s is not valid; use one of %s"):format(field, tostring(v), table.concat(names, ", ")), 3)
end

--- Build a description. t: { address, shape (outermost first, as tensors
-- are), dtype (a pyptx type or name), strides (bytes, outermost first,
-- optional: row-major), box (outermost first), elem_strides, swizzle,
-- interleave, l2, oob }. Returns the C struct (innermost first inside).
function M.describe(t)
  local d = ffi.new("lpx_tma_desc")
  local dtype = type(t.dtype) == "table" and t.dtype.name or t.dtype
  d.dtype = core.tma_dtype_lookup(tostring(dtype))
  local rank = #t.shape
  d.rank = rank
  d.global_address = t.address or 0
  local esize = math.max(core.tma_dtype_size(d.dtype), 1)
  local stride = esize
  for i = 1, rank do
    local inner = rank - i          -- the driver wants innermost first
    d.dims[inner] = t.shape[i]
    d.box[inner] = (t.box or t.shape)[i] or 1
    d.elem_strides[inner] = t.elem_strides and t.elem_strides[i] or 1
  end
  for j = 0, rank - 2 do
    stride = stride * tonumber(d.dims[j])
    d.strides[j] = t.strides and t.strides[rank - 1 - j] or stride
  end
  d.swizzle = pick(SWIZZLE, t.swizzle, "swizzle", 0)
  d.interleave = pick(INTERLEAVE, t.interleave, "interleave", 0)
  d.l2_promotion = pick(L2, t.l2, "l2", 0)
  d.oob_fill = pick(OOB, t.oob, "oob", 0)
  return d
end

--- Validate a description; raises "TMA descriptor for <name>: <field> ...".
function M.validate(d, name)
  if core.tma_validate(core.ctx, name or "tensor", d) < 0 then error(core.error_message(), 2) end
  return d
end

--- Bytes one copy of the box moves (what mbarrier expect_tx counts).
function M.box_bytes(d)
  return core.tma_box_bytes(d)
end

return M
