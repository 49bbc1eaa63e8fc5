-- Autotuning on the emulator: failures recorded and skipped, the per-config
-- cache reused, sharding and merge, and the reports.
local pyptx = require "pyptx"
local tune = require "pyptx.tune"
local report = require "pyptx.tune_report"
local json = require "pyptx.json"
local tensor = require "pyptx.tensor"
local runtime = require "pyptx.runtime"
local kernel, reg, ptx, Tile = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.Tile
local f32, u32 = pyptx.types.f32, pyptx.types.u32

local N = 1024

--- A sweep whose MODE plants a wrong result, a compile failure and a build error.
local function sweep(name, blocks)
  return {
    name = name,
    space = { BLOCK = blocks or { 64, 128, 256 }, MODE = { "ok", "wrong", "badptx", "throws" } },
    build = function(cfg)
      if cfg.MODE == "throws" then error("this config cannot be built", 0) end
      return kernel "tuned" {
        arch = "sm_90a", in_specs = { Tile(N, f32) }, out_specs = { Tile(N, f32) },
        grid = { N / cfg.BLOCK }, block = { cfg.BLOCK },
        function(X, Y)
          local px, py = ptx.global_ptrs(X, Y)
          local i = reg.from(ptx.special.ctaid.x(), u32) * cfg.BLOCK + reg.from(ptx.special.tid.x(), u32)
          local off = i:mul_wide(4)
          local v = reg.scalar(f32)
          ptx.ld.global(v, ptx.addr(px + off))
          if cfg.MODE == "badptx" then ptx.inst("frob.b32", reg.scalar(u32), 1) end
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

describe("pyptx.tune on the emulator", function()
  local ok_dev, dev = pcall(runtime.open, "emu")
  if not ok_dev then pending("no emulator: " .. tostring(dev)) return end
  runtime.use(dev)
  local name = ("spec_sweep_%d_%d"):format(os.time(), math.random(1e6))

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
    local r = tune.run(sweep(name), { quiet = true })
    assert.equal(12, #r.results)
    assert.is_false(r.timed)
    assert.matches("emulator: timing is not meaningful", r.ranking, 1, true)
    assert.equal("ok", entry(r, "BLOCK=64,MODE=ok").status)
    assert.matches("^wrong result %(output 1%): %d+ of 1024 elements differ", entry(r, "BLOCK=64,MODE=wrong").reason)
    assert.matches("^compile: ", entry(r, "BLOCK=128,MODE=badptx").reason)
    assert.equal("build: this config cannot be built", entry(r, "BLOCK=256,MODE=throws").reason)
    assert.matches("MODE=ok$", r.best.key)
    for i, x in ipairs(r.results) do
      if x.status ~= "ok" then assert.is_true(i > 3, "failed configs sort after the good ones") end
    end
  end)

  it("reuses cached results on a second run and only runs configs it has not seen", function()
    local again = tune.run(sweep(name), { quiet = true })
    for _, x in ipairs(again.results) do
      if x.status == "ok" then assert.is_true(x.cached, x.key .. " was re-run") end
    end
    local grown = tune.run(sweep(name, { 64, 128, 256, 512 }), { quiet = true })
    assert.is_true(entry(grown, "BLOCK=64,MODE=ok").cached)
    assert.is_false(entry(grown, "BLOCK=512,MODE=ok").cached)
    assert.equal("ok", entry(grown, "BLOCK=512,MODE=ok").status)
  end)

  it("merges shards into the whole sweep", function()
    local a = tune.run(sweep(name .. "_sh"), { quiet = true, shard = "1/2" })
    local b = tune.run(sweep(name .. "_sh"), { quiet = true, shard = "2/2" })
    assert.equal(6, #a.results)
    local merged = report.merge { json.decode(report.json(a)), json.decode(report.json(b)) }
    assert.equal(12, #merged.results)
    assert.matches("MODE=ok$", merged.best.key)
  end)

  it("writes a table, CSV, JSON and an SVG chart", function()
    local r = tune.run(sweep(name), { quiet = true })
    local tbl = report.table(r)
    assert.matches("best: BLOCK=%d+,MODE=ok", tbl)
    local csv = report.csv(r)
    assert.matches("^BLOCK,MODE,status,ms,registers,smem,spills,instructions,reason\n", csv)
    assert.equal(12, select(2, csv:gsub("\n%d+,[%w]+,", "")))   -- one row per config
    assert.equal(12, #json.decode(report.json(r)).results)
    local svg = report.svg(r)
    assert.matches("^<svg ", svg)
    assert.matches("failed: wrong result", svg, 1, true)
    assert.equal(3 * 1, select(2, svg:gsub("<rect ", "")) / 1)
  end)

  it("runs from the command line with --csv --json --plot and --merge", function()
    local BIN = os.getenv("LUAPTX_BIN") or "./build/luaptx"
    if BIN:sub(1, 1) ~= "/" then BIN = io.popen("pwd"):read("*l") .. "/" .. BIN end
    local dir = os.tmpname()
    os.remove(dir)
    os.execute("mkdir -p " .. dir)
    local cmd = ("cd %s && LUAPTX_CACHE_DIR=%s/cache %s tune %s/examples/tune/scale_sweep.lua --shard %%s --json %%s 2>&1")
      :format(dir, dir, BIN, io.popen("pwd"):read("*l"))
    local p = io.popen(cmd:format("1/2", "a.json") .. "; " .. cmd:format("2/2", "b.json"))
    local out = p:read("*a")
    p:close()
    assert.matches("best: ", out)
    p = io.popen(("cd %s && %s tune --merge a.json b.json --csv all.csv --plot all.svg 2>&1"):format(dir, BIN))
    out = p:read("*a")
    p:close()
    assert.matches("12 +BLOCK=", out)
    local f = assert(io.open(dir .. "/all.csv"))
    assert.equal(12, select(2, f:read("*a"):gsub("\n%d+,%d+,", "")))
    f:close()
    assert.is_truthy(io.open(dir .. "/all.svg"))
    os.execute("rm -rf " .. dir)
  end)
end)
