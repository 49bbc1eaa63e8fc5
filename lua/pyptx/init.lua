--- pyptx for Lua: hand-written PTX kernels traced from Lua.
--   local pyptx = require "pyptx"
--   local kernel, reg, ptx, smem, Tile = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.smem, pyptx.Tile
local core = require "pyptx.core"
local specs = require "pyptx.specs"

local M = {}

M.types = require "pyptx.types"
M.reg = require "pyptx.reg"
M.ptx = require "pyptx.ptx"
M.smem = require "pyptx.smem"
M.pipeline = require "pyptx.pipeline"
M.kernel = require("pyptx.kernel").kernel
M.func = require("pyptx.func").func
M.module = require("pyptx.module").module
M.Tile = specs.Tile
M.Layout = specs.Layout
M.toolkit = require "pyptx.toolkit"
M.version = core.version
M.load_ptx = function(src, name) return require("pyptx.foreign").load(src, name) end

--- Run an autotuning sweep (see pyptx.tune): returns the best config's result.
function M.tune(spec, opts)
  local result = require("pyptx.tune").run(spec, opts)
  return result.best, result
end

--- Is v a kernel object (made by kernel "name" { ... })?
function M.is_kernel(v)
  return require("pyptx.kernel").is(v)
end

return M
