--- What the specs share: running programs (never through a shell), the
-- luaptx binary, temporary files, the emulator device, seeded random
-- inputs, and the toolkit checks that mark a test pending with its reason
-- instead of passing without running.
-- .busted loads it as busted's helper (so temporaries are removed after
-- every test); specs use it with `local H = require "spec.helpers"`.
-- (One instance: while `require` runs this file package.loaded holds a
-- sentinel, so only a table counts as already loaded.)
if type(package.loaded["spec.helpers"]) == "table" then return package.loaded["spec.helpers"] end
local ffi = require "ffi"
local bit = require "bit"
local sys = require "pyptx.core.sys"
local toolkit = require "pyptx.runtime.toolkit"
local lfs = require "lfs"

local M = {}
package.loaded["spec.helpers"] = M

--- The working directory (the repository root when busted runs from there).
local function cwd()
  local res = assert(sys.run { "pwd" })
  return (res.stdout:gsub("\n$", ""))
end
M.ROOT = cwd()

--- The luaptx binary under test, as an absolute path.
M.BIN = os.getenv("LUAPTX_BIN") or "build/luaptx"
if M.BIN:sub(1, 1) ~= "/" then M.BIN = M.ROOT .. "/" .. M.BIN:gsub("^%./", "") end

--- Mark the running test pending with a reason (busted's pending, found in
-- the calling spec's environment). Never returns. Call it as a statement
-- (`H.pending(why) return`), never as `return H.pending(why)` from a test
-- function: that tail call drops the frame whose environment holds pending.
function M.pending(reason)
  for level = 2, 8 do
    local ok, env = pcall(getfenv, level)
    if ok and type(env) == "table" and type(env.pending) == "function" then return env.pending(reason) end
  end
  error("spec.helpers.pending called outside a busted test: " .. reason, 2)
end

--- Run argv (a list of strings) with sys.run's options; errors when the
-- program cannot start. Returns { status, stdout, stderr, timed_out }.
function M.run(argv, opts)
  local res, err = sys.run(argv, opts)
  if not res then error(err, 2) end
  return res
end

--- Run the luaptx binary with args (a list); opts as for run.
-- Returns stdout, stderr, status (stdout holds both when opts.merge).
function M.luaptx(args, opts)
  local argv = { M.BIN }
  for _, a in ipairs(args) do argv[#argv + 1] = tostring(a) end
  local res = M.run(argv, opts)
  return res.stdout, res.stderr, res.status
end

--- The path of ptxas, or the test goes pending with the reason.
function M.need_ptxas()
  local exe = toolkit.find("ptxas")
  if exe then return exe end
  return M.pending(toolkit.missing_message("ptxas"))
end

--- The path of a toolkit program (nvcc, nvdisasm, ...), or the test goes pending.
function M.need_tool(name)
  local exe = toolkit.find(name)
  if exe then return exe end
  return M.pending(toolkit.missing_message(name))
end

--- The PTX text of a string, a kernel (k:ptx()) or a specialization (s.ptx).
local function ptx_text(x)
  if type(x) == "string" then return x end
  if type(x) == "table" and type(x.ptx) == "string" then return x.ptx end
  return x:ptx()
end

-- ptxas's results by (ptxas, arch, options, text), in memory and, across
-- spec files and runs, under $LUAPTX_CACHE_DIR/spec-ptxas (ctest sets it):
-- several specs assemble the same corpus files, ptxas takes seconds on the
-- large ones, and one check (a 2^30-register kernel) makes it fault in
-- 8 GB. A key is the content hash of ptxas's version, the arch, the
-- options and the text, so a changed text or toolkit runs ptxas again;
-- ptxas is the oracle either way, asked once per input.
local remembered, ptxas_version = {}, nil

--- The cache key of a ptxas run: (ptxas and its version, kind, arch, text).
local function ptxas_key(ptxas, kind, arch, text)
  if not ptxas_version then ptxas_version = ptxas .. "\0" .. M.run({ ptxas, "--version" }).stdout end
  local core = require "pyptx.core"
  local key_text = table.concat({ ptxas_version, kind, arch, text }, "\0")
  local hash = ffi.new("char[33]")
  core.content_hash(key_text, #key_text, hash)
  return ffi.string(hash)
end

--- The on-disk cache's file for key and suffix, or nil without a usable
-- (private) $LUAPTX_CACHE_DIR.
local function ptxas_cache_file(key, suffix)
  local root = os.getenv("LUAPTX_CACHE_DIR")
  local dir = root and root ~= "" and root .. "/spec-ptxas"
  if dir and not (pcall(sys.mkdirs, dir) and sys.private_dir(dir)) then return nil end
  return dir and dir .. "/" .. key .. suffix
end

-- A verdict file: this header, "ok" or "refused", a newline, ptxas's log.
local VERDICT = "luaptx spec-ptxas verdict 1\n"

--- Run ptxas on PTX text (or a kernel or specialization) for arch (default
-- sm_90a); the PTX of a failure is not kept. Pending without ptxas, so call
-- it after a test's other checks. Returns ok, report, log; a run without
-- opts.output is remembered (above) and its verdict read back next time.
function M.ptxas(ptx_or_kernel, arch, opts)
  if not toolkit.find("ptxas") then return M.pending(toolkit.missing_message("ptxas")) end
  local o = { keep_failed = false }
  for k, v in pairs(opts or {}) do o[k] = v end
  arch = arch or "sm_90a"
  local text = ptx_text(ptx_or_kernel)
  if o.output then return toolkit.ptxas(text, arch, o) end
  local key = ptxas_key(M.need_ptxas(), "verdict " .. tostring(o.lineinfo ~= false), arch, text)
  local file = ptxas_cache_file(key, ".log")
  local saved = remembered[key] or (file and M.read(file))
  local status, log
  if saved then status, log = saved:match("^" .. VERDICT:gsub("%p", "%%%0") .. "(%a+)\n(.*)$") end
  if status == "ok" or status == "refused" then
    remembered[key] = saved
    return status == "ok", status == "ok" and toolkit.parse_report(log) or nil, log
  end
  local ok, report, out = toolkit.ptxas(text, arch, o)
  if ok or not o.keep_failed then   -- a kept failure's log names its temporary file
    remembered[key] = VERDICT .. (ok and "ok" or "refused") .. "\n" .. out
    if file then sys.write_file(file, remembered[key]) end
  end
  return ok, report, out
end

--- The cubin ptxas makes of PTX text for arch (through the cache above),
-- or false and ptxas's log; pending without ptxas.
function M.cubin(text, arch)
  local ptxas = M.need_ptxas()
  local key = ptxas_key(ptxas, "cubin", arch, text)
  if remembered[key] then return remembered[key][1], remembered[key][2] end
  local file = ptxas_cache_file(key, ".cubin")
  local bin = file and M.read(file)
  if not bin or #bin == 0 then
    local tmp = M.temp_dir()
    M.write(tmp .. "/in.ptx", text)
    local res = M.run({ ptxas, "-arch=" .. arch, tmp .. "/in.ptx", "-o", tmp .. "/out.cubin" }, { merge = true })
    bin = M.read(tmp .. "/out.cubin")
    if res.status ~= 0 or not bin or #bin == 0 then
      remembered[key] = { false, res.stdout }
      return false, res.stdout
    end
    if file then sys.write_file(file, bin) end
  end
  remembered[key] = { bin }
  return bin
end

--- Assemble PTX text (or a kernel or specialization) with ptxas for arch
-- and assert it is accepted; pending without ptxas, so call it after a
-- test's other checks. Returns ptxas's report.
function M.assert_ptxas(ptx_or_kernel, arch, opts)
  if not toolkit.find("ptxas") then return M.pending(toolkit.missing_message("ptxas")) end
  local ok, report, log = M.ptxas(ptx_or_kernel, arch, opts)
  assert(ok, log)
  return report
end

--- Assert that ptxas refuses PTX text for arch; pending without ptxas.
-- Returns ptxas's log.
function M.assert_ptxas_refuses(ptx_or_kernel, arch, opts)
  if not toolkit.find("ptxas") then return M.pending(toolkit.missing_message("ptxas")) end
  local ok, _, log = M.ptxas(ptx_or_kernel, arch, opts)
  assert(not ok, "ptxas accepted PTX it was expected to refuse")
  return log
end

-- Temporaries made during a test are removed when it ends; those made
-- outside a test (a describe body, before_each, setup) when its file ends.
local made = { test = {}, file = {} }
local scope = "file"

--- Remember a temporary path for removal at the end of the current scope.
local function track(path)
  local list = made[scope]
  list[#list + 1] = path
  return path
end

--- Remove the temporaries of one scope (newest first).
local function remove_all(list)
  for i = #list, 1, -1 do
    pcall(sys.remove_tree, list[i])
    list[i] = nil
  end
end

--- A fresh private temporary directory; removed when the test ends (or
-- the spec file, when made outside a test).
function M.temp_dir()
  return track(sys.temp_dir())
end

--- A fresh private temporary file holding text; removed like temp_dir's.
function M.temp_file(text, suffix)
  return track(sys.temp_file(text or "", suffix))
end

--- Remove the temporaries the running test made so far (busted's helper
-- hook below does it when each test ends anyway).
function M.cleanup()
  remove_all(made.test)
end

--- With busted's API at hand, remove temporaries at the end of each test and file.
local ok_busted, busted = pcall(require, "busted")
if ok_busted and type(busted) == "table" and type(busted.subscribe) == "function" then
  busted.subscribe({ "test", "start" }, function() scope = "test" return nil, true end)
  busted.subscribe({ "test", "end" }, function() remove_all(made.test) scope = "file" return nil, true end)
  busted.subscribe({ "file", "end" }, function() remove_all(made.file) return nil, true end)
end

--- Run fn with environment variables edited ({ NAME = "value" | false to
-- unset }), restoring them afterwards even when fn errors. Returns fn's results.
ffi.cdef [[
int setenv(const char *name, const char *value, int overwrite);
int unsetenv(const char *name);
]]
function M.with_env(edits, fn)
  local saved = {}
  local function set(name, value)
    if value then ffi.C.setenv(name, value, 1) else ffi.C.unsetenv(name) end
  end
  for name, value in pairs(edits) do
    saved[name] = os.getenv(name) or false
    set(name, value)
  end
  local res = { pcall(fn) }
  for name, value in pairs(saved) do set(name, value) end
  if not res[1] then error(res[2], 0) end
  return unpack(res, 2, table.maxn(res))
end

--- The source of the nearest calling function outside this file (the spec file).
local HERE = debug.getinfo(1, "S").source
local function caller_file()
  for level = 3, 20 do
    local info = debug.getinfo(level, "S")
    if not info then break end
    if info.source ~= HERE and info.what ~= "C" then return info.source end
  end
  return "?"
end

--- The device of kind opened for the calling spec file (runtime.open errors pass through).
local devices = {}
local function device_for(kind)
  local key = caller_file() .. "\0" .. kind
  if not devices[key] then devices[key] = require("pyptx.runtime").open(kind) end
  return devices[key]
end

--- A device of kind ("emu" by default), opened once per spec file.
function M.device(kind) return device_for(kind or "emu") end

--- The CPU emulator device, opened once per spec file.
function M.emu() return device_for("emu") end

--- The error tracing body fn in a kernel raises, or nil when it traces.
-- opts: the arch (a string; default sm_90a) or the kernel's options
-- ({ arch =, version =, check_refs =, ... }).
function M.trace_error(fn, opts)
  local o = type(opts) == "table" and opts or { arch = opts }
  local k = { fn }
  for key, v in pairs(o) do k[key] = v end
  k.arch = k.arch or "sm_90a"
  local ok, err = pcall(function() return require("pyptx").kernel "t" (k):ptx() end)
  return not ok and tostring(err) or nil
end

--- Run fn with io.stderr captured: fn's first result and what it wrote
-- there (an error in fn fails the test).
function M.capture_stderr(fn)
  local saved, buf = io.stderr, {}
  rawset(io, "stderr", { write = function(self, ...) for _, s in ipairs { ... } do buf[#buf + 1] = tostring(s) end return self end })
  local ok, res = pcall(fn)
  rawset(io, "stderr", saved)
  assert(ok, res)
  return res, table.concat(buf)
end

--- An example's m.main(args) with print captured: main's result and the
-- printed text (lines joined by newlines); an error in main is raised as it is.
function M.run_main(m, args)
  local lines, saved = {}, _G.print
  _G.print = function(...)
    local parts = {}
    for i = 1, select("#", ...) do parts[i] = tostring((select(i, ...))) end
    lines[#lines + 1] = table.concat(parts, "\t")
  end
  local ok, rc = pcall(m.main, args)
  _G.print = saved
  if not ok then error(rc, 0) end
  return rc, table.concat(lines, "\n")
end

--- An emulator on the adversarial schedule of seed, opened once per spec
-- file and seed.
function M.adversarial(seed)
  local key = "emu\0" .. tostring(seed)
  local dev = devices[caller_file() .. "\0" .. key]
  if not dev then
    dev = require("pyptx.runtime").open("emu")
    dev:set_option("schedule", seed)
    devices[caller_file() .. "\0" .. key] = dev
  end
  return dev
end

--- An example's m.check(...) with dev as the current device (the spec
-- file's emulator again after): true or false, the report's message and
-- the report; or false and the error's text when it raises.
function M.check_on(dev, m, ...)
  local runtime = require "pyptx.runtime"
  runtime.use(dev)
  local res = { pcall(m.check, ...) }
  runtime.use(device_for("emu"))
  if not res[1] then return false, tostring(res[2]) end
  return res[2], res[3].message, res[3]
end

-- ------------------------------------------- planted bugs, source lines

--- The line this is called from.
function M.here() return debug.getinfo(2, "l").currentline end

--- The 1-based line of the first occurrence of text in src.
function M.line_of(src, text)
  local at = assert(src:find(text, 1, true), text)
  return select(2, src:sub(1, at):gsub("\n", "")) + 1
end

--- Escape text for a Lua pattern.
function M.lit(text) return (text:gsub("[%^%$%(%)%%%.%[%]%*%+%-%?]", "%%%0")) end

--- The module at path loaded afresh with a bug planted when old is given:
-- old becomes new (as many lines, so other lines keep their numbers);
-- old must occur exactly once, or nth picks its nth occurrence. Returns
-- the module and its source as written.
function M.planted(path, old, new, nth)
  local src = assert(M.read(path))
  local patched = src
  if old then
    local at = 0
    for _ = 1, nth or 1 do at = assert(src:find(old, at + 1, true), ("no %s #%d in %s"):format(old, nth or 1, path)) end
    assert(nth or not src:find(old, at + 1, true), "more than one " .. old .. " in " .. path)
    patched = src:sub(1, at - 1) .. (new or "") .. src:sub(at + #old)
  end
  return assert(load(patched, "@" .. path))(), src
end

--- The module at path loaded afresh (edit = { old, new } planted in it,
-- or nil) while the library module lib_module (file lib_path) is loaded
-- afresh with lib_edit = { old, new } planted (kept as loaded when nil).
-- Returns the module, its source and the library's (nil when kept).
function M.planted_on(path, edit, lib_module, lib_path, lib_edit)
  local saved, lib_src = package.loaded[lib_module], nil
  if lib_edit then package.loaded[lib_module], lib_src = M.planted(lib_path, lib_edit[1], lib_edit[2]) end
  local ok, m, src = pcall(M.planted, path, edit and edit[1], edit and edit[2])
  package.loaded[lib_module] = saved
  if not ok then error(m, 0) end
  return m, src, lib_src
end

-- ------------------------------------------------ the nvcc differentials

--- The device the differential specs run on: the emulator, or the one
-- $LUAPTX_DIFF_DEVICE names (cuda: check the references on hardware).
function M.diff_device() return device_for(os.getenv("LUAPTX_DIFF_DEVICE") or "emu") end

--- The module of spec/fixtures/ptx/nvcc/<name>_<arch>.ptx (nvcc's output).
function M.nvcc_ptx(name, arch)
  return require("pyptx").load_ptx(("spec/fixtures/ptx/nvcc/%s_%s.ptx"):format(name, arch))
end

--- A 1-D tensor of dtype holding vals on the differential's device.
function M.diff_input(vals, dtype)
  return require("pyptx.runtime.tensor").from_table(vals, dtype, { #vals }, M.diff_device())
end

--- A 1-D output of n elements of dtype, every byte 0xff (so an element
-- the kernel does not write never matches a reference).
function M.diff_output(n, dtype)
  local t = require("pyptx.runtime.tensor").empty({ n }, dtype, M.diff_device())
  t:fill_bytes(0xff)
  return t
end

--- The CUDA device, opened once per spec file; or nil and the pending
-- reason ("needs a GPU: ...") when there is no driver or no GPU.
function M.gpu()
  local ok, dev = pcall(device_for, "cuda")
  if ok then return dev end
  return nil, "needs a GPU: " .. tostring(dev):gsub("\n.*", ""):gsub("^[^:\n]+:%d+: ", "")
end

--- A u32 from a Lua number holding a signed 32-bit pattern.
local function u32(x) return x % 4294967296 end
M.u32 = u32

--- A xorshift generator of signed 32-bit integers (never 0) from a seed.
function M.rng(seed)
  local s = bit.tobit(seed * 2654435761 + 1)
  if s == 0 then s = 1 end
  return function()
    s = bit.bxor(s, bit.lshift(s, 13))
    s = bit.bxor(s, bit.rshift(s, 17))
    s = bit.bxor(s, bit.lshift(s, 5))
    return s
  end
end

--- n random non-zero s32 values; edges (a list) are placed at the front; fn
-- (optional) maps each random value.
function M.rand_s32(n, seed, edges, fn)
  local r, t = M.rng(seed), {}
  for i = 1, n do t[i] = edges and edges[i] or (fn and fn(r()) or r()) end
  return t
end

--- n random u32 values (odd and even, never all zero) from math.random seeded with seed.
function M.rand_u32(n, seed)
  math.randomseed(seed)
  local t = {}
  for i = 1, n do t[i] = math.random(1, 0x7fffffff) * 2 + math.random(0, 1) end
  return t
end

--- n random numbers uniform in [lo, hi), never zero, from math.random seeded with seed.
function M.rand_uniform(n, seed, lo, hi)
  math.randomseed(seed)
  local t = {}
  for i = 1, n do
    local x = lo + (hi - lo) * math.random()
    t[i] = x == 0 and 0.5 or x
  end
  return t
end

local f32box = ffi.new("float[1]")
--- x rounded to the nearest f32.
function M.f32(x) f32box[0] = x return f32box[0] end

--- n random f32 values with exponents in [-lo, hi] (any sign), edges in front.
function M.rand_f32(n, seed, edges, lo, hi)
  local r, t = M.rng(seed), {}
  for i = 1, n do
    if edges and edges[i] ~= nil then t[i] = M.f32(edges[i])
    else
      local m = 1 + (u32(r()) % 8388608) / 8388608
      local e = u32(r()) % (lo + hi + 1) - lo
      t[i] = M.f32((r() < 0 and -1 or 1) * m * 2 ^ e)
    end
  end
  return t
end

--- n random doubles with exponents in [-lo, hi] (any sign), edges in front.
function M.rand_f64(n, seed, edges, lo, hi)
  local r, t = M.rng(seed), {}
  for i = 1, n do
    if edges and edges[i] ~= nil then t[i] = edges[i]
    else
      local m = 1 + (u32(r()) % 2 ^ 32) / 2 ^ 32 + (u32(r()) % 2 ^ 20) / 2 ^ 52
      t[i] = (r() < 0 and -1 or 1) * m * 2 ^ (u32(r()) % (lo + hi + 1) - lo)
    end
  end
  return t
end

--- Read a whole file (nil when missing).
function M.read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

--- Write a whole file.
function M.write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
  return path
end

--- The sorted names of the files in dir whose names match a Lua pattern.
function M.list(dir, pattern)
  local out = {}
  for name in lfs.dir(dir) do
    if name ~= "." and name ~= ".." and (not pattern or name:match(pattern)) then out[#out + 1] = dir .. "/" .. name end
  end
  table.sort(out)
  return out
end

--- Every file below dir (recursively) whose name matches pattern, sorted.
function M.find(dir, pattern)
  local out = {}
  local function walk(d)
    for name in lfs.dir(d) do
      local p = d .. "/" .. name
      local mode = name ~= "." and name ~= ".." and lfs.symlinkattributes(p, "mode")
      if mode == "directory" then walk(p)
      elseif mode == "file" and (not pattern or name:match(pattern)) then out[#out + 1] = p end
    end
  end
  walk(dir)
  table.sort(out)
  return out
end

return M
