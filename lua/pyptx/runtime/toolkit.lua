--- The CUDA toolkit on this machine: finding ptxas, assembling PTX with it,
-- reading its resource report, and mapping its errors back to Lua lines.
local sys = require "pyptx.core.sys"
local argcheck = require "pyptx.args"

local M = {}

--- Does a file exist and is it readable?
local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() return true end
  return false
end

--- The one toolkit root searched: $CUDA_HOME when set, else $CUDA_PATH when
-- set, else /usr/local/cuda. Returns the root and the variable naming it (or nil).
function M.root()
  for _, var in ipairs { "CUDA_HOME", "CUDA_PATH" } do
    local v = os.getenv(var)
    if v and v ~= "" then return v, var end
  end
  return "/usr/local/cuda", nil
end

--- Directories that may hold a toolkit program: the root's bin/, then $PATH.
function M.search_dirs()
  local dirs = { M.root() .. "/bin" }
  for dir in (os.getenv("PATH") or ""):gmatch("[^:]+") do dirs[#dirs + 1] = dir end
  return dirs
end

--- Path of a toolkit program (ptxas, nvdisasm, cuobjdump), or nil.
function M.find(tool)
  for _, dir in ipairs(M.search_dirs()) do
    if exists(dir .. "/" .. tool) then return dir .. "/" .. tool end
  end
  return nil
end

--- The message shown when the toolkit is missing; it names the root searched.
function M.missing_message(tool)
  local root, var = M.root()
  local where = var and ("$%s/bin = %s/bin"):format(var, root) or (root .. "/bin")
  return ("%s not found: install the CUDA toolkit, or point CUDA_HOME at it (searched %s, then $PATH)"):format(tool, where)
end

--- Write text to a fresh private (0600) temporary file with a suffix;
-- returns its path.
function M.temp_file(text, suffix)
  return sys.temp_file(text, suffix)
end

--- Read ptxas -v output into { [kernel] = { registers, smem, stack, spill_stores, spill_loads, cmem } }.
function M.parse_report(log)
  local out, cur = {}, nil
  for line in log:gmatch("[^\n]+") do
    local name = line:match("Compiling entry function '([^']+)'") or line:match("Function properties for ([%w_$]+)")
    if name then
      cur = out[name] or { registers = 0, smem = 0, stack = 0, spill_stores = 0, spill_loads = 0, cmem = 0, barriers = 0 }
      out[name] = cur
    end
    if cur then
      local st, ss, sl = line:match("(%d+) bytes stack frame, (%d+) bytes spill stores, (%d+) bytes spill loads")
      if st then cur.stack, cur.spill_stores, cur.spill_loads = tonumber(st), tonumber(ss), tonumber(sl) end
      local regs = line:match("Used (%d+) registers")
      if regs then cur.registers = tonumber(regs) end
      cur.smem = tonumber(line:match("(%d+) bytes smem")) or cur.smem
      cur.cmem = tonumber(line:match("(%d+) bytes cmem%[0%]")) or cur.cmem
      cur.barriers = tonumber(line:match("used (%d+) barriers")) or cur.barriers
    end
  end
  return out
end

--- Map PTX line numbers in a ptxas log to the Lua file:line of the
-- closest preceding .loc, appending " (from file:line)" to each.
function M.map_lines(log, ptx)
  local files, locs, n = {}, {}, 0
  local cur = nil
  for line in (ptx .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    local id, path = line:match("^%s*%.file%s+(%d+)%s+\"(.-)\"")
    if id then files[tonumber(id)] = path end
    local f, l = line:match("^%s*%.loc%s+(%d+)%s+(%d+)")
    if f then cur = { tonumber(f), tonumber(l) } end
    locs[n] = cur
  end
  return (log:gsub("line (%d+)([^\n]*)", function(num, rest)
    local loc = locs[tonumber(num)]
    if loc and files[loc[1]] then
      return ("line %s%s (from %s:%d)"):format(num, rest, files[loc[1]], loc[2])
    end
  end))
end

--- Assemble PTX with ptxas for arch. Returns ok, report (per kernel), log.
-- Without ptxas, returns nil, nil, the missing-toolkit message.
function M.ptxas(ptx, arch, opts)
  opts = opts or {}
  local exe = M.find("ptxas")
  if not exe then return nil, nil, M.missing_message("ptxas") end
  local path = M.temp_file(ptx, ".ptx")
  local argv = { exe, "-arch=" .. arch, "-v" }
  if opts.lineinfo ~= false then argv[#argv + 1] = "-lineinfo" end
  for _, a in ipairs { "-o", opts.output or "/dev/null", path } do argv[#argv + 1] = a end
  local res, err = sys.run(argv, { merge = true })
  local log = res and res.stdout or err
  local rc = res and res.status
  if rc == 0 then
    os.remove(path)
    return true, M.parse_report(log), log
  end
  log = M.map_lines(log, ptx)
  if opts.keep_failed == false then os.remove(path) end
  return false, nil, log .. (opts.keep_failed ~= false and ("\n(the PTX is kept at " .. path .. ")") or "")
end

argcheck.sign(M, "toolkit", {
  find = { "tool: string" },
  missing_message = { "tool: string" },
  temp_file = { "text: string?", "suffix: string?" },
  parse_report = { "log: string" },
  map_lines = { "log: string", "ptx: string" },
  ptxas = { "ptx: string", "arch: string", "opts: table?" },
})

return M
