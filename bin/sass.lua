--- `luaptx sass script.lua [--arch A] [--summary]`: the SASS of every kernel
-- a script defines, under the Lua lines it came from, and the instruction
-- counts by class per Lua line (pyptx.runtime.sass).
local sass = require "pyptx.runtime.sass"
local toolkit = require "pyptx.runtime.toolkit"

local M = {}

--- entries: the script's { kernel, values } pairs (--arch applied);
-- opts.summary prints only the tables. Returns the exit status: 2
-- without nvdisasm (the message says how to get it).
function M.main(entries, opts)
  if not toolkit.find("nvdisasm") then
    io.stderr:write("luaptx: ", toolkit.missing_message("nvdisasm"), "\n")
    return 2
  end
  local source = sass.file_source()
  for i, e in ipairs(entries) do
    local text = sass.kernel(e.kernel, e.values, { summary_only = opts.summary, source = source })
    io.write(i > 1 and "\n" or "", text)
  end
  return 0
end

return M
