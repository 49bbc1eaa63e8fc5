--- The REPL's :run: trace the session with an epilogue that stores every
-- register of every thread to an output tensor, launch it on the current
-- device (the emulator without a GPU), and print each register per lane,
-- collapsing runs of lanes that hold the same value.
local ffi = require "ffi"
local pyptx = require "pyptx"
local core = require "pyptx.core"
local trace = require "pyptx.trace"
local reg = require "pyptx.reg"
local floats = require "pyptx.runtime.floats"

local M = {}
local types, ptx = pyptx.types, pyptx.ptx

--- The pyptx type with a C type id.
local function type_of(id)
  for _, t in ipairs(types.all) do if t.id == id then return t end end
end

--- PTX register names the way the emitter numbers them (per class, from 1).
local function names(regtypes)
  local counts, out = {}, {}
  for i = 0, #regtypes do
    local t = regtypes[i]
    local prefix = t.kind == "p" and "%p" or (t == types.f32 and "%f") or (t == types.f64 and "%fd")
      or (t.bits <= 16 and "%rs") or (t.bits == 64 and "%rd") or "%r"
    counts[prefix] = (counts[prefix] or 0) + 1
    out[i] = prefix .. counts[prefix]
  end
  return out
end

--- Store register r (of type t) to [addr + off] in a form every type takes.
local function store(r, t, addr, off)
  if t.kind == "p" then
    local v = reg.new(trace.current(), types.u32)
    ptx.inst.selp.u32(v, 1, 0, r)
    ptx.inst.st.global.u32(ptx.addr(addr, off), v)
  elseif t.bits <= 16 then
    ptx.inst.st.global.b16(ptx.addr(addr, off), r)
  else
    ptx.inst["st"]["global"]["b" .. t.bits](ptx.addr(addr, off), r)
  end
end

--- Decode the 8 stored bytes (two u32 words) of a register as text.
local function decode(t, lo, hi)
  if t.kind == "p" then return lo % 2 == 1 and "true" or "false" end
  if t == types.f32 then return ("%.9g"):format(floats.from_f32_bits(lo)) end
  if t == types.f16 then return ("%.5g"):format(floats.from_f16(lo % 65536)) end
  if t == types.bf16 then return ("%.4g"):format(floats.from_bf16(lo % 65536)) end
  if t == types.f64 then return ("%.17g"):format(floats.from_f64_bits(lo, hi)) end
  if t.bits == 64 then
    local u = ffi.new("uint64_t", hi) * 4294967296ULL + lo
    if t.kind == "s" then return tostring(ffi.cast("int64_t", u)):gsub("LL$", "") end
    return tostring(u):gsub("ULL$", "")
  end
  local v = t.bits == 16 and lo % 65536 or lo
  if t.kind == "s" and v >= 2 ^ (t.bits - 1) then v = v - 2 ^ t.bits end
  return ("%d"):format(v)
end

--- "0-15: 3  16-31: 4": lanes grouped by runs of equal values.
local function runs(values, n)
  local parts, start = {}, 0
  for i = 1, n do
    if i == n or values[i] ~= values[start] then
      local span = (i - 1 == start) and tostring(start) or (start .. "-" .. (i - 1))
      parts[#parts + 1] = (n > 1 and (span .. ": ") or "") .. values[start]
      start = i
    end
  end
  if #parts == 1 and n > 1 then return "all: " .. values[0] end
  return table.concat(parts, "  ")
end

--- Trace, launch and print; threads is the block size.
function M.run(session, threads)
  local base = session:kernel():specialize {}
  local nregs = core.func_reg_count(base.module, base.fn)
  if nregs == 0 then session.out:write("no registers yet\n") return end
  local regtypes = {}
  for i = 0, nregs - 1 do regtypes[i] = type_of(core.reg_type(base.module, base.fn, i)) end
  local k = pyptx.kernel "repl" {
    arch = session.arch, version = session.version, block = { threads },
    out_specs = { pyptx.Tile(threads * nregs * 2, types.u32) },
    function(OUT)
      session:replay()
      local p = ptx.global_ptrs(OUT)
      local tid = reg.from(ptx.special.tid.x(), types.u32)
      local addr = p + tid:mul_wide(nregs * 8)
      for i = 0, nregs - 1 do
        store(reg.make(i, regtypes[i], trace.current()), regtypes[i], addr, i * 8)
      end
      ptx.ret()
    end,
  }
  local runtime = require "pyptx.runtime"
  local dev = runtime.device()
  -- registers a snippet never wrote are shown, not reported as a bug here
  if dev.kind == "emu" then core.device_set_option(dev.handle, "uninit_check", 0) end
  local ok, out = pcall(k)
  if dev.kind == "emu" then core.device_set_option(dev.handle, "uninit_check", 1) end
  if not ok then error(out, 0) end
  local words = out:to_host()
  local reg_names = names(regtypes)
  session.out:write(("ran %d threads on %s\n"):format(threads, dev.name))
  for i = 0, nregs - 1 do
    local values = {}
    for lane = 0, threads - 1 do
      local w = (lane * nregs + i) * 2
      values[lane] = decode(regtypes[i], tonumber(words[w]), tonumber(words[w + 1]))
    end
    session.out:write(("%-6s %-5s %s\n"):format(reg_names[i], regtypes[i].name, runs(values, threads)))
  end
end

return M
