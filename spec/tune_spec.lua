-- Autotuning on the emulator: every failure of one config recorded as its
-- failed row and the sweep goes on, the per-config cache reused, private
-- and safe under concurrent shards, sharding and merge, the reports, and a
-- sweep with no CUDA toolkit.
local H = require "spec.helpers"
local ffi = require "ffi"
pcall(ffi.cdef, "int setenv(const char *, const char *, int); int unsetenv(const char *);")
local lfs = require "lfs"
local pyptx = require "pyptx"
local tune = require "pyptx.tools.tune"
local report = require "pyptx.tools.tune_report"
local tensor = require "pyptx.runtime.tensor"
local runtime = require "pyptx.runtime"
local compile = require "pyptx.runtime.compile"
local toolkit = require "pyptx.runtime.toolkit"
local sys = require "pyptx.core.sys"
local core = require "pyptx.core"
local kernel, reg, ptx, Tile = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.Tile
local f32, u32 = pyptx.types.f32, pyptx.types.u32

local N = 1024
local SCALE = H.ROOT .. "/examples/tune/scale_sweep.lua"

--- A sweep whose MODE plants a failure: "wrong" (a wrong result), "badptx"
-- (an instruction ptxas rejects), "throws" (a build error), "unlinked" (a
-- call to an undefined function: a compile log without the word "error"
-- from ptxas), "unwritten" (half the grid: outputs never written).
local function sweep(name, blocks, modes)
  return {
    name = name,
    space = { BLOCK = blocks or { 64, 128, 256 }, MODE = modes or { "ok", "wrong", "badptx", "throws" } },
    build = function(cfg)
      if cfg.MODE == "throws" then error("this config cannot be built", 0) end
      return kernel "tuned" {
        arch = "sm_90a", in_specs = { Tile(N, f32) }, out_specs = { Tile(N, f32) },
        grid = { N / cfg.BLOCK / (cfg.MODE == "unwritten" and 2 or 1) }, block = { cfg.BLOCK },
        function(X, Y)
          if cfg.MODE == "unlinked" then ptx.raw_module(".extern .func undefined_helper ();") end
          local px, py = ptx.global_ptrs(X, Y)
          local i = reg.from(ptx.special.ctaid.x(), u32) * cfg.BLOCK + reg.from(ptx.special.tid.x(), u32)
          local off = i:mul_wide(4)
          local v = reg.scalar(f32)
          ptx.ld.global(v, ptx.addr(px + off))
          if cfg.MODE == "badptx" then ptx.inst("frob.b32", reg.scalar(u32), 1) end
          if cfg.MODE == "unlinked" then ptx.raw("call undefined_helper, ();") end
          ptx.st.global(ptx.addr(py + off), v:fma(2.0, cfg.MODE == "wrong" and 0.5 or 1.0))
          ptx.ret()
        end,
      }
    end,
    inputs = function(seed) return tensor.rand({ N }, f32, { seed = seed }) end,
    reference = function(x)
      local out = {}
      for i, v in ipairs(x:values()) do out[i] = v * 2 + 1 end
      return out
    end,
  }
end

--- The result entry for a config key.
local function entry(result, key)
  for _, r in ipairs(result.results) do if r.key == key then return r end end
end

--- A file's or directory's permission string ("rw-------").
local function perms(path)
  return lfs.attributes(path, "permissions")
end

--- Run fn with the CUDA toolkit out of reach of this process: no compiler
-- opens and ptxas is not found (what a machine without the toolkit sees).
local function without_toolkit(fn)
  local compiler, find = compile.compiler, toolkit.find
  compile.compiler = function()
    error("no PTX compiler: neither libnvJitLink nor ptxas was found; install the CUDA toolkit", 2)
  end
  toolkit.find = function() return nil end
  local ok, err = pcall(fn)
  compile.compiler, toolkit.find = compiler, find
  if not ok then error(err, 0) end
end

--- Run fn with every parallel compile forced to the ptxas program, as on a
-- machine where ptxas is installed but libnvJitLink is not; returns fn's result.
local function with_ptxas_program(fn)
  local many = core.compile_many
  core.compile_many = function(c, jobs, n, o, threads)
    o.force_ptxas = 1
    return many(c, jobs, n, o, threads)
  end
  local ok, res = pcall(fn)
  core.compile_many = many
  if not ok then error(res, 0) end
  return res
end

