--- Deprecated name of pyptx.core.env (renamed in the layering of 0.1.0;
-- works until 0.2.0, saying once what to require instead).
require("pyptx.deprecated").warn("pyptx.env", "pyptx.core.env")
return require "pyptx.core.env"
