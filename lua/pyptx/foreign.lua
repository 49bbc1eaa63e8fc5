--- Deprecated name of pyptx.runtime.ptx_loader (renamed in the layering of 0.1.0;
-- works until 0.2.0, saying once what to require instead).
require("pyptx.deprecated").warn("pyptx.foreign", "pyptx.runtime.ptx_loader")
return require "pyptx.runtime.ptx_loader"
