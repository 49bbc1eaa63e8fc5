--- Foreign PTX: load PTX written by nvcc, Triton or by hand and launch its
-- entries from Lua with explicit grid, block, shared memory and raw
-- arguments (the CuPy RawModule of luaptx).
--   local mod = pyptx.load_ptx("k.ptx")            -- a path or PTX text
--   mod.saxpy { grid = { 4 }, block = { 256 }, smem = 0, args = { x, y, 2.5, n } }
--   mod:get("saxpy") { ... }                        -- the same kernel
-- Arguments are packed by the entry's .param list: tensors (or device
-- addresses) for 64-bit integer params, Lua numbers for scalars, strings
-- / cdata / tables for .b8 arrays; ptx_loader.f32(2), ptx_loader.u32(7), ...
-- force a type for untyped .b32/.b64 params.
local ffi = require "ffi"
local core = require "pyptx.core"
local ptxparse = require "pyptx.ptxparse"
local floats = require "pyptx.runtime.floats"
local sys = require "pyptx.core.sys"
local runtime = require "pyptx.runtime"
local limits = require "pyptx.limits"

local M = {}

-- ------------------------------------------------------------ signatures

-- Scalar param types: byte size, FFI storage type and the kind of value.
local SCALAR = {
  u8 = { 1, "uint8_t", "int" }, s8 = { 1, "int8_t", "int" }, b8 = { 1, "uint8_t", "bits" },
  u16 = { 2, "uint16_t", "int" }, s16 = { 2, "int16_t", "int" }, b16 = { 2, "uint16_t", "bits" },
  u32 = { 4, "uint32_t", "int" }, s32 = { 4, "int32_t", "int" }, b32 = { 4, "uint32_t", "bits" },
  u64 = { 8, "uint64_t", "int" }, s64 = { 8, "int64_t", "int" }, b64 = { 8, "uint64_t", "bits" },
  f16 = { 2, "uint16_t", "f16" }, bf16 = { 2, "uint16_t", "bf16" },
  f32 = { 4, "float", "float" }, f64 = { 8, "double", "float" },
}

-- Integer ranges of the signed and unsigned integer param types.
local RANGE = {
  u8 = { 0, 255 }, s8 = { -128, 127 }, u16 = { 0, 65535 }, s16 = { -32768, 32767 },
  u32 = { 0, 4294967295 }, s32 = { -2147483648, 2147483647 },
  u64 = { 0, 2 ^ 64 - 1 }, s64 = { -2 ^ 63, 2 ^ 63 - 1 },
}

local name_out = ffi.new("const char *[1]")
local int_out = ffi.new("int32_t[4]")

--- Param idx of function fn of a parsed module as { name, type, align, count, bytes }.
local function param_of(ptr, fn, idx, entry)
  if core.func_param_info(ptr, fn, idx, name_out, int_out, int_out + 1, int_out + 2) ~= 0 then
    error("load_ptx: " .. core.error_message(), 0)
  end
  local name, ty = ffi.string(name_out[0]), ffi.string(core.type_name(int_out[0]))
  if not SCALAR[ty] then
    error(("load_ptx: entry %s: param %s has type .%s, which cannot be passed from Lua (one of .u8 .s8 .b8 ... .u64 "
      .. ".s64 .b64 .f16 .bf16 .f32 .f64, or an array of them)"):format(entry, name, ty), 0)
  end
  local size, count = SCALAR[ty][1], int_out[2] > 0 and int_out[2] or 1
  return { name = name, type = ty, align = int_out[1] > 0 and int_out[1] or size, count = count, bytes = size * count }
end

