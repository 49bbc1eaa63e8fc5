--- The active kernel trace: the C module being built, operand packing and
-- the one function every instruction goes through (M.emit).
local ffi = require "ffi"
local core = require "pyptx.core"

local M = {}

-- Operand kinds are the C enum (LPX_OPD_* in src/lpx_core.h), read through the FFI.
local OPD = {}
for _, k in ipairs { "REG", "NUM", "IMM", "FIMM", "SPECIAL", "SYM", "LABEL", "ADDR", "VEC", "PIPE", "SINK", "PAREN", "INT", "BRACKET" } do
  OPD[k] = tonumber(ffi.C["LPX_OPD_" .. k])
end
M.OPD = OPD

local MAX_OPS = 1024
local ops = ffi.new("lpx_operand[?]", MAX_OPS)
local cur = nil
local select, type, getmetatable = select, type, getmetatable

-- --------------------------------------------------------------- locations

local own_source = core.own_source

--- Is a chunk one of luaptx's own modules or a helper library (skipped
-- when locating the user)? Decided by how it was loaded (src/lpx_lua.c).
local function is_internal(src)
  local own = own_source(src)
  return own == "module" or own == "helper"
end
M.is_internal = is_internal

local core_where = core.where
local source_names = {}
local last_key, last_line   -- the location emit_n or emit_up found last (emit_n_again's)

local front_end = {}   -- chunk keys of the command line's own code

--- Source and line of the first frame at or above level outside luaptx.
-- When none is left inside the trace (a body ending in `return ptx.ret()`
-- is a tail call, so its frame is gone) the search would reach the command
-- line's code; the kernel's defining line stands in for it then.
function M.where(level)
  local key, line = core_where((level or 1) + 1)
  if not key or front_end[key] then
    if cur and cur.src then return cur.src, cur.line end
    if not key then return "?", 0 end
  end
  local src = source_names[key]
  if not src then
    local _
    _, _, src = core_where((level or 1) + 1, true)
    source_names[key] = src
    if own_source(src) == "cli" then
      front_end[key] = true
      if cur and cur.src then return cur.src, cur.line end
    end
  end
  return src, line
end

--- "file:line" for a chunk source and line, as Lua prints it.
function M.format_where(src, line)
  local first = src:sub(1, 1)
  local file = (first == "@" or first == "=") and src:sub(2) or src
  return file .. ":" .. tostring(line)
end

--- Raise msg as a Lua error prefixed with the user's file:line: the first
-- frame from fail's caller up that is not luaptx's own code (no level to
-- pass: starting higher could skip the user's frame when a wrapper was
-- tail-called).
function M.fail(msg)
  local src, line = M.where(2)
  error(M.format_where(src, line) .. ": " .. msg, 0)
end

-- ---------------------------------------------------------- user errors

--- Is a chunk source luaptx's own code: a pyptx module, a helper library
-- or the command line's (decided by how it was loaded, src/lpx_lua.c)?
local function is_own(src)
  return own_source(src) ~= nil
end
M.is_own = is_own

--- Mark the chunk that calls this (through pyptx.helper) as a helper
-- library: the lines its code emits, and the errors raised in it, name
-- the user's line that called into it instead (examples/lib/*.lua do).
function M.mark_helper()
  -- the chunk calling in, found without core_where: it skips a chunk
  -- already marked (a helper loaded again), which would mark its caller
  local level, info = 2, debug.getinfo(2, "S")
  while info and (info.what == "C" or own_source(info.source) == "module") do
    level = level + 1
    info = debug.getinfo(level, "S")
  end
  if not info then return end
  local src = info.source
  core.where_skip(src)
  if src:sub(1, 1) ~= "@" then core.where_skip("@" .. src:sub(2)) end   -- as strip_own names it
end

--- Does the user want Lua tracebacks with errors ($LUAPTX_TRACEBACK)?
function M.traceback_wanted()
  local v = os.getenv("LUAPTX_TRACEBACK")
  return v ~= nil and v ~= "" and v ~= "0"
end

--- The first frame at or above level that is user code: source, line and
-- the name the user called into luaptx by (nil when unknown); the active
-- kernel's defining line when no user frame is left (a tail call).
local function user_frame(level)
  local called
  while true do
    local info = debug.getinfo(level, "Sln")
    if not info then break end
    if info.what ~= "C" and info.currentline > 0 and not is_own(info.source) then
      return info.source, info.currentline, called
    end
    called = info.name
    level = level + 1
  end
  if cur and cur.src then return cur.src, cur.line end
end

--- Strip every leading "file:line: " that points into luaptx's own code.
local function strip_own(msg)
  while true do
    local file, rest = msg:match("^([^\n:]+):%d+: (.*)$")
    if not file or not is_own("@" .. file) then return msg end
    msg = rest
  end
end
M.strip_own = strip_own

--- An xpcall handler that makes an error a user error: a message located
-- in luaptx's own code is moved to the user's file:line (or loses its
-- location when the user has none), so no internal path leaks. With
-- LUAPTX_TRACEBACK set, the message is kept and a traceback appended.
function M.relocate(err)
  if type(err) ~= "string" then return err end
  if M.traceback_wanted() then
    if err:find("\nstack traceback:\n", 1, true) then return err end
    return debug.traceback(err, 2)
  end
  local rest = strip_own(err)
  if rest == err then return err end
  if rest:match("^[^\n:]+:%d+: ") then return rest end     -- already names the user's line
  local src, line, called = user_frame(3)
  if called then rest = called .. ": " .. rest end
  if not src then return rest end
  return M.format_where(src, line) .. ": " .. rest
end

-- ------------------------------------------------------------------ traces

--- The active trace, or an error naming the user's line when none is.
function M.need(what)
  if cur then return cur end
  M.fail(what .. " called outside a kernel trace (use it inside a kernel body)")
end

--- The active trace or nil.
function M.current() return cur end

--- Start a trace of a module; with spec.name, open its kernel (.entry)
-- right away (M.open opens further functions).
function M.begin(spec)
  if cur then error("a kernel trace is already active (kernels cannot be traced inside kernels)", 0) end
  local mod = core.module_new(core.ctx, spec.version, spec.arch, spec.address_size or 64)
  if mod == nil then error(core.error_message(), 0) end
  mod = ffi.gc(mod, core.module_free)
  if spec.target_modifiers and core.module_target_modifiers(mod, table.concat(spec.target_modifiers, ", ")) ~= 0 then
    error(core.error_message(), 0)
  end
  local sm = ffi.new("int32_t[2]")
  core.arch_parse(spec.arch, sm, sm + 1)
  cur = {
    mod = mod, fn = -1, name = spec.name, arch = spec.arch, version = spec.version,
    sm = sm[0], family = sm[1], files = {}, syms = {}, nlabels = 0, count = 0, src = spec.src, line = spec.line,
    guard = nil, smem_size = 0, smem_align = 16, on_emit = nil, address_size = spec.address_size or 64,
  }
  if spec.name then M.open(cur, spec.name, true, 1) end
  return cur
end

--- Open function `name` in trace t (an .entry when is_entry; linkage 0
-- none, 1 .visible, 2 .extern, 3 .weak, 4 .common); later calls append to it.
function M.open(t, name, is_entry, linkage)
  local fn = core.func_begin(t.mod, name, is_entry and 1 or 0, linkage or 0)
  if fn < 0 then error(core.error_message(), 0) end
  t.fn, t.name, t.guard, t.at_where, t.reg_names, t.reg_ranges = fn, name, nil, nil, nil, nil
  return fn
end

--- End the active trace (always called, also when the body failed).
function M.finish()
  cur = nil
end

--- Symbol id of a name in the trace's module (interned once).
function M.sym(t, name)
  local id = t.syms[name]
  if id then return id end
  id = core.sym(t.mod, name)
  t.syms[name] = id
  return id
end

--- A fresh label name unique in the trace ("$L__name_3").
function M.fresh_label(t, hint)
  t.nlabels = t.nlabels + 1
  return "$L__" .. (hint or "L") .. "_" .. t.nlabels
end

--- A fresh label name and its symbol id, interned straight into the
-- module: the name is new, so remembering it in t.syms (a hash insert per
-- label of every loop and if_) would only cost.
function M.fresh_sym(t, hint)
  local name = M.fresh_label(t, hint)
  local id = core.sym(t.mod, name)
  if id < 0 then M.fail(core.error_message()) end
  return name, id
end

-- --------------------------------------------------------------- operands

local put

--- Pack a plain Lua table as a vector operand {a, b, ...}.
local function put_vector(t, k, v)
  local o = ops[k]
  local n = #v
  o.kind, o.type, o.id, o.aux, o.ival, o.fval = OPD.VEC, -1, 0, n, 0, 0
  k = k + 1
  for i = 1, n do k = put(t, k, v[i]) end
  return k
end

--- Pack one Lua value into the operand buffer at k; return the next slot.
put = function(t, k, v)
  if k >= MAX_OPS - 1 then M.fail("too many operands in one instruction") end
  local o = ops[k]
  local tv = type(v)
  if tv == "table" then
    local mt = getmetatable(v)
    if mt and mt.__operand then return mt.__operand(v, o, t, k, put) end
    if mt == nil then return put_vector(t, k, v) end
  elseif tv == "number" then
    o.kind, o.type, o.id, o.aux, o.ival, o.fval = OPD.NUM, -1, 0, 0, 0, v
    return k + 1
  elseif tv == "string" then
    o.kind, o.type, o.id, o.aux, o.ival, o.fval = OPD.SYM, -1, M.sym(t, v), 0, 0, 0
    return k + 1
  elseif tv == "cdata" and ffi.istype("int64_t", v) or ffi.istype("uint64_t", v) then
    -- aux 1: written unsigned (ULL), so it prints as an unsigned literal
    o.kind, o.type, o.id, o.aux, o.ival, o.fval = OPD.INT, -1, 0, ffi.istype("uint64_t", v) and 1 or 0, v, 0
    return k + 1
  end
  M.fail(("cannot use a %s (%s) as an operand; expected a register, number, vector table, address or label")
    :format(tv, tostring(v)))
end
M.put = put

--- File id of a chunk source for .loc (registered once per trace).
local function file_id(t, src)
  local id = t.files[src]
  if id then return id end
  if src:sub(1, 1) ~= "@" then id = 0 else id = core.module_file(t.mod, src:sub(2)) end
  t.files[src] = id
  return id
end

--- Append the instruction whose k operands are packed, at the user's line
-- that core.where found (key, line); level: where M.where looks again,
-- counted from here, when the chunk is new or the command line's own.
-- Takes the guard and appends in C.
local function append_at(t, form, k, key, line, level)
  local src = key and not front_end[key] and source_names[key]
  if not src then src, line = M.where(level) end   -- a chunk seen first, or the command line's code
  local g, gneg = -1, 0
  local guard = t.guard   -- a predicate register, or a negated view of one ({ reg = p })
  if guard then
    t.guard = nil
    local negated = rawget(guard, "reg")   -- a register has none: no __index call
    if negated then g, gneg = negated[1], 1 else g = guard[1] end   -- a register's id (pyptx.reg)
  end
  local rc = core.append(t.mod, t.fn, form, g, gneg, k, ops, file_id(t, src), line)
  if rc < 0 then error(M.format_where(src, line) .. ": " .. core.error_message(), 0) end
  t.count = t.count + 1
  if t.on_emit then t.on_emit(rc) end
  return rc
end

--- Pack the first n (at most eight) of a..h into the operand buffer;
-- returns the number of operand slots they took.
local function pack_fixed(t, n, a, b, c, d, e, f, g, h)
  local k = 0
  if n > 0 then k = put(t, k, a) end
  if n > 1 then k = put(t, k, b) end
  if n > 2 then k = put(t, k, c) end
  if n > 3 then k = put(t, k, d) end
  if n > 4 then k = put(t, k, e) end
  if n > 5 then k = put(t, k, f) end
  if n > 6 then k = put(t, k, g) end
  if n > 7 then k = put(t, k, h) end
  return k
end

--- Append one instruction of form with n (at most eight) operands, at
-- the user's line that core.where finds from level up (counted from
-- here): the shared body of emit_n and emit_up. Fixed parameters, no
-- vararg: a trace the JIT starts here, or resumes here after the C call
-- that finds the line, can return through it to the caller, which it
-- cannot through a vararg function's frame.
local function emit_from(level, form, n, a, b, c, d, e, f, g, h)
  local t = cur
  if not t then M.fail("ptx instruction called outside a kernel trace (use it inside a kernel body)") end
  local k = pack_fixed(t, n, a, b, c, d, e, f, g, h)
  local key, line = core_where(level + 1)
  last_key, last_line = key, line
  local rc = append_at(t, form, k, key, line, level + 2)   -- M.where < append_at < this frame
  return rc
