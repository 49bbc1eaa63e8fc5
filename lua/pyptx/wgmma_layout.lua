--- Canonical shared-memory layouts wgmma reads (and TMA writes): the
-- layout a tile gets, where element (r, k) of a tile lies, and the
-- hardware's address swizzle. Pure arithmetic at trace time; smem
-- allocates tiles in these layouts (smem.wgmma_tile) and pyptx.hopper
-- builds descriptors from them (and re-exports them as hopper.*).
local bit = require "bit"

local M = {}

-- Descriptor layout-type codes (bits 62-63) and the swizzle span in bytes.
M.LAYOUT = { interleave = 0, none = 0, ["128B"] = 1, ["64B"] = 2, ["32B"] = 3 }
M.SPAN = { [0] = 0, [1] = 128, [2] = 64, [3] = 32 }
local BY_SPAN = { [128] = "128B", [64] = "64B", [32] = "32B" }

--- The layout a K-major tile of kbytes bytes per row gets: the widest
-- swizzle whose span divides the row (interleave when none does).
function M.choose_layout(kbytes)
  for _, span in ipairs { 128, 64, 32 } do
    if kbytes % span == 0 then return BY_SPAN[span], span end
  end
  return "interleave", 0
end

--- Byte offset of element (r, k) of a wgmma tile (r: M or N, k: K) in its
-- canonical layout, before the address swizzle.
-- K-major (rows of K): column blocks of span bytes, 8-row atoms; interleave:
-- 8x16-byte core matrices, LBO between K neighbours, SBO between row groups.
-- MN-major (rows of M/N, f16/bf16): atoms of 8 K-rows of span bytes along
-- M/N, LBO between span-wide M/N blocks, SBO between 8-row K groups;
-- interleave: core matrices of 8 K-rows x 16 bytes, SBO between M/N
-- neighbours, LBO between K groups.
function M.tile_offset(tile, r, k)
  local esize, span = tile.type.bytes, tile.span
  if tile.major == "MN" then
    local mb = r * esize
    if span == 0 then
      return math.floor(mb / 16) * tile.sbo + math.floor(k / 8) * tile.lbo + (k % 8) * 16 + mb % 16
    end
    return math.floor(mb / span) * tile.lbo + math.floor(k / 8) * tile.sbo + (k % 8) * span + mb % span
  end
  local kb = k * esize
  if span == 0 then
    return math.floor(r / 8) * tile.sbo + math.floor(kb / 16) * tile.lbo + (r % 8) * 16 + kb % 16
  end
  local block = math.floor(kb / span)
  return block * tile.rows * span + math.floor(r / 8) * tile.sbo + (r % 8) * span + kb % span
end

--- The hardware swizzle of an absolute shared byte address (span 0: none):
-- the 16-byte chunk XORs with the index of the address's 128-byte line in
-- the swizzle pattern. TMA and smem.wgmma_tile use patterns starting at a
-- span * 8-byte boundary (descriptor base offset 0); base_offset (the
-- ISA's (pattern start >> 7) & 7) places a pattern that starts elsewhere.
function M.swizzle_address(a, span, base_offset)
  if span == 0 then return a end
  local mask = span / 16 - 1
  return bit.bxor(a, bit.lshift(bit.band(bit.rshift(a, 7) - (base_offset or 0), mask), 4))
end

return M
