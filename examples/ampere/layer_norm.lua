--- Layer norm for Ampere (sm_80): the kernel of examples/hopper/layer_norm.lua, which
-- uses nothing above sm_80 (v4 ld/st, shfl.sync, bar.sync, MUFU
-- approximations), retargeted. Same shapes, options and constraints.
return require("examples.lib.retarget")("layer_norm", "sm_80")
