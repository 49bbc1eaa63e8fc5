--- `luaptx tune sweep.lua [--csv F] [--json F] [--plot F.svg] [--shard i/n] [--force]`
-- and `luaptx tune --merge a.json b.json ... [--csv F] [--json F] [--plot F]`.
-- A sweep script returns the table pyptx.tune.run takes.
local tune = require "pyptx.tune"
local report = require "pyptx.tune_report"
local json = require "pyptx.json"

local M = {}

--- Write text to a file, or fail with the path.
local function write(path, text)
  local f, err = io.open(path, "w")
  if not f then error("cannot write " .. path .. ": " .. err, 0) end
  f:write(text)
  f:close()
end

--- Parse the arguments after "tune".
local function parse(args)
  local o, files = {}, {}
  local i = 1
  while args[i] do
    local a = args[i]
    if a == "--csv" or a == "--json" or a == "--plot" or a == "--shard" then o[a:sub(3)] = args[i + 1]; i = i + 1
    elseif a == "--merge" then o.merge = true
    elseif a == "--force" then o.force = true
    elseif a:sub(1, 1) == "-" then error("tune: unknown option " .. a, 0)
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
    for _, path in ipairs(files) do
      local f = assert(io.open(path, "r"), "cannot read " .. path)
      parts[#parts + 1] = json.decode(f:read("*a"))
      f:close()
    end
    result = report.merge(parts)
  else
    if not files[1] then error("usage: luaptx tune <sweep.lua> [--csv F] [--json F] [--plot F.svg] [--shard i/n] [--force]", 0) end
    local fn = assert(loadfile(files[1]))
    local spec = fn()
    if type(spec) ~= "table" then error(files[1] .. ": a sweep script returns the sweep table (build, space, inputs, ...)", 0) end
    result = tune.run(spec, { shard = o.shard, force = o.force })
  end
  io.write(report.table(result))
  if o.csv then write(o.csv, report.csv(result)) end
  if o.json then write(o.json, report.json(result)) end
  if o.plot then write(o.plot, report.svg(result)) end
  return result.best and 0 or 1
end

return M
