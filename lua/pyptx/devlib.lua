--- The device library CUDA's runtime provides, from the DSL:
-- `ptx.printf(fmt, ...)` and `ptx.assert(pred, msg)` emit the calls nvcc
-- emits for `printf` and `assert` (`vprintf` with its argument buffer,
-- `__assertfail`), so a kernel prints and asserts on a GPU and on the
-- emulator alike. Each call is one `{ }` block at the caller's line.
local ffi = require "ffi"
local bit = require "bit"
local trace = require "pyptx.trace"
local ptxparse = require "pyptx.ptxparse"
local reg = require "pyptx.reg"
local types = require "pyptx.types"

local M = {}

local VPRINTF = ".extern .func (.param .b32 func_retval0) vprintf (.param .b64 vprintf_param_0, .param .b64 vprintf_param_1);"
local ASSERTFAIL = ".extern .func __assertfail (.param .b64 __assertfail_param_0, .param .b64 __assertfail_param_1, "
  .. ".param .b32 __assertfail_param_2, .param .b64 __assertfail_param_3, .param .b64 __assertfail_param_4);"

--- A module-level NUL-terminated string constant; returns its name.
local function string_const(t, prefix, s)
  t.devlib_n = (t.devlib_n or 0) + 1
  local name = ("__%s_%d"):format(prefix, t.devlib_n)
  local bytes = { s:byte(1, -1) }
  bytes[#bytes + 1] = 0
  ptxparse.append_module((".global .align 1 .b8 %s[%d] = {%s};"):format(name, #bytes, table.concat(bytes, ", ")), 4)
  return name
end

--- Declare extern function decl once per trace (key names it).
local function declare(t, key, decl)
  t.devlib_decl = t.devlib_decl or {}
  if not t.devlib_decl[key] then ptxparse.append_module(decl, 4); t.devlib_decl[key] = true end
end

--- The conversions of a printf format, in order: { conv, bytes } (bytes in
-- vprintf's argument buffer: doubles, pointers and l/ll integers 8, else 4).
local function conversions(fmt)
  local list, i = {}, 1
  while true do
    local s = fmt:find("%", i, true)
    if not s then return list end
    local flags, len, conv, e = fmt:match("^%%([-+ #0]*%d*%.?%d*)([hlLzjt]*)([%a%%])()", s)
    if not conv or not ("diuxXocspfFeEgGaA%"):find(conv, 1, true) then
      trace.fail(("ptx.printf: format %q: '%s' at byte %d is not a conversion CUDA's printf takes (%%d %%i %%u %%x %%X %%o "
        .. "%%c %%s %%p %%f %%e %%g %%a, with flags, width, precision and h/l/ll)"):format(fmt, fmt:sub(s, s + 2), s))
    end
    if conv ~= "%" then
      local wide = ("fFeEgGaAsp"):find(conv, 1, true) or len:sub(1, 1) == "l"
      list[#list + 1] = { conv = conv, bytes = wide and 8 or 4, spec = "%" .. flags .. len .. conv }
    end
    i = e
  end
end

--- The PTX immediate of an f64 value: 0d and its 16 hex digits.
local bits = ffi.new("union { double d; uint32_t w[2]; }")
local function f64_imm(v)
  bits.d = v
  return "0d" .. bit.tohex(bits.w[1], 8) .. bit.tohex(bits.w[0], 8)
end

--- PTX storing argument v for conversion c at buf+off; env gets registers.
local function store_arg(t, c, v, off, k, env, id)
  local at = ("[__pf_buf_%d+%d]"):format(id, off)
  local what = ("ptx.printf: argument %d (for %s)"):format(k, c.spec)
  if c.conv == "s" then
    if type(v) ~= "string" then trace.fail(what .. " must be a Lua string, got " .. type(v)) end
    local name = string_const(t, "printf_str", v)
    return ("mov.u64 %%__pf_l, %s; cvta.global.u64 %%__pf_l, %%__pf_l; st.local.u64 %s, %%__pf_l;"):format(name, at)
  end
  local key = "a" .. k
  if type(v) == "number" then
    if ("fFeEgGaA"):find(c.conv, 1, true) then return ("st.local.f64 %s, %s;"):format(at, f64_imm(v)) end
    if v ~= math.floor(v) then trace.fail(what .. " is an integer conversion; got " .. tostring(v)) end
    return ("st.local.%s %s, %d;"):format(c.bytes == 8 and "u64" or "u32", at, v)
  end
  if not reg.is(v) then trace.fail(what .. " must be a register or a Lua number, got " .. tostring(v)) end
  env[key] = v
  local ty = v.type
  if ("fFeEgGaA"):find(c.conv, 1, true) then
    if ty == types.f64 then return ("st.local.f64 %s, %%{%s};"):format(at, key) end
    if ty == types.f32 then return ("cvt.f64.f32 %%__pf_d, %%{%s}; st.local.f64 %s, %%__pf_d;"):format(key, at) end
    trace.fail(what .. " takes a float register (f32 or f64), got a " .. ty.name .. " register")
  end
  if not types.is_int(ty) then trace.fail(what .. " takes an integer register, got a " .. ty.name .. " register") end
  local signed = ty.kind == "s"
  if c.bytes == 8 then
    if ty.bits == 64 then return ("st.local.u64 %s, %%{%s};"):format(at, key) end
    return ("cvt.%s64.%s%d %%__pf_l, %%{%s}; st.local.u64 %s, %%__pf_l;"):format(signed and "s" or "u", signed and "s" or "u",
      ty.bits, key, at)
  end
  if ty.bits == 32 then return ("st.local.u32 %s, %%{%s};"):format(at, key) end
  if ty.bits == 64 then trace.fail(what .. " is a 32-bit conversion; a 64-bit register needs l or ll (%ld, %llu, ...)") end
  return ("cvt.%s32.%s%d %%__pf_r, %%{%s}; st.local.u32 %s, %%__pf_r;"):format(signed and "s" or "u", signed and "s" or "u",
    ty.bits, key, at)
end

--- ptx.printf(fmt, ...): CUDA's printf from a kernel: one vprintf call
-- with its argument buffer (a .local array), at the caller's line.
function M.printf(fmt, ...)
  local t = trace.need("ptx.printf")
  if type(fmt) ~= "string" then trace.fail("ptx.printf: expected a format string, got " .. type(fmt)) end
  local convs, n = conversions(fmt), select("#", ...)
  if n ~= #convs then
    trace.fail(("ptx.printf: format %q takes %d argument(s), got %d"):format(fmt, #convs, n))
  end
  declare(t, "vprintf", VPRINTF)
  local name = string_const(t, "printf_fmt", fmt)
  local id = t.devlib_n
  local env, parts, off = {}, {}, 0
  for k, c in ipairs(convs) do
    off = math.ceil(off / c.bytes) * c.bytes
    parts[#parts + 1] = store_arg(t, c, (select(k, ...)), off, k, env, id)
    off = off + c.bytes
  end
  local buf = off > 0 and ("mov.u64 %%__pf_a, __pf_buf_%d; cvta.local.u64 %%__pf_a, %%__pf_a;"):format(id) or "mov.u64 %__pf_a, 0;"
  local text = ("{ .local .align 8 .b8 __pf_buf_%d[%d]; .reg .b64 %%__pf_l, %%__pf_a, %%__pf_f; .reg .f64 %%__pf_d; .reg .b32 %%__pf_r; "
    .. "%s mov.u64 %%__pf_f, %s; cvta.global.u64 %%__pf_f, %%__pf_f; %s .param .b64 param0; .param .b64 param1; .param .b32 retval0; "
    .. "st.param.b64 [param0], %%__pf_f; st.param.b64 [param1], %%__pf_a; call.uni (retval0), vprintf, (param0, param1); }")
    :format(id, math.max(off, 8), table.concat(parts, " "), name, buf)
  ptxparse.append(text, env)
end

--- ptx.assert(pred, msg): CUDA's assert: the threads where pred is false
-- call __assertfail with msg, the caller's file and line and the kernel's name.
function M.assert(pred, msg)
  local t = trace.need("ptx.assert")
  local neg = getmetatable(pred) == reg.NegPred
  if not reg.is_pred(pred) then trace.fail("ptx.assert: expected a predicate register, got " .. tostring(pred)) end
  if type(msg) ~= "string" then trace.fail("ptx.assert: expected a message string, got " .. type(msg)) end
  reg.use_pred(t, pred)
  local src, line = trace.where(2)
  local file = src:gsub("^[@=]", "")
  declare(t, "__assertfail", ASSERTFAIL)
  local m, f, fn = string_const(t, "assert_msg", msg), string_const(t, "assert_file", file), string_const(t, "assert_func", t.name or "kernel")
  ptxparse.append(("{ .reg .b64 %%__pa<4>; .param .b64 param0; .param .b64 param1; .param .b32 param2; .param .b64 param3; "
    .. ".param .b64 param4; mov.u64 %%__pa1, %s; cvta.global.u64 %%__pa1, %%__pa1; mov.u64 %%__pa2, %s; cvta.global.u64 %%__pa2, %%__pa2; "
    .. "mov.u64 %%__pa3, %s; cvta.global.u64 %%__pa3, %%__pa3; st.param.b64 [param0], %%__pa1; st.param.b64 [param1], %%__pa2; "
    .. "st.param.b32 [param2], %d; st.param.b64 [param3], %%__pa3; st.param.b64 [param4], 1; "
    .. "@%s%%{p} call __assertfail, (param0, param1, param2, param3, param4); }"):format(m, f, fn, line, neg and "" or "!"),
    { p = neg and pred.reg or pred })
end

return M
