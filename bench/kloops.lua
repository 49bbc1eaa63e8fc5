--- The k-loops of the GEMMs, measured in their SASS (pyptx.runtime.sass's
-- mma_loops): every GEMM example's kernels, and a CUTLASS 4.2 Hopper GEMM
-- (bench/cutlass_gemm.cu) compiled here with nvcc against the headers of
-- the `nvidia-cutlass` PyPI wheel. bench/sass_compare.lua prints them;
-- spec/sass_gemm_spec.lua keeps the examples' k-loops free of GPU-scope
-- fences and local memory.
local sass = require "pyptx.runtime.sass"
local compile = require "pyptx.runtime.compile"
local toolkit = require "pyptx.runtime.toolkit"
local script = require "pyptx.runtime.script"
local sys = require "pyptx.core.sys"
local ptxparse = require "pyptx.ptxparse"

local M = {}

--- Every GEMM example (spec/sass_gemm_spec.lua checks this list against
-- examples/{ampere,hopper,blackwell}/*gemm*.lua).
M.GEMM_EXAMPLES = {
  "examples/hopper/gemm.lua", "examples/hopper/gemm_fast.lua", "examples/hopper/grouped_gemm.lua",
  "examples/hopper/grouped_gemm_uniform.lua",
  "examples/ampere/gemm.lua", "examples/ampere/gemm_2stage.lua", "examples/ampere/gemm_fast.lua",
  "examples/ampere/gemm_pipelined.lua",
  "examples/blackwell/gemm.lua", "examples/blackwell/gemm_no_tma.lua", "examples/blackwell/gemm_persistent.lua",
  "examples/blackwell/grouped_gemm.lua",
}

--- Why the SASS cannot be read here (no nvdisasm, no PTX compiler), or nil.
function M.missing()
  if not toolkit.find("nvdisasm") then return toolkit.missing_message("nvdisasm") end
  local ok, err = pcall(compile.compiler)
  if not ok then return tostring(err) end
  return nil
end

--- ptxas -v's register count of a specialization (nvdisasm's listing
-- names none from sm_90 on), or nil without ptxas.
local function ptxas_registers(s, name)
  local ok, report = toolkit.ptxas(s.ptx, s.arch, { keep_failed = false })
  return ok and report[name] and report[name].registers or nil
end

--- The k-loops of kernel k at values: { name, listing, loops =
-- sass.mma_loops(listing) } (each loop's registers from ptxas -v when the
-- listing has none).
local function kernel_loops(k, values)
  local _, listing = sass.kernel(k, values, { summary_only = true })
  local loops = sass.mma_loops(listing)
  local regs
  for _, lp in ipairs(loops) do
    if not lp.registers then
      regs = regs or ptxas_registers(k:specialize(values), k.name)
      lp.registers = regs
    end
  end
  return { name = k.name, listing = listing, loops = loops }
end

--- The k-loops of every kernel of an example script (see kernel_loops).
function M.example(path)
  local out = {}
  for _, e in ipairs(script.entries(script.load_file(path, {}))) do out[#out + 1] = kernel_loops(e.kernel, e.values) end
  return out
end

--- Variants of the examples that docs/performance.md compares beside their
-- default kernels: the example's build called with these arguments.
M.VARIANTS = {
  { "examples/hopper/gemm_fast.lua", label = "UNROLL=2", args = { 4096, 4096, 4096, { UNROLL = 2 } } },
}

--- The k-loops of one variant's kernel (see kernel_loops).
function M.variant(v)
  local m = assert(loadfile(v[1]))()           -- the module itself: its build, not its kernels list
  return kernel_loops(m.build(unpack(v.args)), {})
end

-- ------------------------------------------------------------- CUTLASS

local PYTHON_MINORS = { 8, 14 }

--- The CUTLASS include directory of the `nvidia-cutlass` wheel in one of
-- the Python environments luaptx searches (toolkit.python_roots), or nil
-- and where it looked.
function M.cutlass_include()
  local looked = {}
  for _, root in ipairs(toolkit.python_roots()) do
    for minor = PYTHON_MINORS[1], PYTHON_MINORS[2] do
      local dir = ("%s/lib/python3.%d/site-packages/cutlass_library/source/include"):format(root, minor)
      if sys.kind(dir .. "/cutlass/cutlass.h") == "file" then return dir end
    end
    looked[#looked + 1] = root
  end
  return nil, ("the nvidia-cutlass wheel's headers were not found under lib/python3.*/site-packages/"
    .. "cutlass_library/source/include of %s: `pip install --no-deps nvidia-cutlass` into build/venv (or "
    .. "$VIRTUAL_ENV)"):format(table.concat(looked, ", "))
end

--- Read a whole file, or nil (missing, unreadable).
local function slurp(path)
  local ok, text = pcall(ptxparse.read_file, path)
  return ok and text or nil
