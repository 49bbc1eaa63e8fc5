--- `luaptx sass script.lua [--arch A] [--summary]`: the SASS of every kernel
-- a script defines, under the Lua lines it came from, and the instruction
-- counts by class per Lua line (pyptx.runtime.sass).
local script = require "pyptx.runtime.script"
local sass = require "pyptx.runtime.sass"
local toolkit = require "pyptx.runtime.toolkit"

local M = {}

--- opts: input (the script), arch, summary. Returns the exit status: 2
-- without nvdisasm (the message says how to get it).
function M.main(opts)
  local s = script.load_file(opts.input)   -- a broken script says so, nvdisasm or not
  if not toolkit.find("nvdisasm") then
    io.stderr:write("luaptx: ", toolkit.missing_message("nvdisasm"), "\n")
    return 2
  end
  local source = sass.file_source()
  for i, e in ipairs(script.entries(s)) do
    local values = {}
    for k, v in pairs(e.values) do values[k] = v end
    if opts.arch then values.arch = opts.arch end
    local text = sass.kernel(e.kernel, values, { summary_only = opts.summary, source = source })
    io.write(i > 1 and "\n" or "", text)
  end
  return 0
end

return M
