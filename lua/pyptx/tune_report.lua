--- Deprecated name of pyptx.tools.tune_report (renamed in the layering of 0.1.0;
-- works until 0.2.0, saying once what to require instead).
require("pyptx.deprecated").warn("pyptx.tune_report", "pyptx.tools.tune_report")
return require "pyptx.tools.tune_report"
