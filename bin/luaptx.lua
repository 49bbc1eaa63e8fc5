--- The luaptx command line: subcommand dispatch and the luajit-like modes.
-- Each subcommand is a row of COMMANDS naming its arguments and its flags:
-- the parser accepts exactly those flags and `luaptx help` prints them, from
-- the same table, so the two cannot drift. Errors name the user's file:line
-- or nothing (LUAPTX_TRACEBACK=1 adds a traceback).
local M = {}

local ffi = require "ffi"
local core = require "pyptx.core"
local trace = require "pyptx.trace"
local script_require = require "pyptx.runtime.script_require"
local script_mod = require "pyptx.runtime.script"

--- Print to stderr with the program's prefix.
local function say_err(msg)
  io.stderr:write("luaptx: ", msg, "\n")
end

--- Run a file or chunk the way luajit would: global `arg`, varargs.
local function run_chunk(fn, name, args, first)
  local a = { [0] = name }
  for i = first, #args do a[#a + 1] = args[i] end
  _G.arg = a
  return fn(unpack(a, 1, #a))
end

--- A hint for a PTX file given where a Lua script belongs ("" otherwise).
local function ptx_hint(path)
  local f = io.open(path, "rb")
  local head = f and f:read(4096) or ""
  if f then f:close() end
  if not (path:match("%.ptx$") or head:match("^%s*%.version") or head:match("\n%s*%.target%s")) then return "" end
  return ("\n%s looks like PTX, not a Lua script: `luaptx transpile %s` turns it into one, "
    .. "`luaptx fmt` formats it, and pyptx.load_ptx launches it from Lua"):format(path, path)
end

--- luaptx script.lua [args]
local function run_script(args)
  local fn, err = loadfile(args[1])
  if not fn then error(err .. ptx_hint(args[1]), 0) end
  run_chunk(fn, args[1], args, 2)
  return 0
end

--- Load a kernel script: returns { kernels = {...}, main = fn|nil }.
function M.load_kernel_script(path, script_args)
  require "pyptx"
  local fn, err = loadfile(path)
  if not fn then error(err .. ptx_hint(path), 0) end
  local a = { [0] = path }
  for i, v in ipairs(script_args or {}) do a[i] = v end
  _G.arg = a
  return require("pyptx.runtime.script").normalize(fn(), path)
end

--- Each (kernel, values) pair a script defines, specialised with --arch
-- (opts.arch) and the -D values (opts.defines) each kernel takes.
local function each_kernel(script, opts, path)
  local arch, out = opts.arch, {}
  for _, entry in ipairs(script.kernels) do
    local k, values = entry, {}
    if type(entry) == "table" and not getmetatable(entry) then k, values = entry[1], entry[2] or {} end
    local v = {}
    for key, x in pairs(values) do v[key] = x end
    if arch then v.arch = arch end
    out[#out + 1] = { kernel = k, values = v }
  end
  return script_mod.apply_defines(out, script_mod.defines(opts.defines), path)
end

--- Write text to a file the user named (pyptx.core.sys.write_output: atomic,
-- no link followed, every write checked), or to standard output.
local function write_output(path, text)
  return require("pyptx.core.sys").write_output(path, text)
end

--- The entries --kernel NAME picks (all when no name is given); an error
-- listing the script's kernels when none is called so.
local function pick_kernels(list, name, path)
  if not name then return list end
  local out, names = {}, {}
  for _, e in ipairs(list) do
    if e.kernel.name == name then out[#out + 1] = e end
    names[#names + 1] = e.kernel.name
  end
  if #out == 0 then
    error(("%s: no kernel is named %s; its kernels: %s"):format(path, name, table.concat(names, ", ")), 0)
  end
  return out
end

--- The PTX of several kernels as one module, as nvcc writes one per .cu
-- file: one header, every entry, a .func or variable they share written
-- once. Refused (naming both kernels) when they differ in .target or
-- .version, or define one name differently.
local function merged_ptx(list, line_info, path)
  local n = #list
  local mods, labels, lines = ffi.new("lpx_module*[?]", n), ffi.new("const char*[?]", n), ffi.new("int32_t[?]", n)
  local keep = {}
  for i, e in ipairs(list) do
    local s = e.kernel:specialize(e.values)
    keep[i] = ("kernel %s (%s, entry %d of the script)"):format(e.kernel.name, s.arch, i)
    mods[i - 1], labels[i - 1] = s.module, keep[i]
    lines[i - 1] = (line_info and e.kernel.line_info ~= false) and 1 or 0
  end
  local text, len = ffi.new("const char*[1]"), ffi.new("size_t[1]")
  if core.merge_emit(mods, labels, lines, n, text, len) ~= 0 then
    error(("%s: cannot write its %d kernels as one PTX module: %s; write one file per kernel with -o DIR/ "
      .. "or pick one with --kernel NAME"):format(path, n, core.error_message()), 0)
  end
  return ffi.string(text[0], len[0])
end

--- Is an -o path a directory (one that exists, or one spelled with a final /)?
local function is_dir_path(path)
  return path:sub(-1) == "/" or require("pyptx.core.sys").kind(path) == "directory"
end

--- Write each kernel's module to DIR/<kernel>.ptx; two kernels of one
-- name would share a file, so they are refused.
local function write_per_kernel(list, dir, path)
  local sys = require "pyptx.core.sys"
  local seen = {}
  for i, e in ipairs(list) do
    if seen[e.kernel.name] then
      error(("%s: entries %d and %d are both named %s and would share %s/%s.ptx; give the specializations "
        .. "distinct names"):format(path, seen[e.kernel.name], i, e.kernel.name, dir, e.kernel.name), 0)
    end
    seen[e.kernel.name] = i
  end
  sys.mkdirs(dir)
  for _, e in ipairs(list) do
    local file = dir:gsub("/+$", "") .. "/" .. e.kernel.name .. ".ptx"
    sys.write_output(file, e.kernel:ptx(e.values))
    print(file)
  end
end

--- luaptx ptx script.lua [--arch A] [-o FILE|DIR/] [--kernel NAME] [--no-line-info]
local function cmd_ptx(opts, pos)
  local script = M.load_kernel_script(pos[1])
  local whole = not opts.kernel and script.module and require("pyptx.module").is(script.module.module) and script.module.module
  if whole and opts.defines then error(pos[1] .. ": -D binds a kernel's values; the script returns a pyptx.module", 0) end
  if whole and not (opts.output and is_dir_path(opts.output)) then   -- a pyptx.module (transpiled scripts): one module already
    if opts.arch then whole.arch, whole.traced = opts.arch, nil end
    if opts["--no-line-info"] then whole.line_info, whole.traced = false, nil end
    local text = whole:ptx()
    write_output(opts.output, text)
    return 0
  end
  local list = pick_kernels(each_kernel(script, opts, pos[1]), opts.kernel, pos[1])
  for _, e in ipairs(list) do
    if opts["--no-line-info"] then e.kernel.line_info = false end
  end
  if opts.output and is_dir_path(opts.output) then write_per_kernel(list, opts.output, pos[1]) return 0 end
  if #list == 0 then error(pos[1] .. ": the script defines no kernels", 0) end
  local text = #list == 1 and list[1].kernel:ptx(list[1].values) or merged_ptx(list, not opts["--no-line-info"], pos[1])
  write_output(opts.output, text)
  return 0
end

--- luaptx check script.lua [--arch A]
local function cmd_check(opts, pos)
  local toolkit = require "pyptx.runtime.toolkit"
  local script = M.load_kernel_script(pos[1])   -- a broken script says so, toolkit or not
  local list = each_kernel(script, opts, pos[1])
  if not toolkit.find("ptxas") then say_err(toolkit.missing_message("ptxas")) return 2 end
  local failed = 0
  print(("%-28s %-8s %5s %6s %8s %8s %6s %6s"):format("kernel", "arch", "insts", "regs", "smem", "dyn.smem", "spills", "stack"))
  for _, e in ipairs(list) do
    local s = e.kernel:specialize(e.values)
    local ok, report, log = toolkit.ptxas(s.ptx, s.arch)
    if ok then
      local r = report[e.kernel.name] or {}
      print(("%-28s %-8s %5d %6d %8d %8d %6d %6d"):format(e.kernel.name, s.arch, s.instructions, r.registers or 0,
        r.smem or 0, s.dynamic_smem, (r.spill_stores or 0) + (r.spill_loads or 0), r.stack or 0))
    else
      failed = failed + 1
      print(("%-28s %-8s FAILED"):format(e.kernel.name, s.arch))
      io.stderr:write(log, "\n")
    end
  end
  return failed > 0 and 1 or 0
end

--- luaptx run script.lua [args]: everything after the script is its own.
local function cmd_run(_, pos)
  local rest = {}
  for i = 2, #pos do rest[#rest + 1] = pos[i] end
  local script = M.load_kernel_script(pos[1], rest)
  if not script.main then
    error(pos[1] .. ": the script has no main(args) to run; `luaptx ptx` and `luaptx check` inspect its kernels", 0)
  end
  local rc = script.main(rest)
  return type(rc) == "number" and rc or 0
end

--- luaptx compile script.lua [--arch A] [-o DIR] [--force]
local function cmd_compile(opts, pos)
  local compile = require "pyptx.runtime.compile"
  local script = M.load_kernel_script(pos[1])
  local sys = require "pyptx.core.sys"
  local list = each_kernel(script, opts, pos[1])
  if opts.dir then sys.mkdirs(opts.dir) end
  print(("compiler: %s; cache: %s"):format(compile.identity(), compile.cache_dir() or "off"))
  local hash = ffi.new("char[33]")
  for _, e in ipairs(list) do
    local s = e.kernel:specialize(e.values)
    local t0 = os.clock()
    local cubin = compile.cubin(s.ptx, s.arch, { no_cache = opts["--force"] })
    local ms = (os.clock() - t0) * 1e3
    local path = ""
    if opts.dir then
      -- DIR/<kernel>.<arch>.<PTX hash>.cubin: two specializations of one kernel never share a file
      core.content_hash(s.ptx, #s.ptx, hash)
      path = ("%s/%s.%s.%s.cubin"):format(opts.dir, e.kernel.name, s.arch, ffi.string(hash, 12))
      sys.write_output(path, cubin.data)
    end
    print(("%-28s %-8s %8d bytes  %-5s %8.2f ms  %s %s"):format(e.kernel.name, s.arch, cubin.size,
      cubin.cache_hit and "hit" or "miss", ms, cubin.key, path))
  end
  return 0
end

--- luaptx cache ls|clear|stats
local function cmd_cache(_, pos)
  local compile = require "pyptx.runtime.compile"
  local sub = pos[1]
  if sub == "ls" then
    io.write(compile.cache_list())
  elseif sub == "clear" then
    print(("removed %d entries from %s"):format(compile.cache_clear(), compile.cache_dir()))
  elseif sub == "stats" then
    local s = compile.cache_stats()
    print(("%s: %d entries, %.1f KiB"):format(compile.cache_dir(), s.entries, s.bytes / 1024))
  else
    error("usage: luaptx cache ls|clear|stats", 0)
  end
  return 0
end

--- A subcommand that lives in its own module (bin/<name>.lua, loaded on
-- first use): its main takes the options, with the input path when the
-- command takes one ("input"), or the raw arguments ("raw").
local function forward(name, how)
  return function(opts, pos, raw)
    local main = require("luaptx." .. name).main
    if how == "raw" then return main(raw) end
    if how == "input" then opts.input = pos[1] end
    return main(opts)
  end
end

local cmd_repl = forward("repl")                      -- luaptx repl [--arch A] [--version V]
local cmd_transpile = forward("transpile", "input")   -- luaptx transpile <in.ptx|-> [--name N] [--sugar] [-o out.lua]
local cmd_fmt = forward("fmt", "input")               -- luaptx fmt <in.ptx|-> [--canonical] [-o out.ptx]
local cmd_tune = forward("tune", "raw")               -- luaptx tune ...: checked against the table, passed as given
local cmd_profile = forward("profile", "input")       -- luaptx profile <script.lua> [--kernel N] [--gpu G] [--json F] [--html F]

--- Is a --gpu value a GPU of the roofline table?
local function check_gpu(v)
  local g, err = require("pyptx.tools.gpus").find(v)
  return not g and err or nil
end

--- Check an output path before any work (pyptx.core.sys.check_output: its
-- directory exists and is writable; not empty, a link or a directory).
local function check_output(v)
  local ok, err = require("pyptx.core.sys").check_output(v)
  if not ok then return err end
end

--- Check ptx's -o: a directory (one there, or spelled with a final /) or an output file.
local function check_output_or_dir(v)
  if v ~= "" and is_dir_path(v) then return end
  return check_output(v)
end

--- Check tune's --shard (i/n, or auto: the Slurm array's variables) before the sweep script runs.
local function check_shard(v)
  local ok, err = pcall(require("pyptx.tools.tune").parse_shard, v)
  if not ok then return (tostring(err):gsub("^tune: %-%-shard ", "")) end
end

--- Check a directory to write into: not empty (it is created when missing).
local function check_dir(v)
  if v == "" then return "the directory path is empty" end
end

--- luaptx sass script.lua [--arch A] [--summary]: the listing is bin/sass.lua's.
local function cmd_sass(opts, pos)
  local script = M.load_kernel_script(pos[1])   -- a broken script says so, nvdisasm or not
  return require("luaptx.sass").main(each_kernel(script, opts, pos[1]), opts)
end

-- ------------------------------------------------------------- the table

local arch_list = require("pyptx.kernel").arch_list   -- the core's targets, as one line

--- Check a --arch value against the core's target table.
local function check_arch(v)
  local bad = v ~= "auto" and require("pyptx.kernel").bad_arch(v)
  if bad then return bad .. " (or auto)" end
end

--- Check a --version value: a PTX ISA version luaptx knows.
local function check_version(v)
  local ok, err = pcall(require("pyptx.kernel").parse_version, v:match("^%d+%.%d$") and v or {})
  if not ok then return (err:gsub("a table without two numbers", v)) end
end

local ARCH = { "--arch", "A", key = "arch", check = check_arch, help = "target arch: sm_80, sm_90a, sm_100a, ... (see below)" }
--- Check a -D value's form (the names are checked against the kernels later).
local function check_define(v)
  if not v:match("^[%a_][%w_]*=.") then return "expected NAME=VALUE, e.g. -D B=1024" end
end
local DEFINE = { "-D", "NAME=VALUE", key = "defines", many = true, check = check_define,
  help = "bind a template value or symbolic dim of the kernels, as k:ptx{NAME = VALUE} (repeatable)" }

-- Each command: args (its positional arguments, as usage shows them),
-- min/max positional counts (rest: everything after the first positional
-- belongs to the script), flags { flag, VALUE|nil, key, check, help },
-- help, and run(opts, positional, raw args).
local COMMANDS = {
  { name = "run", args = "<script.lua> [args]", min = 1, rest = true, run = cmd_run,
    help = "load a kernel script and call its main(args) with the arguments after it" },
  { name = "ptx", args = "<script.lua>", min = 1, max = 1, run = cmd_ptx,
    help = "print the PTX of every kernel the script defines, as one module",
    flags = { ARCH, DEFINE, { "-o", "FILE|DIR/", key = "output", check = check_output_or_dir,
                      help = "write the PTX to FILE (one module), or to DIR/<kernel>.ptx each when DIR is a directory" },
              { "--kernel", "NAME", key = "kernel", help = "only the kernel(s) named NAME" },
              { "--no-line-info", help = "leave out .file/.loc" } } },
  { name = "check", args = "<script.lua>", min = 1, max = 1, run = cmd_check,
    help = "assemble each kernel with ptxas: registers, shared memory, spills, stack",
    flags = { ARCH, DEFINE } },
  { name = "compile", args = "<script.lua>", min = 1, max = 1, run = cmd_compile,
    help = "compile each kernel to a cubin through the cache",
    flags = { ARCH, DEFINE, { "-o", "DIR", key = "dir", check = check_dir,
                      help = "also write DIR/<kernel>.<arch>.<hash>.cubin (hash: 12 hex digits of the PTX's)" },
              { "--force", help = "bypass the cache" } } },
  { name = "sass", args = "<script.lua>", min = 1, max = 1, run = cmd_sass,
    help = "each kernel's machine code under the Lua lines it came from, its instructions by class per line, and "
      .. "what costs time in its loops (GPU-scope fences, local memory, wgmma drains) at their Lua lines (needs nvdisasm)",
    flags = { ARCH, DEFINE, { "--summary", key = "summary", help = "only the per-line table of instruction classes and the loop hazards" } } },
  { name = "profile", args = "<script.lua>", min = 1, max = 1, run = cmd_profile,
    help = "run the script's main on the emulator with performance counters: per kernel totals, occupancy, "
      .. "the roofline bound, the SASS hazards of its loops and the worst Lua lines (docs/profile.md)",
    flags = { DEFINE, { "--kernel", "NAME", key = "kernel", help = "report only this kernel" },
              { "--gpu", "G", key = "gpu", check = check_gpu, help = "GPU of the roofline and occupancy: A100, H100, H100-PCIe, H200, B200, RTX4090, RTX5090" },
              { "--json", "F", key = "json", check = check_output, help = "write the report as JSON" },
              { "--html", "F", key = "html", check = check_output, help = "write a self-contained HTML page: annotated source, charts" } } },
  { name = "cache", args = "ls|clear|stats", min = 1, max = 1, choices = { ls = true, clear = true, stats = true },
    run = cmd_cache, help = "list, clear or count the cubin cache ($LUAPTX_CACHE_DIR)" },
  { name = "repl", args = "", max = 0, run = cmd_repl, help = "an interactive prompt inside a kernel trace",
    flags = { ARCH, { "--version", "V", key = "version", check = check_version, help = "PTX ISA version, e.g. 8.3" } } },
  { name = "tune", args = "<sweep.lua>", min = 1, run = cmd_tune,
    help = "an autotuning sweep (docs/tuning.md)",
    flags = { { "--csv", "F", key = "csv", check = check_output, help = "write the results as CSV" },
              { "--json", "F", key = "json", check = check_output, help = "write the results as JSON" },
              { "--plot", "F.svg", key = "plot", check = check_output, help = "write an SVG plot" },
              { "--shard", "i/n", key = "shard", check = check_shard, help = "run every n-th config starting at the i-th; auto: from a Slurm job array" },
              { "--force", help = "re-time cached configs" },
              { "--merge", help = "merge shard results: the arguments are --json files, not a sweep" } } },
  { name = "transpile", args = "<in.ptx|->", min = 1, max = 1, run = cmd_transpile,
    help = "PTX -> a kernel script in the DSL (traced, it re-emits the PTX); - reads standard input",
    flags = { { "--name", "N", key = "name", help = "rename the (first) kernel" },
              { "--sugar", key = "sugar", help = "a script a person reads: loops, short labels, builder chains" },
              { "-o", "FILE", key = "output", check = check_output, help = "write the script to FILE" } } },
  { name = "fmt", args = "<in.ptx|->", min = 1, max = 1, run = cmd_fmt,
    help = "reformat PTX: lossless by default (byte-identical); - reads standard input",
    flags = { { "--canonical", key = "canonical", help = "the tracer's normalized layout instead" },
              { "-o", "FILE", key = "output", check = check_output, help = "write the result to FILE" } } },
}
local BY_NAME = {}
for _, c in ipairs(COMMANDS) do BY_NAME[c.name] = c end
M.COMMANDS = COMMANDS   -- for the specs: every flag here must be in `luaptx help`

--- One command's synopsis: "ptx <script.lua> [--arch A] [-o FILE] [--no-line-info]".
local function synopsis(c)
  local parts = { c.name }
  if c.args ~= "" then parts[#parts + 1] = c.args end
  for _, f in ipairs(c.flags or {}) do parts[#parts + 1] = "[" .. f[1] .. (f[2] and " " .. f[2] or "") .. "]" end
  return table.concat(parts, " ")
end

--- A command's full help: synopsis, what it does, one line per flag.
local function command_help(c)
  local lines = { "usage: luaptx " .. synopsis(c), "  " .. c.help }
  for _, f in ipairs(c.flags or {}) do
    lines[#lines + 1] = ("    %-18s %s"):format(f[1] .. (f[2] and " " .. f[2] or ""), f.help)
  end
  return table.concat(lines, "\n")
end

--- The text of `luaptx help`: every command with every flag.
local function usage()
  local out = {
    "usage: luaptx <command> [options]",
    "       luaptx script.lua [args]      run a Lua script (like luajit)",
    "       luaptx -e 'chunk' [args]      run a Lua chunk",
    "", "commands:",
  }
  for _, c in ipairs(COMMANDS) do
    out[#out + 1] = "  " .. synopsis(c)
    out[#out + 1] = "      " .. c.help
    for _, f in ipairs(c.flags or {}) do
      out[#out + 1] = ("      %-18s %s"):format(f[1] .. (f[2] and " " .. f[2] or ""), f.help)
    end
  end
  out[#out + 1] = "  help [command]" .. "\n      this text, or one command's"
  out[#out + 1] = "  --version" .. "\n      print the version"
  out[#out + 1] = ""
  out[#out + 1] = "Targets (--arch): " .. arch_list() .. ", or auto."
  out[#out + 1] = [[
Kernel scripts return a kernel, a list of kernels, or a table with
`kernels` (what ptx/check take), `main` (what run calls) and optionally
`module` (a pyptx.module: what ptx prints instead of each kernel).
Environment: LUAPTX_LUA_DIR=lua loads luaptx's Lua modules from disk,
LUAPTX_ARCH sets what arch = "auto" means, CUDA_HOME locates the toolkit,
LUAPTX_TRACEBACK=1 adds a Lua traceback to errors.]]
  return table.concat(out, "\n")
end

--- Edit distance of two short strings (for "did you mean").
local function distance(a, b)
  local prev = {}
  for j = 0, #b do prev[j] = j end
  for i = 1, #a do
    local cur = { [0] = i }
    for j = 1, #b do
      cur[j] = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a:sub(i, i) == b:sub(j, j) and 0 or 1))
    end
    prev = cur
  end
  return prev[#b]
end

--- "unknown option X": the valid ones, and the nearest when it is close.
local function unknown_flag(c, a)
  local names, best, bestd = {}, nil, 4
  for _, f in ipairs(c.flags or {}) do
    names[#names + 1] = f[1] .. (f[2] and " " .. f[2] or "")
    local d = distance(a, f[1])
    if d < bestd then best, bestd = f[1], d end
  end
  local valid = #names > 0 and "; valid: " .. table.concat(names, ", ") or "; it takes no options"
  return ("%s: unknown option %s%s%s"):format(c.name, a, best and " (did you mean " .. best .. "?)" or "", valid)
end

--- The flag row of c that spells a, or nil.
local function find_flag(c, a)
  for _, f in ipairs(c.flags or {}) do
    if f[1] == a then return f end
  end
end

--- Parse a command's arguments against its row: opts (by key) and the
-- positional arguments; errors say what is wrong and what is valid.
local function parse(c, args)
  local opts, pos, i, only_pos = {}, {}, 1, false
  while i <= #args do
    local a = args[i]
    if only_pos or (c.rest and #pos > 0) or a == "-" or a:sub(1, 1) ~= "-" then pos[#pos + 1] = a
    elseif a == "--" then only_pos = true
    else
      local name, inline = a:match("^(%-%-[^=]+)=(.*)$")
      if not name and not find_flag(c, a) and find_flag(c, a:sub(1, 2)) then name, inline = a:sub(1, 2), a:sub(3) end   -- -DNAME=VALUE
      local f = find_flag(c, name or a)
      if not f then error(unknown_flag(c, a), 0) end
      local key = f.key or f[1]
      if not f[2] then
        if inline then error(("%s: %s takes no value"):format(c.name, f[1]), 0) end
        opts[key] = true
      else
        local v = inline or args[i + 1]
        if v == nil then error(("%s: %s needs a value (%s)"):format(c.name, f[1], f[2]), 0) end
        if not inline then i = i + 1 end
        local bad = f.check and f.check(v)
        if bad then error(("%s: %s: %s"):format(c.name, f[1], bad), 0) end
        if f.many then opts[key] = opts[key] or {} table.insert(opts[key], v) else opts[key] = v end
      end
    end
    i = i + 1
  end
  return opts, pos
end

--- Check the positional arguments' count (and choices) against the row.
local function check_positional(c, pos)
  local n, want = #pos, c.args ~= "" and c.args or "no arguments"
  if c.min and n < c.min then
    error(("%s: missing %s\nusage: luaptx %s"):format(c.name, c.args:match("^%S+"), synopsis(c)), 0)
  end
  if c.max and n > c.max then
    error(("%s: unexpected argument '%s' (it takes %s)\nusage: luaptx %s"):format(c.name, pos[c.max + 1], want, synopsis(c)), 0)
  end
  if c.choices and not c.choices[pos[1]] then
    error(("%s: unknown subcommand '%s'; valid: %s"):format(c.name, pos[1], c.args), 0)
  end
end

--- Run a command: -h/--help prints its help; else parse and run.
local function run_command(c, args)
  local raw = {}
  for i = 2, #args do raw[#raw + 1] = args[i] end
  if raw[1] == "-h" or raw[1] == "--help" then print(command_help(c)) return 0 end
  local opts, pos = parse(c, raw)
  check_positional(c, pos)
  return c.run(opts, pos, raw)
end

--- The error handler of every mode: a user error as the user should see it.
local function handler(err)
  if type(err) ~= "string" then
    local mt = getmetatable(err)
    err = mt and mt.__tostring and tostring(err) or ("(error object is a " .. type(err) .. " value)")
  end
  return trace.relocate(err)
end

--- Run f(...) and report its error; returns f's status (a number) or 1.
local function protected(f, ...)
  local ok, rc = xpcall(f, handler, ...)
  if not ok then say_err(rc) return 1 end
  return type(rc) == "number" and rc or 0
end

--- The command names, comma-separated (for "neither a command nor a file").
local function command_names()
  local names = {}
  for _, c in ipairs(COMMANDS) do names[#names + 1] = c.name end
  return table.concat(names, ", ")
end

--- Dispatch a command line: argv[0] is the program, argv[1..] its arguments.
local function dispatch(argv)
  script_require.install()   -- a script's require finds its own tree's modules from any directory
  local args = {}
  for i = 1, #argv do args[i] = argv[i] end
  local first = args[1]
  if first == nil or first == "help" or first == "--help" or first == "-h" then
    local c = first == "help" and args[2] and BY_NAME[args[2]]
    if first == "help" and args[2] and not c then
      say_err("help: unknown command '" .. args[2] .. "'; see `luaptx help`")
      return 1
    end
    print(c and command_help(c) or usage())
    return 0
  end
  if first == "--version" or first == "-v" then
    print("luaptx " .. core.version .. " (" .. jit.version .. ")")
    return 0
  end
  if first == "-e" then
    if not args[2] then say_err("-e needs a chunk") return 1 end
    local fn, err = loadstring(args[2], "=(command line)")
    if not fn then say_err(err) return 1 end
    return protected(function() run_chunk(fn, "-e", args, 3) end)
  end
  local c = BY_NAME[first]
  if c then return protected(run_command, c, args) end
  if first:sub(1, 1) ~= "-" then
    local kind = require("pyptx.core.sys").kind(first)
    if kind == nil and not first:find("[/.]") then
      say_err(("'%s' is neither a command nor a file; commands: %s (see `luaptx help`)"):format(first, command_names()))
      return 1
    end
    return protected(run_script, args)
  end
  say_err("unknown command or option '" .. first .. "'; see `luaptx help`")
  return 1
end

--- Entry point: run the command line, then check that all its standard
-- output arrived (a full disk or /dev/full is exit 1 with the reason).
function M.main(argv)
  local rc = dispatch(argv)
  local ok, err = require("pyptx.core.sys").stdout_ok()
  if not ok then say_err(err) return 1 end
  return rc
end

return M
