--- SwiGLU for Ampere (sm_80): the kernel of examples/hopper/swiglu.lua,
-- which uses nothing above sm_80 (v4 ld/st, shfl.sync, bar.sync, MUFU
-- approximations), retargeted. Same shapes, options and constraints.
local base = require "examples.hopper.swiglu"

local M = {}

M.reference, M.inputs, M.shape_error, M.args = base.reference, base.inputs, base.shape_error, base.args

--- build(B, N[, opts]) as in the Hopper file, with arch defaulting to "sm_80".
function M.build(B, N, opts)
  local o = { arch = "sm_80" }
  for k, v in pairs(opts or {}) do o[k] = v end
  -- Check here so a bad shape is reported at our caller's line, not ours.
  local err = base.shape_error(B, N, o)
  if err then error(err, 2) end
  local k = base.build(B, N, o)
  return k
end

-- Llama-3-8B MLP: 4096 tokens, intermediate size 14336; both input layouts.
M.kernels = { M.build(4096, 14336), M.build(4096, 14336, { fused = true }) }

--- `luaptx run examples/ampere/swiglu.lua [B N] [--summary]`: the Hopper file's
-- run-and-check, built for sm_80.
function M.main(args)
  return base.main(args, { arch = "sm_80" }, M.kernels)
end

return M
