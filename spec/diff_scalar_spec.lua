-- The scalar differential against nvcc: every form of
-- spec/fixtures/cuda/diff_scalar_cases.h (f32/f64/f16/bf16 arithmetic in
-- each rounding mode with .ftz/.sat/.relu, min/max with .NaN and
-- .xorsign.abs, setp/set/slct, testp, copysign, neg/abs, div/rem, every
-- integer cvt pair with .sat, integer <-> float, f16/bf16/tf32/fp8
-- conversions, f32 atomics), compiled by nvcc into
-- spec/fixtures/ptx/nvcc/diff_scalar_{sm80,sm90a}.ptx, runs on the emulator
-- over edge values crossed with each other plus random patterns, and each
-- result is checked bit for bit against the H100 (recorded) and the host
-- oracle: every result of both archs was recorded on an NVIDIA H100, and
-- spec/fixtures/diff_scalar_h100.delta keeps the ones that differ from the
-- table the host oracle (spec/fixtures/cuda/scalar_oracle.cu: CUDA's own
-- host conversions, IEEE host arithmetic, exact integer rounding) wrote
-- into spec/fixtures/diff_scalar.ref. The expected value is the H100's
-- where the delta has one, else the oracle's (which the H100 then gave
-- too, so the .ref's NaN-agnostic flag is not used: NaN payloads count).
-- All of it is checked in, so no toolkit or GPU is needed;
-- spec/fixtures/cuda/build.sh regenerates the oracle's table and
-- spec/fixtures/cuda/hw_delta.lua the delta from a new recording.
-- oracle: hardware records: nvcc's PTX, each result as an H100 gave it (spec/fixtures/diff_scalar_h100.delta, diff_scalar.ref)
local ffi = require "ffi"
local bit = require "bit"
local pyptx = require "pyptx"
local tensor = require "pyptx.runtime.tensor"
local H = require "spec.helpers"

local types = pyptx.types
local REF = "spec/fixtures/diff_scalar.ref"
local HW_DELTA = "spec/fixtures/diff_scalar_h100.delta"

--- A hex string as a uint64_t.
local function hex64(s)
  if #s <= 8 then return ffi.new("uint64_t", tonumber(s, 16)) end
  return ffi.new("uint64_t", tonumber(s:sub(1, -9), 16)) * 4294967296ULL + tonumber(s:sub(-8), 16)
end

--- The values of a fixed-width hex line (digits per value) as uint64_t[n].
local function fixed(line, digits, n)
  local v = ffi.new("uint64_t[?]", n)
  for t = 0, n - 1 do v[t] = hex64(line:sub(t * digits + 1, (t + 1) * digits)) end
  return v
end

