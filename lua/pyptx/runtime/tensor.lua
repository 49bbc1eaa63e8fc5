--- Tensors: device memory with a shape, a dtype and strides, created from
-- Lua tables, FFI arrays or fill helpers, read back into FFI buffers or
-- tables, and compared with a tolerance that reports the first mismatch.
local ffi = require "ffi"
local types = require "pyptx.types"
local floats = require "pyptx.runtime.floats"
local device = require "pyptx.runtime.device"

local M = {}

local Tensor = {}
Tensor.__index = Tensor
M.Tensor = Tensor

-- Host storage of each dtype; half and fp8 types are held as raw bits.
local STORAGE = {
  f32 = "float", f64 = "double", s32 = "int32_t", u32 = "uint32_t", s64 = "int64_t", u64 = "uint64_t",
  s16 = "int16_t", u16 = "uint16_t", s8 = "int8_t", u8 = "uint8_t", f16 = "uint16_t", bf16 = "uint16_t",
  e4m3 = "uint8_t", e5m2 = "uint8_t", b32 = "uint32_t", b16 = "uint16_t", b8 = "uint8_t", b64 = "uint64_t",
}

--- The FFI element type that holds a dtype on the host.
function M.storage(dtype)
  if not types.is(dtype) then
    error(("tensor.storage: argument 1 (dtype) must be a pyptx type (f32, bf16, ...); got %s"):format(type(dtype)), 2)
  end
  local s = STORAGE[dtype.name]
  if not s then error("tensor: dtype " .. dtype.name .. " is not supported for tensors", 3) end
  return s
end

--- Encode a Lua number into a dtype's storage value (half types: RNE bits).
local function encode(dtype, x)
  if dtype == types.f16 then return floats.to_f16(x) end
  if dtype == types.bf16 then return floats.to_bf16(x) end
  return x
end
M.encode = encode

--- Decode a storage value into a Lua number.
local function decode(dtype, v)
  if dtype == types.f16 then return floats.from_f16(v) end
  if dtype == types.bf16 then return floats.from_bf16(v) end
  return tonumber(v)
end
M.decode = decode

-- Outputs are poisoned before a launch so an element the kernel never
-- writes is recognisable: floats get a quiet NaN with a payload no
-- arithmetic produces, integers an unlikely value. { bytes, pattern }.
local POISON = {
  f32 = { 4, 0x7fc0dead }, f64 = { 8, 0x7ff80000deaddeadULL }, f16 = { 2, 0x7ead }, bf16 = { 2, 0x7fed },
  e4m3 = { 1, 0x7f }, e5m2 = { 1, 0x7f },
  s8 = { 1, 0xad }, u8 = { 1, 0xad }, b8 = { 1, 0xad }, s16 = { 2, 0xdead }, u16 = { 2, 0xdead }, b16 = { 2, 0xdead },
  s32 = { 4, 0xdeaddead }, u32 = { 4, 0xdeaddead }, b32 = { 4, 0xdeaddead },
  s64 = { 8, 0xdeaddeaddeaddeadULL }, u64 = { 8, 0xdeaddeaddeaddeadULL }, b64 = { 8, 0xdeaddeaddeaddeadULL },
}
M.POISON = POISON

--- Row-major strides (in elements) of a shape.
local function row_major(shape)
  local strides, s = {}, 1
  for i = #shape, 1, -1 do strides[i] = s; s = s * shape[i] end
  return strides
end

