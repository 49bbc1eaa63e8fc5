--- Tensor boundary specs: `Tile(dims..., dtype[, layout])` and `Layout`,
-- and the TensorSpec placeholders a kernel body receives.
local types = require "pyptx.types"
local async = require "pyptx.async"

local M = {}

M.Layout = { ROW = "row", COL = "col" }

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
  return async.tma_param(self, opts or {})
end

return M
