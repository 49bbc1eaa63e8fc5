--- RMS norm for Ampere (sm_80): the kernel of examples/hopper/rms_norm.lua,
-- which uses nothing above sm_80 (v4 ld/st, shfl.sync, bar.sync, MUFU
-- approximations), retargeted. Same shapes, options and constraints.
local base = require "examples.hopper.rms_norm"

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

-- Llama-style hidden size: 2048 tokens of 8192 features.
M.kernels = { M.build(2048, 8192) }

--- `luaptx run examples/ampere/rms_norm.lua [B N] [--summary]`: the Hopper file's
-- run-and-check, built for sm_80.
function M.main(args)
  return base.main(args, { arch = "sm_80" }, M.kernels)
end

return M
