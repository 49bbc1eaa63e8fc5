-- The worked examples in docs/ are run here, so the docs keep matching
-- what luaptx does.
local H = require "spec.helpers"
local pyptx = require "pyptx"
local runtime = require "pyptx.runtime"
local tensor = require "pyptx.runtime.tensor"

--- The fenced code blocks of a markdown file with their language.
local function blocks(path)
  local out = {}
  for lang, body in H.read(path):gmatch("```(%w*)\n(.-)```") do out[#out + 1] = { lang = lang, body = body } end
  return out
end

--- The words of a documented command line (no quoting in these lines).
local function words(line)
  local out = {}
  for w in line:gmatch("%S+") do out[#out + 1] = w end
  return out
end

--- The bytes printf prints for a format with only \n escapes and no %.
local function printf_text(format)
  assert(not format:find("%", 1, true), "the documented printf format has a %")
  return (format:gsub("\\n", "\n"))
end

describe("docs", function()
  it("README.md: the make run figures (PTX lines, instructions) are what luaptx gives", function()
    local readme = H.read("README.md")
    local lines = tonumber(readme:match("traced PTX: build/rms_norm%.ptx %((%d+) lines%)"))
    local insts = tonumber(readme:match("\nrms_norm +sm_90a +(%d+) "))
    local out, err, status = H.luaptx { "ptx", "examples/hopper/rms_norm.lua" }
    assert.equal(0, status, err)
    assert.equal(select(2, out:gsub("\n", "")), lines, "README's PTX line count")
    local script = require "pyptx.runtime.script"
    local e = script.entries(script.load_file("examples/hopper/rms_norm.lua"))[1]
    assert.equal(e.kernel:specialize(e.values).instructions, insts, "README's instruction count")
  end)

  it("getting-started.md: the package list is the Makefile's (make deps)", function()
    local want = H.read("Makefile"):match("\nDEBIAN_PACKAGES = ([^\n]+)")
    local doc = H.read("docs/getting-started.md"):match("`make deps` alone installs the packages (.-)%. The")
    assert.is_string(doc)
    for p in want:gmatch("%S+") do assert.matches("`" .. p .. "`", doc, 1, true) end
  end)
  it("getting-started.md: the first kernel traces, retargets and fails as shown", function()
    local code
    for _, b in ipairs(blocks("docs/getting-started.md")) do if b.lang == "lua" and not code then code = b.body end end
    local dir = H.temp_dir()
    H.write(dir .. "/axpy.lua", code)
    assert.matches(".target sm_80", H.luaptx({ "ptx", dir .. "/axpy.lua", "--arch", "sm_80" }, { merge = true }), 1, true)
    local bad = code:gsub("ptx%.st%.global%(ptx%.addr%(pz %+ off%), x:fma%(a, y%)%)", "ptx.inst.add.u32(x, x, 1)")
    H.write(dir .. "/axpy.lua", bad)
    local doc_error = H.read("docs/getting-started.md"):match("\n(luaptx: axpy%.lua:%d+: [^\n]+)")
    local out = H.luaptx({ "ptx", dir .. "/axpy.lua" }, { merge = true }):gsub(dir:gsub("%p", "%%%0") .. "/", "")
    assert.are.equal(doc_error, (out:gsub("\n$", "")))
  end)

  it("getting-started.md: main matches its reference, and the planted bug is reported as shown", function()
    local code
    for _, b in ipairs(blocks("docs/getting-started.md")) do if b.lang == "lua" and not code then code = b.body end end
    local dir = H.temp_dir()
    H.write(dir .. "/axpy.lua", code)
    local env = { LUAPTX_DEVICE = "emu" }
    local out, err, status = H.luaptx({ "run", "axpy.lua" }, { cwd = dir, env = env })
    assert.equal(0, status, err)
    assert.equal(H.read("docs/getting-started.md"):match("```\n(axpy: [^\n]+)\n```"), (out:gsub("\n$", "")))
    local bad, n = code:gsub("ptx%.addr%(pz %+ off%)", "ptx.addr(pz + off + 4)")
    assert.equal(1, n)
    H.write(dir .. "/axpy.lua", bad)
    local report = H.read("docs/getting-started.md"):match("\n(luaptx: axpy%.lua:%d+: launching [^\n]+)")
    local _, err2, status2 = H.luaptx({ "run", "axpy.lua" }, { cwd = dir, env = env })
    err, status = err2, status2
    assert.equal(1, status)
    assert.equal(report, (err:gsub("\n$", "")))
  end)

  it("repl.md: the session transcript is what the REPL prints", function()
    local transcript = blocks("docs/repl.md")[1].body
    local inputs, expected = {}, {}
    for line in transcript:gmatch("[^\n]+") do
      local input = line:match("^ptx sm_90a> (.*)$")
      if input then inputs[#inputs + 1] = input
      elseif not line:match("^%$") and not line:match("^luaptx %d") then expected[#expected + 1] = line end
    end
    local out = H.luaptx({ "repl" }, { input = table.concat(inputs, "\n") .. "\n", merge = true })
    for _, line in ipairs(expected) do assert.matches(line, out, 1, true) end
  end)

  it("repl.md: the scripted example runs", function()
    local format, args = H.read("docs/repl.md"):match("```sh\nprintf '([^']+)' | luaptx (repl[^\n]*)\n```")
    assert.is_string(format, "docs/repl.md has no `printf '...' | luaptx repl` example")
    local out = H.luaptx(words(args), { input = printf_text(format), merge = true })
    assert.matches("mov.u32 \t%r1, 7;", out, 1, true)
    H.need_ptxas()                                            -- :check assembles the session
    assert.matches("ok: sm_80", out, 1, true)
  end)

  it("tuning.md: the sweep, its table header and the shard/merge commands work as written", function()
    local doc = H.read("docs/tuning.md")
    local first = doc:match("```sh\n(luaptx tune [^\n]+)\n```")
    local header = doc:match("\n(#%s+config%s+status[^\n]+)")
    local shards = doc:match("## Sharding.-```sh\n(.-)```")
    assert.is_string(first)
    assert.is_string(header)
    assert.is_string(shards)
    local dir = H.temp_dir()
    local sweep = H.ROOT .. "/examples/tune/scale_sweep.lua"
    local opts = { cwd = dir, env = { LUAPTX_CACHE_DIR = dir .. "/cache" }, merge = true }
    --- Run a documented `luaptx ...` line in dir, the sweep script given by absolute path.
    local function run(line)
      local argv = words(line)
      assert.equal("luaptx", table.remove(argv, 1))
      for i, a in ipairs(argv) do if a:match("sweep%.lua$") then argv[i] = sweep end end
      return (H.luaptx(argv, opts))
    end
    assert.matches(header:gsub("%s+$", ""), run(first), 1, true)
    for _, file in ipairs { "scale.csv", "scale.json", "scale.svg" } do assert.is_truthy(H.read(dir .. "/" .. file), file) end
    for line in shards:gmatch("[^\n]+") do assert.matches("best: ", run(line), 1, true) end
    assert.is_truthy(H.read(dir .. "/all.csv"))
  end)

  it("dsl.md: the staged-tile kernel multiplies through both stages on the emulator and assembles", function()
    local section = H.read("docs/dsl.md"):match("\n### Tiles in stages\n(.-)\n## ")
    assert.is_string(section, "docs/dsl.md has no Tiles in stages section")
    local k = assert(loadstring(section:match("```lua\n(.-)```"), "=dsl.md"))()
    local floats = require "pyptx.runtime.floats"
    local a, b = H.rand_uniform(64 * 128, 11, -1, 1), H.rand_uniform(64 * 128, 12, -1, 1)
    for i = 1, 64 * 128 do a[i], b[i] = floats.round_bf16(a[i]), floats.round_bf16(b[i]) end
    local previous = runtime.device()
    runtime.use(H.emu())
    local ok, out = pcall(function()
      return k(tensor.from_table(a, pyptx.types.bf16, { 64, 128 }), tensor.from_table(b, pyptx.types.bf16, { 64, 128 })):values()
    end)
    runtime.use(previous)
    assert(ok, out)
    for m = 0, 63 do
      for n = 0, 63 do
        local want = 0
        for kk = 1, 128 do want = want + a[m * 128 + kk] * b[n * 128 + kk] end
        assert.is_true(math.abs(out[m * 64 + n + 1] - want) <= 1e-4 * (1 + math.abs(want)), ("D[%d][%d]"):format(m, n))
      end
    end
    H.assert_ptxas(k:ptx(), "sm_90a")
  end)

  it("dsl.md: the Pipelines kernel runs on the emulator, keeps running sums and assembles", function()
    local section = H.read("docs/dsl.md"):match("\n## Pipelines: `pyptx%.pipeline`\n(.-)\n## ")
    assert.is_string(section, "docs/dsl.md has no Pipelines section")
    local code = section:match("```lua\n(.-)```")
    local k = assert(loadstring(code, "=dsl.md"))()
    local previous = runtime.device()
    runtime.use(H.emu())
    local x = H.rand_f32(8 * 64, 7, nil, 4, 4)
    local ok, out = pcall(function() return k(tensor.from_table(x, pyptx.types.f32, { 8 * 64 })):values() end)
    runtime.use(previous)
    assert(ok, out)
    local sum = {}
    for b = 0, 7 do
      for t = 1, 64 do
        sum[t] = H.f32((sum[t] or 0) + x[b * 64 + t])
        assert.are.equal(sum[t], out[b * 64 + t])
      end
    end
    H.assert_ptxas(k:ptx(), "sm_90a")
  end)

  it("dsl.md: the Constants kernel stores its encoded half/bf16 constants on the emulator and assembles", function()
    local section = H.read("docs/dsl.md"):match("\n### Constants and widening\n(.-)\n###? ")
    assert.is_string(section, "docs/dsl.md has no Constants and widening section")
    local k = assert(loadstring(section:match("```lua\n(.-)```"), "=dsl.md"))()
    local text = k:ptx()
    for _, line in ipairs { "cvt.u64.u32", "mov.b16 \t%rs1, 15872;", "mov.b16 \t%rs2, 49168;", "mov.b16 \t%rs3, 16896;" } do
      assert.matches(line, text, 1, true)
    end
    local previous = runtime.device()
    runtime.use(H.emu())
    local ok, out = pcall(function() return k():values() end)
    runtime.use(previous)
    assert(ok, out)
    for t = 0, 31 do assert.same({ 1.5, -2.25, 3, t }, { out[4 * t + 1], out[4 * t + 2], out[4 * t + 3], out[4 * t + 4] }) end
    H.assert_ptxas(text, "sm_90a")
  end)

  it("dsl.md: the register swizzle kernel stores the trace-time swizzle of every offset on the emulator", function()
    local section = H.read("docs/dsl.md"):match("\n### Swizzles on registers\n(.-)\n## ")
    assert.is_string(section, "docs/dsl.md has no Swizzles on registers section")
    local k = assert(loadstring(section:match("```lua\n(.-)```"), "=dsl.md"))()
    local previous = runtime.device()
    runtime.use(H.emu())
    local ok, out = pcall(function() return k():values() end)
    runtime.use(previous)
    assert(ok, out)
    for t = 0, 255 do assert.equal(pyptx.smem.swizzle(t * 16, pyptx.smem.B128), out[t + 1]) end
    H.assert_ptxas(k:ptx(), "sm_80")
  end)

  it("dsl.md: the selp/mad/multicast kernel computes its values on the emulator and assembles", function()
    local section = H.read("docs/dsl.md"):match("\n### selp, mad and multicast arrivals\n(.-)\n###? ")
    assert.is_string(section, "docs/dsl.md has no selp, mad and multicast arrivals section")
    local k = assert(loadstring(section:match("```lua\n(.-)```"), "=dsl.md"))()
    local previous = runtime.device()
    runtime.use(H.emu())
    local ok, out = pcall(function() return k():values() end)
    runtime.use(previous)
    assert(ok, out)
    for r = 0, 1 do
      for t = 0, 63 do assert.equal(t < 32 and 3 * t + r or math.floor(t / 16) + 100, out[r * 64 + t + 1]) end
    end
    H.assert_ptxas(k:ptx(), "sm_90a")
  end)

  it("dsl.md: the tile GEMM takes its TMA boxes and wgmma descriptors from the tiles and matches A.B^T", function()
    local section = H.read("docs/dsl.md"):match("\n### Tiles for TMA and wgmma\n(.-)\n## ")
    assert.is_string(section, "docs/dsl.md has no Tiles for TMA and wgmma section")
    local code = section:match("```lua\n(.-)```")
    local rng = H.rng(16)
    local a, b = {}, {}
    for i = 1, 64 * 64 do a[i], b[i] = rng() % 5 - 2, rng() % 7 - 3 end   -- small integers: exact sums
    local bf16 = pyptx.types.bf16
    for _, layout in ipairs { "TMA_128B", "TMA_64B", "TMA_32B" } do       -- the documented one, then the others
      local variant, n = code:gsub("pyptx%.Layout%.TMA_128B", "pyptx.Layout." .. layout, 1)
      assert.equal(1, n)
      local k = assert(loadstring(variant, "=dsl.md"))()
      local previous = runtime.device()
      runtime.use(H.emu())
      local ok, out = pcall(function()
        return k(tensor.from_table(a, bf16, { 64, 64 }), tensor.from_table(b, bf16, { 64, 64 })):values()
      end)
      runtime.use(previous)
      assert(ok, out)
      for m = 0, 63 do
        for nn = 0, 63 do
          local want = 0
          for kk = 0, 63 do want = want + a[m * 64 + kk + 1] * b[nn * 64 + kk + 1] end
          assert.equal(want, out[m * 64 + nn + 1], ("%s: D[%d][%d]"):format(layout, m, nn))
        end
      end
      H.assert_ptxas(k:ptx(), "sm_90a")
    end
  end)

  it("dsl.md: the Traps kernel warns about its Lua `if` as shown and assembles", function()
    local section = H.read("docs/dsl.md"):match("\n### Traps\n(.-)\n## ")
    assert.is_string(section, "docs/dsl.md has no Traps section")
    local code, shown = section:match("```lua\n(.-)```"), section:match("\n```\n(dsl%.md:%d+: warning: [^\n]*)\n```")
    local k = assert(loadstring(code, "=dsl.md"))()
    local saved, buf = io.stderr, {}
    rawset(io, "stderr", { write = function(self, ...) for _, s in ipairs { ... } do buf[#buf + 1] = s end return self end })
    local ok, text = pcall(k.ptx, k)
    rawset(io, "stderr", saved)
    assert(ok, text)
    assert.equal(shown .. "\n", table.concat(buf))
    assert.matches("@%p3 add.u32", text, 1, true)
    H.assert_ptxas(text, "sm_80")
  end)

  it("runtime.md: Launching Triton PTX runs Triton's vector add as shown", function()
    local section = H.read("docs/runtime.md"):match("\n## Launching Triton PTX\n(.-)\n## ")
    assert.is_string(section, "docs/runtime.md has no Launching Triton PTX section")
    local code = section:match("```lua\n(.-)```")
    local shown = code:match("print%([^\n]*%-%- ([^\n]+)")
    local out, err, status = H.luaptx({ "-e", code }, { cwd = H.ROOT, env = { LUAPTX_DEVICE = "emu" } })
    assert.equal(0, status, err)
    assert.equal(shown:gsub("%s+", "\t") .. "\n", out)
  end)

  it("embedding.md: the C and CMake snippets are those of the tested host", function()
    local host, cmake = H.read("examples/embed/host.c"), H.read("examples/embed/CMakeLists.txt")
    for _, b in ipairs(blocks("docs/embedding.md")) do
      if b.lang == "c" then
        for line in b.body:gmatch("[^\n]+") do assert.matches(line, host, 1, true) end
      elseif b.lang == "cmake" then
        assert.matches("find_package(luaptx REQUIRED)", cmake, 1, true)
        assert.matches("target_link_libraries(embed_host PRIVATE luaptx::luaptx m)", cmake, 1, true)
      end
    end
  end)
  it("performance.md: the GPU table is headed as documented (a dry run on the emulator)", function()
    local doc = H.read("docs/performance.md")
    local head = doc:match("It writes the table, headed by this line.-```\n(.-)```")
    assert.is_string(head, "docs/performance.md documents no table header")
    local out_file = H.temp_dir() .. "/t.md"
    local out, err, status = H.luaptx({ "bench/gpu_check.lua", "--dry-run", "--skip-examples", "--out", out_file },
      { timeout = 600 })
    assert.equal(0, status, out .. err)
    assert.truthy(H.read(out_file):find("\n" .. head, 1, true), head .. "\n---\n" .. H.read(out_file))
    for _, cols in ipairs { "| kernel | M x N x K | ms | TFLOP/s | cuBLAS TFLOP/s | ours / cuBLAS | check |",
                            "| kernel | B x N | ms | GB/s | % of peak | % of copy | check |" } do
      assert.truthy(H.read(out_file):find(cols, 1, true), cols)
      assert.truthy(doc:find(cols:gsub("^| ", "("):gsub(" |$", ")"):gsub(" | ", ", "), 1, true), "not documented: " .. cols)
    end
  end)

  it("performance.md: the SASS table has bench/sass_compare's columns, a row per GEMM kernel, CUTLASS's figures", function()
    local kloops = require "bench.kloops"
    local doc = H.read("docs/performance.md")
    local tbl = doc:match("\n(| kernel | k%-loop insts .-)\n\n")
    assert.is_string(tbl, "docs/performance.md has no SASS table")
    local header = tbl:match("^[^\n]+")
    local src = H.read("bench/sass_compare.lua")
    for cell in header:gmatch("[^|]+") do
      local head = cell:match("^%s*(.-)%s*$")
      if head ~= "" then assert.truthy(src:find('"' .. head .. '"', 1, true), head) end
    end
    for _, path in ipairs(kloops.GEMM_EXAMPLES) do
      for _, k in ipairs(require("pyptx.runtime.script").load_file(path, {}).kernels) do
        local row = ("| %s `%s` |"):format(path:gsub("^examples/", ""), k.name)
        assert.truthy(tbl:find(row, 1, true), "no row " .. row)
      end
    end
    local missing = kloops.missing() or (not kloops.cutlass_include() and select(2, kloops.cutlass_include()))
    if missing then H.pending(missing) end
    local c, why = kloops.cutlass(H.BIN:gsub("/[^/]+$", "") .. "/cutlass")
    assert.is_table(c, why)
    local f = kloops.figures(c.loops[1], kloops.function_of(c.listing, c.loops[1].func))
    local want = ("| CUTLASS cooperative 128x256x64, cluster 2x1 | %s | %s | %s | %s | %s | %s | %s | %s |"):format(
      f.instructions, f.kblocks, f.per_kblock, f.mma, f.in_flight, f.fences, f.local_insts, f.registers)
    assert.truthy(tbl:find(want, 1, true), want .. "\n---\n" .. tbl)
  end)
end)
