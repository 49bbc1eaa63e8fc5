--- Deprecated name of pyptx.floats (renamed in the layering of 0.1.0;
-- works until 0.2.0, saying once what to require instead).
require("pyptx.deprecated").warn("pyptx.half", "pyptx.floats")
return require "pyptx.floats"
