--- The float conversions under their runtime name: pyptx.floats (the
-- kernel language encodes half and fp8 constants with them, so they live
-- in the language layer; `require "pyptx".floats` is the same table).
return require "pyptx.floats"