end

--- Append one instruction of form with n (at most eight) operands given
-- as fixed arguments: the emit of the hot paths (operators, control flow,
-- the family wrappers), which the JIT compiles end to end. It packs the
-- operands and finds the user's line itself, walking up from its caller:
-- each frame between here and the user's is one more for core.where to
-- look at, for every instruction.
function M.emit_n(form, n, a, b, c, d, e, f, g, h)
  local rc = emit_from(2, form, n, a, b, c, d, e, f, g, h)   -- emit_from < emit_n < the caller
  return rc
end

--- emit_n for luaptx's own code that the user's calls (an operator, a
-- family wrapper): the walk starts above the caller, which is known not
-- to be the user's, and saves core.where a frame for every instruction.
-- Never tail-call it (`return emit_up(...)`): the caller's frame would be
-- gone, and the frame above it could be the user's line itself.
function M.emit_up(form, n, a, b, c, d, e, f, g, h)
  local rc = emit_from(3, form, n, a, b, c, d, e, f, g, h)   -- emit_from < emit_up < luaptx < the caller
  return rc
end
local emit_up = M.emit_up

--- emit_n for the second and later instructions a helper appends for
-- one call of the user's, right after an emit_n or emit_up of its own: at the line
-- that one found (no stack walk), so they carry the same .loc.
function M.emit_n_again(form, n, a, b, c, d, e, f, g, h)
  local t = cur
  if not t then M.fail("ptx instruction called outside a kernel trace (use it inside a kernel body)") end
  local k = pack_fixed(t, n, a, b, c, d, e, f, g, h)
  local rc = append_at(t, form, k, last_key, last_line, 3)   -- M.where < append_at < emit_n_again < the caller
  return rc
