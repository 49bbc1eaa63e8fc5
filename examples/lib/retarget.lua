--- The Ampere and Blackwell copies of the Hopper row-wise examples: the same
-- kernel script with another default arch (the kernels use nothing above
-- sm_80). Usage, in examples/ampere/rms_norm.lua:
--   return require("examples.lib.retarget")("rms_norm", "sm_80")
return function(name, arch)
  local base = require("examples.hopper." .. name)
  local M = {}
  M.reference, M.inputs, M.shape_error, M.args = base.reference, base.inputs, base.shape_error, base.args

  --- build(B, N[, opts]) as in the Hopper file, with arch defaulting to this target.
  function M.build(B, N, opts)
    local o = { arch = arch }
    for k, v in pairs(opts or {}) do o[k] = v end
    -- Checked here so a bad shape is reported at our caller's line.
    local err = base.shape_error(B, N, o)
    if err then error(err, 2) end
    return base.build(B, N, o)
  end

  --- check(B, N[, opts]) as in the Hopper file, built for this target.
  function M.check(B, N, opts)
    local o = { arch = arch }
    for k, v in pairs(opts or {}) do o[k] = v end
    return base.check(B, N, o)
  end

  M.kernels = {}
  for i, size in ipairs(base.DEFAULT_SIZES) do M.kernels[i] = M.build(size[1], size[2], size[3]) end

  --- `luaptx run examples/<arch>/<name>.lua [B N] [--summary]`: the Hopper
  -- file's run-and-check, built for this target.
  function M.main(args)
    return base.main(args, { arch = arch }, M.kernels)
  end
  return M
end