--- The reference table: a list of groups { name, n, inputs = { A = uint64_t[n], ... },
-- cases = { { k, width, sm, flags, text, want = uint64_t[n] } } }.
local function parse(path)
  local groups, g, pending = {}, nil, nil
  for line in H.read(path):gmatch("([^\n]*)\n") do
    if pending then
      local c = pending
      if c.base < 0 then c.want = fixed(line, c.digits, g.n)
      else
        c.want = ffi.new("uint64_t[?]", g.n)
        ffi.copy(c.want, g.cases[c.base + 1].want, 8 * g.n)
        for t, v in line:gmatch("(%x+):(%x+)") do c.want[tonumber(t, 16)] = hex64(v) end
      end
      g.cases[#g.cases + 1], pending = c, nil
    elseif line:match("^group ") then
      local name, n = line:match("^group (%S+) (%d+)")
      g = { name = name, n = tonumber(n), inputs = {}, cases = {} }
      groups[#groups + 1] = g
    elseif line:match("^L?[ABC] ") then
      local key, hex = line:match("^(%S+) (%x+)")
      g.inputs[key] = fixed(hex, key:sub(1, 1) == "L" and 16 or 8, g.n)
    elseif line:match("^case ") then
      local k, w, d, sm, fl, base, text = line:match("^case (%d+) (%d+) (%d+) (%d+) (%d+) (%-?%d+) (.*)$")
      pending = { k = tonumber(k), width = tonumber(w), digits = tonumber(d), sm = tonumber(sm), flags = tonumber(fl),
                  base = tonumber(base), text = text }
    end
  end
  return groups
end

local GROUPS = parse(REF)

--- The recorded GPU results that differ from the oracle:
-- delta[arch][group][case] = { [thread] = uint64_t }.
local function parse_delta(path)
  local delta = {}
  for line in H.read(path):gmatch("([^\n]*)\n") do
    local archs, group, k, rest = line:match("^(%S+) (%S+) (%d+) (.*)$")
    if archs and not archs:match("^#") then
      for arch in archs:gmatch("[^,]+") do
        delta[arch] = delta[arch] or {}
        delta[arch][group] = delta[arch][group] or {}
        local vals = {}
        for t, v in rest:gmatch("(%x+):(%x+)") do vals[tonumber(t, 16)] = hex64(v) end
        delta[arch][group][tonumber(k)] = vals
      end
    end
  end
  return delta
end

local DELTA = parse_delta(HW_DELTA)

local dev = H.diff_device

--- A device tensor of dtype holding a uint64_t[n] (narrowed to the storage type).
local function upload(vals, n, dtype)
  local buf = ffi.new(tensor.storage(dtype) .. "[?]", n)
  for i = 0, n - 1 do buf[i] = vals[i] end
  return tensor.from_ffi(buf, { n }, dtype, dev())
end

--- Hex of a uint64_t.
local function hx(v) return bit.tohex(v, 16):gsub("^0+(%x)", "%1") end

--- Compare a group's output buffer (uint64_t or uint32_t, case k at k * n)
-- with its cases for arch (sm number archnum): the H100's value where the
-- delta has one (bit for bit), else the oracle's; fails naming each
-- mismatching form, a thread, its inputs, the value got and the value
-- expected (and whose it is).
local function check(g, got, arch, archnum)
  local msgs, bad = {}, 0
  local hw = (DELTA[arch] or {})[g.name] or {}
  for _, c in ipairs(g.cases) do
    if c.sm <= archnum then
      local first, firstw
      local hwc = hw[c.k] or {}
      for t = 0, g.n - 1 do
        local v, w = ffi.cast("uint64_t", got[c.k * g.n + t]), hwc[t] or c.want[t]
        if v ~= w then
          bad = bad + 1
          first, firstw = first or t, firstw or w
        end
      end
      if first and #msgs < 12 then
        local i = g.inputs
        msgs[#msgs + 1] = ("%s: thread %d (a=%s b=%s c=%s la=%s lb=%s lc=%s): got 0x%s, expected 0x%s (%s)"):format(c.text, first,
          hx(i.A[first]), hx(i.B[first]), hx(i.C[first]), hx(i.LA[first]), hx(i.LB[first]), hx(i.LC[first]),
          hx(ffi.cast("uint64_t", got[c.k * g.n + first])), hx(firstw), hwc[first] and "the H100's" or "the oracle's")
      end
    end
  end
  assert(bad == 0, table.concat(msgs, "\n") .. ("\n[%d mismatching results in %s]"):format(bad, g.name))
end

--- With LUAPTX_DIFF_RECORD=file, append the device's results for a group:
-- one line per case, "<arch> <group> <case> <hex values>" (how the H100's
-- results were recorded; spec/fixtures/cuda/hw_delta.lua turns a record
-- into spec/fixtures/diff_scalar_h100.delta).
local function record(arch, g, got)
  local path = os.getenv("LUAPTX_DIFF_RECORD")
  if not path then return end
  local f = assert(io.open(path, "a"))
  for _, c in ipairs(g.cases) do
    local hex = {}
    for t = 0, g.n - 1 do hex[#hex + 1] = bit.tohex(ffi.cast("uint64_t", got[c.k * g.n + t]), 16):sub(17 - c.digits) end
    f:write(("%s %s %d %s\n"):format(arch, g.name, c.k, table.concat(hex)))
  end
  f:close()
end

local ARCHS = { { "sm80", 80 }, { "sm90a", 90 } }

for _, a in ipairs(ARCHS) do
  local arch, archnum = a[1], a[2]
  describe("nvcc " .. arch .. " scalar forms against the H100 (recorded) and the host oracle", function()
    for _, g in ipairs(GROUPS) do
      local what = ("%s: %d forms over %d inputs"):format(g.name, #g.cases, g.n)
      it(what .. " match bit for bit", function()
        local mod = pyptx.load_ptx(("spec/fixtures/ptx/nvcc/diff_scalar_%s.ptx"):format(arch))
        local n, i = g.n, g.inputs
        local grid = math.ceil(n / 128)
        if g.name == "scalar_atomics" then
          local scratch, out = tensor.empty({ 2 * n }, types.u32, dev()), tensor.empty({ 4 * n }, types.u32, dev())
          out:fill_bytes(0xff)
          mod.scalar_atomics { grid = grid, block = 128, device = dev(),
                               args = { upload(i.A, n, types.u32), upload(i.B, n, types.u32), scratch, out, n } }
          record(arch, g, out:to_host())
          return check(g, out:to_host(), arch, archnum)
        end
        local out = tensor.empty({ #g.cases * n }, types.u64, dev())
        out:fill_bytes(0xff)
        mod[g.name] { grid = grid, block = 128, device = dev(),
                      args = { upload(i.A, n, types.u32), upload(i.B, n, types.u32), upload(i.C, n, types.u32),
                               upload(i.LA, n, types.u64), upload(i.LB, n, types.u64), upload(i.LC, n, types.u64), out, n } }
        record(arch, g, out:to_host())
        check(g, out:to_host(), arch, archnum)
      end)
    end
  end)
end
