--- The luaptx command line: subcommand dispatch and the luajit-like modes.
local M = {}

local USAGE = [[
usage: luaptx <command> [options]
       luaptx script.lua [args]      run a Lua script (like luajit)
       luaptx -e 'chunk' [args]      run a Lua chunk

commands:
  run <script.lua> [args]           load a kernel script and call its main(args)
  ptx <script.lua> [--arch A] [-o out.ptx] [--no-line-info]
                                    print the PTX of every kernel the script defines
  check <script.lua> [--arch A]     assemble each kernel with ptxas and print
                                    registers, shared memory, spills and stack
  compile <script.lua> [--arch A] [-o DIR] [--force]
                                    compile each kernel to a cubin through the cache
  cache ls|clear|stats              the cubin cache ($LUAPTX_CACHE_DIR)
  repl [--arch A] [--version V]     an interactive prompt inside a kernel trace
  tune <sweep.lua> [--csv F] [--json F] [--plot F.svg] [--shard i/n] [--force]
  tune --merge a.json b.json ...    an autotuning sweep; merge shard results
  transpile <in.ptx> [--name N] [-o out.lua]
                                    PTX -> a kernel script in the DSL (traced, it re-emits the PTX)
  fmt <in.ptx> [--canonical] [-o out.ptx]
                                    reformat PTX: lossless by default (byte-identical),
                                    --canonical for the tracer's normalized layout
  help                              this text
  --version                         print the version

Kernel scripts return a kernel, a list of kernels, or a table with
`kernels` (what ptx/check take), `main` (what run calls) and optionally
`module` (a pyptx.module: what ptx prints instead of each kernel).
Environment: LUAPTX_LUA_DIR=lua loads luaptx's Lua modules from disk,
LUAPTX_ARCH sets what arch = "auto" means, CUDA_HOME locates the toolkit.]]

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

--- luaptx script.lua [args]
local function run_script(args)
  local fn, err = loadfile(args[1])
  if not fn then say_err(err) return 1 end
  run_chunk(fn, args[1], args, 2)
  return 0
end

