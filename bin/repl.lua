--- `luaptx repl`: an interactive prompt inside an implicit kernel trace.
-- The session is the list of accepted inputs; every new input is traced
-- after replaying them into a fresh kernel, so an input that fails leaves
-- nothing behind, and :ptx / :check / :save see exactly what was shown.
local ffi = require "ffi"
local pyptx = require "pyptx"
local core = require "pyptx.core"
local kernel = require "pyptx.kernel"
local sys = require "pyptx.core.sys"
local toolkit = require "pyptx.runtime.toolkit"
local trace = require "pyptx.trace"
local lineedit = require "luaptx.lineedit"

local M = {}

local SIGHUP, SIGTERM = 1, 15
local MAX_THREADS = 1024   -- :run's block size limit (the hardware's)

--- The globals every input sees: the DSL and the type names.
local function base_env()
  local env = {
    pyptx = pyptx, kernel = pyptx.kernel, reg = pyptx.reg, ptx = pyptx.ptx, smem = pyptx.smem,
    Tile = pyptx.Tile, types = pyptx.types,
  }
  for _, t in ipairs(pyptx.types.all) do env[t.name] = t end
  return setmetatable(env, { __index = _G })
end

--- Make top-level `local x = ...` persist: drop the `local` keyword of
-- statements that start a line (the session's environment keeps them).
local function globalize(src)
  return (src:gsub("^(%s*)local%s+function%s", "%1function "):gsub("\n(%s*)local%s+function%s", "\n%1function ")
    :gsub("^(%s*)local%s+", "%1"):gsub("\n(%s*)local%s+", "\n%1"))
end
M.globalize = globalize

local Session = {}
Session.__index = Session

--- A new session with an arch and a PTX version (nil: the arch's default).
function M.new(opts)
  opts = opts or {}
  return setmetatable({ inputs = {}, arch = opts.arch or "sm_90a", version = opts.version,
                        out = opts.out or io.stdout, threads = 32 }, Session)
end

--- Compile one input to a function running in env; chunk name repl-N.
-- Interpreted, never JIT-compiled: compiled loops do not check hooks, so
-- Ctrl-C could not interrupt a runaway `while true do end`.
local function compile_input(src, n, env)
  local fn, err = loadstring(globalize(src), "@repl-" .. n)
  if not fn then return nil, err end
  jit.off(fn, true)
  return setfenv(fn, env)
end

--- A message as the REPL shows it: never a location inside luaptx.
local function shown(err)
  return trace.strip_own(tostring(err))
end

--- Call f(...) with interrupts armed (Ctrl-C stops the user code it runs);
-- returns pcall's results. A trace left open by an interrupt is closed.
local function interruptible(f, ...)
  core.signals_arm(true)
  local res = { pcall(f, ...) }
  core.signals_arm(false)
  if trace.current() then trace.finish() end
  return unpack(res, 1, table.maxn(res))
end

--- Run the session's inputs (plus an optional new one) in the active trace.
function Session:replay(extra)
  local env = base_env()
  self.env = env
  local inputs = {}
  for i, src in ipairs(self.inputs) do inputs[i] = src end
  if extra then inputs[#inputs + 1] = extra end
  for i, src in ipairs(inputs) do
    local fn, err = compile_input(src, i, env)
    if not fn then error(err, 0) end
    fn()
  end
end

--- A kernel whose body replays inputs (plus an optional new one).
function Session:kernel(extra)
  local session = self
  return pyptx.kernel "repl" {
    arch = self.arch, version = self.version, block = { self.threads },
    function() session:replay(extra) end,
  }
end

--- Trace the session plus src; returns the specialization and the PTX
-- lines src appended (the items past those already shown).
function Session:try(src)
  local s = self:kernel(src):specialize {}
  local lines, i = {}, self.items or 0
  local text, len = ffi.new("const char*[1]"), ffi.new("size_t[1]")
  while core.inst_text(s.module, s.fn, i, text, len) == 0 do
    lines[#lines + 1] = ffi.string(text[0], len[0])
    i = i + 1
  end
  return s, lines, i
end

--- Is a compile error the "unfinished chunk" kind (more input expected)?
local function incomplete(err)
  return err and err:match("<eof>") ~= nil
end
M.incomplete = incomplete

--- Feed one complete input; prints the appended PTX or the error.
function Session:eval(src)
  local fn, err = loadstring(globalize(src), "@repl-" .. (#self.inputs + 1))
  if not fn then self.out:write("error: ", err, "\n") return false end
  local ok, s, lines, count = interruptible(self.try, self, src)
  if not ok then
    local msg = shown(s)
    if self.interactive and msg:match(": interrupted$") then self.out:write("\n") end   -- after the echoed ^C
    self.out:write("error: ", msg, "\n")
    return false
  end
  self.inputs[#self.inputs + 1] = src
  self.items = count
  for _, l in ipairs(lines) do self.out:write(l) end
  return true
end

--- The session as PTX text.
function Session:ptx()
  return self:kernel():ptx {}
end

--- :check: assemble with ptxas; resources, or ptxas's message mapped to inputs.
function Session:check()
  local pok, text = pcall(self.ptx, self)
  if not pok then self.out:write("error: ", shown(text), "\n") return end
  local ok, report, log = toolkit.ptxas(text, self.arch)
  if ok == nil then self.out:write(log, "\n") return end
  if not ok then self.out:write("ptxas failed:\n", log, "\n") return end
  local r = report.repl or {}
  self.out:write(("ok: %s, %d registers, %d bytes smem, %d spill stores, %d spill loads, %d bytes stack\n")
    :format(self.arch, r.registers or 0, r.smem or 0, r.spill_stores or 0, r.spill_loads or 0, r.stack or 0))
end

--- The text of line n of input "repl-<i>" (what the session's .loc lines name).
function Session:source(file, n)
  local src = self.inputs[tonumber(file:match("^repl%-(%d+)$"))]
  local i = 0
  for l in ((src or "") .. "\n"):gmatch("([^\n]*)\n") do
    i = i + 1
    if i == n then return (l:gsub("^%s+", ""):gsub("%s+$", "")) end
  end
end

--- :sass: the session's machine code under the inputs it came from.
function Session:sass()
  local ok, text = interruptible(function()
    return (self:kernel():sass({}, { source = function(file, n) return self:source(file, n) end }))
  end)
  self.out:write(ok and text or ("error: " .. shown(text) .. "\n"))
end

--- :save: a kernel script whose body is the session's inputs, written the
-- way every output the user names is (sys.write_output: atomic, no link
-- followed, a failed write said, not "saved").
function Session:save(path)
  local parts = { "-- Saved from a luaptx repl session. Run: luaptx ptx ", path, "\n",
    "local pyptx = require \"pyptx\"\nlocal reg, ptx, smem = pyptx.reg, pyptx.ptx, pyptx.smem\n" }
  for _, t in ipairs(pyptx.types.all) do parts[#parts + 1] = ("local %s = pyptx.types.%s\n"):format(t.name, t.name) end
  parts[#parts + 1] = "\nlocal M = {}\n\nfunction M.build(arch)\n  return pyptx.kernel \"repl\" {\n"
  parts[#parts + 1] = ("    arch = arch or %q, block = { %d },\n    function()\n"):format(self.arch, self.threads)
  parts[#parts + 1] = "      -- luaptx-repl-begin\n"
  for _, src in ipairs(self.inputs) do parts[#parts + 1] = "      " .. src:gsub("\n", "\n      ") .. "\n" end
  parts[#parts + 1] = "      -- luaptx-repl-end\n    end,\n  }\nend\n\nM.kernels = { M.build() }\nreturn M\n"
  local ok, err = pcall(sys.write_output, path, table.concat(parts))
  if not ok then self.out:write("error: :save: ", tostring(err), "\n") return end
  self.out:write(("saved %d inputs to %s\n"):format(#self.inputs, path))
end

--- :load: replay the inputs of a saved session (or every line of a file).
function Session:load(path)
  local kind = sys.kind(path)
  if kind ~= "file" and kind ~= "link" then
    local why = kind == nil and "no such file" or kind == "directory" and "is a directory" or "is not a regular file"
    self.out:write(("error: :load: %s: %s; give a Lua file (one saved with :save, or any Lua lines)\n"):format(path, why))
    return
  end
  local f, err = io.open(path, "r")
  local text = f and f:read("*a")
  if f then f:close() end
  if not text then self.out:write("error: :load: cannot read ", err or path, "\n") return end
  local body = text:match("%-%- luaptx%-repl%-begin\n(.-)\n%s*%-%- luaptx%-repl%-end") or text
  local pending = ""
  for line in (body .. "\n"):gmatch("([^\n]*)\n") do
    pending = pending .. (pending ~= "" and "\n" or "") .. line:gsub("^      ", "")
    local _, perr = loadstring(globalize(pending))
    if not incomplete(perr) then
      if pending:match("%S") then self:eval(pending) end
      pending = ""
    end
  end
end

--- Re-trace the session after a change of arch or version.
function Session:retarget(field, value)
  local old = self[field]
  self[field] = value
  local ok, err = interruptible(function() self:kernel():specialize {} end)
  if not ok then
    self[field] = old
    self.out:write("error: ", shown(err), "\n")
  else
    self.out:write(field, " = ", tostring(value), "\n")
  end
end

local bad_arch = kernel.bad_arch   -- the error for an arch the core does not know (nil when it does)

--- The error for a PTX version the session's arch cannot use (nil when fine).
local function bad_version(v, arch)
  if not v:match("^%d+%.%d$") then return ("the version is major.minor, e.g. 8.3; got '%s'"):format(v) end
  local ok, err = pcall(kernel.parse_version, v)
  if not ok then return err end
  local min = core.arch_min_ptx(arch)
  if err < min then
    return ("PTX ISA %s does not know %s; use %d.%d or newer"):format(v, arch, math.floor(min / 10), min % 10)
  end
end

--- :run's thread count: nil and the error unless an integer 1..MAX_THREADS.
local function thread_count(arg, default)
  if arg == "" then return default end
  local n = tonumber(arg)
  if n and n >= 1 and n <= MAX_THREADS and n % 1 == 0 then return n end
  return nil, ("the thread count (the block size) is an integer from 1 to %d; got '%s'"):format(MAX_THREADS, arg)
end

-- The commands: name, argument ("": none, "[x]": optional, "x": required),
-- help, and the handler (session, argument).
local COMMANDS = {
  { "ptx", "", "the whole snippet as a kernel", function(self)
    local ok, text = pcall(self.ptx, self)
    self.out:write(ok and text or ("error: " .. shown(text) .. "\n"))
  end },
  { "check", "", "assemble it with ptxas for the current arch", function(self) self:check() end },
  { "sass", "", "its machine code (nvdisasm) under the inputs it came from, and counts by class", function(self)
    self:sass()
  end },
  { "run", "[threads]", "run it on the emulator (or GPU) and print registers per lane", function(self, arg)
    local n, err = thread_count(arg, self.threads)
    if not n then self.out:write("error: :run: ", err, "\n") return end
    self:run(n)
  end },
  { "arch", "sm_80", "change the target (the session is re-traced)", function(self, arg)
    local err = bad_arch(arg)
    if err then self.out:write("error: :arch: ", err, "\n") return end
    self:retarget("arch", arg)
  end },
  { "version", "8.3", "change the PTX ISA version", function(self, arg)
    local err = bad_version(arg, self.arch)
    if err then self.out:write("error: :version: ", err, "\n") return end
    self:retarget("version", arg)
  end },
  { "reset", "", "forget every input", function(self)
    self.inputs, self.items = {}, 0
    self.out:write("session cleared\n")
  end },
  { "save", "file.lua", "write the session as a runnable kernel script", function(self, arg) self:save(arg) end },
  { "load", "file.lua", "replay a script saved with :save (or any Lua lines)", function(self, arg) self:load(arg) end },
  { "history", "", "the accepted inputs", function(self)
    for i, src in ipairs(self.inputs) do self.out:write(("%3d  %s\n"):format(i, src)) end
  end },
  { "help", "", "this text", function(self) self.out:write(M.HELP, "\n") end },
  { "quit", "", "leave (also :q, :exit, Ctrl-D); Ctrl-C stops a running input or clears the line" },
}
local BY_NAME = { q = COMMANDS[#COMMANDS], exit = COMMANDS[#COMMANDS] }
for _, c in ipairs(COMMANDS) do BY_NAME[c[1]] = c end

--- The :help text, from the command table.
M.HELP = (function()
  local lines = {
    "Type Lua: each ptx.* call (and each register operator) appends one PTX",
    "instruction, shown as it is appended. Locals persist between inputs.",
  }
  for _, c in ipairs(COMMANDS) do
    lines[#lines + 1] = ("  %-18s %s"):format(":" .. c[1] .. (c[2] ~= "" and " " .. c[2] or ""), c[3])
  end
  return table.concat(lines, "\n")
end)()

--- Handle a :command line; returns false to leave the session.
function Session:command(line)
  local name, arg = line:match("^%s*:(%S*)%s*(.-)%s*$")
  local c = BY_NAME[name]
  if not c then
    self.out:write("unknown command :", name, "; :help lists them\n")
    return true
  end
  local takes = c[2]
  if takes == "" and arg ~= "" then
    self.out:write(("error: :%s takes no argument; got '%s'\n"):format(c[1], arg))
    return true
  end
  if takes ~= "" and takes:sub(1, 1) ~= "[" and arg == "" then
    self.out:write(("error: :%s needs an argument: :%s %s\n"):format(c[1], c[1], takes))
    return true
  end
  if not c[4] then return false end   -- :quit
  c[4](self, arg)
  return true
end

--- :run [threads]: execute on the device and print registers per lane.
function Session:run(threads)
  local ok, runner = pcall(require, "luaptx.repl_run")
  if not ok then
    self.out:write(":run needs the device runtime: ", shown(runner):match("[^\n]*"), "\n")
    return
  end
  local rok, err = interruptible(runner.run, self, threads)
  if not rok then self.out:write("error: ", shown(err), "\n") end
end

-- ------------------------------------------------------------ completion

--- Names to complete after a prefix like "ptx.inst.ld." or "reg.".
function M.complete(prefix)
  local out = {}
  local base, partial = prefix:match("^(.*)%.([%w_]*)$")
  if not base then
    for _, n in ipairs { "ptx", "reg", "smem", "kernel", "pyptx", "types" } do
      if n:sub(1, #prefix) == prefix then out[#out + 1] = n end
    end
    for _, t in ipairs(pyptx.types.all) do if t.name:sub(1, #prefix) == prefix then out[#out + 1] = t.name end end
    return out
  end
  local names = {}
  if base == "ptx" or base == "reg" or base == "smem" then
    for k in pairs(pyptx[base]) do if type(k) == "string" and not k:match("^_") then names[#names + 1] = k end end
  elseif base:match("^ptx%.inst") then
    local opcode = base:gsub("^ptx%.inst%.?", "")
    for _, w in ipairs(M.opcode_words(opcode)) do names[#names + 1] = w end
  end
  table.sort(names)
  for _, n in ipairs(names) do
    if n:sub(1, #partial) == partial then out[#out + 1] = base .. "." .. n end
  end
  return out
end

--- Words that may follow an opcode prefix ("" -> opcodes, "ld" -> modifiers).
function M.opcode_words(opcode)
  local words, seen = {}, {}
  local function add(w) if not seen[w] then seen[w] = true; words[#words + 1] = w end end
  for row = 0, core.isa_row_count() - 1 do
    local name = ffi.string(core.isa_row_name(row))
    if opcode == "" then add((name:match("^[^.]+")))
    elseif name:sub(1, #opcode + 1) == opcode .. "." then add((name:sub(#opcode + 2):match("^[^.]+")))
    end
  end
  if opcode ~= "" then
    local buf = ffi.new("char[4096]")
    if core.isa_modifiers(opcode, buf, 4096) >= 0 then
      for w in ffi.string(buf):gmatch("%S+") do add((w:gsub("::", "_"))) end
    end
  end
  return words
end

-- ------------------------------------------------------------------ loop

--- The read-eval loop; returns the exit status (128 + the signal for
-- SIGTERM/SIGHUP, which end the session with its history saved).
local function loop(session, input)
  if input.interactive then
    io.stdout:write(("luaptx %s repl — %s, PTX %s. :help for commands.\n")
      :format(core.version, session.arch, session.version or "default"))
  end
  local pending = nil
  while true do
    local line = input:read(pending and "...> " or ("ptx " .. session.arch .. "> "))
    if line == nil then
      if input.interactive then io.stdout:write("\n") end
      return 0
    end
    if line == false then     -- a signal while waiting for input
      local sig = core.signals_take()
      if sig == SIGTERM or sig == SIGHUP then return 128 + sig end
      if input.interactive then io.stdout:write("^C\n") end
      pending = nil           -- Ctrl-C at the prompt: the line (and an unfinished chunk) is dropped
    elseif not pending and line:match("^%s*:") then
      if not session:command(line) then return 0 end
    elseif pending or line:match("%S") then
      local src = pending and (pending .. "\n" .. line) or line
      local _, err = loadstring(globalize(src))
      if incomplete(err) then pending = src
      else
        pending = nil
        session:eval(src)
      end
    end
    io.stdout:flush()
    local sig = core.signals_take()   -- Ctrl-C already stopped the input it hit
    if sig == SIGTERM or sig == SIGHUP then return 128 + sig end
  end
end

--- The history file: $LUAPTX_HISTORY, else $HOME/.luaptx_history; nil (no
-- history, as the cache has none) when neither is set, never the current
-- directory.
function M.history_path()
  local set = os.getenv("LUAPTX_HISTORY")
  if set and set ~= "" then return set end
  local home = os.getenv("HOME")
  return home and home ~= "" and home .. "/.luaptx_history" or nil
end

--- Run the interactive loop on a terminal, or read stdin when piped.
-- opts: arch, version (checked by the command line). History is written
-- after every line, so any way out keeps it.
function M.main(opts)
  opts = opts or {}
  local session = M.new(opts)
  local sigfd = core.signals_open()
  local input = lineedit.open { history = M.history_path(), complete = M.complete, signal_fd = sigfd }
  session.interactive = input.interactive
  local ok, rc = xpcall(loop, trace.relocate, session, input)
  input:close()
  core.signals_close()
  if not ok then error(rc, 0) end
  return rc
end

return M
