--- `kernel "name" { options..., body }`: kernel objects, their options,
-- specialization (template values and symbolic dims), the per-
-- specialization trace cache, and inspection (`k:ptx{}`, `k:module{}`).
local ffi = require "ffi"
local core = require "pyptx.core"
local trace = require "pyptx.trace"
local types = require "pyptx.types"
local reg = require "pyptx.reg"
local tile = require "pyptx.tile"
local smem = require "pyptx.smem"
local func = require "pyptx.func"
local env = require "pyptx.core.env"
local ptxparse = require "pyptx.ptxparse"
local limits = require "pyptx.limits"

local M = {}

local Kernel = {}
Kernel.__index = Kernel
M.Kernel = Kernel

local OPTIONS = {
  arch = "string", version = "any", in_specs = "table", out_specs = "table", grid = "any",
  block = "table", cluster = "table", smem = "number", raw_params = "table", extern_smem = "any",
  reqntid = "table", raw_directives = "table", params = "table", line_info = "boolean", maxnreg = "number",
  minnctapersm = "number", check_refs = "boolean", maxntid = "boolean", funcs = "table", address_size = "number",
  target_modifiers = "table",
}

-- Integer options and the values PTX and the hardware allow: { min, max, what }.
local INT_RANGES = {
  smem = { 0, 2 ^ 31 - 1, "a byte count" },
  maxnreg = { 1, 255, "a register count (.maxnreg)" },
  minnctapersm = { 1, 64, "a CTA count (.minnctapersm)" },
}

--- Check an integer option against INT_RANGES; address_size is 32 or 64.
local function check_int_option(k, v, name, where)
  local r = INT_RANGES[k]
  if k == "address_size" and v ~= 32 and v ~= 64 then
    error(("%s: kernel \"%s\": option 'address_size' must be 32 or 64, got %s"):format(where, name, tostring(v)), 0)
  end
  if r and (v ~= math.floor(v) or v < r[1] or v > r[2]) then
    error(("%s: kernel \"%s\": option '%s' must be an integer in [%d, %d] (%s), got %s")
      :format(where, name, k, r[1], r[2], r[3], tostring(v)), 0)
  end
end

-- The host runtime (pyptx.runtime, the layer above this one) registers how
-- a kernel launches and which arch "auto" means on the current device.
local host = nil

--- Register the runtime: { launch = fn(kernel, ...), current_arch = fn(), sass = fn(kernel, given, opts) }.
function M.use_runtime(runtime) host = runtime end