--- Split "--arch A", "-o F" style options from positional arguments.
local function parse_options(args, first, spec)
  local opts, pos = {}, {}
  local i = first
  while i <= #args do
    local a = args[i]
    local key = spec[a]
    if key == true then opts[a] = true
    elseif key then
      if args[i + 1] == nil then error("option " .. a .. " needs a value", 0) end
      opts[key] = args[i + 1]
      i = i + 1
    elseif a:sub(1, 1) == "-" and #pos == 0 then error("unknown option " .. a, 0)
    else pos[#pos + 1] = a end
    i = i + 1
  end
  return opts, pos
end

--- Load a kernel script: returns { kernels = {...}, main = fn|nil }.
function M.load_kernel_script(path, script_args)
  local pyptx = require "pyptx"
  local fn, err = loadfile(path)
  if not fn then error(err, 0) end
  local a = { [0] = path }
  for i, v in ipairs(script_args or {}) do a[i] = v end
  _G.arg = a
  local ret = fn()
  if pyptx.is_kernel(ret) then return { kernels = { ret } } end
  if type(ret) ~= "table" then
    error(path .. ": a kernel script must return a kernel, a list of kernels, or a table with `kernels`/`main`", 0)
  end
  if ret.kernels or ret.main then
    return { kernels = ret.kernels or {}, main = ret.main, module = ret }
  end
  for i, k in ipairs(ret) do
    if not pyptx.is_kernel(k) then error(("%s: item %d of the returned list is not a kernel"):format(path, i), 0) end
  end
  return { kernels = ret }
end

--- Each (kernel, values) pair a script defines, specialised with --arch.
local function each_kernel(script, arch)
  local out = {}
  for _, entry in ipairs(script.kernels) do
    local k, values = entry, {}
    if type(entry) == "table" and not getmetatable(entry) then k, values = entry[1], entry[2] or {} end
    local v = {}
    for key, x in pairs(values) do v[key] = x end
    if arch then v.arch = arch end
    out[#out + 1] = { kernel = k, values = v }
  end
  return out
end

--- luaptx ptx script.lua [--arch A] [-o out] [--no-line-info]
local function cmd_ptx(args)
  local opts, pos = parse_options(args, 2, { ["--arch"] = "arch", ["-o"] = "output", ["--no-line-info"] = true })
  if not pos[1] then error("usage: luaptx ptx <script.lua> [--arch A] [-o out.ptx]", 0) end
  local script = M.load_kernel_script(pos[1])
  local chunks = {}
  local whole = script.module and require("pyptx.module").is(script.module.module) and script.module.module
  if whole then   -- a pyptx.module (transpiled scripts): its kernels and functions as one PTX module
    if opts.arch then whole.arch, whole.traced = opts.arch, nil end
    if opts["--no-line-info"] then whole.line_info, whole.traced = false, nil end
    chunks[1] = whole:ptx()
  end
  for _, e in ipairs(whole and {} or each_kernel(script, opts.arch)) do
    if opts["--no-line-info"] then e.kernel.line_info = false end
    chunks[#chunks + 1] = e.kernel:ptx(e.values)
  end
  local text = table.concat(chunks, "\n")
  if opts.output then
    local f = assert(io.open(opts.output, "wb"))
    f:write(text)
    f:close()
  else
    io.write(text)
  end
  return 0
end

--- luaptx check script.lua [--arch A]
local function cmd_check(args)
  local toolkit = require "pyptx.toolkit"
  local opts, pos = parse_options(args, 2, { ["--arch"] = "arch" })
  if not pos[1] then error("usage: luaptx check <script.lua> [--arch A]", 0) end
  if not toolkit.find("ptxas") then say_err(toolkit.missing_message("ptxas")) return 2 end
  local script = M.load_kernel_script(pos[1])
  local failed = 0
  print(("%-28s %-8s %5s %6s %8s %8s %6s %6s"):format("kernel", "arch", "insts", "regs", "smem", "dyn.smem", "spills", "stack"))
  for _, e in ipairs(each_kernel(script, opts.arch)) do
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

--- luaptx run script.lua [args]
local function cmd_run(args)
  if not args[2] then error("usage: luaptx run <script.lua> [args]", 0) end
  local rest = {}
  for i = 3, #args do rest[#rest + 1] = args[i] end
  local script = M.load_kernel_script(args[2], rest)
  if not script.main then
    error(args[2] .. ": the script has no main(args) to run; `luaptx ptx` and `luaptx check` inspect its kernels", 0)
  end
  local rc = script.main(rest)
  return type(rc) == "number" and rc or 0
end

--- luaptx compile script.lua [--arch A] [-o DIR] [--force]
local function cmd_compile(args)
  local compile = require "pyptx.compile"
  local opts, pos = parse_options(args, 2, { ["--arch"] = "arch", ["-o"] = "dir", ["--force"] = true })
  if not pos[1] then error("usage: luaptx compile <script.lua> [--arch A] [-o DIR] [--force]", 0) end
  local script = M.load_kernel_script(pos[1])
  local core, ffi, sys = require "pyptx.core", require "ffi", require "pyptx.sys"
  if opts.dir then sys.mkdirs(opts.dir) end
  print(("compiler: %s; cache: %s"):format(compile.identity(), compile.cache_dir() or "off"))
  local hash = ffi.new("char[33]")
  for _, e in ipairs(each_kernel(script, opts.arch)) do
    local s = e.kernel:specialize(e.values)
    local t0 = os.clock()
    local cubin = compile.cubin(s.ptx, s.arch, { no_cache = opts["--force"] })
    local ms = (os.clock() - t0) * 1e3
    local path = ""
    if opts.dir then
      -- DIR/<kernel>.<arch>.<PTX hash>.cubin: two specializations of one kernel never share a file
      core.content_hash(s.ptx, #s.ptx, hash)
      path = ("%s/%s.%s.%s.cubin"):format(opts.dir, e.kernel.name, s.arch, ffi.string(hash, 12))
      sys.write_file(path, cubin.data)
    end
    print(("%-28s %-8s %8d bytes  %-5s %8.2f ms  %s %s"):format(e.kernel.name, s.arch, cubin.size,
      cubin.cache_hit and "hit" or "miss", ms, cubin.key, path))
  end
  return 0
end

--- luaptx cache ls|clear|stats
local function cmd_cache(args)
  local compile = require "pyptx.compile"
  local sub = args[2]
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

--- luaptx repl [--arch A] [--version V]
local function cmd_repl(args)
  local rest = {}
  for i = 2, #args do rest[#rest + 1] = args[i] end
  return require("luaptx.repl").main(rest)
end

--- luaptx transpile ...
local function cmd_transpile(args)
  local rest = {}
  for i = 2, #args do rest[#rest + 1] = args[i] end
  return require("luaptx.transpile").main(rest)
end

--- luaptx fmt ...
local function cmd_fmt(args)
  local rest = {}
  for i = 2, #args do rest[#rest + 1] = args[i] end
  return require("luaptx.fmt").main(rest)
end

--- luaptx tune ...
local function cmd_tune(args)
  local rest = {}
  for i = 2, #args do rest[#rest + 1] = args[i] end
  return require("luaptx.tune").main(rest)
end

local COMMANDS = { ptx = cmd_ptx, check = cmd_check, run = cmd_run, compile = cmd_compile, cache = cmd_cache,
                   repl = cmd_repl, tune = cmd_tune, fmt = cmd_fmt,
                   transpile = cmd_transpile }

--- Entry point: argv[0] is the program, argv[1..] its arguments.
function M.main(argv)
  local args = {}
  for i = 1, #argv do args[i] = argv[i] end
  local first = args[1]
  if first == nil or first == "help" or first == "--help" or first == "-h" then print(USAGE) return 0 end
  if first == "--version" or first == "-v" then
    print("luaptx " .. require("pyptx.core").version .. " (" .. jit.version .. ")")
    return 0
  end
  if first == "-e" then
    if not args[2] then say_err("-e needs a chunk") return 1 end
    local fn, err = loadstring(args[2], "=(command line)")
    if not fn then say_err(err) return 1 end
    run_chunk(fn, "-e", args, 3)
    return 0
  end
  local cmd = COMMANDS[first]
  if cmd then
    local ok, rc = pcall(cmd, args)
    if not ok then say_err(tostring(rc)) return 1 end
    return rc
  end
  if first:sub(1, 1) ~= "-" then return run_script(args) end
  say_err("unknown command or option '" .. first .. "'; see `luaptx help`")
  return 1
end

return M
