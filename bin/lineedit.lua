--- Line input for the REPL: libedit (or GNU readline) through the FFI on a
-- terminal, with history and tab completion; plain stdin when piped, so
-- sessions can be scripted and tested. Either way input is read through
-- poll(2) on stdin and a signal pipe, so a signal (Ctrl-C) wakes a waiting
-- prompt: the line being typed is dropped and read says so.
local ffi = require "ffi"
local sys = require "pyptx.core.sys"

local M = {}

-- One declaration per call: another module may have declared some already.
for _, decl in ipairs {
  "char *readline(const char *prompt);",
  "int add_history(const char *line);",
  "int read_history(const char *file);",
  "int write_history(const char *file);",
  "typedef void (*lpx_rl_line_fn)(char *line);",
  "void rl_callback_handler_install(const char *prompt, lpx_rl_line_fn fn);",
  "void rl_callback_read_char(void);",
  "void rl_callback_handler_remove(void);",
  "typedef char **(*lpx_rl_completion_fn)(const char *text, int start, int end);",
  "typedef char *(*lpx_rl_generator_fn)(const char *text, int state);",
  "char **rl_completion_matches(const char *text, lpx_rl_generator_fn gen);",
  "int isatty(int fd);",
  "void free(void *p);",
  "char *strdup(const char *s);",
  "struct lpx_pollfd { int fd; short events; short revents; };",
  "int poll(void *fds, unsigned long nfds, int timeout);",
  "long read(int fd, void *buf, size_t n);",
} do pcall(ffi.cdef, decl) end

local POLLIN = 1

--- Load libedit or readline; nil when neither is present.
local function load_lib()
  for _, name in ipairs { "libedit.so.2", "libreadline.so.8", "edit", "readline" } do
    local ok, lib = pcall(ffi.load, name)
    if ok and pcall(function() return lib.rl_callback_read_char end) then return lib end
  end
  return nil
end

local Input = {}
Input.__index = Input

--- Install a tab-completion function: complete(word) -> list of words.
local function install_completion(self, lib, complete)
  local matches = {}
  self.generator = ffi.cast("lpx_rl_generator_fn", function(text, state)
    if state == 0 then matches = complete(ffi.string(text)) end
    local m = matches[state + 1]
    return m and ffi.C.strdup(m) or nil
  end)
  self.completer = ffi.cast("lpx_rl_completion_fn", function(text)
    return lib.rl_completion_matches(text, self.generator)
  end)
  -- extern variables are assigned through the library namespace
  lib.rl_attempted_completion_function = self.completer
  self.breaks = ffi.new("char[?]", 32, " \t\n\"\\'`@$><=;|&{(,)[]")
  lib.rl_basic_word_break_characters = self.breaks
end

--- Load the history file into the library. The library follows links, so
-- it never opens the file itself: the text is read here (a regular file of
-- ours, never through a link: sys.read_regular) and handed over in a fresh
-- private temporary. Returns nil and why when the file is refused.
local function load_history(lib, path)
  local text, why = sys.read_regular(path, true)
  if text == nil then return nil, why end
  if text ~= "" then
    local tmp = sys.temp_file(text)
    lib.read_history(tmp)
    os.remove(tmp)
  end
  return true
end

--- Save the library's history: it writes a fresh private temporary, whose
-- text sys.write_output puts at path (atomic, 0600, a link there refused).
local function save_history(lib, path)
  local ok, tmp = pcall(sys.temp_file, "")
  if not ok then return end
  if lib.write_history(tmp) == 0 then
    local text = sys.read_regular(tmp)
    if text then pcall(sys.write_output, path, text) end
  end
  os.remove(tmp)
end

--- Open input: opts.history (file path), opts.complete (function),
-- opts.signal_fd (a descriptor that becomes readable when a signal arrives).
function M.open(opts)
  local self = setmetatable({ interactive = ffi.C.isatty(0) == 1 and ffi.C.isatty(1) == 1, history = opts.history,
                              signal_fd = opts.signal_fd or -1, buffer = "" }, Input)
  if self.interactive then
    self.lib = load_lib()
    if self.lib then
      pcall(ffi.cdef, "extern lpx_rl_completion_fn rl_attempted_completion_function; extern const char *rl_basic_word_break_characters;")
      if opts.complete then pcall(install_completion, self, self.lib, opts.complete) end
      local ok, why = true, nil
      if self.history then ok, why = load_history(self.lib, self.history) end
      if not ok then
        io.stderr:write("luaptx: warning: no history is kept: ", why, "\n")
        self.history = nil
      end
      self.on_line = ffi.cast("lpx_rl_line_fn", function(p)
        self.done, self.line = true, p ~= nil and ffi.string(p) or nil
        if p ~= nil then ffi.C.free(p) end
      end)
    end
  end
  return self
end

--- Wait until stdin or the signal pipe is readable: "input" or "signal".
function Input:wait()
  local fds = ffi.new("struct lpx_pollfd[2]", { { 0, POLLIN, 0 }, { self.signal_fd, POLLIN, 0 } })
  while true do
    local n = ffi.C.poll(fds, self.signal_fd >= 0 and 2 or 1, -1)
    if n > 0 then
      if fds[1].revents ~= 0 then return "signal" end
      return "input"
    end
    if ffi.errno() ~= 4 then return "input" end   -- not EINTR: let the read report it
    if self.signal_fd >= 0 then return "signal" end
  end
end

--- Read one line through libedit/readline's callback interface.
function Input:read_edited(prompt)
  local lib = self.lib
  self.done, self.line = false, nil
  lib.rl_callback_handler_install(prompt, self.on_line)
  while not self.done do
    if self:wait() == "signal" then
      lib.rl_callback_handler_remove()
      return false, "signal"
    end
    lib.rl_callback_read_char()
  end
  lib.rl_callback_handler_remove()
  local line = self.line
  if line and line:match("%S") then
    lib.add_history(line)
    if self.history then save_history(lib, self.history) end   -- saved now: any exit keeps it
  end
  return line
end

--- Read one line from a pipe or a plain terminal (read(2), so a signal interrupts it).
function Input:read_plain(prompt)
  if self.interactive then io.stdout:write(prompt) io.stdout:flush() end
  local buf = ffi.new("char[4096]")
  while not self.buffer:find("\n", 1, true) do
    if self.eof then break end
    if self:wait() == "signal" then
      self.buffer = ""
      return false, "signal"
    end
    local n = tonumber(ffi.C.read(0, buf, 4096))
    if n > 0 then self.buffer = self.buffer .. ffi.string(buf, n)
    elseif n == 0 or ffi.errno() ~= 4 then self.eof = true end
  end
  local line, rest = self.buffer:match("^([^\n]*)\n(.*)$")
  if line then self.buffer = rest return line end
  if self.buffer ~= "" then line, self.buffer = self.buffer, "" return line end
  return nil
end

--- Read one line: the line, nil at end of input, or false and "signal"
-- when a signal arrived while waiting (the partial line is dropped).
function Input:read(prompt)
  if self.lib then return self:read_edited(prompt) end
  return self:read_plain(prompt)
end

-- Never JIT-compiled: rl_callback_read_char calls back into Lua (the line
-- handler, completion), which a compiled FFI call must not do.
for _, f in pairs(Input) do if type(f) == "function" then jit.off(f, true) end end

--- Save history and leave the terminal as it was.
function Input:close()
  if self.lib and self.history then save_history(self.lib, self.history) end
end

return M