-- A Lua driver that starts its arguments' commands at once (posix_spawn,
-- no shell), each argument a command line split at spaces, and waits for
-- them all; prints "exit N" per command.
local DRIVER = [[
local ffi = require "ffi"
for _, decl in ipairs {
  "int posix_spawn(int *pid, const char *path, const void *actions, const void *attr, char *const argv[], char *const envp[]);",
  "int waitpid(int pid, int *status, int options);",
  "extern char **environ;",
} do pcall(ffi.cdef, decl) end
local pids, keep = {}, {}
for i = 1, #arg do
  local words = {}
  for w in arg[i]:gmatch("%S+") do words[#words + 1] = w end
  local argv = ffi.new("char *[?]", #words + 1)
  for j, w in ipairs(words) do keep[#keep + 1] = w; argv[j - 1] = ffi.cast("char *", w) end
  local pid = ffi.new("int[1]")
  assert(ffi.C.posix_spawn(pid, words[1], nil, nil, argv, ffi.C.environ) == 0, "cannot start " .. words[1])
  pids[i] = pid[0]
end
for i, pid in ipairs(pids) do
  local st = ffi.new("int[1]")
  ffi.C.waitpid(pid, st, 0)
  print(("command %d: exit %d"):format(i, math.floor(st[0] / 256) % 256))
end
]]

describe("pyptx.tune on the emulator", function()
  it("writes JSON with sorted keys and NaN as null, and reads it back (dkjson)", function()
    local v = { b = 1, a = { d = 2, c = 0 / 0, e = { 1, 2.5 } }, s = "q\"x" }
    assert.equal('{\n  "a":{\n    "c":null,\n    "d":2,\n    "e":[1,2.5]\n  },\n  "b":1,\n  "s":"q\\"x"\n}',
      tune.encode_json(v))
    assert.same({ b = 1, a = { d = 2, e = { 1, 2.5 } }, s = "q\"x" }, tune.decode_json(tune.encode_json(v)))
    assert.has_error(function() tune.decode_json("{ nope") end)
  end)

  local dev = H.emu()
  runtime.use(dev)
  local cache
  local function opts(extra)
    local o = { quiet = true, cache_dir = cache }
    for k, v in pairs(extra or {}) do o[k] = v end
    return o
  end
  setup(function() cache = H.temp_dir() end)
  teardown(H.cleanup)

  it("enumerates the space in a stable order, prunes and shards it", function()
    local all = tune.configs({ B = { 1, 2 }, A = { "x", "y" } })
    assert.same({ "A=x,B=1", "A=x,B=2", "A=y,B=1", "A=y,B=2" },
      { tune.config_key(all[1]), tune.config_key(all[2]), tune.config_key(all[3]), tune.config_key(all[4]) })
    assert.equal(2, #tune.configs({ B = { 1, 2, 3, 4 } }, function(c) return c.B % 2 == 0 end))
    local s1, s2 = tune.shard(all, 1, 2), tune.shard(all, 2, 2)
    assert.equal(2, #s1)
    assert.equal("A=x,B=2", tune.config_key(s2[1]))
  end)

  it("checks every config, records failures with reasons and returns the best", function()
    local r = tune.run(sweep("main"), opts())
    assert.equal(12, #r.results)
    assert.is_false(r.timed)
    assert.matches("emulator: timing is not meaningful", r.ranking, 1, true)
    assert.equal("ok", entry(r, "BLOCK=64,MODE=ok").status)
    assert.matches("^wrong result %(output 1%): %d+ of 1024 elements differ", entry(r, "BLOCK=64,MODE=wrong").reason)
    assert.equal("build: this config cannot be built", entry(r, "BLOCK=256,MODE=throws").reason)
    assert.matches("MODE=ok$", r.best.key)
    for i, x in ipairs(r.results) do
      if x.status ~= "ok" then assert.is_true(i > 3, "failed configs sort after the good ones") end
    end
    assert.equal("failed", entry(r, "BLOCK=128,MODE=badptx").status)
    H.need_ptxas()
    assert.matches("^compile: ", entry(r, "BLOCK=128,MODE=badptx").reason)
  end)

  it("sweeps a list of configs of one kernel's template values, launching each with its values", function()
    local k = kernel "tuned_values" {
      arch = "sm_90a", in_specs = { Tile(N, f32) }, out_specs = { Tile(N, f32) },
      params = { MUL = 1 }, grid = { N / 128 }, block = { 128 },
      function(X, Y, p)
        local px, py = ptx.global_ptrs(X, Y)
        local off = (reg.from(ptx.special.ctaid.x(), u32) * 128 + reg.from(ptx.special.tid.x(), u32)):mul_wide(4)
        local v = reg.scalar(f32)
        ptx.ld.global(v, ptx.addr(px + off))
        ptx.st.global(ptx.addr(py + off), v * p.MUL)
      end,
    }
    local r = tune.run({
      name = "values", configs = { { MUL = 3 }, { MUL = 2 } },
      build = function() return k end,
      values = function(cfg) return { MUL = cfg.MUL } end,
      inputs = function(seed) return tensor.rand({ N }, f32, { seed = seed }) end,
      reference = function(x)
        local out = {}
        for i, v in ipairs(x:values()) do out[i] = v * 3 end
        return out
      end,
    }, opts())
    assert.equal("ok", entry(r, "MUL=3").status, entry(r, "MUL=3").reason)   -- launched with MUL=3, not the default 1
    assert.matches("^wrong result", entry(r, "MUL=2").reason)
    assert.equal("MUL=3", r.results[1].key)
    assert.has_error(function() tune.run({ name = "x", configs = {}, build = function() return k end, inputs = function() end }, opts()) end,
      "tune: configs must be a non-empty list")
  end)

  it("reuses cached results on a second run and only runs configs it has not seen", function()
    local again = tune.run(sweep("main"), opts())
    for _, x in ipairs(again.results) do
      if x.status == "ok" or x.reason:match("^wrong result") then assert.is_true(x.cached, x.key .. " was re-run") end
    end
    assert.matches("^wrong result", entry(again, "BLOCK=64,MODE=wrong").reason)
    local grown = tune.run(sweep("main", { 64, 128, 256, 512 }), opts())
    assert.is_true(entry(grown, "BLOCK=64,MODE=ok").cached)
    assert.is_false(entry(grown, "BLOCK=512,MODE=ok").cached)
    assert.equal("ok", entry(grown, "BLOCK=512,MODE=ok").status)
    assert.is_false(tune.run(sweep("main"), opts { force = true }).results[1].cached)
  end)

  it("records a compile failure whose log lacks the word 'error' as that config's row", function()
    local r = tune.run(sweep("unlinked", nil, { "ok", "unlinked" }), opts())
    assert.equal(6, #r.results)
    for _, b in ipairs { 64, 128, 256 } do
      assert.equal("ok", entry(r, "BLOCK=" .. b .. ",MODE=ok").status)
      assert.equal("failed", entry(r, "BLOCK=" .. b .. ",MODE=unlinked").status)
    end
    assert.matches("MODE=ok$", r.best.key)
    H.need_ptxas()
    assert.matches("^compile: .*undefined_helper", entry(r, "BLOCK=64,MODE=unlinked").reason)
    -- The ptxas program (used where libnvJitLink is missing) says "ptxas fatal".
    r = with_ptxas_program(function() return tune.run(sweep("unlinked_ptxas", nil, { "ok", "unlinked" }), opts()) end)
    assert.equal("ok", entry(r, "BLOCK=64,MODE=ok").status)
    assert.matches("^compile: ptxas fatal +: Unresolved extern function 'undefined_helper'", entry(r, "BLOCK=64,MODE=unlinked").reason)
  end)

  it("fails a config that leaves outputs unwritten and goes on", function()
    local r = tune.run(sweep("unwritten", nil, { "ok", "unwritten" }), opts())
    assert.equal(6, #r.results)
    for _, b in ipairs { 64, 128, 256 } do
      assert.equal("ok", entry(r, "BLOCK=" .. b .. ",MODE=ok").status)
      local bad = entry(r, "BLOCK=" .. b .. ",MODE=unwritten")
      assert.equal("failed", bad.status)
      assert.matches("(output 1)", bad.reason, 1, true)
      assert.not_matches("pyptx/[%w_/]+%.lua:%d+", bad.reason)
    end
  end)

  it("records any error of one config as its failed row: values, outputs, build, prune", function()
    local s = sweep("errors", { 64, 128 }, { "ok" })
    s.values = function(cfg) if cfg.BLOCK == 128 then error("no values for 128", 0) end return {} end
    local r = tune.run(s, opts())
    assert.equal("ok", entry(r, "BLOCK=64,MODE=ok").status)
    assert.equal("trace: no values for 128", entry(r, "BLOCK=128,MODE=ok").reason)
    s = sweep("errors2", { 64 }, { "ok" })
    local one = s.reference
    s.reference = function(x) return one(x), one(x) end
    r = tune.run(s, opts())
    assert.equal("check: the kernel has 1 output(s) but the reference returned 2", r.results[1].reason)
    s = sweep("errors3", { 64 }, { "ok" })
    s.build = function() return 42 end
    r = tune.run(s, opts())
    assert.equal("build: build returned a number; expected a kernel", r.results[1].reason)
    s = sweep("errors4", { 64, 128, 256 }, { "ok" })
    s.prune = function(cfg) if cfg.BLOCK == 128 then error("cannot judge 128", 0) end return cfg.BLOCK < 256 end
    r = tune.run(s, opts())
    assert.equal(2, #r.results)
    assert.equal("ok", entry(r, "BLOCK=64,MODE=ok").status)
    assert.equal("prune: cannot judge 128", entry(r, "BLOCK=128,MODE=ok").reason)
  end)

  it("runs the emulator-only sweep with no CUDA toolkit and reports it", function()
    local r
    without_toolkit(function() r = tune.run(sweep("notoolkit"), opts()) end)
    assert.equal(12, #r.results)
    assert.matches("ranked by instructions (no ptxas: no register counts)", r.ranking, 1, true)
    assert.matches("no PTX compiler", r.warnings[1], 1, true)
    assert.equal("ok", entry(r, "BLOCK=64,MODE=ok").status)
    assert.is_nil(entry(r, "BLOCK=64,MODE=ok").registers)
    assert.is_number(entry(r, "BLOCK=64,MODE=ok").instructions)
    assert.matches("^wrong result", entry(r, "BLOCK=64,MODE=wrong").reason)
    assert.matches("^launch: .*frob", entry(r, "BLOCK=64,MODE=badptx").reason)
    assert.matches("MODE=ok$", r.best.key)
    assert.matches("no ptxas", report.table(r), 1, true)
  end)

  it("creates its cache private: directories 0700, result files 0600", function()
    local root = H.temp_dir() .. "/fresh/cache"
    local r = tune.run(sweep("private", { 64 }, { "ok", "wrong", "throws" }), opts { cache_dir = root })
    assert.equal(root .. "/tune/private", r.cache)
    for _, d in ipairs { root, root .. "/tune", r.cache } do assert.equal("rwx------", perms(d), d) end
    local files = H.list(r.cache)
    assert.equal(2, #files)   -- the ok and the wrong-result config (a build error is not cached)
    for _, f in ipairs(files) do assert.equal("rw-------", perms(f), f) end
  end)

  it("keeps sweep names inside the cache", function()
    local r = tune.run(sweep("..", { 64 }, { "ok" }), opts())
    assert.matches("^" .. cache:gsub("%p", "%%%0") .. "/tune/__%-%x+$", r.cache)
    r = tune.run(sweep("a/b", { 64 }, { "ok" }), opts())
    assert.matches("/tune/a_b%-%x+$", r.cache)
  end)

  it("refuses a cache directory others may write, or none at all, and runs uncached", function()
    local shared = H.temp_dir() .. "/shared"
    sys.mkdirs(shared)
    H.run { "chmod", "0777", shared }
    local r = tune.run(sweep("shared", { 64 }), opts { cache_dir = shared })
    assert.is_false(r.cache)
    assert.matches("results are not cached: refusing directory .*writable by group or others", r.warnings[1])
    assert.equal("ok", entry(r, "BLOCK=64,MODE=ok").status)
    assert.same({}, H.list(shared))
    -- the C core reads the environment: unset the variables for real
    local saved = {}
    for _, k in ipairs { "HOME", "XDG_CACHE_HOME", "LUAPTX_CACHE_DIR" } do
      saved[k] = os.getenv(k)
      ffi.C.unsetenv(k)
    end
    local ok, res = pcall(tune.run, sweep("nohome", { 64 }), { quiet = true })
    for k, v in pairs(saved) do ffi.C.setenv(k, v, 1) end
    assert(ok, res)
    assert.is_false(res.cache)
    assert.matches("HOME is unset and neither LUAPTX_CACHE_DIR nor XDG_CACHE_HOME names a directory", res.warnings[1], 1, true)
    assert.equal("ok", entry(res, "BLOCK=64,MODE=ok").status)
  end)

  it("merges shards into the whole sweep", function()
    local a = tune.run(sweep("sharded"), opts { shard = "1/2" })
    local b = tune.run(sweep("sharded"), opts { shard = "2/2" })
    assert.equal(6, #a.results)
    local merged = report.merge { tune.decode_json(report.json(a)), tune.decode_json(report.json(b)) }
    assert.equal(12, #merged.results)
    assert.matches("MODE=ok$", merged.best.key)
    assert.has_error(function() tune.run(sweep("sharded"), opts { shard = "3/2" }) end,
      "tune: --shard 3/2: the shard index i runs from 1 to n, and n is at least 1")
  end)

  it("writes a table, CSV, JSON and an SVG chart", function()
    local r = tune.run(sweep("main"), opts())
    local tbl = report.table(r)
    assert.matches("best: BLOCK=%d+,MODE=ok", tbl)
    local csv = report.csv(r)
    assert.matches("^BLOCK,MODE,status,ms,registers,smem,spills,instructions,reason\n", csv)
    assert.equal(12, select(2, csv:gsub("\n%d+,[%w]+,", "")))   -- one row per config
    assert.equal(12, #tune.decode_json(report.json(r)).results)
    local svg = report.svg(r)
    assert.matches("^<svg ", svg)
    assert.matches("failed: wrong result", svg, 1, true)
    assert.equal(3, select(2, svg:gsub("<rect ", "")))
  end)

  it("keeps the SVG well-formed: reasons cut at characters, controls and bad bytes dropped (an XML parser agrees)", function()
    local reason = ("x"):rep(59) .. "éé" .. "\27[31m\0\1 bad \255 \237\160\128 \239\191\191 end"
    local r = { name = "n\1<&>", device = "emu", timed = false, ranking = "r", results = {
      { key = "A=\2é", config = {}, status = "ok", instructions = 5 },
      { key = "B=1", config = {}, status = "failed", reason = reason },
      { key = "C=1", config = {}, status = "failed", reason = "\27[1m" .. ("é"):rep(70) },
    } }
    r.best = r.results[1]
    local svg = report.svg(r)
    assert.is_nil(svg:find("[%z\1-\8\11\12\14-\31\127]"), "a control character in the SVG")
    assert.matches("failed: " .. ("x"):rep(59) .. "é</text>", svg, 1, true)   -- 60 characters, not 60 bytes
    assert.matches("failed: [1m" .. ("é"):rep(57) .. "</text>", svg, 1, true)
    assert.equal("a\239\191\189b", report.clean_text("a\255b"))
    assert.equal("ab", report.clean_text("a\0\27\127b"))
    local file = H.temp_file(svg, ".svg")
    local res = sys.run { "python3", "-c", "import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1]); print('ok')", file }
    if not res or res.status ~= 0 and res.stderr:find("No module named", 1, true) then H.pending("needs python3 with xml.etree") end
    assert.equal(0, res.status, res.stderr)
    assert.equal("ok\n", res.stdout)
    r.results[2].reason = "a\rb"   -- CSV: a lone CR ends a row in a reader unless quoted
    assert.matches(',"a\rb"\n', report.csv(r), 1, true)
  end)

  it("runs from the command line with --csv --json --plot and --merge, files 0600", function()
    local dir = H.temp_dir()
    local env = { LUAPTX_CACHE_DIR = dir .. "/cache" }
    for i, json_file in ipairs { "a.json", "b.json" } do
      local out, err, status = H.luaptx({ "tune", SCALE, "--shard", i .. "/2", "--json", json_file }, { cwd = dir, env = env })
      assert.equal(0, status, err)
      assert.matches("best: ", out)
    end
    local out, err, status = H.luaptx({ "tune", "--merge", "a.json", "b.json", "--csv", "all.csv", "--plot", "all.svg" }, { cwd = dir })
    local _
    assert.equal(0, status, err)
    assert.matches("12 +BLOCK=", out)
    assert.equal(12, select(2, H.read(dir .. "/all.csv"):gsub("\n%d+,%d+,", "")))
    for _, f in ipairs { "a.json", "all.csv", "all.svg" } do assert.equal("rw-------", perms(dir .. "/" .. f), f) end
    _, err, status = H.luaptx({ "tune", "--merge", "a.json", "missing.json" }, { cwd = dir })
    assert.equal(1, status)
    assert.matches("tune --merge: cannot read missing.json", err, 1, true)
    _, err, status = H.luaptx({ "tune", SCALE, "--shard" }, { cwd = dir })
    assert.equal(1, status)
    assert.matches("tune: --shard needs a value", err, 1, true)
  end)

  it("runs `luaptx tune` with CUDA_HOME and PATH pointing away from the toolkit", function()
    local dir = H.temp_dir()
    local out, err, status = H.luaptx({ "tune", SCALE, "--json", "r.json" },
      { cwd = dir, env = { LUAPTX_CACHE_DIR = dir .. "/cache", CUDA_HOME = "/nonexistent", CUDA_PATH = false, PATH = "/usr/bin:/bin" } })
    assert.equal(0, status, err)
    assert.matches("best: BLOCK=", out)
    assert.equal(12, #tune.decode_json(H.read(dir .. "/r.json")).results)
  end)

  it("never runs a shell on the cache path from LUAPTX_CACHE_DIR", function()
    local dir = H.temp_dir()
    local evil = dir .. "/c'$(touch " .. dir .. "/pwned)'x'; touch " .. dir .. "/pwned2; echo '"
    local _, err, status = H.luaptx({ "tune", SCALE, "--shard", "1/12" }, { cwd = dir, env = { LUAPTX_CACHE_DIR = evil } })
    assert.is_nil(sys.kind(dir .. "/pwned"), "$() ran in a shell")
    assert.is_nil(sys.kind(dir .. "/pwned2"), "a quote ended the path in a shell")
    assert.equal(0, status, err)
    assert.equal("directory", sys.kind(evil .. "/tune/scale"))
  end)

  it("ignores a FIFO or a link planted in the cache, and replaces it", function()
    local dir = H.temp_dir()
    local env = { LUAPTX_CACHE_DIR = dir .. "/cache" }
    local args = { "tune", SCALE, "--shard", "1/6" }   -- two configs
    local _, err, status = H.luaptx(args, { cwd = dir, env = env })
    assert.equal(0, status, err)
    local files = H.find(dir .. "/cache/tune", "%.json$")
    local victim = H.temp_file("victim\n")
    H.run { "rm", files[1], files[#files] }
    H.run { "mkfifo", files[1] }
    if #files > 1 then H.run { "ln", "-s", victim, files[#files] } end
    local out
    out, err, status = H.luaptx(args, { cwd = dir, env = env, timeout = 30 })
    assert.equal(0, status, err)
    assert.equal(2, #files)
    assert.not_matches("(cached)", out, 1, true)
    assert.equal("victim\n", H.read(victim))
    for _, f in ipairs(files) do
      assert.equal("file", sys.kind(f))
      assert.equal("rw-------", perms(f))
    end
    out = H.luaptx(args, { cwd = dir, env = env })
    assert.equal(2, select(2, out:gsub("%(cached%)", "")))
  end)

  it("keeps every config's result when shards run concurrently into one cache", function()
    local dir = H.temp_dir()
    local driver = H.temp_file(DRIVER, ".lua")
    local shards = {}
    for i = 1, 3 do shards[i] = ("%s tune %s --shard %d/3 --json s%d.json"):format(H.BIN, SCALE, i, i) end
    local env = { LUAPTX_CACHE_DIR = dir .. "/cache" }
    local res = H.run({ H.BIN, driver, shards[1], shards[2], shards[3] }, { cwd = dir, env = env, merge = true })
    assert.equal(0, res.status, res.stdout)
    assert.matches("command 1: exit 0\ncommand 2: exit 0\ncommand 3: exit 0\n", res.stdout, 1, true)
    for i = 1, 3 do assert.equal(4, #tune.decode_json(H.read(("%s/s%d.json"):format(dir, i))).results) end
    local _, err, status = H.luaptx({ "tune", SCALE, "--json", "all.json" }, { cwd = dir, env = env })
    assert.equal(0, status, err)
    local all = tune.decode_json(H.read(dir .. "/all.json"))
    assert.equal(12, #all.results)
    for _, r in ipairs(all.results) do assert.is_true(r.cached, r.key .. " was lost from the cache") end
  end)
end)

describe("luaptx tune --shard auto (Slurm job arrays)", function()
  --- parse_shard's result (or error) with the Slurm variables set as given.
  local function shard_with(vars, text)
    local names = { "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_MAX",
                    "SLURM_ARRAY_TASK_STEP" }
    local old = {}
    for _, k in ipairs(names) do
      old[k] = os.getenv(k)
      if vars[k] then ffi.C.setenv(k, vars[k], 1) else ffi.C.unsetenv(k) end
    end
    local ok, i, n = pcall(tune.parse_shard, text or "auto")
    for _, k in ipairs(names) do if old[k] then ffi.C.setenv(k, old[k], 1) else ffi.C.unsetenv(k) end end
    if not ok then return tostring(i) end
    return i .. "/" .. n
  end

  it("takes shard ID - MIN + 1 of COUNT from the array task's variables", function()
    assert.equal("1/4", shard_with { SLURM_ARRAY_TASK_ID = "0", SLURM_ARRAY_TASK_COUNT = "4" })
    assert.equal("4/4", shard_with { SLURM_ARRAY_TASK_ID = "3", SLURM_ARRAY_TASK_COUNT = "4", SLURM_ARRAY_TASK_MIN = "0" })
    assert.equal("2/4", shard_with { SLURM_ARRAY_TASK_ID = "2", SLURM_ARRAY_TASK_COUNT = "4", SLURM_ARRAY_TASK_MIN = "1" })
    assert.equal("3/8", shard_with({ SLURM_ARRAY_TASK_ID = "0" }, "3/8"))   -- an explicit i/n ignores Slurm
  end)

  it("takes stepped arrays (--array=0-6:2) and refuses a list (--array=1,5,7) in every task alike", function()
    local stepped = { SLURM_ARRAY_TASK_COUNT = "4", SLURM_ARRAY_TASK_MIN = "0", SLURM_ARRAY_TASK_MAX = "6", SLURM_ARRAY_TASK_STEP = "2" }
    local got = {}
    for _, id in ipairs { "0", "2", "4", "6" } do
      stepped.SLURM_ARRAY_TASK_ID = id
      got[#got + 1] = shard_with(stepped)
    end
    assert.same({ "1/4", "2/4", "3/4", "4/4" }, got)
    stepped.SLURM_ARRAY_TASK_ID = "3"
    assert.matches("SLURM_ARRAY_TASK_ID=3 is not a task of the array 0..6 step 2", shard_with(stepped), 1, true)
    for _, id in ipairs { "1", "5", "7" } do   -- what Slurm sets for --array=1,5,7
      local err = shard_with { SLURM_ARRAY_TASK_ID = id, SLURM_ARRAY_TASK_COUNT = "3", SLURM_ARRAY_TASK_MIN = "1",
                               SLURM_ARRAY_TASK_MAX = "7", SLURM_ARRAY_TASK_STEP = "1" }
      assert.equal("tune: --shard auto: the Slurm array's 3 tasks are not evenly spaced (from SLURM_ARRAY_TASK_MIN=1 in steps "
        .. "of SLURM_ARRAY_TASK_STEP=1 they would end at 3, but SLURM_ARRAY_TASK_MAX=7: a list such as --array=1,5,7?); "
        .. "every task refuses it; luaptx tune --shard auto takes a range (--array=0-2, or stepped: --array=0-4:2), not a list", err)
    end
  end)

  it("runs an empty shard (more tasks than configs) to exit 0, and merges the complete set only", function()
    local dir = H.temp_dir()
    local env = { LUAPTX_CACHE_DIR = dir .. "/cache" }
    local out, err, status = H.luaptx({ "tune", SCALE, "--shard", "13/20", "--json", "e.json" }, { cwd = dir, env = env })
    assert.equal(0, status, err)
    assert.matches("shard 13/20 is empty (12 configs)\n", out, 1, true)
    assert.same({ i = 13, n = 20, configs = 12 }, tune.decode_json(H.read(dir .. "/e.json")).shard)
    for i = 1, 4 do
      local _, e, st = H.luaptx({ "tune", SCALE, "--shard", i .. "/4", "--json", "s" .. i .. ".json" }, { cwd = dir, env = env })
      assert.equal(0, st, e)
    end
    local function merge(...)
      local o, e, st = H.luaptx({ "tune", "--merge", ... }, { cwd = dir })
      return st == 0 and o or e, st
    end
    local msg, st = merge("s1.json", "s3.json")
    assert.equal(1, st)
    assert.matches("tune --merge: the set is incomplete: shards 2/4, 4/4 of 12 configs are missing (2 of 4 given)", msg, 1, true)
    msg, st = merge("s1.json", "s2.json", "s2.json", "s3.json", "s4.json")
    assert.equal(1, st)
    assert.matches("tune --merge: shard 2/4 is given twice (s2.json and s2.json)", msg, 1, true)
    msg, st = merge("s1.json", "s2.json", "s3.json", "e.json")
    assert.equal(1, st)
    assert.matches("s1.json is shard 1/4 of 12 configs but e.json is shard 13/20 of 12 configs", msg, 1, true)
    local cut = tune.decode_json(H.read(dir .. "/s4.json"))
    table.remove(cut.results)
    H.write(dir .. "/cut.json", tune.encode_json(cut))
    msg, st = merge("s1.json", "s2.json", "s3.json", "cut.json")
    assert.equal(1, st)
    assert.matches("cut.json (shard 4/4 of 12 configs) holds 2 results, not 3", msg, 1, true)
    cut.shard = nil
    H.write(dir .. "/old.json", tune.encode_json(cut))
    msg, st = merge("s1.json", "old.json")
    assert.equal(1, st)
    assert.matches("old.json has no shard record", msg, 1, true)
    msg, st = merge("s1.json", "s2.json", "s3.json", "s4.json", "--json", "all.json")
    assert.equal(0, st, msg)
    assert.matches("best: ", msg)
    assert.same({ i = 1, n = 1, configs = 12 }, tune.decode_json(H.read(dir .. "/all.json")).shard)
    msg, st = merge("all.json")   -- a merged result is a whole sweep: it merges again
    assert.equal(0, st, msg)
  end)

  it("refuses missing, malformed and out-of-array values, saying what is valid", function()
    assert.equal("tune: --shard auto takes the shard from a Slurm job array, but SLURM_ARRAY_TASK_ID is not set; "
      .. "submit with sbatch --array=0-N, or give --shard i/n", shard_with {})
    assert.matches("but SLURM_ARRAY_TASK_COUNT is not set", shard_with { SLURM_ARRAY_TASK_ID = "1" }, 1, true)
    assert.equal("SLURM_ARRAY_TASK_ID=1x: not an integer; valid: an integer in 0..2147483648 "
      .. "(the Slurm array task's index, set by sbatch --array)",
      shard_with { SLURM_ARRAY_TASK_ID = "1x", SLURM_ARRAY_TASK_COUNT = "4" })
    assert.matches("^SLURM_ARRAY_TASK_COUNT=0: out of range",
      shard_with { SLURM_ARRAY_TASK_ID = "0", SLURM_ARRAY_TASK_COUNT = "0" })
    assert.equal("tune: --shard auto: SLURM_ARRAY_TASK_ID=6 is not a task of the array 0..3 step 1 (SLURM_ARRAY_TASK_MIN=0, "
      .. "SLURM_ARRAY_TASK_STEP=1, SLURM_ARRAY_TASK_COUNT=4); luaptx tune --shard auto takes a range such as --array=0-3",
      shard_with { SLURM_ARRAY_TASK_ID = "6", SLURM_ARRAY_TASK_COUNT = "4" })
    for _, bad in ipairs { "1/0", "0/4", "5/4" } do
      assert.equal(("tune: --shard %s: the shard index i runs from 1 to n, and n is at least 1"):format(bad), shard_with({}, bad))
    end
    for _, bad in ipairs { "2", "1/2/3", " 1/2", "a/b", "-1/2", "1/99999999999999999999999" } do
      assert.equal("tune: --shard takes i/n (e.g. 2/8) or auto (from a Slurm job array); got " .. bad, shard_with({}, bad))
    end
  end)

  it("merges 4 array tasks run as separate processes into one directory to the single-process sweep", function()
    local dir = H.temp_dir()
    local driver = H.temp_file(DRIVER, ".lua")
    local cmds = { H.BIN, driver }
    for id = 0, 3 do
      cmds[#cmds + 1] = ("/usr/bin/env SLURM_ARRAY_TASK_ID=%d SLURM_ARRAY_TASK_COUNT=4 SLURM_ARRAY_TASK_MIN=0 %s tune %s "
        .. "--shard auto --json shard%d.json"):format(id, H.BIN, SCALE, id)
    end
    local res = H.run(cmds, { cwd = dir, env = { LUAPTX_CACHE_DIR = dir .. "/shared" }, merge = true })
    assert.equal(0, res.status, res.stdout)
    assert.matches("command 1: exit 0\ncommand 2: exit 0\ncommand 3: exit 0\ncommand 4: exit 0\n", res.stdout, 1, true)
    local _, err, status = H.luaptx({ "tune", "--merge", "shard0.json", "shard1.json", "shard2.json", "shard3.json",
      "--json", "merged.json" }, { cwd = dir })
    assert.equal(0, status, err)
    _, err, status = H.luaptx({ "tune", SCALE, "--json", "single.json" }, { cwd = dir, env = { LUAPTX_CACHE_DIR = dir .. "/own" } })
    assert.equal(0, status, err)
    local merged, single = tune.decode_json(H.read(dir .. "/merged.json")), tune.decode_json(H.read(dir .. "/single.json"))
    assert.equal(12, #single.results)
    for _, k in ipairs { "name", "device", "timed", "ranking", "results", "best" } do assert.same(single[k], merged[k], k) end
    assert.equal(12, #H.find(dir .. "/shared/tune", "%.json$"))   -- one cache entry per config, no leftovers
    assert.equal(0, #H.find(dir .. "/shared", "tmp%-"))
  end)

  it("is not blocked by the temporaries a job killed mid-write leaves in a shared cache", function()
    local dir = H.temp_dir()
    local env = { LUAPTX_CACHE_DIR = dir .. "/cache" }
    local args = { "tune", SCALE, "--shard", "1/6" }   -- two configs
    local _, err, status = H.luaptx(args, { cwd = dir, env = env })
    assert.equal(0, status, err)
    local files = H.find(dir .. "/cache/tune", "%.json$")
    assert.equal(2, #files)
    for _, f in ipairs(files) do   -- as a crash between write and rename leaves them
      os.remove(f)
      local t = assert(io.open(f .. ".tmp-Xy12Zq", "wb")); t:write('{"key":"trunc'); t:close()
    end
    local out
    out, err, status = H.luaptx(args, { cwd = dir, env = env, timeout = 30 })
    assert.equal(0, status, err)
    assert.not_matches("(cached)", out, 1, true)
    out = H.luaptx(args, { cwd = dir, env = env })
    assert.equal(2, select(2, out:gsub("%(cached%)", "")))
  end)
end)
