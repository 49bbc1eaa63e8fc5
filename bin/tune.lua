--- `luaptx tune sweep.lua [--csv F] [--json F] [--plot F.svg] [--shard i/n|auto] [--force]`
-- and `luaptx tune --merge a.json b.json ... [--csv F] [--json F] [--plot F]`.
-- A sweep script returns the table pyptx.tools.tune.run takes.
local tune = require "pyptx.tools.tune"
local report = require "pyptx.tools.tune_report"
local sys = require "pyptx.core.sys"

local M = {}

local USAGE = "usage: luaptx tune <sweep.lua> [--csv F] [--json F] [--plot F.svg] [--shard i/n|auto] [--force]\n" ..
              "       luaptx tune --merge a.json b.json ... [--csv F] [--json F] [--plot F.svg]"

--- Write a report file (sys.write_output: atomic, no link followed), or
-- fail naming the path.
local function write(path, text)
  local ok, err = pcall(sys.write_output, path, text)
  if not ok then error("tune: " .. tostring(err), 0) end
end

--- Read and decode one shard's JSON result, or fail naming the file.
local function read_result(path)
  local f, err = io.open(path, "rb")
  if not f or sys.kind(path) ~= "file" then error(("tune --merge: cannot read %s: %s"):format(path, err or "not a regular file"), 0) end
  local text = f:read("*a")
  f:close()
  local ok, t = pcall(tune.decode_json, text)
  if not ok or type(t) ~= "table" or type(t.results) ~= "table" then
    error(("tune --merge: %s is not the --json output of a sweep (%s)"):format(path, ok and "no results list" or t), 0)
  end
  return t
end

local VALUED = { ["--csv"] = true, ["--json"] = true, ["--plot"] = true, ["--shard"] = true }

--- Parse the arguments after "tune".
local function parse(args)
  local o, files = {}, {}
  local i = 1
  while args[i] do
    local a = args[i]
    if VALUED[a] then
      if args[i + 1] == nil then error(("tune: %s needs a value\n%s"):format(a, USAGE), 0) end
      o[a:sub(3)] = args[i + 1]
      i = i + 1
    elseif a == "--merge" then o.merge = true
    elseif a == "--force" then o.force = true
    elseif a:sub(1, 1) == "-" then error(("tune: unknown option %s; valid: --csv, --json, --plot, --shard, --force, --merge\n%s"):format(a, USAGE), 0)
    else files[#files + 1] = a end
    i = i + 1
  end
  return o, files
end

--- Run the command; returns the exit status.
function M.main(args)
  local o, files = parse(args)
  local result
  if o.merge then
    local parts = {}
    for _, path in ipairs(files) do parts[#parts + 1] = read_result(path) end
    result = report.merge(parts, files)
  else
    if not files[1] then error(USAGE, 0) end
    local fn, err = loadfile(files[1])
    if not fn then error(err, 0) end
    local spec = fn()
    if type(spec) ~= "table" then error(files[1] .. ": a sweep script returns the sweep table (build, space, inputs, ...)", 0) end
    result = tune.run(spec, { shard = o.shard, force = o.force })
  end
  io.write(report.table(result))
  if o.csv then write(o.csv, report.csv(result)) end
  if o.json then write(o.json, report.json(result)) end
  if o.plot then write(o.plot, report.svg(result)) end
  return (result.best or report.empty_shard(result)) and 0 or 1
end

return M
