--- Tensor boundary specs: `Tile(dims..., dtype[, layout])` and `Layout`,
-- and the TensorSpec placeholders a kernel body receives.
local trace = require "pyptx.trace"
local types = require "pyptx.types"
local async = require "pyptx.async"

local M = {}

-- ROW/COL: a tensor's order; TMA_128B/64B/32B, INTERLEAVED: the layout a
-- wgmma tile asks for (smem.wgmma_tile(dt, shape, Layout.TMA_64B)), which
-- fixes its TMA box and swizzle and its descriptor's layout together.
M.Layout = { ROW = "row", COL = "col", TMA_128B = "128B", TMA_64B = "64B", TMA_32B = "32B", INTERLEAVED = "interleave" }

local Tile = {}
Tile.__index = Tile
Tile.__tostring = function(t)
  local d = {}
  for i, v in ipairs(t.dims) do d[i] = tostring(v) end
  return ("Tile(%s, %s)"):format(table.concat(d, ", "), t.dtype.name)
end

--- Tile(d1, d2, ..., dtype[, layout]): dims are numbers or symbol names.
function M.Tile(...)
  local args = { ... }
  local layout = M.Layout.ROW
  if args[#args] == M.Layout.ROW or args[#args] == M.Layout.COL then layout = table.remove(args) end
  local dtype = table.remove(args)
  if not types.is(dtype) then error("Tile(dims..., dtype[, layout]): the last dim argument must be a type, got " .. tostring(dtype), 2) end
  if #args == 0 then error("Tile needs at least one dimension", 2) end
  for i, d in ipairs(args) do
    if type(d) ~= "string" and (type(d) ~= "number" or d < 1 or d ~= math.floor(d)) then
      error(("Tile: dimension %d must be a positive integer or a name, got %s"):format(i, tostring(d)), 2)
    end
  end
  return setmetatable({ dims = args, dtype = dtype, layout = layout }, Tile)
end

--- Is v a Tile?
function M.is_tile(v) return getmetatable(v) == Tile end

--- Names of the symbolic dims of a Tile, in order.
function Tile:symbols()
  local out = {}
  for _, d in ipairs(self.dims) do if type(d) == "string" then out[#out + 1] = d end end
  return out
end

--- The concrete shape of a Tile under bound values (nil, name when unbound).
function Tile:resolve(values)
  local shape = {}
  for i, d in ipairs(self.dims) do
    if type(d) == "string" then
      if values[d] == nil then return nil, d end
      shape[i] = values[d]
    else
      shape[i] = d
    end
  end
  return shape
end

local TensorSpec = {}
TensorSpec.__index = TensorSpec
TensorSpec.__tostring = function(s) return ("TensorSpec(%s)"):format(s.name) end

--- The placeholder for tensor argument i of a kernel during a trace.
function M.tensor_spec(kernel_name, i, tile, shape, role)
  return setmetatable({
    name = ("%s_param_%d"):format(kernel_name, i - 1), param = ("%s_param_%d"):format(kernel_name, i - 1),
    param_type = types.u64, index = i, tile = tile, shape = shape, dtype = tile.dtype,
    layout = tile.layout, role = role,
  }, TensorSpec)
end

--- Element count of a spec's concrete shape.
function TensorSpec:numel()
  local n = 1
  for _, d in ipairs(self.shape) do n = n * d end
  return n
end

--- X:tma_desc{box = {64, 64}, swizzle = "128B", ...}: declare a
-- `.param .align 64 .b8 <param>_tma[128]` tensor map for this tensor (built
-- from the actual tensor at launch) and return its operand (pyptx.async).
function TensorSpec:tma_desc(opts)
  if type(opts) == "table" and opts.tile ~= nil then return async.tma_param(self, M.tma_opts_for_tile(self, opts)) end
  return async.tma_param(self, opts or {})
end

--- X:tma_desc{tile = sA}: the box and swizzle that write the wgmma tile
-- sA's layout (smem.wgmma_tile, K-major, swizzled), so the TMA map and
-- the wgmma descriptor agree; a box or swizzle also given must match.
function M.tma_opts_for_tile(spec, opts)
  local tile = opts.tile
  if type(tile) ~= "table" or not tile.layout or not tile.rows then
    trace.fail("X:tma_desc: tile must be a wgmma tile (smem.wgmma_tile), got " .. tostring(tile))
  end
  if not tile.tma_box then
    trace.fail(("X:tma_desc: a %s-major %s tile has no one-box TMA layout; declare it K-major with a row of 32, 64 or a "
      .. "multiple of 128 bytes"):format(tile.major, tile.layout))
  end
  if tile.type ~= spec.dtype then
    trace.fail(("X:tma_desc: tile holds %s but tensor %s is %s"):format(tile.type.name, spec.name, spec.dtype.name))
  end
  local out = {}
  for k, v in pairs(opts) do if k ~= "tile" then out[k] = v end end
  local box = tile.tma_box
  if out.box ~= nil and (type(out.box) ~= "table" or out.box[1] ~= box[1] or out.box[2] ~= box[2] or out.box[3] ~= nil) then
    trace.fail(("X:tma_desc: box {%s} does not write tile's layout; the tile needs box {%d, %d} (or leave box out)")
      :format(type(out.box) == "table" and table.concat(out.box, ", ") or tostring(out.box), box[1], box[2]))
  end
  if out.swizzle ~= nil and out.swizzle ~= tile.tma_swizzle then
    trace.fail(("X:tma_desc: swizzle %s does not match the tile's %s layout (or leave swizzle out)")
      :format(tostring(out.swizzle), tile.tma_swizzle))
  end
  out.box, out.swizzle = { box[1], box[2] }, tile.tma_swizzle
  return out
end

return M
