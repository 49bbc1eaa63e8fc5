--- pyptx for Lua: hand-written PTX kernels traced from Lua. The entry to
-- every layer (docs/architecture.md): the kernel language, the runtime
-- that launches kernels, and the tools.
--   local pyptx = require "pyptx"
--   local kernel, reg, ptx, smem, Tile = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.smem, pyptx.Tile
local core = require "pyptx.core"
local trace = require "pyptx.trace"
local tile = require "pyptx.tile"
local kernel = require "pyptx.kernel"
local ptx_loader = require "pyptx.runtime.ptx_loader"
local tune = require "pyptx.tools.tune"
require "pyptx.runtime"   -- registers how kernels launch (pyptx.kernel.use_runtime)

local M = {}

M.types = require "pyptx.types"
M.floats = require "pyptx.floats"
M.reg = require "pyptx.reg"
M.ptx = require "pyptx.ptx"
M.smem = require "pyptx.smem"
M.pipeline = require "pyptx.pipeline"
M.kernel = kernel.kernel
M.func = require("pyptx.func").func
M.module = require("pyptx.module").module
M.Tile = tile.Tile
M.Layout = tile.Layout
M.toolkit = require "pyptx.runtime.toolkit"
M.version = core.version
M.load_ptx = function(src, name) return ptx_loader.load(src, name) end

--- Run an autotuning sweep (see pyptx.tools.tune): returns the best config's result.
function M.tune(spec, opts)
  local result = tune.run(spec, opts)
  return result.best, result
end

--- Mark the calling module as a helper library (at its top:
-- `pyptx.helper()`): instructions it emits and errors raised in it name
-- the user's line that called the helper.
function M.helper()
  trace.mark_helper()
end

--- Is v a kernel object (made by kernel "name" { ... })?
function M.is_kernel(v)
  return kernel.is(v)
end

return M
