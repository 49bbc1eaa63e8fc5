--- Row softmax for Blackwell (sm_100a): the kernel of examples/hopper/softmax.lua, which
-- uses nothing above sm_80 (v4 ld/st, shfl.sync, bar.sync, MUFU
-- approximations), retargeted. Same shapes, options and constraints.
return require("examples.lib.retarget")("softmax", "sm_100a")
