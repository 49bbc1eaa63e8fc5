--- Line input for the REPL: libedit (or GNU readline) through the FFI on a
-- terminal, with history and tab completion; plain stdin when piped, so
-- sessions can be scripted and tested.
local ffi = require "ffi"

local M = {}

ffi.cdef [[
  char *readline(const char *prompt);
  int add_history(const char *line);
  int read_history(const char *file);
  int write_history(const char *file);
  typedef char **(*lpx_rl_completion_fn)(const char *text, int start, int end);
  typedef char *(*lpx_rl_generator_fn)(const char *text, int state);
  char **rl_completion_matches(const char *text, lpx_rl_generator_fn gen);
  int isatty(int fd);
  void free(void *p);
  void *malloc(size_t n);
  char *strdup(const char *s);
]]

--- Load libedit or readline; nil when neither is present.
local function load_lib()
  for _, name in ipairs { "libedit.so.2", "libreadline.so.8", "edit", "readline" } do
    local ok, lib = pcall(ffi.load, name)
    if ok then return lib end
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

--- Open input: opts.history (file path), opts.complete (function).
function M.open(opts)
  local self = setmetatable({ interactive = ffi.C.isatty(0) == 1 and ffi.C.isatty(1) == 1, history = opts.history }, Input)
  if self.interactive then
    self.lib = load_lib()
    if self.lib then
      pcall(ffi.cdef, "extern lpx_rl_completion_fn rl_attempted_completion_function; extern const char *rl_basic_word_break_characters;")
      if opts.complete then pcall(install_completion, self, self.lib, opts.complete) end
      if self.history then self.lib.read_history(self.history) end
    end
  end
  return self
end

--- Read one line (nil at end of input), prompting on a terminal.
function Input:read(prompt)
  if self.lib then
    local p = self.lib.readline(prompt)
    if p == nil then return nil end
    local line = ffi.string(p)
    ffi.C.free(p)
    if line:match("%S") then self.lib.add_history(line) end
    return line
  end
  if self.interactive then io.stdout:write(prompt) io.stdout:flush() end
  return io.stdin:read("*l")
end

--- Save history and release the callbacks.
function Input:close()
  if self.lib and self.history then self.lib.write_history(self.history) end
end

return M
