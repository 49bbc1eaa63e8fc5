--- Deprecated name of pyptx.tools.verify (renamed in the layering of 0.1.0;
-- works until 0.2.0, saying once what to require instead).
require("pyptx.deprecated").warn("pyptx.check", "pyptx.tools.verify")
return require "pyptx.tools.verify"
