--- Deprecated name of pyptx.tools.transpile_sugar (renamed in the layering of 0.1.0;
-- works until 0.2.0, saying once what to require instead).
require("pyptx.deprecated").warn("pyptx.sugar", "pyptx.tools.transpile_sugar")
return require "pyptx.tools.transpile_sugar"