--- Is name a PTX identifier ptxas takes for an entry: [a-zA-Z][a-zA-Z0-9_$]*
-- or [_$][a-zA-Z0-9_$]+ (the ISA's followsym; `_` alone is refused)?
function M.is_identifier(name)
  return name:match("^%a[%w_$]*$") ~= nil or name:match("^[_$][%w_$]+$") ~= nil
end

--- The targets the core knows, as one line ("sm_50 sm_52 ... sm_121f").
function M.arch_list()
  local n = core.arch_list(nil, 0)
  local buf = ffi.new("char[?]", n + 1)
  core.arch_list(buf, n + 1)
  return ffi.string(buf, n)
end

--- "unknown arch 'X'; valid: <the core's list>" for an arch the core does
-- not know, nil for one it does.
function M.bad_arch(arch)
  local sm = ffi.new("int32_t[2]")
  if core.arch_parse(arch, sm, sm + 1) == 0 then return nil end
  return ("unknown arch '%s'; valid: %s"):format(arch, M.arch_list())
end

--- The arch "auto" resolves to: $LUAPTX_ARCH, else the current device's.
function M.auto_arch()
  local given = env.get("LUAPTX_ARCH")
  if given then
    local bad = M.bad_arch(given)
    if bad then error(("LUAPTX_ARCH=%s: %s"):format(given, bad), 0) end
    return given
  end
  if host then
    local found, arch = pcall(host.current_arch)   -- no device opens: the default
    if found then return arch end
  end
  return "sm_90a"
end

--- The oldest PTX ISA version (x10) that knows a target (family: 1 "a", 2 "f"):
-- the target table's (LPX_TARGETS in src/lpx_isa.def).
function M.min_version(sm, family)
  return core.arch_min_ptx(("sm_%d%s"):format(sm, ({ [0] = "", "a", "f" })[family]))
end

--- Default PTX ISA version (x10) for an sm: the first that covers our ISA
-- and knows the target.
function M.default_version(sm, family)
  return math.max(80, M.min_version(sm, family))
end

--- Parse version = {8, 3} | "8.3" | 8.3 into x10.
local function parse_version(v, where)
  local n
  if type(v) == "table" and type(v[1]) == "number" and (v[2] == nil or type(v[2]) == "number") then
    n = v[1] * 10 + (v[2] or 0)
  elseif type(v) == "string" then
    local a, b = v:match("^(%d+)%.(%d)$")
    if a then n = tonumber(a) * 10 + tonumber(b) end
  elseif type(v) == "number" then
    n = math.floor(v * 10 + 0.5)
  end
  local at = where and where .. ": " or ""
  if not n or n < 10 or n % 1 ~= 0 then
    local shown = type(v) == "table" and "a table without two numbers" or tostring(v)
    error(at .. "version must be {major, minor} or \"major.minor\", got " .. shown, 0)
  end
  if core.ptx_version_check(core.ctx, n) ~= 0 then error(at .. core.error_message(), 0) end
  return n
end
M.parse_version = parse_version

--- A {x, y, z} triple with defaults, or an error naming the option.
local function triple(v, name, where)
  if v == nil then return { 1, 1, 1 } end
  local out = { v[1] or 1, v[2] or 1, v[3] or 1 }
  for i = 1, 3 do
    if type(out[i]) ~= "number" or out[i] < 1 or out[i] ~= math.floor(out[i]) then
      error(("%s: %s[%d] must be a positive integer, got %s"):format(where, name, i, tostring(out[i])), 0)
    end
  end
  return out
end

--- Check options and build a kernel object; `where` is the defining line.
function M.new(name, opts, where)
  if type(opts) ~= "table" then error(where .. ": kernel \"" .. name .. "\" expects an options table { ..., function(...) end }", 0) end
  local body = opts[1] or opts.body
  if type(body) ~= "function" then error(where .. ": kernel \"" .. name .. "\" needs its body function as the table's first item", 0) end
  for k, v in pairs(opts) do
    if k ~= 1 and k ~= "body" then
      local want = OPTIONS[k]
      if not want then
        local names = {}
        for o in pairs(OPTIONS) do names[#names + 1] = o end
        table.sort(names)
        error(("%s: kernel \"%s\": unknown option '%s'; valid options: %s"):format(where, name, tostring(k), table.concat(names, ", ")), 0)
      end
      if want ~= "any" and type(v) ~= want then
        error(("%s: kernel \"%s\": option '%s' must be a %s, got %s"):format(where, name, k, want, type(v)), 0)
      end
      if want == "number" then check_int_option(k, v, name, where) end
    end
  end
  if not M.is_identifier(name) then
    error(where .. ": kernel name '" .. name .. "' is not a PTX identifier (a letter then letters, digits, _ or $; "
      .. "or _ or $ then at least one of those)", 0)
  end
  local k = setmetatable({
    name = name, body = body, where = where, arch = opts.arch or "sm_90a", version = opts.version,
    in_specs = opts.in_specs or {}, out_specs = opts.out_specs or {}, grid = opts.grid or { 1, 1, 1 },
    block = triple(opts.block, "block", where), cluster = triple(opts.cluster, "cluster", where),
    smem = opts.smem or 0, raw_params = opts.raw_params or {}, extern_smem = opts.extern_smem,
    reqntid = opts.reqntid, raw_directives = opts.raw_directives or {}, params = opts.params or {},
    line_info = opts.line_info ~= false, maxnreg = opts.maxnreg, minnctapersm = opts.minnctapersm,
    check_refs = opts.check_refs, funcs = opts.funcs or {}, address_size = opts.address_size or 64,
    target_modifiers = opts.target_modifiers,
    maxntid = opts.maxntid,   -- false: no .maxntid from block (transpiled kernels without one)
    cache = {},
  }, Kernel)
  if k.address_size ~= 32 and k.address_size ~= 64 then
    error(("%s: kernel \"%s\": address_size must be 32 or 64, got %s"):format(where, name, tostring(k.address_size)), 0)
  end
  for i, f in ipairs(k.funcs) do
    if not func.is(f) and type(f) ~= "string" then
      error(("%s: kernel \"%s\": funcs[%d] must be a pyptx.func or module-level PTX text, got %s"):format(where, name, i, tostring(f)), 0)
    end
  end
  for i, s in ipairs(k.in_specs) do
    if not tile.is_tile(s) then error(("%s: in_specs[%d] must be a Tile, got %s"):format(where, i, tostring(s)), 0) end
  end
  for i, s in ipairs(k.out_specs) do
    if not tile.is_tile(s) then error(("%s: out_specs[%d] must be a Tile, got %s"):format(where, i, tostring(s)), 0) end
  end
  return k
end

--- kernel "name" { ... }
function M.kernel(name)
  if type(name) ~= "string" then error("kernel: expected a name string: kernel \"name\" { ... }", 2) end
  local src, line = trace.where(2)
  local where = trace.format_where(src, line)
  return function(opts)
    local k = M.new(name, opts, where)
    k.src, k.line = src, line
    return k
  end
end

-- --------------------------------------------------------- specialization

--- Template defaults overlaid with the caller's values.
function Kernel:values(given)
  local v = {}
  for k, x in pairs(self.params) do v[k] = x end
  for k, x in pairs(given or {}) do v[k] = x end
  return v
end

--- A stable cache key for a set of values.
local function key_of(values, arch)
  local keys = {}
  for k in pairs(values) do keys[#keys + 1] = tostring(k) end
  table.sort(keys)
  local parts = { arch }
  for _, k in ipairs(keys) do parts[#parts + 1] = k .. "=" .. tostring(values[k]) end
  return table.concat(parts, ";")
end

--- The TensorSpec placeholders for every in/out spec under values.
function Kernel:tensor_specs(values)
  local out = {}
  local all = {}
  for j, s in ipairs(self.in_specs) do all[#all + 1] = { s, "in", j } end
  for j, s in ipairs(self.out_specs) do all[#all + 1] = { s, "out", j } end
  for i, pair in ipairs(all) do
    local shape, missing = pair[1]:resolve(values)
    if not shape then
      error(("%s: kernel \"%s\": dimension %s of %s spec %d is not bound; pass it, e.g. k:ptx{%s = 1024} (luaptx ptx/check/sass/compile/profile: -D %s=1024)")
        :format(self.where, self.name, missing, pair[2], pair[3], missing, missing), 0)
    end
    out[i] = tile.tensor_spec(self.name, i, pair[1], shape, pair[2])
  end
  return out
end

--- Declare params and entry directives for a specialization.
local function declare(k, t, tensors)
  for _, s in ipairs(tensors) do
    if core.func_param(t.mod, t.fn, s.param, types.u64.id, 0, 0) < 0 then error(core.error_message(), 0) end
  end
  func.declare_params(t, k.raw_params, k.where, "raw_params")
  local dirs = {}
  if k.reqntid then dirs[#dirs + 1] = ".reqntid " .. table.concat(k.reqntid, ", ")
  elseif k.maxntid ~= false then dirs[#dirs + 1] = ".maxntid " .. table.concat(k.block, ", ") end
  if k.minnctapersm then
    dirs[#dirs + 1] = ".minnctapersm " .. k.minnctapersm
    local threads = k.reqntid or (k.maxntid ~= false and k.block) or nil
    threads = threads and threads[1] * (threads[2] or 1) * (threads[3] or 1)
    local w = limits.minnctapersm_warning(k.name, t.arch, k.minnctapersm, threads)
    if w then io.stderr:write(k.where, ": warning: ", w, "\n") end
  end
  if k.maxnreg then dirs[#dirs + 1] = ".maxnreg " .. k.maxnreg end
  if k.cluster[1] * k.cluster[2] * k.cluster[3] > 1 then
    dirs[#dirs + 1] = ".reqnctapercluster " .. table.concat(k.cluster, ", ")
  end
  for _, d in ipairs(k.raw_directives) do
    local args = type(d[2]) == "table" and table.concat(d[2], ", ") or tostring(d[2] or "")
    dirs[#dirs + 1] = d[1] .. (args ~= "" and (" " .. args) or "")
  end
  for _, d in ipairs(dirs) do core.func_directive(t.mod, t.fn, d) end
end

--- Resolve the grid option (table or function of the values).
local function resolve_grid(k, values)
  local g = k.grid
  if type(g) == "function" then g = g(values) end
  if type(g) == "number" then g = { g } end
  if type(g) ~= "table" then error(k.where .. ": grid must be a table or a function returning one", 0) end
  return triple(g, "grid", k.where)
end

--- Trace this kernel's entry into trace t (after the module's functions).
function Kernel:trace_into(t, values, tensors)
  trace.open(t, self.name, true, 1)
  declare(self, t, tensors)
  local args = {}
  for i, s in ipairs(tensors) do args[i] = s end
  args[#tensors + 1] = values
  self.body(unpack(args, 1, #tensors + 1))
  if t.at_where then
    error(t.at_where .. ": ptx.at guards nothing; call the instruction through it: ptx.at(p).inst.op(...)", 0)
  end
  reg.warn_unused_preds(t)
  t.dynamic_smem = smem.finish(t, self.extern_smem or self.smem > smem.STATIC_LIMIT)
  if self.check_refs ~= false and core.func_check_refs(t.mod, t.fn) < 0 then error(core.error_message(), 0) end
  -- a dynamic buffer is at least the smem option, also when nothing was allocated
  if self.extern_smem or self.smem > smem.STATIC_LIMIT or t.dynamic_smem > 0 then
    t.dynamic_smem = math.max(t.dynamic_smem, self.smem)
  end
  return t.fn
end

-- The collector's pause while a kernel traces (Lua's default is 200: a
-- cycle starts once the heap has doubled). Tracing makes short-lived
-- tables by the megabyte (operands, registers, keyword tables); waiting
-- for the heap to grow fourfold marks the same live data half as often.
-- callgrind, unrolled Blackwell GEMM: 4% fewer instructions per trace,
-- about 250 KB more peak heap.
local TRACE_GC_PAUSE = 400

--- Trace one specialization into a module and its PTX text.
function Kernel:trace(values, arch)
  local sm = ffi.new("int32_t[2]")
  if core.arch_parse(arch, sm, sm + 1) < 0 then
    error(("%s: kernel \"%s\": unknown arch '%s'; use e.g. sm_80, sm_90a, sm_100a or \"auto\""):format(self.where, self.name, arch), 0)
  end
  local version = self.version and parse_version(self.version, self.where) or M.default_version(sm[0], sm[1])
  if version < M.min_version(sm[0], sm[1]) then
    error(("%s: kernel \"%s\": PTX ISA %d.%d does not know %s; use version %d.%d or newer"):format(self.where, self.name,
      math.floor(version / 10), version % 10, arch, math.floor(M.min_version(sm[0], sm[1]) / 10), M.min_version(sm[0], sm[1]) % 10), 0)
  end
  local tensors = self:tensor_specs(values)
  local t = trace.begin { arch = arch, version = version, src = self.src, line = self.line, address_size = self.address_size,
    target_modifiers = self.target_modifiers }
  local pause = collectgarbage("setpause", TRACE_GC_PAUSE)
  local ok, err = xpcall(function()
    for _, f in ipairs(self.funcs) do
      if type(f) == "string" then ptxparse.append_module(f) else f:trace_into(t) end
    end
    self:trace_into(t, values, tensors)
  end, trace.relocate)
  collectgarbage("setpause", pause)   -- also after a failed trace: xpcall returned
  trace.finish()
  if not ok then error(err, 0) end
  local opts = ffi.new("lpx_emit_opts", { self.line_info and 1 or 0, 1 })
  local text, len = ffi.new("const char*[1]"), ffi.new("size_t[1]")
  if core.emit(t.mod, opts, text, len) < 0 then error(core.error_message(), 0) end
  return {
    kernel = self, values = values, arch = arch, version = version, module = t.mod, fn = t.fn,
    ptx = ffi.string(text[0], len[0]), instructions = t.count, tensors = tensors,
    grid = resolve_grid(self, values), block = self.block, cluster = self.cluster,
    dynamic_smem = t.dynamic_smem, static_smem = t.dynamic_smem == 0 and t.smem_size or 0,
    tma = t.tma,  -- tensor maps declared by X:tma_desc (pyptx.async), packed at launch
  }
end

--- The specialization for the given values (traced once, then cached).
function Kernel:specialize(given)
  local values = self:values(given)
  local arch = values.arch or self.arch
  values.arch = nil
  if arch == "auto" then arch = M.auto_arch() end
  local key = key_of(values, arch)
  local s = self.cache[key]
  if not s then
    s = self:trace(values, arch)
    self.cache[key] = s
  end
  return s
end

--- PTX text of a specialization: k:ptx{M = 4096, BM = 128}.
function Kernel:ptx(given)
  return self:specialize(given).ptx
end

--- The traced IR as Lua tables: { version, target, entry = { name,
-- params, directives, instructions = { "mov.u32 %r1, %tid.x;", ... } } }.
function Kernel:module(given)
  local s = self:specialize(given)
  local insts = {}
  local text, len = ffi.new("const char*[1]"), ffi.new("size_t[1]")
  local i = 0
  while core.inst_text(s.module, s.fn, i, text, len) == 0 do
    insts[#insts + 1] = (ffi.string(text[0], len[0]):gsub("^%s+", ""):gsub("%s+$", ""):gsub(" \t", " "))
    i = i + 1
  end
  local params = {}
  for _, tspec in ipairs(s.tensors) do params[#params + 1] = { name = tspec.param, type = "u64" } end
  for _, p in ipairs(self.raw_params) do params[#params + 1] = { name = p[2], type = tostring(p[1]) } end
  return {
    version = ("%d.%d"):format(math.floor(s.version / 10), s.version % 10), target = s.arch,
    address_size = self.address_size, entry = { name = self.name, params = params, body = insts },
    grid = s.grid, block = s.block, cluster = s.cluster, dynamic_smem = s.dynamic_smem,
  }
end

--- The machine code of a specialization under the Lua lines it came from,
-- and the SASS instruction counts by class per Lua line: k:sass{M = 4096}.
-- Returns the text and the listing table (pyptx.runtime.sass, which needs
-- nvdisasm and a PTX compiler).
function Kernel:sass(given, opts)
  if not (host and host.sass) then
    error(("kernel \"%s\": k:sass needs pyptx.runtime; require \"pyptx\" (or \"pyptx.runtime\") first"):format(self.name), 2)
  end
  return host.sass(self, given, opts)
end

--- k(x, w[, opts]): launching lives in the runtime (pyptx.runtime), which
-- registers itself when loaded (require "pyptx" loads it).
Kernel.__call = function(self, ...)
  if not host then
    error(("kernel \"%s\": launching needs pyptx.runtime; require \"pyptx\" (or \"pyptx.runtime\") first, "
      .. "or inspect the kernel with k:ptx{}"):format(self.name), 2)
  end
  return host.launch(self, ...)
end

Kernel.__tostring = function(k) return ("kernel \"%s\" (%s)"):format(k.name, k.arch) end

--- Is v a kernel object?
function M.is(v) return getmetatable(v) == Kernel end

return M