--- Row-major strides (in elements) of a shape, for hosts that describe
-- tensors themselves (the C API's launches).
function M.row_major(shape)
  if type(shape) ~= "table" then error("tensor.row_major: argument 1 (shape) must be a list of integers; got " .. type(shape), 2) end
  for i, d in ipairs(shape) do
    if type(d) ~= "number" then error(("tensor.row_major: shape[%d] must be an integer; got %s"):format(i, type(d)), 2) end
  end
  return row_major(shape)
end

--- Check a shape is a list of positive integers; returns the element count.
local function check_shape(shape)
  if type(shape) == "number" then shape = { shape } end
  if type(shape) ~= "table" or #shape == 0 then error("tensor: shape must be a list of positive integers", 3) end
  local n = 1
  for i, d in ipairs(shape) do
    if type(d) ~= "number" or d < 1 or d ~= math.floor(d) then
      error(("tensor: shape[%d] must be a positive integer, got %s"):format(i, tostring(d)), 3)
    end
    n = n * d
  end
  if n > 2 ^ 48 then   -- past any device's memory, and past exact Lua integers once in bytes
    error(("tensor: shape %s holds %.3g elements; no device holds that many"):format(table.concat(shape, "x"), n), 3)
  end
  return shape, n
end

--- An uninitialised tensor on device dev (default: the current device).
function M.empty(shape, dtype, dev)
  local n
  shape, n = check_shape(shape)
  if not types.is(dtype) then error("tensor.empty: dtype must be a type (pyptx.types.f32, ...)", 2) end
  dev = dev or device.device()
  local esize = ffi.sizeof(M.storage(dtype))
  local t = setmetatable({ shape = shape, strides = row_major(shape), dtype = dtype, numel = n,
                           nbytes = n * esize, elem_size = esize, device = dev }, Tensor)
  t.ptr, t.mem = dev:alloc(t.nbytes)
  return t
end

--- A host FFI array holding n elements of dtype.
local function host_buffer(dtype, n)
  return ffi.new(M.storage(dtype) .. "[?]", n)
end

--- Flatten nested Lua tables row-major; returns values and inferred shape.
local function flatten(tbl)
  local shape, out = {}, {}
  local node = tbl
  while type(node) == "table" do shape[#shape + 1] = #node; node = node[1] end
  local function walk(t, depth)
    if depth > #shape then out[#out + 1] = t return end
    if type(t) ~= "table" or #t ~= shape[depth] then error("tensor.from_table: ragged nested table", 4) end
    for i = 1, #t do walk(t[i], depth + 1) end
  end
  walk(tbl, 1)
  return out, shape
end

--- A tensor from a (nested) Lua table of numbers.
function M.from_table(tbl, dtype, shape, dev)
  dtype = dtype or types.f32
  local values, inferred = flatten(tbl)
  shape = shape or inferred
  local t = M.empty(shape, dtype, dev)
  if #values ~= t.numel then error(("tensor.from_table: %d values for shape of %d elements"):format(#values, t.numel), 2) end
  local buf = host_buffer(dtype, t.numel)
  for i = 1, #values do
    local v = values[i]
    if type(v) ~= "number" and not (type(v) == "cdata" and tonumber(v)) then
      error(("tensor.from_table: element %d is a %s (%s); expected a number"):format(i, type(v), tostring(v)), 2)
    end
    buf[i - 1] = encode(dtype, v)
  end
  t:upload(buf)
  return t
end

--- A tensor copied from an FFI array (of the dtype's storage type).
function M.from_ffi(ptr, shape, dtype, dev)
  local t = M.empty(shape, dtype, dev)
  t:upload(ptr)
  return t
end

--- Deterministic uniform random numbers in [lo, hi) from a seed (xorshift).
local function rng(seed)
  local s = ffi.new("uint64_t[1]", (seed or 1) * 2654435761ULL + 0x9E3779B97F4A7C15ULL)
  return function()
    local x = s[0]
    x = bit.bxor(x, bit.lshift(x, 13)); x = bit.bxor(x, bit.rshift(x, 7)); x = bit.bxor(x, bit.lshift(x, 17))
    s[0] = x
    return tonumber(bit.rshift(x, 11)) / 9007199254740992
  end
end

--- Random tensor: opts.seed, opts.lo (default -1), opts.hi (default 1);
-- integer dtypes get integers in [lo, hi].
function M.rand(shape, dtype, opts)
  opts = opts or {}
  dtype = dtype or types.f32
  local t = M.empty(shape, dtype, opts.device)
  local r, lo, hi = rng(opts.seed or os.time()), opts.lo or -1, opts.hi or 1
  local buf = host_buffer(dtype, t.numel)
  local int = types.is_int(dtype)
  for i = 0, t.numel - 1 do
    local x = lo + (hi - lo) * r()
    buf[i] = int and math.floor(x + 0.5) or encode(dtype, x)
  end
  t:upload(buf)
  return t
end

--- 0, 1, 2, ... n-1 (times step) as a 1-D tensor.
function M.arange(n, dtype, step)
  local t = M.empty({ n }, dtype or types.f32)
  local buf = host_buffer(t.dtype, n)
  for i = 0, n - 1 do buf[i] = encode(t.dtype, i * (step or 1)) end
  t:upload(buf)
  return t
end

--- Copy a host buffer (FFI pointer of nbytes) into the tensor.
function Tensor:upload(buf)
  self.device:upload(self.ptr, buf, self.nbytes)
  return self
end

--- The tensor's contents in a new host FFI buffer (storage type).
function Tensor:to_host()
  local buf = host_buffer(self.dtype, self.numel)
  self.device:download(buf, self.ptr, self.nbytes)
  return buf
end

--- Readers of a host buffer by dtype: element i (0-based) as a Lua number
-- (NaNs canonical) and whether its bits are the dtype's poison.
local READERS = {
  f32 = function(buf, poison)
    local u = ffi.cast("uint32_t *", buf)
    return function(i) local b = u[i] return floats.from_f32_bits(b), b == poison end
  end,
  f64 = function(buf)
    local u = ffi.cast("uint32_t *", buf)
    return function(i)
      local lo, hi = u[2 * i], u[2 * i + 1]
      return floats.from_f64_bits(lo, hi), hi == 0x7ff80000 and lo == 0xdeaddead
    end
  end,
  f16 = function(buf, poison)
    return function(i) local b = buf[i] return floats.from_f16(b), b == poison end
  end,
  bf16 = function(buf, poison)
    return function(i) local b = buf[i] return floats.from_bf16(b), b == poison end
  end,
}

--- The reader of dtype's host buffer (integers and fp8 bits read as numbers).
local function reader(dtype, buf)
  local p = POISON[dtype.name]
  local make = READERS[dtype.name]
  if make then return make(buf, p[2]) end
  local box = ffi.new(M.storage(dtype) .. "[1]")
  ffi.copy(box, ffi.new("uint64_t[1]", p[2]), p[1])   -- the pattern's low bytes (little-endian)
  local poison = tonumber(box[0])
  return function(i) local v = tonumber(buf[i]) return v, v == poison end
end

--- The values as a flat Lua array and the 0-based indices whose bits are
-- still the poison pattern (candidates for "never written").
function Tensor:read()
  local read = reader(self.dtype, self:to_host())
  local out, poisoned = {}, {}
  for i = 0, self.numel - 1 do
    local v, p = read(i)
    out[i + 1] = v
    if p then poisoned[#poisoned + 1] = i end
  end
  return out, poisoned
end

--- Flat Lua array of the values (half types decoded to numbers; every NaN
-- as Lua's NaN).
function Tensor:values()
  return (self:read())
end

--- Nested Lua tables following the shape.
function Tensor:totable()
  local flat, pos = self:values(), 0
  local function build(depth)
    local out = {}
    for i = 1, self.shape[depth] do
      if depth == #self.shape then pos = pos + 1; out[i] = flat[pos] else out[i] = build(depth + 1) end
    end
    return out
  end
  return build(1)
end

--- Fill every byte with b.
function Tensor:fill_bytes(b)
  self.device:memset(self.ptr, b, self.nbytes)
  return self
end

--- Fill every element with the dtype's poison pattern (POISON): what
-- outputs hold before a launch, so compare can tell unwritten elements.
function Tensor:poison()
  local p = POISON[self.dtype.name]
  self.device:fill(self.ptr, p[2], p[1], self.numel)
  return self
end

--- Fill with a value.
function Tensor:fill(x)
  local buf = host_buffer(self.dtype, self.numel)
  local v = encode(self.dtype, x)
  for i = 0, self.numel - 1 do buf[i] = v end
  return self:upload(buf)
end

Tensor.__tostring = function(t)
  local d = {}
  for i, v in ipairs(t.shape) do d[i] = tostring(v) end
  return ("Tensor(%s, %s, %s)"):format(table.concat(d, "x"), t.dtype.name, t.device.kind)
end

--- The expected values of want (tensor, flat table or nested table).
local function expected(want)
  if getmetatable(want) == Tensor then return want:values() end
  if type(want) ~= "table" then error("tensor.compare: argument 2 (want) must be a tensor or a table of numbers; got " .. type(want), 3) end
  return type(want[1]) == "table" and flatten(want) or want
end

--- The message of a compare whose got and want differ in element count:
-- the shape, what want was taken as, and the two forms a table may take
-- (flat as values() gives, nested as totable() gives).
local function size_mismatch(got, want, n_got, n_want)
  local as = getmetatable(want) == Tensor and ("a tensor of shape %s"):format(table.concat(want.shape, "x"))
    or type(want[1]) == "table" and "a nested table (the totable() form), flattened"
    or "a flat table (the values() form)"
  return ("size mismatch: got %d elements (shape %s), expected %d from %s; want is a tensor, a flat table of every "
    .. "element (t:values()) or a table nested along the shape (t:totable())"):format(n_got, table.concat(got.shape, "x"),
    n_want, as)
end

--- Is element x (got) within tolerance of y (want)? Returns within, abs err.
local function close(x, y, atol, rtol)
  if x ~= x or y ~= y then return x ~= x and y ~= y, (x ~= x and y ~= y) and 0 or math.huge end
  local err = math.abs(x - y)
  return err <= atol + rtol * math.abs(y), err
end

--- The report's message: unwritten elements first, then other mismatches.
local function message(r, label)
  local parts = {}
  if r.unwritten > 0 then
    parts[1] = ("%d %s of %s %s never written (first at flat index %d)"):format(r.unwritten,
      r.unwritten == 1 and "element" or "elements", label, r.unwritten == 1 and "was" or "were", r.first_unwritten)
  end
  local other = r.bad - r.unwritten
  if other > 0 then
    parts[#parts + 1] = ("%s%d of %d elements differ; first at flat index %d: got %.9g, expected %.9g")
      :format(r.unwritten > 0 and "other than those, " or "", other, r.count, r.first, r.first_got, r.first_want)
  end
  if #parts == 0 then
    return ("all %d elements match; max abs err %.3g, max rel err %.3g"):format(r.count, r.max_abs, r.max_rel)
  end
  return table.concat(parts, "; ") .. ("; max abs err %.3g, max rel err %.3g"):format(r.max_abs, r.max_rel)
end

--- Compare got (a tensor) with want (tensor, flat table or nested table):
-- returns ok, report {max_abs, max_rel, first, bad, count, unwritten,
-- first_unwritten, message}. An element still holding the poison pattern
-- (see Tensor:poison) counts as never written: for floats always, for
-- integers when it differs from want. opts: atol, rtol, output (the
-- output's number, for the message).
function M.compare(got, want, opts)
  if not M.is(got) then error("tensor.compare: argument 1 (got) must be a tensor; got " .. type(got), 2) end
  if opts ~= nil and type(opts) ~= "table" then
    error("tensor.compare: argument 3 (opts) must be a table { atol =, rtol = } or nil; got " .. type(opts), 2)
  end
  opts = opts or {}
  local atol, rtol = opts.atol or 1e-5, opts.rtol or 1e-5
  if type(atol) ~= "number" or type(rtol) ~= "number" then
    error("tensor.compare: opts.atol and opts.rtol must be numbers", 2)
  end
  local a, poisoned = got:read()
  local b = expected(want)
  if #a ~= #b then return false, { message = size_mismatch(got, want, #a, #b) } end
  local is_float = not types.is_int(got.dtype)   -- floats and fp8: a NaN payload nothing computes
  local unwritten = {}
  for _, i in ipairs(poisoned) do
    if is_float or a[i + 1] ~= b[i + 1] then unwritten[i + 1] = true end
  end
  local r = { max_abs = 0, max_rel = 0, bad = 0, count = #a, unwritten = 0 }
  for i = 1, #a do
    local x, y = a[i], b[i]
    if type(y) ~= "number" then
      error(("tensor.compare: expected value %d is %s, not a number"):format(i, tostring(y)), 2)
    end
    if unwritten[i] then
      r.bad, r.unwritten = r.bad + 1, r.unwritten + 1
      r.first_unwritten = r.first_unwritten or i - 1
    else
      local within, err = close(x, y, atol, rtol)
      local rel = err / math.max(math.abs(y), 1e-30)
      if err > r.max_abs then r.max_abs = err end
      if rel > r.max_rel and err > 0 then r.max_rel = rel end
      if not within then
        r.bad = r.bad + 1
        if not r.first then r.first, r.first_got, r.first_want = i - 1, x, y end
      end
    end
  end
  r.message = message(r, opts.output and ("output " .. tostring(opts.output)) or "the output")
  return r.bad == 0, r
end

--- Is v a tensor?
function M.is(v) return getmetatable(v) == Tensor end

return M