end

--- Append one instruction of an interned form with Lua operands.
-- ptx.inst comes through here, and this vararg frame is wanted: a trace
-- the JIT resumes after core.where stops at it and returns to the
-- interpreter. Through fixed frames it would run on into the caller, and
-- a transpiled script's straight-line body, one call site per
-- instruction, then makes a side trace per call site until LuaJIT
-- flushes them all (tried: big_gemm_sm80 traced in 250 ms, not 8 ms).
function M.emit(form, ...)
  local n = select("#", ...)
  if n <= 8 then
    local rc = emit_up(form, n, ...)   -- this frame is luaptx's own: the walk starts above it
    return rc
  end
  local t = cur
  if not t then M.fail("ptx instruction called outside a kernel trace (use it inside a kernel body)") end
  local k = 0
  for i = 1, n do k = put(t, k, (select(i, ...))) end
  local key, line = core_where(2)   -- emit < the caller
  local rc = append_at(t, form, k, key, line, 3)   -- M.where < append_at < emit < the caller
  return rc
end

--- Append a raw body line (a brace, a pragma) to the active trace.
function M.raw_line(text)
  local t = M.need("ptx.raw_line")
  if core.append_raw(t.mod, t.fn, text) < 0 then M.fail(core.error_message()) end
end

--- Intern an opcode string into a form id, raising at the user's line.
-- strict: unknown opcodes are errors (the builder) rather than warnings (raw).
function M.form(opcode, strict)
  local id = core.form_intern(core.ctx, opcode)
  if id < 0 then M.fail(core.error_message()) end
  local info = core.form_get(core.ctx, id)
  if info.op < 0 then
    local w = core.take_warning()
    -- the core warns only when it first interns the opcode
    if w == "" then w = opcode .. ": opcode not in luaptx's instruction table; emitted unchecked" end
    if strict then M.fail(w .. " (use ptx.inst(\"" .. opcode .. "\", ...) to emit it unchecked)") end
    local src, line = M.where(2)
    io.stderr:write(M.format_where(src, line), ": warning: ", w, "\n")
  end
  return id, info
end

return M
