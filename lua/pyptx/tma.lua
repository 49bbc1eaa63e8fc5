--- TMA tensor maps: descriptions built from a tensor (or shape) and a box
-- (tiled) or a pixel box (im2col), validated in C against every documented
-- constraint before any driver call, and the kernel-side hook
-- `X:tma_desc{box = ...}` / `X:tma_desc{mode = "im2col", ...}`.
local ffi = require "ffi"
local core = require "pyptx.core"
local argcheck = require "pyptx.args"

local M = {}

local SWIZZLE = { none = 0, [0] = 0, ["32B"] = 1, [32] = 1, ["64B"] = 2, [64] = 2, ["128B"] = 3, [128] = 3,
  ["128B_atom_32B"] = 4, ["128B_atom_32B_flip_8B"] = 5, ["128B_atom_64B"] = 6 }
local INTERLEAVE = { none = 0, [0] = 0, ["16B"] = 1, [16] = 1, ["32B"] = 2, [32] = 2 }
local L2 = { none = 0, [0] = 0, ["64B"] = 1, [64] = 1, ["128B"] = 2, [128] = 2, ["256B"] = 3, [256] = 3 }
local OOB = { zero = 0, zeros = 0, [0] = 0, nan = 1 }
local MODE = { tile = 0, tiled = 0, im2col = 1 }
M.SWIZZLE, M.INTERLEAVE, M.L2, M.OOB, M.MODE = SWIZZLE, INTERLEAVE, L2, OOB, MODE

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

--- The im2col pixel-box corner `field` (outermost first: D, H, W) into the
-- C array arr (W first); rank - 2 entries, zeros by default.
local function corners(arr, list, rank, field)
  if list == nil or rank < 3 then return end   -- the C check names a rank below 3
  if type(list) ~= "table" or #list ~= rank - 2 then
    error(("TMA %s: a rank-%d im2col map takes %d corner offset(s) (outermost first: %s), got %s"):format(field, rank,
      rank - 2, ({ "W", "H, W", "D, H, W" })[rank - 2] or "?", type(list) == "table" and #list or tostring(list)), 3)
  end
  for i = 1, rank - 2 do arr[rank - 2 - i] = list[i] end
end

--- Build a description. t: { address, shape (outermost first, as tensors
-- are), dtype (a pyptx type or name), strides (bytes, outermost first,
-- optional: row-major), box (outermost first), elem_strides, swizzle,
-- interleave, l2, oob } for a tiled map; with mode = "im2col", instead of
-- box: lower_corner and upper_corner (D, H, W offsets, outermost first),
-- channels_per_pixel and pixels_per_column. Returns the C struct
-- (innermost first inside).
function M.describe(t)
  argcheck.fields("tma.describe", t, { "shape: table", "dtype: type|string", "address: integer|cdata?", "strides: table?",
    "box: table?", "elem_strides: table?", "mode: string?" })
  local d = ffi.new("lpx_tma_desc")
  local dtype = type(t.dtype) == "table" and t.dtype.name or t.dtype
  d.dtype = core.tma_dtype_lookup(tostring(dtype))
  local rank = #t.shape
  d.rank = rank
  d.global_address = t.address or 0
  d.mode = pick(MODE, t.mode, "mode", 0)
  local esize = math.max(core.tma_dtype_size(d.dtype), 1)
  local stride = esize
  for i = 1, rank do
    local inner = rank - i          -- the driver wants innermost first
    d.dims[inner] = t.shape[i]
    if d.mode == 0 then d.box[inner] = (t.box or t.shape)[i] or 1 end
    d.elem_strides[inner] = t.elem_strides and t.elem_strides[i] or 1
  end
  if d.mode == 1 then
    corners(d.lower, t.lower_corner, rank, "lower_corner")
    corners(d.upper, t.upper_corner, rank, "upper_corner")
    d.channels, d.pixels = t.channels_per_pixel or 0, t.pixels_per_column or 0
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

--- Bytes one copy of the box moves (what mbarrier expect_tx counts):
-- ceil(box / element stride) elements per dimension, or pixels x channels.
function M.box_bytes(d)
  return core.tma_box_bytes(d)
end

argcheck.kind("tma_desc", "a TMA description (tma.describe's result)", function(v)
  return ffi.istype("lpx_tma_desc", v) or ffi.istype("lpx_tma_desc *", v) and v ~= nil
end)
argcheck.sign(M, "tma", {
  describe = { "t: table" },
  validate = { "d: tma_desc", "name: string?" },
  box_bytes = { "d: tma_desc" },
})

return M
