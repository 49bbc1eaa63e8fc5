--- PTX text -> the C IR, and back: a thin FFI face of the C parser
-- (src/lpx_parse.c) and its two printers (src/lpx_fmt.c).
--   local ptxparse = require "pyptx.ptxparse"
--   local m = ptxparse.parse(text, "in.ptx")   -- raises "in.ptx:3:7: expected ..."
--   m:lossless()    -- byte-identical text, rebuilt from the IR
--   m:canonical()   -- the tracer's normalized layout
local ffi = require "ffi"
local core = require "pyptx.core"
local sys = require "pyptx.core.sys"
local trace = require "pyptx.trace"

local M = {}

local Module = {}
Module.__index = Module

local text_out, len_out = ffi.new("const char *[1]"), ffi.new("size_t[1]")

--- Raise the core's last error (already "file:line:col: ...").
local function fail()
  error(core.error_message(), 0)
end

--- A parsed module from one of the core's whole-file parsers.
local function parse_with(parser, what, text, name)
  assert(type(text) == "string", what .. ": text must be a string")
  local m = parser(core.ctx, text, #text, name or "<ptx>")
  if m == nil then fail() end
  return setmetatable({ ptr = ffi.gc(m, core.module_free), name = name }, Module)
end

--- Parse PTX text; name is used in error messages (default "<ptx>").
-- Tolerant: an instruction the ISA table would refuse is kept as written
-- (what fmt and transpile need to reproduce any file).
function M.parse(text, name)
  return parse_with(core.parse, "ptxparse.parse", text, name)
end

--- Parse PTX text and validate every instruction as a traced one is
-- (opcode, operands, arch, PTX version): what load_ptx runs. The first
-- invalid instruction raises "name:line:col: ...".
function M.parse_checked(text, name)
  return parse_with(core.parse_checked, "ptxparse.parse_checked", text, name)
end

--- Call a core printer and return its text.
local function print_with(self, fn)
  if fn(self.ptr, text_out, len_out) ~= 0 then fail() end
  return ffi.string(text_out[0], len_out[0])
end

--- The module's text exactly as parsed (plus any edits made to its IR).
function Module:lossless() return print_with(self, core.fmt_lossless) end

--- The module in the canonical layout the tracer emits.
function Module:canonical() return print_with(self, core.fmt_canonical) end

--- Write the module's text (canonical = true: the canonical layout) to a
-- file the user named (created 0600, never through a symbolic link), or
-- to standard output when path is nil. The core writes it as it prints
-- it: a big module's text is never whole in memory, nor a Lua string.
function Module:write(path, canonical)
  if not path then io.stdout:flush() end
  if core.fmt_write(self.ptr, canonical and 1 or 0, path) ~= 0 then fail() end
end

--- Rename register `old` of function fn (0-based) to `new`; every use changes.
function Module:rename_register(fn, old, new)
  local reg = core.reg_find(self.ptr, fn, old)
  if reg < 0 then error(("no register %s in function %d"):format(old, fn), 2) end
  if core.reg_rename(self.ptr, fn, reg, new) ~= 0 then fail() end
end

--- The PTX name of a register object in trace t ("%r3").
local function reg_name(t, r)
  if core.reg_name(t.mod, t.fn, r.id, text_out, len_out) ~= 0 then fail() end
  return ffi.string(text_out[0], len_out[0])
end

--- Replace %{key} in text by env[key]: a register's PTX name, or tostring.
local function substitute(t, text, env)
  return (text:gsub("%%{([%w_]+)}", function(key)
    local v = env[key]
    if v == nil then trace.fail("ptx.raw: %{" .. key .. "} is not in the table of values") end
    if type(v) == "table" and type(v.id) == "number" and v.type then return reg_name(t, v) end
    return tostring(v)
  end))
end

--- ptx.raw(text [, env]): append PTX body statements to the active kernel
-- trace. Registers are named as the PTX shows them (%r3, or a name the text
-- declares with .reg); %{x} is replaced by env.x (a register's PTX name, or
-- tostring of a value). Errors read "file.lua:line: ptx.raw:l:c: ...".
function M.append(text, env)
  local t = trace.need("ptx.raw")
  if type(text) ~= "string" then trace.fail("ptx.raw: expected a string of PTX, got " .. type(text)) end
  if env then text = substitute(t, text, env) end
  local src, line = trace.where(2)
  local file = src:sub(1, 1) == "@" and core.module_file(t.mod, src:sub(2)) or 0
  local before = core.func_inst_count(t.mod, t.fn)
  local name = trace.format_where(src, line) .. ": ptx.raw"
  if core.parse_into(t.mod, t.fn, text, #text, name, file, line) ~= 0 then fail() end
  t.count = t.count + (core.func_inst_count(t.mod, t.fn) - before)
end

--- ptx.raw_module(text): module-level PTX for the active trace's module
-- (variables with initializers, .extern .func declarations, .pragma),
-- printed before the function being traced (in place between the items of
-- a pyptx.module). Function definitions are refused.
function M.append_module(text, level)
  local t = trace.need("ptx.raw_module")
  if type(text) ~= "string" then trace.fail("ptx.raw_module: expected a string of PTX, got " .. type(text)) end
  local src, line = trace.where(level or 2)
  local name = trace.format_where(src, line) .. ": ptx.raw_module"
  local from = core.module_top_count(t.mod)
  if core.parse_module_decls(t.mod, text, #text, name) ~= 0 then fail() end
  if t.fn >= 0 and core.module_hoist(t.mod, from) ~= 0 then fail() end
end

--- Read a whole file (binary); a directory is named as one.
function M.read_file(path)
  if sys.kind(path) == "directory" then error(path .. " is a directory (expected a PTX file)", 0) end
  local f, err = io.open(path, "rb")
  if not f then error(err, 0) end
  local text, rerr = f:read("*a")
  f:close()
  if not text then error(path .. ": " .. tostring(rerr), 0) end   -- a link to a directory
  return text
end

--- Parse PTX and write it back (canonical = true: in the canonical layout)
-- to the file output (standard output when nil) as it is parsed, so that a
-- big input's IR is never held whole, nor its text when output is a file
-- (what `luaptx fmt` runs).
-- input is a path, or { text = ..., name = ... } for text in hand. On a
-- parse error nothing is written and output is left as it was.
function M.format(input, output, canonical)
  local text, len, name, buf
  if type(input) == "table" then
    text, len, name = input.text, #input.text, input.name or "<ptx>"
  else
    if sys.kind(input) == "directory" then error(input .. " is a directory (expected a PTX file)", 0) end
    buf = core.fs_read_file(core.ctx, input, len_out)
    if buf == nil then fail() end
    text, len, name = buf, len_out[0], input
  end
  if not output then io.stdout:flush() end
  local rc = core.fmt_file(core.ctx, text, len, name, canonical and 1 or 0, output)
  if buf ~= nil then core.fs_free(buf) end
  if rc ~= 0 then fail() end
end

--- Parse a file. It is read in C and parsed from there: a big input is
-- never a Lua string (nor the buffers io.read grows to make one).
function M.parse_file(path)
  if sys.kind(path) == "directory" then error(path .. " is a directory (expected a PTX file)", 0) end
  local buf = core.fs_read_file(core.ctx, path, len_out)
  if buf == nil then fail() end
  local m = core.parse(core.ctx, buf, len_out[0], path)
  core.fs_free(buf)
  if m == nil then fail() end
  return setmetatable({ ptr = ffi.gc(m, core.module_free), name = path }, Module)
end

return M
