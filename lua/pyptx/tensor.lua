--- Tensors: device memory with a shape, a dtype and strides, created from
-- Lua tables, FFI arrays or fill helpers, read back into FFI buffers or
-- tables, and compared with a tolerance that reports the first mismatch.
local ffi = require "ffi"
local types = require "pyptx.types"
local half = require "pyptx.half"

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
  local s = STORAGE[dtype.name]
  if not s then error("tensor: dtype " .. dtype.name .. " is not supported for tensors", 3) end
  return s
end

--- Encode a Lua number into a dtype's storage value (half types: RNE bits).
local function encode(dtype, x)
  if dtype == types.f16 then return half.to_f16(x) end
  if dtype == types.bf16 then return half.to_bf16(x) end
  return x
end
M.encode = encode

--- Decode a storage value into a Lua number.
local function decode(dtype, v)
  if dtype == types.f16 then return half.from_f16(v) end
  if dtype == types.bf16 then return half.from_bf16(v) end
  return tonumber(v)
end
M.decode = decode

--- Row-major strides (in elements) of a shape.
local function row_major(shape)
  local strides, s = {}, 1
  for i = #shape, 1, -1 do strides[i] = s; s = s * shape[i] end
  return strides
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
  return shape, n
end

--- An uninitialised tensor on device dev (default: the current device).
function M.empty(shape, dtype, dev)
  local n
  shape, n = check_shape(shape)
  if not types.is(dtype) then error("tensor.empty: dtype must be a type (pyptx.types.f32, ...)", 2) end
  dev = dev or require("pyptx.runtime").device()
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
  for i = 1, #values do buf[i - 1] = encode(dtype, values[i]) end
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

--- Flat Lua array of the values (half types decoded to numbers).
function Tensor:values()
  local buf, out = self:to_host(), {}
  for i = 0, self.numel - 1 do out[i + 1] = decode(self.dtype, buf[i]) end
  return out
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

--- Fill every byte with b (e.g. 0xff poisons floats with NaN before a launch).
function Tensor:fill_bytes(b)
  self.device:memset(self.ptr, b, self.nbytes)
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

--- Compare got (a tensor) with want (tensor, flat table or nested table):
-- returns ok, report {max_abs, max_rel, first, bad, count, message}.
function M.compare(got, want, opts)
  opts = opts or {}
  local atol, rtol = opts.atol or 1e-5, opts.rtol or 1e-5
  local a = got:values()
  local b = getmetatable(want) == Tensor and want:values() or (type(want[1]) == "table" and flatten(want) or want)
  if #a ~= #b then
    return false, { message = ("size mismatch: got %d elements, expected %d"):format(#a, #b) }
  end
  local r = { max_abs = 0, max_rel = 0, bad = 0, count = #a }
  for i = 1, #a do
    local x, y = a[i], b[i]
    local err = math.abs(x - y)
    if x ~= x or y ~= y then err = (x ~= x and y ~= y) and 0 or math.huge end
    local rel = err / math.max(math.abs(y), 1e-30)
    if err > r.max_abs then r.max_abs = err end
    if rel > r.max_rel and err > 0 then r.max_rel = rel end
    local within = err <= atol + rtol * math.abs(y)
    if not within then
      r.bad = r.bad + 1
      if not r.first then r.first, r.first_got, r.first_want = i - 1, x, y end
    end
  end
  if r.bad > 0 then
    r.message = ("%d of %d elements differ; first at flat index %d: got %.9g, expected %.9g; max abs err %.3g, max rel err %.3g")
      :format(r.bad, r.count, r.first, r.first_got, r.first_want, r.max_abs, r.max_rel)
  else
    r.message = ("all %d elements match; max abs err %.3g, max rel err %.3g"):format(r.count, r.max_abs, r.max_rel)
  end
  return r.bad == 0, r
end

--- Is v a tensor?
function M.is(v) return getmetatable(v) == Tensor end

return M