--- The entries of a parsed module (ptxparse.parse's result), read from the
-- parser's IR: a list of { name, params = {...}, size } in file order, each
-- param at its offset (its .align, else its natural alignment).
local function entries_of_ir(ir)
  local list, ptr = {}, ir.ptr
  for fn = 0, core.module_func_count(ptr) - 1 do
    if core.func_info(ptr, fn, int_out, int_out + 3) == 0 and int_out[0] == 1 then
      local nparams = int_out[3]
      assert(core.func_name(ptr, fn, name_out) == 0)
      local e = { name = ffi.string(name_out[0]), params = {} }
      local off = 0
      for i = 1, nparams do
        local p = param_of(ptr, fn, i - 1, e.name)
        off = math.ceil(off / p.align) * p.align
        p.offset, off = off, off + p.bytes
        e.params[i] = p
      end
      e.size = off
      list[#list + 1] = e
    end
  end
  return list
end
M.entries_of_ir = entries_of_ir

-- ------------------------------------------------------------ typed values

local Typed = {}
Typed.__index = Typed

--- A value forced to a PTX type, for untyped .b32/.b64 params.
local function typed(ty)
  return function(v) return setmetatable({ type = ty, value = v }, Typed) end
end
for _, ty in ipairs { "u8", "s8", "u16", "s16", "u32", "s32", "u64", "s64", "f16", "bf16", "f32", "f64" } do
  M[ty] = typed(ty)
end

-- ------------------------------------------------------------ packing

--- Describe a value for an error message.
local function describe(v)
  if getmetatable(v) == Typed then return v.type .. " " .. tostring(v.value) end
  if type(v) == "table" and v.ptr and v.dtype then return "a tensor" end
  return type(v) == "cdata" and tostring(ffi.typeof(v)) or type(v) .. " " .. tostring(v)
end

--- Is v an integer (a Lua number without fraction, or a 64-bit cdata)?
local function is_int(v)
  if type(v) == "number" then return v == math.floor(v) and v == v end
  return type(v) == "cdata" and (ffi.istype("int64_t", v) or ffi.istype("uint64_t", v))
end

--- Store scalar v of param type ty at dst, or return an error text.
local function store_scalar(dst, ty, v)
  local info = SCALAR[ty]
  local kind, ctype = info[3], info[2]
  if getmetatable(v) == Typed then
    if SCALAR[v.type][1] ~= info[1] or (kind ~= "bits" and v.type ~= ty) then
      return ("takes %s, got a %s value"):format(ty, v.type)
    end
    ty, v = v.type, v.value
    info = SCALAR[ty]
    kind, ctype = info[3], info[2]
  end
  if type(v) == "table" and v.ptr and v.dtype then
    if info[1] ~= 8 or kind == "float" then return ("takes %s, got a tensor"):format(ty) end
    v = v.ptr
  end
  if type(v) == "boolean" then v = v and 1 or 0 end
  if kind == "bits" then
    if type(v) == "number" and not is_int(v) then
      ctype = info[1] == 8 and "double" or info[1] == 4 and "float" or nil
      if not ctype then return ("takes %s, got the non-integer %s"):format(ty, tostring(v)) end
    elseif is_int(v) and type(v) == "number" and v < 0 then
      ctype = ctype:gsub("uint", "int")
    end
  end
  if kind == "f16" or kind == "bf16" then
    if type(v) ~= "number" then return ("takes %s, got %s"):format(ty, describe(v)) end
    v = kind == "f16" and floats.to_f16(v) or floats.to_bf16(v)
  elseif kind == "float" then
    if type(v) ~= "number" then return ("takes %s, got %s"):format(ty, describe(v)) end
  elseif type(v) ~= "number" and type(v) ~= "cdata" then
    return ("takes %s, got %s"):format(ty, describe(v))
  elseif kind == "int" then
    if not is_int(v) then return ("takes %s, got %s"):format(ty, describe(v)) end
    local r = RANGE[ty]
    if type(v) == "number" and (v < r[1] or v > r[2]) then return ("takes %s, got %s (out of range)"):format(ty, tostring(v)) end
  end
  ffi.cast(ctype .. "*", dst)[0] = v
end

--- Store an array param (.b8 name[N], ...) from a string, cdata or table.
local function store_array(dst, p, v)
  if type(v) == "string" then
    if #v ~= p.bytes then return ("takes %d bytes, got a string of %d"):format(p.bytes, #v) end
    ffi.copy(dst, v, p.bytes)
  elseif type(v) == "cdata" then
    local n = ffi.sizeof(v)
    if n ~= p.bytes then return ("takes %d bytes, got %s of %s bytes"):format(p.bytes, describe(v), tostring(n)) end
    ffi.copy(dst, v, p.bytes)
  elseif type(v) == "table" and getmetatable(v) == nil then
    if #v ~= p.count then return ("takes %d %s elements, got a table of %d"):format(p.count, p.type, #v) end
    local size = SCALAR[p.type][1]
    for i, x in ipairs(v) do
      local err = store_scalar(dst + (i - 1) * size, p.type, x)
      if err then return ("element %d: %s"):format(i, err) end
    end
  else
    return ("takes %d bytes (a string, cdata or table), got %s"):format(p.bytes, describe(v))
  end
end

--- Pack args by an entry's params; returns the buffer and its size.
function M.pack(entry, args)
  local np = #entry.params
  local n = args.n or #args
  if n ~= np then
    local names = {}
    for i, p in ipairs(entry.params) do names[i] = p.name .. ": " .. p.type .. (p.count > 1 and "[" .. p.count .. "]" or "") end
    error(("entry %s takes %d argument(s) (%s), got %d"):format(entry.name, np, table.concat(names, ", "), n), 0)
  end
  local buf = ffi.new("uint8_t[?]", math.max(entry.size, 1))
  for i, p in ipairs(entry.params) do
    local v = args[i]
    local err
    if v == nil then err = "is missing (nil)"
    elseif p.count ~= 1 then err = store_array(buf + p.offset, p, v)
    else err = store_scalar(buf + p.offset, p.type, v) end
    if err then error(("entry %s: argument %d (param %s) %s"):format(entry.name, i, p.name, err), 0) end
  end
  return buf, entry.size
end

-- ------------------------------------------------------------ kernels

local Kernel = {}
Kernel.__index = Kernel

--- A dim3 from a number or a table of up to 3 numbers (required).
local function dim3(v, what, name)
  if v == nil then error(("entry %s: %s is missing (give %s = n or {x, y, z}; a foreign launch has no default)"):format(name, what, what), 0) end
  if type(v) == "number" then v = { v } end
  if type(v) ~= "table" or #v < 1 or #v > 3 then error(("%s: %s must be a number or {x[, y[, z]]}"):format(name, what), 0) end
  local d = { v[1], v[2] or 1, v[3] or 1 }
  for i = 1, 3 do
    if type(d[i]) ~= "number" or d[i] < 1 or d[i] ~= math.floor(d[i]) then
      error(("%s: %s[%d] must be a positive integer, got %s"):format(name, what, i, tostring(d[i])), 0)
    end
  end
  return d
end

--- The device function of this kernel on dev (module loaded once per device).
function Kernel:function_on(dev)
  local fn = self.loaded[dev]
  if fn then return fn end
  local mod = self.module:load_on(dev)
  local f = ffi.new("int32_t[1]")
  if core.device_function(dev.handle, mod, self.name, f) < 0 then error("entry " .. self.name .. ": " .. core.error_message(), 0) end
  self.loaded[dev] = f[0]
  return f[0]
end

--- Launch: k { grid =, block =, cluster =, smem =, args = {...}, device = }.
function Kernel:launch(opts)
  if type(opts) ~= "table" then error("entry " .. self.name .. ": call it with a table { grid =, block =, smem =, args = }", 2) end
  local ok, err = pcall(function()
    local dev = opts.device or runtime.device()
    local grid, block = dim3(opts.grid, "grid", self.name), dim3(opts.block, "block", self.name)
    local bad = runtime.dims_error("entry " .. self.name, grid, block)
    if bad then error(bad, 0) end
    local cluster = dim3(opts.cluster or 1, "cluster", self.name)
    local buf, size = M.pack(self.entry, opts.args or {})
    local cfg = ffi.new("lpx_launch_cfg")
    for d = 0, 2 do cfg.grid[d], cfg.block[d], cfg.cluster[d] = grid[d + 1], block[d + 1], cluster[d + 1] end
    cfg.dynamic_smem = opts.smem or opts.shared_mem or 0
    cfg.params, cfg.params_size = buf, size
    local fn = self:function_on(dev)
    if core.device_launch(dev.handle, fn, cfg) < 0 then error("launching entry " .. self.name .. ": " .. core.error_message(), 0) end
    if opts.sync ~= false then
      if core.device_sync(dev.handle) < 0 then error("entry " .. self.name .. ": " .. core.error_message(), 0) end
    end
  end)
  if not ok then error(err, 2) end
end
Kernel.__call = Kernel.launch

-- ------------------------------------------------------------ modules

local Module = {}

--- Methods first, then entries by name (mod.saxpy).
Module.__index = function(self, key)
  local m = Module[key]
  if m ~= nil then return m end
  if type(key) == "string" then return self:get(key) end
end

--- The entry names, in file order.
function Module:names()
  local t = {}
  for i, e in ipairs(self.entries) do t[i] = e.name end
  return t
end

--- The kernel of entry name (an exact name, or a C++ name's unmangled base
-- when exactly one mangled entry has it); unknown names list the entries.
function Module:get(name)
  local k = rawget(self, "kernels")[name]
  if k then return k end
  local found
  for _, e in ipairs(self.entries) do
    if e.name == name or e.name:sub(1, #name + #tostring(#name) + 2) == "_Z" .. #name .. name then
      if found then found = false break end
      found = e
    end
  end
  if not found then
    error(("%s: no entry named '%s'; entries: %s"):format(self.source, name, table.concat(self:names(), ", ")), 0)
  end
  k = self.kernels[found.name]
    or setmetatable({ name = found.name, entry = found, module = self, loaded = setmetatable({}, { __mode = "k" }) }, Kernel)
  self.kernels[name], self.kernels[found.name] = k, k
  return k
end

--- Load the parsed module onto dev once; returns the device's module id.
function Module:load_on(dev)
  local id = self.loaded[dev]
  if id then return id end
  local out = ffi.new("int32_t[1]")
  if core.device_load_ir(dev.handle, self.ir.ptr, out) < 0 then error("loading " .. self.source .. ": " .. core.error_message(), 0) end
  self.loaded[dev] = out[0]
  return out[0]
end

--- Does a one-line s look like PTX text rather than a file path (asked
-- when no file of that name exists)? Text has braces or semicolons, or
-- starts with a module directive; "dir/my.entry.ptx" is a (missing) path.
local function looks_like_text(s)
  return s:find("[{};]") ~= nil or s:find("^%s*%.version%s") ~= nil or s:find("^%s*%.target%s") ~= nil
end

--- Is src a file path rather than PTX text? Text has line breaks; a
-- one-line string is a path when something of that name exists
-- ("dir/my.entry.ptx"), else when it does not look like PTX.
local function is_path(src)
  if src:find("\n") then return false end
  return sys.kind(src) ~= nil or not looks_like_text(src)
end

--- Warn, as ptxas does, of each entry's .minnctapersm that its .maxntid or
-- .reqntid and the target's SM cannot meet (a hint, never a launch condition).
local function warn_minnctapersm(ir, source)
  local b = ffi.new("uint32_t[8]")
  for fn = 0, core.module_func_count(ir.ptr) - 1 do
    if core.func_bounds(ir.ptr, fn, b) == 0 and b[6] > 0 then
      local t = b[0] > 0 and b[0] * b[1] * b[2] or (b[3] > 0 and b[3] * b[4] * b[5]) or nil
      assert(core.func_name(ir.ptr, fn, name_out) == 0)
      local w = limits.minnctapersm_warning(ffi.string(name_out[0]), "sm_" .. b[7], b[6], t)
      if w then io.stderr:write(source, ": warning: ", w, "\n") end
    end
  end
end

--- Parse PTX text or a file into a module of launchable entries; a
-- malformed file raises the parser's "file:line:col: ..." message.
function M.load(src, name)
  if type(src) ~= "string" then error("load_ptx: expected PTX text or a file path, got " .. type(src), 2) end
  local text, source = src, name or "<ptx>"
  if is_path(src) then
    local ok, res = pcall(ptxparse.read_file, src)
    if not ok then error("load_ptx: " .. res, 0) end
    text, source = res, name or src
  end
  local ok, ir = pcall(ptxparse.parse_checked, text, source)
  if not ok then error(ir, 0) end -- already "file:line:col: ..."
  local entries = entries_of_ir(ir)
  warn_minnctapersm(ir, source)
  return setmetatable({ ir = ir, source = source, text = text, entries = entries, kernels = {},
                        loaded = setmetatable({}, { __mode = "k" }) }, Module)
end

return M
