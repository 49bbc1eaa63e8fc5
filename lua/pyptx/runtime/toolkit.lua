--- The CUDA toolkit on this machine: finding ptxas (and nvdisasm,
-- cuobjdump, also in their Python wheels), assembling PTX with ptxas,
-- reading its resource report, and mapping its errors back to Lua lines.
local ffi = require "ffi"
local core = require "pyptx.core"
local sys = require "pyptx.core.sys"
local env = require "pyptx.core.env"
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

-- Toolkit programs that also come as Python wheels on PyPI (the CUDA 13
-- toolkit ships neither nvdisasm nor cuobjdump): the package, and where
-- the program lies under site-packages (CUDA 13 wheels put it in
-- nvidia/cu13/bin, CUDA 12 wheels in nvidia/cuda_<program>/bin).
M.WHEELS = {
  nvdisasm = { package = "nvidia-cuda-nvdisasm", dirs = { "nvidia/cu13/bin", "nvidia/cuda_nvdisasm/bin" } },
  cuobjdump = { package = "nvidia-cuda-cuobjdump", dirs = { "nvidia/cu13/bin", "nvidia/cuda_cuobjdump/bin" } },
}

-- The Python 3 minor versions whose lib/python3.N/site-packages are looked in.
local PYTHON_MINORS = { 6, 20 }

--- The Python environments searched for the wheels, in order:
-- $VIRTUAL_ENV, the venv beside the luaptx program (build/venv, made by
-- `make sass-tools`), the user's ($PYTHONUSERBASE, else $HOME/.local).
function M.python_roots()
  local roots = {}
  local venv, exe_dir = env.get("VIRTUAL_ENV"), sys.exe_dir()
  local user = env.get("PYTHONUSERBASE") or (env.get("HOME") and env.get("HOME") .. "/.local")
  for _, r in ipairs { venv or false, exe_dir and exe_dir .. "/venv" or false, user or false } do
    if r then roots[#roots + 1] = r end
  end
  return roots
end

--- The directories of tool's wheel that exist under the Python
-- environments' site-packages ({} for a program without a wheel).
function M.wheel_dirs(tool)
  local wheel, dirs = M.WHEELS[tool], {}
  if not wheel then return dirs end
  for _, root in ipairs(M.python_roots()) do
    for minor = PYTHON_MINORS[1], PYTHON_MINORS[2] do
      local site = ("%s/lib/python3.%d/site-packages"):format(root, minor)
      if sys.kind(site) == "directory" then
        for _, d in ipairs(wheel.dirs) do dirs[#dirs + 1] = site .. "/" .. d end
      end
    end
  end
  return dirs
end

--- Path of a toolkit program (ptxas, nvdisasm, cuobjdump), or nil: the
-- root's bin/, then $PATH, then (nvdisasm, cuobjdump) the wheels.
function M.find(tool)
  for _, list in ipairs { M.search_dirs(), M.wheel_dirs(tool) } do
    for _, dir in ipairs(list) do
      if exists(dir .. "/" .. tool) then return dir .. "/" .. tool end
    end
  end
  return nil
end

--- The message shown when a toolkit program is missing; it names every
-- place searched and, for a program with a wheel, how to install it.
function M.missing_message(tool)
  local root, var = M.root()
  local where = var and ("$%s/bin = %s/bin"):format(var, root) or (root .. "/bin")
  local wheel = M.WHEELS[tool]
  if not wheel then
    return ("%s not found: install the CUDA toolkit, or point CUDA_HOME at it (searched %s, then $PATH)"):format(tool, where)
  end
  return ("%s not found: the CUDA 13 toolkit does not ship it; install its Python wheel with "
    .. "`pip install %s` (into a virtual environment or the user's site-packages), or run `make sass-tools` "
    .. "in a luaptx checkout (build/venv) (searched %s, then $PATH, then %s under lib/python3.*/site-packages of %s)")
    :format(tool, wheel.package, where, table.concat(wheel.dirs, " and "), table.concat(M.python_roots(), ", "))
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

-- ptxas's logs of successful runs without an output file, by the content
-- hash of (ptxas, arch, -lineinfo, text): a process that checks the same
-- text again (tune's configs, a script's kernels checked twice) gets the
-- same report without running ptxas. At most MEMO_MAX entries; then it
-- starts afresh.
local memo, memo_n, MEMO_MAX = {}, 0, 256

--- The memo's key of a run: a content hash (the text is not kept).
local function memo_key(exe, arch, lineinfo, ptx)
  local s = table.concat({ exe, arch, tostring(lineinfo), ptx }, "\0")
  local out = ffi.new("char[33]")
  core.content_hash(s, #s, out)
  return ffi.string(out)
end

--- Assemble PTX with ptxas for arch. Returns ok, report (per kernel), log.
-- Without ptxas, returns nil, nil, the missing-toolkit message. A success
-- without opts.output is remembered for the process (see memo above).
function M.ptxas(ptx, arch, opts)
  opts = opts or {}
  local exe = M.find("ptxas")
  if not exe then return nil, nil, M.missing_message("ptxas") end
  local key = not opts.output and memo_key(exe, arch, opts.lineinfo ~= false, ptx)
  if key and memo[key] then return true, M.parse_report(memo[key]), memo[key] end
  local path = M.temp_file(ptx, ".ptx")
  local argv = { exe, "-arch=" .. arch, "-v" }
  if opts.lineinfo ~= false then argv[#argv + 1] = "-lineinfo" end
  for _, a in ipairs { "-o", opts.output or "/dev/null", path } do argv[#argv + 1] = a end
  local res, err = sys.run(argv, { merge = true })
  local log = res and res.stdout or err
  local rc = res and res.status
  if rc == 0 then
    os.remove(path)
    if key then
      if memo_n >= MEMO_MAX then memo, memo_n = {}, 0 end
      memo[key], memo_n = log, memo_n + 1
    end
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
