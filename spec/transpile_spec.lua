--- PTX -> Lua transpiler: the script it writes, traced, re-emits the PTX
-- (structurally: the same instructions, operands, declarations and
-- directives; canonical formatting, no debug lines) and ptxas assembles it
-- to the same cubin as the input.
local transpile = require "luaptx.transpile"
local ptxparse = require "pyptx.ptxparse"
local toolkit = require "pyptx.toolkit"

local BIN = os.getenv("LUAPTX_BIN") or "./build/luaptx"
local CORPUS = "spec/fixtures/ptx"

--- Transpile a PTX file and trace the script: the PTX of each kernel.
local function round_trip(path)
  local script = transpile.transpile(ptxparse.read_file(path), path)
  local chunk = assert(loadstring(script, "=" .. path .. ".lua"))
  local out = {}
  for i, k in ipairs(chunk().kernels) do
    k.line_info = false
    out[i] = k:ptx()
  end
  return out, script
end

--- Canonical text without debug lines (.loc/.file point at different sources).
local function structure(text)
  local canon = ptxparse.parse(text):canonical()
  return (canon:gsub("\t%.loc[^\n]*\n", ""):gsub("\t%.file[^\n]*\n", ""))
end

--- Assemble PTX text for arch; the cubin bytes.
local function assemble(ptxas, text, arch)
  local src, out = toolkit.temp_file(text, ".ptx"), os.tmpname()
  local p = io.popen(("%s -arch=%s %s -o %s 2>&1"):format(ptxas, arch, src, out))
  local log = p:read("*a")
  p:close()
  local f = io.open(out, "rb")
  local bin = f and f:read("*a")
  if f then f:close() end
  os.remove(src); os.remove(out)
  assert(bin and #bin > 0, log)
  return bin
end

describe("luaptx transpile", function()
  it("re-emits the tracer's own kernels structurally identical", function()
    for _, name in ipairs { "hopper_rms_norm", "ampere_layer_norm", "blackwell_softmax" } do
      local path = CORPUS .. "/examples/" .. name .. ".ptx"
      local ptx = round_trip(path)
      assert.are.equal(1, #ptx)
      assert.are.equal(structure(ptxparse.read_file(path)), structure(ptx[1]), name)
    end
  end)

  it("writes reg arrays, ptx.inst calls and kernel options", function()
    local _, script = round_trip(CORPUS .. "/nvcc/hopper_sm90a.ptx")
    assert.matches('kernel "hopper_kernel" {', script, 1, true)
    assert.matches("local r = numbered(T.b32, 19)", script, 1, true)
    assert.matches('ptx.inst("mov.u32", r[2], S"%tid.x")', script, 1, true)
    assert.matches('ptx.at(p[1]).inst("bra", L"$L__BB0_2")', script, 1, true)
    assert.matches('{ ".reqnctapercluster", "2, 1, 1" }', script, 1, true)
    assert.matches("ptx.raw[==[cp.async.bulk.tensor.2d", script, 1, true)   -- [addr, {x, y}] has no DSL operand
  end)

  it("assembles to the same cubin as the input", function()
    local ptxas = toolkit.find("ptxas")
    if not ptxas then pending("ptxas not found") return end
    for _, rel in ipairs { "nvcc/hopper_sm90a.ptx", "large/big_gemm_sm80.ptx", "edge/crlf.ptx" } do
      local path = CORPUS .. "/" .. rel
      local text = ptxparse.read_file(path)
      local arch = text:match("%.target%s+([%w_]+)")
      local ptx = round_trip(path)
      assert.are.equal(assemble(ptxas, text, arch), assemble(ptxas, ptx[1], arch), rel)
    end
  end)

  it("names what it cannot carry", function()
    local ok, err = pcall(transpile.transpile, ptxparse.read_file(CORPUS .. "/nvcc/basic_sm80.ptx"), "basic")
    assert.is_false(ok)
    assert.matches("transpile: cannot carry .func _Z5scaleff", err, 1, true)
  end)

  it("runs from the command line", function()
    local out = os.tmpname()
    local p = io.popen(BIN .. " transpile " .. CORPUS .. "/edge/crlf.ptx --name renamed -o " .. out .. " 2>&1; echo rc=$?")
    local log = p:read("*a")
    p:close()
    assert.matches("rc=0", log, 1, true)
    local script = ptxparse.read_file(out)
    os.remove(out)
    assert.matches('kernel "renamed"', script, 1, true)
  end)
end)
