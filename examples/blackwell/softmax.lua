--- Row softmax for Blackwell (sm_100a): the kernel of examples/hopper/softmax.lua,
-- which uses nothing above sm_80 (v4 ld/st, shfl.sync, bar.sync, MUFU
-- approximations), retargeted. Same shapes, options and constraints.
local base = require "examples.hopper.softmax"

local M = {}

M.reference, M.inputs, M.shape_error, M.args = base.reference, base.inputs, base.shape_error, base.args

--- build(B, N[, opts]) as in the Hopper file, with arch defaulting to "sm_100a".
function M.build(B, N, opts)
  local o = { arch = "sm_100a" }
  for k, v in pairs(opts or {}) do o[k] = v end
  -- Check here so a bad shape is reported at our caller's line, not ours.
  local err = base.shape_error(B, N, o)
  if err then error(err, 2) end
  local k = base.build(B, N, o)
  return k
end

-- Attention-score-sized default: 4096 rows of 4096 logits.
M.kernels = { M.build(4096, 4096) }

--- `luaptx run examples/blackwell/softmax.lua [B N] [--summary]`: the Hopper file's
-- run-and-check, built for sm_100a.
function M.main(args)
  return base.main(args, { arch = "sm_100a" }, M.kernels)
end

return M
