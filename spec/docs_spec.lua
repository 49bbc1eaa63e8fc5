-- The worked examples in docs/ are run here, so the docs keep matching
-- what luaptx does.
local BIN = os.getenv("LUAPTX_BIN") or "./build/luaptx"

--- A file's text.
local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

--- The fenced code blocks of a markdown file with their language.
local function blocks(path)
  local out = {}
  for lang, body in read(path):gmatch("```(%w*)\n(.-)```") do out[#out + 1] = { lang = lang, body = body } end
  return out
end

--- Run a shell command (in dir, if given); returns its output.
local function sh(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("*a")
  p:close()
  return out
end

--- A fresh temporary directory.
local function tmpdir()
  local d = os.tmpname()
  os.remove(d)
  os.execute("mkdir -p " .. d)
  return d
end

describe("docs", function()
  it("getting-started.md: the first kernel traces, retargets and fails as shown", function()
    local code
    for _, b in ipairs(blocks("docs/getting-started.md")) do if b.lang == "lua" and not code then code = b.body end end
    local dir = tmpdir()
    local f = assert(io.open(dir .. "/axpy.lua", "w"))
    f:write(code)
    f:close()
    assert.matches(".target sm_80", sh(BIN .. " ptx " .. dir .. "/axpy.lua --arch sm_80"), 1, true)
    local bad = code:gsub("ptx%.st%.global%(ptx%.addr%(pz %+ off%), x:fma%(a, y%)%)", "ptx.inst.add.u32(x, x, 1)")
    f = assert(io.open(dir .. "/axpy.lua", "w"))
    f:write(bad)
    f:close()
    local doc_error = read("docs/getting-started.md"):match("\n(luaptx: axpy%.lua:%d+: [^\n]+)")
    local out = sh(BIN .. " ptx " .. dir .. "/axpy.lua"):gsub(dir:gsub("%p", "%%%0") .. "/", "")
    assert.are.equal(doc_error, (out:gsub("\n$", "")))
    os.execute("rm -rf " .. dir)
  end)

  it("repl.md: the session transcript is what the REPL prints", function()
    local transcript = blocks("docs/repl.md")[1].body
    local inputs, expected = {}, {}
    for line in transcript:gmatch("[^\n]+") do
      local input = line:match("^ptx sm_90a> (.*)$")
      if input then inputs[#inputs + 1] = input
      elseif not line:match("^%$") and not line:match("^luaptx %d") then expected[#expected + 1] = line end
    end
    local dir = tmpdir()
    local f = assert(io.open(dir .. "/in", "w"))
    f:write(table.concat(inputs, "\n"), "\n")
    f:close()
    local out = sh(BIN .. " repl < " .. dir .. "/in")
    for _, line in ipairs(expected) do assert.matches(line, out, 1, true) end
    os.execute("rm -rf " .. dir)
  end)

  it("repl.md: the scripted example runs", function()
    local cmd = read("docs/repl.md"):match("```sh\n(printf [^\n]+)\n```")
    assert.matches("ok: sm_80", sh(cmd:gsub("luaptx repl", BIN .. " repl")), 1, true)
  end)

  it("tuning.md: the sweep, its table header and the shard/merge commands work as written", function()
    local doc = read("docs/tuning.md")
    local dir = tmpdir()
    local bin = BIN:sub(1, 1) == "/" and BIN or (io.popen("pwd"):read("*l") .. "/" .. BIN)
    local env = ("cd %s && LUAPTX_CACHE_DIR=%s/cache "):format(dir, dir)
    local sweep = io.popen("pwd"):read("*l") .. "/examples/tune/scale_sweep.lua"
    local first = doc:match("```sh\n(luaptx tune [^\n]+)\n```")
    local out = sh(env .. first:gsub("^luaptx", bin):gsub("examples/tune/scale_sweep.lua", sweep))
    local header = doc:match("\n(#%s+config%s+status[^\n]+)")
    assert.matches(header:gsub("%s+$", ""), out, 1, true)
    for _, file in ipairs { "scale.csv", "scale.json", "scale.svg" } do assert.is_truthy(io.open(dir .. "/" .. file), file) end
    for cmd in doc:match("## Sharding.-```sh\n(.-)```"):gmatch("[^\n]+") do
      out = sh(env .. cmd:gsub("^luaptx", bin):gsub("sweep%.lua", sweep))
      assert.matches("best: ", out, 1, true)
    end
    assert.is_truthy(io.open(dir .. "/all.csv"))
    os.execute("rm -rf " .. dir)
  end)

  it("embedding.md: the C and CMake snippets are those of the tested host", function()
    local host, cmake = read("examples/embed/host.c"), read("examples/embed/CMakeLists.txt")
    for _, b in ipairs(blocks("docs/embedding.md")) do
      if b.lang == "c" then
        for line in b.body:gmatch("[^\n]+") do assert.matches(line, host, 1, true) end
      elseif b.lang == "cmake" then
        assert.matches("find_package(luaptx REQUIRED)", cmake, 1, true)
        assert.matches("target_link_libraries(embed_host PRIVATE luaptx::luaptx m)", cmake, 1, true)
      end
    end
  end)
end)
