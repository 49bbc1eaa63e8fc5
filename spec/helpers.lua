--- What the specs share: running programs (never through a shell), the
-- luaptx binary, temporary files, and the toolkit checks that mark a test
-- pending with its reason instead of passing without running.
-- Specs load it with `local H = require "spec.helpers"`.
local sys = require "pyptx.sys"
local toolkit = require "pyptx.toolkit"
local lfs = require "lfs"

local M = {}

--- The working directory (the repository root when busted runs from there).
local function cwd()
  local res = assert(sys.run { "pwd" })
  return (res.stdout:gsub("\n$", ""))
end
M.ROOT = cwd()

--- The luaptx binary under test, as an absolute path.
M.BIN = os.getenv("LUAPTX_BIN") or "build/luaptx"
if M.BIN:sub(1, 1) ~= "/" then M.BIN = M.ROOT .. "/" .. M.BIN:gsub("^%./", "") end

--- Mark the running test pending with a reason (busted's pending, found in
-- the calling spec's environment). Never returns.
function M.pending(reason)
  for level = 2, 8 do
    local ok, env = pcall(getfenv, level)
    if ok and type(env) == "table" and type(env.pending) == "function" then env.pending(reason) end
  end
  error("spec.helpers.pending called outside a busted test: " .. reason, 2)
end

--- Run argv (a list of strings) with sys.run's options; errors when the
-- program cannot start. Returns { status, stdout, stderr, timed_out }.
function M.run(argv, opts)
  local res, err = sys.run(argv, opts)
  if not res then error(err, 2) end
  return res
end

--- Run the luaptx binary with args (a list); opts as for run.
-- Returns stdout, stderr, status (stdout holds both when opts.merge).
function M.luaptx(args, opts)
  local argv = { M.BIN }
  for _, a in ipairs(args) do argv[#argv + 1] = tostring(a) end
  local res = M.run(argv, opts)
  return res.stdout, res.stderr, res.status
end

--- The path of ptxas, or the test goes pending with the reason.
function M.need_ptxas()
  local exe = toolkit.find("ptxas")
  if not exe then M.pending(toolkit.missing_message("ptxas")) end
  return exe
end

--- The path of a toolkit program (nvcc, nvdisasm, ...), or the test goes pending.
function M.need_tool(name)
  local exe = toolkit.find(name)
  if not exe then M.pending(toolkit.missing_message(name)) end
  return exe
end

--- Assemble PTX text (or a kernel's PTX) with ptxas for arch and assert it
-- is accepted; pending without ptxas, so call it after a test's other checks.
-- Returns ptxas's report.
function M.assert_ptxas(ptx_or_kernel, arch, opts)
  M.need_ptxas()
  local ptx = type(ptx_or_kernel) == "string" and ptx_or_kernel or ptx_or_kernel:ptx()
  local o = { keep_failed = false }
  for k, v in pairs(opts or {}) do o[k] = v end
  local ok, report, log = toolkit.ptxas(ptx, arch or "sm_90a", o)
  assert(ok, log)
  return report
end

--- A fresh private temporary directory; removed by M.cleanup().
local made = {}
function M.temp_dir()
  local d = sys.temp_dir()
  made[#made + 1] = d
  return d
end

--- A fresh private temporary file holding text; removed by M.cleanup().
function M.temp_file(text, suffix)
  local p = sys.temp_file(text or "", suffix)
  made[#made + 1] = p
  return p
end

--- Remove every temporary this module made (call from after_each/teardown).
function M.cleanup()
  for i = #made, 1, -1 do
    sys.remove_tree(made[i])
    made[i] = nil
  end
end

--- Read a whole file (nil when missing).
function M.read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

--- Write a whole file.
function M.write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
  return path
end

--- The sorted names of the files in dir whose names match a Lua pattern.
function M.list(dir, pattern)
  local out = {}
  for name in lfs.dir(dir) do
    if name ~= "." and name ~= ".." and (not pattern or name:match(pattern)) then out[#out + 1] = dir .. "/" .. name end
  end
  table.sort(out)
  return out
end

--- Every file below dir (recursively) whose name matches pattern, sorted.
function M.find(dir, pattern)
  local out = {}
  local function walk(d)
    for name in lfs.dir(d) do
      local p = d .. "/" .. name
      local mode = name ~= "." and name ~= ".." and lfs.symlinkattributes(p, "mode")
      if mode == "directory" then walk(p)
      elseif mode == "file" and (not pattern or name:match(pattern)) then out[#out + 1] = p end
    end
  end
  walk(dir)
  table.sort(out)
  return out
end

return M
