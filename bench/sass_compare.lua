--- The k-loops of our GEMMs beside CUTLASS's, read from the SASS without a
-- GPU (issue 24, docs/performance.md): per innermost MMA loop (the k-loop)
-- the instructions per k-block, the MMA shapes per k-block, the wgmma
-- groups kept in flight, GPU-scope fences, local memory and registers.
-- CUTLASS: bench/cutlass_gemm.cu compiled by nvcc against the headers of
-- the `nvidia-cutlass` wheel (into build/cutlass; about a minute, reused
-- while the source is unchanged); without the wheel or nvcc the table says
-- so and shows ours. usage: luaptx bench/sass_compare.lua [example.lua ...]
local kloops = require "bench.kloops"
local sys = require "pyptx.core.sys"

local COLUMNS = {
  { "kernel", "name" }, { "k-loop insts", "instructions" }, { "k-blocks/iter", "kblocks" },
  { "insts/k-block", "per_kblock" }, { "MMA per k-block", "mma" }, { "groups in flight", "in_flight" },
  { "GPU-scope fences", "fences" }, { "LDL/STL", "local_insts" }, { "registers", "registers" },
}

--- One markdown row of cells.
local function row(cells) return "| " .. table.concat(cells, " | ") .. " |" end

--- The rows of one kernel's k-loops (or one row saying it has none).
local function kernel_rows(label, k, out)
  if #k.loops == 0 then
    out[#out + 1] = row { label, "no MMA loop", "", "", "", "", "", "", "" }
    return
  end
  for i, lp in ipairs(k.loops) do
    local f = kloops.figures(lp, kloops.function_of(k.listing, lp.func))
    f.name = label .. (#k.loops > 1 and (" (loop %d)"):format(i) or "")
    local cells = {}
    for j, c in ipairs(COLUMNS) do cells[j] = f[c[2]] end
    out[#out + 1] = row(cells)
  end
end

--- Print the table; returns the exit status (2 when the SASS cannot be read).
local function main(args)
  local missing = kloops.missing()
  if missing then
    io.stderr:write("sass_compare: ", missing, "\n")
    return 2
  end
  local heads, rule = {}, {}
  for i, c in ipairs(COLUMNS) do heads[i], rule[i] = c[1], "---" end
  local out = { row(heads), row(rule) }
  local dir = (sys.exe_dir() or "build") .. "/cutlass"
  local ok, c, why = pcall(kloops.cutlass, dir)
  if ok and c then
    kernel_rows("CUTLASS cooperative 128x256x64, cluster 2x1", c, out)
  else
    why = ok and why or tostring(c)
    out[#out + 1] = row { "CUTLASS: not measured", why:gsub("\n", " "):sub(1, 300), "", "", "", "", "", "", "" }
  end
  local list = #args > 0 and args or kloops.GEMM_EXAMPLES
  for _, path in ipairs(list) do
    local kok, ks = pcall(kloops.example, path)
    if kok then
      for _, k in ipairs(ks) do kernel_rows(("%s `%s`"):format(path:gsub("^examples/", ""), k.name), k, out) end
    else
      out[#out + 1] = row { path, "failed: " .. tostring(ks):gsub("\n", " "):sub(1, 200), "", "", "", "", "", "", "" }
    end
  end
  if #args == 0 then
    for _, v in ipairs(kloops.VARIANTS) do
      local kok, k = pcall(kloops.variant, v)
      local label = ("%s %s"):format(v[1]:gsub("^examples/", ""), v.label)
      if kok then kernel_rows(("%s `%s`"):format(label, k.name), k, out)
      else out[#out + 1] = row { label, "failed: " .. tostring(k):gsub("\n", " "):sub(1, 200), "", "", "", "", "", "", "" } end
    end
  end
  print(table.concat(out, "\n"))
  print("\nk-blocks/iter: wgmma batches (WARPGROUP.ARRIVE) per iteration; 1 for other MMAs. "
    .. "groups in flight: the least WARPGROUP.DEPBAR.LE gsb0 count in the loop (- without one).")
  return 0
end

os.exit(main(arg or {}))
