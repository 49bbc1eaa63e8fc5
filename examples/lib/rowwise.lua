--- What the row-wise examples (RMS norm, layer norm, softmax) share: the
-- block size for a row, the shape rules, and the CTA reduction through
-- shared memory. Not a kernel script; the examples require it.
local pyptx = require "pyptx"
pyptx.helper()   -- errors and lines name the example calling in
local reg, ptx, smem = pyptx.reg, pyptx.ptx, pyptx.smem
local f32 = pyptx.types.f32

local M = {}

--- Threads per CTA for a row of n floats: opts.threads, else 256 unless the
-- row is too short to feed them (n/4 threads) or too long to fit max_chunks
-- float4 chunks per thread.
function M.threads_for(n, opts, max_chunks)
  if opts and opts.threads then return opts.threads end
  local t = 256
  if n / 4 < t then t = math.max(32, math.floor(n / 4 / 32) * 32) end
  while n / (4 * t) > max_chunks and t < 1024 do t = t * 2 end
  return t
end

--- Why (B, N, opts) breaks the shape rules, or nil: limits.max_chunks
-- float4 chunks per thread, limits.max_n floats per row (optional).
function M.shape_error(default_name, B, N, opts, limits)
  local name = (opts and opts.name) or default_name
  local function bad(msg) return name .. ": " .. msg end
  if type(B) ~= "number" or B < 1 or B ~= math.floor(B) then return bad("B must be a positive integer, got " .. tostring(B)) end
  if type(N) ~= "number" or N < 1 or N ~= math.floor(N) then return bad("N must be a positive integer, got " .. tostring(N)) end
  if B > 2147483647 then return bad("B must be at most 2^31-1 (one CTA per row on grid.x)") end
  local threads = M.threads_for(N, opts, limits.max_chunks)
  if type(threads) ~= "number" or threads % 32 ~= 0 or threads < 32 or threads > 1024 then
    return bad(("threads must be a multiple of 32 in [32, 1024], got %s"):format(tostring(threads)))
  end
  if N % 128 ~= 0 then return bad(("N %% 128 == 0 is required (whole float4 chunks per warp), got N = %d"):format(N)) end
  if N % (4 * threads) ~= 0 then
    return bad(("N %% (4 * threads) == 0 is required, got N = %d, threads = %d"):format(N, threads))
  end
  if N / (4 * threads) > limits.max_chunks then
    return bad(("N / (4 * threads) <= %d is required (the row slice lives in registers), got N = %d, threads = %d")
      :format(limits.max_chunks, N, threads))
  end
  if limits.max_n and N > limits.max_n then
    return bad(("N <= %d is required (a row must fit one CTA's registers without spilling), got N = %d"):format(limits.max_n, N))
  end
  return nil
end

--- What every CTA reduction needs from the thread index, computed once:
-- the warp count, "am I lane 0" and this warp's byte offset (warp*4).
function M.cta_context(tid, warps)
  if warps == 1 then return { warps = 1 } end
  return { warps = warps, lane0 = tid:band(31):eq(0), warp_off = tid:shr(5):shl(2) }
end

--- Reduce the per-thread value v over the CTA with op ("add" or "max");
-- every thread gets the same result. Warp butterfly, lane 0 stores to a
-- fresh shared buffer, one bar.sync, then each thread combines all warp
-- partials (broadcast v4/v2 loads, no bank conflicts) in a fixed order. A
-- fresh buffer per call is what makes one barrier per reduction enough.
function M.cta_reduce(v, cta, op)
  if op == "max" then ptx.warp.reduce_max(v) else ptx.warp.reduce_sum(v) end
  if cta.warps == 1 then return v end
  local warps = cta.warps
  local part = smem.alloc(f32, warps, { align = 16 })
  -- The slot address is computed first so that the only instruction under
  -- the lane-0 guard is the store itself.
  local slot = part:base() + cta.warp_off
  ptx.at(cta.lane0).inst.st.shared.f32(ptx.addr(slot), v)
  ptx.bar_sync(0)
  local combine = op == "max" and ptx.inst.max.f32 or ptx.inst.add.f32
  local p = reg.array(f32, 4)
  local total
  local i = 0
  while i < warps do
    local n = (warps - i >= 4 and 4) or (warps - i >= 2 and 2) or 1  -- ld.shared has v2/v4, no v3
    if n == 1 then ptx.ld.shared(p[0], part[i]) else
      local dst = {}
      for j = 1, n do dst[j] = p[j - 1] end
      ptx.ld.shared(dst, part[i])
    end
    for j = 0, n - 1 do
      if total then combine(total, total, p[j]) else total = reg.from(p[j]) end
    end
    i = i + n
  end
  return total
end

--- Four consecutive registers of an array as a v4 operand.
function M.v4(a, i)
  return { a[i], a[i + 1], a[i + 2], a[i + 3] }
end

return M
