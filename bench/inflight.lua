--- Little's law for the memory-bound kernels, without a GPU (issue 24,
-- docs/performance.md): at B=2048 N=8192, the global-load bytes each SM
-- keeps in flight (SASS LDG widths per thread x threads per CTA x the CTAs
-- an SM holds, from ptxas's registers and the occupancy calculator) beside
-- what the GPU's HBM needs in flight: bandwidth x latency / SMs.
-- usage: luaptx bench/inflight.lua [latency_ns] [gpu]   (default 700 ns, H100)
local sass = require "pyptx.runtime.sass"
local toolkit = require "pyptx.runtime.toolkit"
local occupancy = require "pyptx.tools.occupancy"
local gpus = require "pyptx.tools.gpus"
local kloops = require "bench.kloops"

local M = {}

--- The bytes one LDG moves per thread: its .64/.128 width, else 4 (.U8,
-- .S8: 1; .U16, .S16: 2).
function M.ldg_bytes(text)
  local op = text:gsub("^@!?U?P%w+%s+", ""):match("^[%w%.]+")
  local bits = tonumber(op:match("%.(128)") or op:match("%.(64)"))
  if bits then return bits / 8 end
  if op:match("%.[US]8") then return 1 end
  if op:match("%.[US]16") then return 2 end
  return 4
end

--- Global-load bytes a thread keeps in flight: those of the loop holding
-- the most (one iteration's loads), or of the whole kernel without such a
-- loop (every load issued once, before the values are used).
function M.thread_bytes(fn)
  local function sum(from, to)
    local n = 0
    for _, it in ipairs(fn.items) do
      if it.opcode == "LDG" and it.offset >= from and it.offset <= to then n = n + M.ldg_bytes(it.text) end
    end
    return n
  end
  local best
  for _, lp in ipairs(sass.loops(fn)) do
    local n = sum(lp.from, lp.to)
    if n > 0 and (not best or n > best) then best = n end
  end
  return best or sum(0, math.huge), best ~= nil
end

--- One kernel's row: { name, threads, registers, ctas, thread_bytes, sm_bytes, looped }.
function M.row(k, values)
  local _, listing = sass.kernel(k, values, { summary_only = true })
  local s = k:specialize(values)
  local ok, report = toolkit.ptxas(s.ptx, s.arch, { keep_failed = false })
  local regs = ok and report[k.name] and report[k.name].registers or 0
  local threads = s.block[1] * s.block[2] * s.block[3]
  local occ = occupancy.compute { arch = 90, threads = threads, registers = regs, smem = s.static_smem + s.dynamic_smem }
  local tb, looped = M.thread_bytes(kloops.function_of(listing, k.name) or listing.functions[1])
  local ctas = occ and occ.ctas or 0
  return { name = k.name, threads = threads, registers = regs, ctas = ctas, thread_bytes = tb,
           sm_bytes = tb * threads * ctas, looped = looped }
end

--- Print the table for the Hopper memory-bound kernels.
local function main(args)
  local missing = kloops.missing()
  if missing then io.stderr:write("inflight: ", missing, "\n") return 2 end
  local latency = tonumber(args[1]) or 700
  local g = assert(gpus.find(args[2] or "H100"))
  local need = g.bw * 1e9 * latency * 1e-9 / g.sms
  print(("%s: %d GB/s x %d ns / %d SMs = %.1f KB in flight per SM to saturate HBM (Little's law; the latency is an assumption)")
    :format(g.full, g.bw, latency, g.sms, need / 1024))
  print("| kernel (B=2048, N=8192) | threads/CTA | registers | CTAs/SM | LDG bytes/thread | KB in flight/SM | x need |")
  print("| --- | --- | --- | --- | --- | --- | --- |")
  for _, name in ipairs { "rms_norm", "layer_norm", "swiglu", "softmax" } do
    local mod = require("examples.hopper." .. name)
    local r = M.row(mod.build(2048, 8192), {})
    print(("| hopper/%s | %d | %d | %d | %d%s | %.0f | %.1f |"):format(name, r.threads, r.registers, r.ctas, r.thread_bytes,
      r.looped and " (per iteration)" or "", r.sm_bytes / 1024, r.sm_bytes / need))
  end
  return 0
end

if arg and arg[0] and arg[0]:match("inflight%.lua$") then os.exit(main(arg)) end
return M