end

--- The CUTLASS kernel's cubin and ptxas's register count, compiled by nvcc
-- into dir (reused while bench/cutlass_gemm.cu and the headers' directory
-- are unchanged: the source and the command are kept beside it). Returns
-- { cubin, registers, seconds, reused } or nil and why.
function M.cutlass_cubin(dir, src)
  src = src or "bench/cutlass_gemm.cu"
  local inc, why = M.cutlass_include()
  if not inc then return nil, why end
  local nvcc = toolkit.find("nvcc")
  if not nvcc then return nil, toolkit.missing_message("nvcc") end
  local text = slurp(src)
  if not text then return nil, "cannot read " .. src end
  local out = dir .. "/cutlass_gemm.cubin"
  local argv = { nvcc, "-std=c++17", "-O3", "-arch=sm_90a", "-cubin", "--expt-relaxed-constexpr", "-DNDEBUG",
                 "-Xptxas", "-v", "-I" .. inc, "-o", out, src }
  local stamp = table.concat(argv, " ") .. "\n" .. text
  local log = slurp(dir .. "/cutlass_gemm.log")
  if slurp(dir .. "/cutlass_gemm.stamp") == stamp and log and sys.kind(out) == "file" then
    return { cubin = slurp(out), registers = tonumber(log:match("Used (%d+) registers")), reused = true }
  end
  sys.mkdirs(dir, tonumber("700", 8))
  local t0 = os.time()
  local res, err = sys.run(argv, { timeout = 900 })
  if not res then return nil, "nvcc: " .. err end
  if res.status ~= 0 then
    return nil, ("nvcc failed (exit status %d) on %s:\n%s"):format(res.status, src, (res.stderr .. res.stdout):sub(1, 4000))
  end
  sys.write_file(dir .. "/cutlass_gemm.log", res.stderr .. res.stdout)
  sys.write_file(dir .. "/cutlass_gemm.stamp", stamp)
  return { cubin = slurp(out), registers = tonumber((res.stderr .. res.stdout):match("Used (%d+) registers")),
           seconds = os.time() - t0 }
end

--- The CUTLASS kernel's k-loops: { name, listing, loops, registers } or
-- nil and why (no wheel, no nvcc, no nvdisasm, nvcc failed).
function M.cutlass(dir)
  local missing = M.missing()
  if missing then return nil, missing end
  local c, why = M.cutlass_cubin(dir)
  if not c then return nil, why end
  local listing = sass.disassemble(c.cubin)
  local loops = sass.mma_loops(listing)
  for _, lp in ipairs(loops) do lp.registers = lp.registers or c.registers end
  return { name = "CUTLASS 4.2 sm90 TMA warp-specialized cooperative 128x256x64, cluster 2x1", listing = listing,
           loops = loops, registers = c.registers, seconds = c.seconds, reused = c.reused }
end

-- ------------------------------------------------------------- figures

--- setmaxnreg's register counts in a function (USETMAXREG), sorted.
function M.setmaxnreg(fn)
  local seen, out = {}, {}
  for _, it in ipairs(fn.items) do
    local n = it.opcode == "USETMAXREG" and it.text:match("(0x%x+)%s*;?$")
    if n and not seen[tonumber(n)] then seen[tonumber(n)] = true; out[#out + 1] = tonumber(n) end
  end
  table.sort(out)
  return out
end

--- The figures of one k-loop, per k-block (an iteration runs `batches`
-- wgmma batches, one per k-block; other MMA loops count one k-block an
-- iteration): { instructions, per_kblock, mma, in_flight, fences,
-- local_insts, registers }, strings ready for a table.
function M.figures(lp, fn)
  local kb = math.max(lp.batches, 1)
  local shapes = {}
  for shape, n in pairs(lp.mma) do shapes[#shapes + 1] = ("%g x %s"):format(n / kb, shape) end
  table.sort(shapes)
  local regs = lp.registers and tostring(lp.registers) or "?"
  local maxn = fn and M.setmaxnreg(fn) or {}
  if #maxn > 0 then
    local list = {}
    for i, n in ipairs(maxn) do list[i] = tostring(n) end
    regs = regs .. " (setmaxnreg " .. table.concat(list, "/") .. ")"
  end
  return {
    instructions = tostring(lp.instructions), per_kblock = ("%g"):format(lp.instructions / kb),
    kblocks = tostring(kb), mma = table.concat(shapes, " + "),
    in_flight = lp.in_flight and tostring(lp.in_flight) or "-", fences = tostring(lp.fences),
    local_insts = tostring(lp.local_insts), registers = regs,
  }
end

--- The function of a listing called name.
function M.function_of(listing, name)
  for _, fn in ipairs(listing.functions) do if fn.name == name then return fn end end
end

return M
