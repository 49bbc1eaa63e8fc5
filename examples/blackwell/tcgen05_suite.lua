--- Each tcgen05 primitive (sm_100a) in a kernel that computes something a
-- CPU reference checks, element by element, on fresh random inputs:
-- allocation, every tcgen05.ld / tcgen05.st shape, tcgen05.mma of each
-- dense kind (f16/bf16, tf32, e4m3 x e5m2, s8 x u8), K- and MN-major
-- operands in every swizzle, A from tensor memory, scale-input-d and
-- disable-output-lane, the 2-CTA (cta_group::2) MMA with a multicast
-- commit, tcgen05.cp in every shape and tcgen05.shift.
--
-- Every kernel that touches tensor memory allocates it first (warp 0:
-- tcgen05.alloc + relinquish_alloc_permit, the base address read back from
-- shared memory) and frees it last (tcgen05.dealloc), as PTX requires; MMA
-- results are read after a tcgen05.commit to an mbarrier and a wait on it.
-- The MMA operands are built on the host in the canonical shared-memory
-- layouts of the PTX ISA (M.layout) and copied into shared memory as words.
--
-- `luaptx run examples/blackwell/tcgen05_suite.lua` runs every case on the
-- current device (the emulator without a GPU); `--summary` prints the
-- PTX/ptxas summary. M.ptxas_only holds forms the emulator does not run
-- yet (tcgen05.mma.sp, decompressing tcgen05.cp); they are assembled only.
local bit = require "bit"
local pyptx = require "pyptx"
local bw = require "pyptx.blackwell"
local half = require "pyptx.floats"
local kernel, reg, ptx, smem, Tile = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.smem, pyptx.Tile
local T = pyptx.types

local M = {}

-- ------------------------------------------------------------ kernel helpers

--- A Lua list of n fresh registers of type ty.
local function regs(ty, n)
  local a, out = reg.array(ty, n), {}
  for i = 0, n - 1 do out[i + 1] = a[i] end
  return out
end

--- Allocate ncols TMEM columns in warp 0, run body(taddr, tid, warp), free
-- them. cta = 2: the pair allocates together and meets at cluster barriers.
local function with_tmem(ncols, cta, body)
  local tc = ptx.tcgen05
  local slot = smem.alloc(T.u32, 1)
  local tid = reg.from(ptx.special.tid.x(), T.u32)
  local warp = tid:shr(5)
  local function sync() if cta == 2 then ptx.cluster.sync() else ptx.bar_sync(0) end end
  ptx.if_(warp:eq(0), function()
    tc.alloc { dst = slot, ncols = ncols, cta_group = cta }
    tc.relinquish_alloc_permit { cta_group = cta }
  end)
  tc.fence_before_thread_sync()
  sync()
  tc.fence_after_thread_sync()
  local taddr = reg.scalar(T.b32)
  ptx.inst.ld.shared.b32(taddr, ptx.addr(slot))
  body(taddr, tid, warp)
  tc.fence_before_thread_sync()
  sync()
  ptx.if_(warp:eq(0), function()
    tc.fence_after_thread_sync()
    tc.dealloc { taddr = taddr, ncols = ncols, cta_group = cta }
  end)
end

--- A kernel "name" for sm_100a with 128 threads; opts override the defaults.
local function k(name, opts, fn)
  local o = { arch = "sm_100a", block = { 128, 1, 1 }, grid = { 1, 1, 1 } }
  for key, v in pairs(opts) do o[key] = v end
  o[1] = function(...) fn(...) ptx.ret() end
  return kernel(name)(o)
end

--- Copy n u32 words from global src (word offset first) to shared dst, all 128 threads.
local function copy_words(dst, src, first, n, tid)
  ptx.range(tid, n, 128, function(i)
    local v = reg.scalar(T.u32)
    ptx.inst.ld.global.u32(v, ptx.addr(src + (i + first):mul_wide(4)))
    ptx.inst.st.shared.u32(ptx.addr(dst + i * 4), v)
  end)
end

--- Each warp reads ncols D columns of its 32 TMEM lanes (32x32b, 32 at a
-- time) and hands register j (column c0 + j) to store(col, reg).
local function read_lanes(lane_base, ncols, store)
  local tc = ptx.tcgen05
  local c = 0
  while c < ncols do
    local n = math.min(32, ncols - c)
    while bit.band(n, n - 1) ~= 0 do n = n - 1 end
    local v = regs(T.b32, n)
    tc.ld { dst = v, taddr = c == 0 and lane_base or lane_base + c, shape = "32x32b" }
    tc.wait("ld")
    for j = 1, n do store(c + j - 1, v[j]) end
    c = c + n
  end
end

-- ------------------------------------------------------ shared-memory layouts

local SPAN = { none = 0, ["32B"] = 32, ["64B"] = 64, ["128B"] = 128 }

--- The canonical shared-memory layout of a tcgen05 operand (PTX ISA,
-- "Shared memory descriptor" and "Shared Memory Layout and Swizzling"),
-- as offsets from a 1024-byte aligned base. o = { major = "K" | "MN",
-- swizzle = "none" | "32B" | "64B" | "128B", strided = rows of the
-- strided dimension (M/N for K-major, K for MN-major), bytes = bytes
-- along the contiguous one }. Returns { at(s, b): offset of byte b of
-- strided row s, lbo, sbo, size, start(s_row, byte): an unswizzled start
-- offset for a descriptor }. Without swizzle the 8 x 16-byte core
-- matrices lie contiguous dimension first (K-major: LBO = 128 along K,
-- SBO between 8-row groups; MN-major the other way round); with a swizzle
-- of S bytes, rows of S bytes form 8-row atoms SBO = 8 S apart, S-byte
-- blocks of the contiguous dimension follow one another, and 16-byte
-- chunks are XORed with the address's 128-byte line (bits 4.. ^= bits 7..).
function M.layout(o)
  local S, rows, bytes, mn = SPAN[o.swizzle or "none"], o.strided, o.bytes, o.major == "MN"
  assert(S, "swizzle must be none, 32B, 64B or 128B")
  local L = { size = rows * bytes }
  local unswizzled
  if S == 0 then
    local nq, ng = bytes / 16, rows / 8
    -- core matrix (row group g, 16-byte chunk q): K-major chunk-fastest, MN-major group-fastest
    unswizzled = function(s, b)
      local g, q = math.floor(s / 8), math.floor(b / 16)
      local core = mn and (q * ng + g) or (g * nq + q)
      return core * 128 + (s % 8) * 16 + b % 16
    end
    L.lbo, L.sbo = 128, mn and ng * 128 or nq * 128
  else
    unswizzled = function(s, b)
      return math.floor(b / S) * rows * S + math.floor(s / 8) * 8 * S + (s % 8) * S + b % S
    end
    L.lbo, L.sbo = mn and rows * S or 16, 8 * S
    L.size = math.ceil(bytes / S) * rows * S       -- a row takes the whole span
  end
  L.start = unswizzled
  L.at = function(s, b)
    local a = unswizzled(s, b)
    if S == 0 then return a end
    return bit.bxor(a, bit.lshift(bit.band(bit.rshift(a, 7), S / 16 - 1), 4))
  end
  L.swizzle = o.swizzle or "none"
  return L
end

-- ------------------------------------------------------------ element types

local function tf32_round(x)     -- the tf32 bits of x: f32 truncated to 19 bits (exact for the values drawn)
  return bit.band(half.f32_bits(x), 0xffffe000)
end

--- Per input type: bytes, bits of a value (a Lua number already of the type), its value, a random draw.
local ELEM = {
  bf16 = { bytes = 2, bits = half.to_bf16, value = half.from_bf16, draw = half.round_bf16 },
  f16 = { bytes = 2, bits = half.to_f16, value = half.from_f16, draw = half.round_f16 },
  tf32 = { bytes = 4, bits = tf32_round, value = function(b) return half.from_f32_bits(b) end,
           draw = function(x) return half.from_f32_bits(tf32_round(x)) end },
  e4m3 = { bytes = 1, bits = half.to_e4m3, value = half.from_e4m3, draw = function(x) return half.from_e4m3(half.to_e4m3(x * 4)) end },
  e5m2 = { bytes = 1, bits = half.to_e5m2, value = half.from_e5m2, draw = function(x) return half.from_e5m2(half.to_e5m2(x * 4)) end },
  s8 = { bytes = 1, bits = function(v) return v % 256 end, value = function(b) return b >= 128 and b - 256 or b end,
         draw = function(x) return math.floor(x * 128) end },
  u8 = { bytes = 1, bits = function(v) return v end, value = function(b) return b end,
         draw = function(x) return math.floor((x + 1) * 127.5) end },
}
M.ELEM = ELEM

--- Little-endian u32 words of a byte image of size bytes; put(offset, nbytes, bits) stores an element.
local function image(size)
  local bytes = {}
  for i = 1, size do bytes[i] = 0 end
  local img = {}
  function img.put(off, n, v)
    for i = 0, n - 1 do bytes[off + i + 1] = bit.band(bit.rshift(v, 8 * i), 0xff) end
  end
  function img.words()
    local w = {}
    for i = 0, size / 4 - 1 do
      local b = i * 4
      w[i + 1] = bytes[b + 1] + bytes[b + 2] * 256 + bytes[b + 3] * 65536 + bytes[b + 4] * 16777216
    end
    return w
  end
  return img
end

--- The words of matrix vals (rows x kdim, row-major) of element type ty in layout L.
function M.operand_words(vals, rows, kdim, ty, L, mn_major)
  local e = ELEM[ty]
  local img = image(L.size)
  for r = 0, rows - 1 do
    for kk = 0, kdim - 1 do
      local bits = e.bits(vals[r * kdim + kk + 1])
      if mn_major then img.put(L.at(kk, r * e.bytes), e.bytes, bits)
      else img.put(L.at(r, kk * e.bytes), e.bytes, bits) end
    end
  end
  return img.words()
end

-- ------------------------------------------------------------------ alloc

--- alloc: one allocation of all 512 columns (it can only start at column
-- 0), then two of 256 (at 0 and 256, in either order): { a512, a1 + a2, a1 ^ a2, lanes }.
local function alloc_case()
  local kern = k("tc_alloc", { out_specs = { Tile(4, T.u32) } }, function(O)
    local tc = ptx.tcgen05
    local po = ptx.global_ptrs(O)
    local slots = smem.alloc(T.u32, 3)
    local tid = reg.from(ptx.special.tid.x(), T.u32)
    ptx.if_(tid:lt(32), function()
      tc.alloc { dst = slots[0], ncols = 512 }
      local a = reg.scalar(T.u32)
      ptx.inst.ld.shared.u32(a, slots[0])
      tc.dealloc { taddr = a, ncols = 512 }
      tc.alloc { dst = slots[1], ncols = 256 }
      tc.alloc { dst = slots[2], ncols = 256 }
      tc.relinquish_alloc_permit {}
      local a1, a2 = reg.scalar(T.u32), reg.scalar(T.u32)
      ptx.inst.ld.shared.u32(a1, slots[1])
      ptx.inst.ld.shared.u32(a2, slots[2])
      ptx.if_(tid:eq(0), function()
        ptx.inst.st.global.u32(ptx.addr(po), a)
        ptx.inst.st.global.u32(ptx.addr(po, 4), a1 + a2)
        ptx.inst.st.global.u32(ptx.addr(po, 8), a1:bxor(a2))
        ptx.inst.st.global.u32(ptx.addr(po, 12), a1:bor(a2):shr(16))
      end)
      tc.dealloc { taddr = a1, ncols = 256 }
      tc.dealloc { taddr = a2, ncols = 256 }
    end)
  end)
  return { name = "alloc", kernel = kern, inputs = function() return {} end, args = function() return {} end,
           reference = function() return { 0, 256, 256, 0 } end, tolerance = { atol = 0, rtol = 0 } }
end

-- ------------------------------------------------------------------ ld / st

-- Register j of thread l of a warp access: { lane in the 16 or 32, 32-bit
-- column }, from the ISA's fragment figures of each shape.
local PLACE = {
  ["32x32b"] = function(l, j) return l, j end,
  ["16x64b"] = function(l, j) return math.floor(l / 4) + 8 * (l % 2), math.floor(l / 2) % 2 + 2 * j end,
  ["16x128b"] = function(l, j) return math.floor(l / 4) + 8 * (j % 2), l % 4 + 4 * math.floor(j / 2) end,
  ["16x256b"] = function(l, j) return math.floor(l / 4) + 8 * (math.floor(j / 2) % 2), j % 2 + 2 * (l % 4) + 8 * math.floor(j / 4) end,
  ["16x32bx2"] = function(l, j) return l % 16, j end,
}
M.PLACE = PLACE
local SPLIT = 8     -- the 16x32bx2 second half's column offset (right after the first)

--- Where register j of thread l of an access with this shape lands: lane
-- (0..31 from the warp's base) and column (0..), with pack (two columns) or not.
local function placed(shape, l, j, wide)
  local ln, c = PLACE[shape](l, j)
  local hi = 0
  if shape == "16x32bx2" then hi = math.floor(l / 16) * SPLIT end
  return ln, hi + c * wide
end

--- st_<shape>: each warp stores registers (value 1000 * tid + j) with the
-- shape, to its lanes (16-row shapes: at lane 0 and again, other values,
-- at lane 16 of its quarter), then every column it wrote comes back with
-- 32x32b: out[lane][col]. wide = 2: the .unpack::16b store.
local function st_case(shape, nregs, wide)
  local per = { ["32x32b"] = 1, ["16x64b"] = 2, ["16x128b"] = 4, ["16x256b"] = 8, ["16x32bx2"] = 1 }
  local num = nregs / bw.SHAPE_REGS[shape]
  local ncols = per[shape] * num * wide * (shape == "16x32bx2" and 2 or 1)
  local name = "tc_st_" .. shape .. (wide == 2 and "_unpack" or "")
  local kern = k(name, { out_specs = { Tile(128, ncols, T.u32) } }, function(O)
    local po = ptx.global_ptrs(O)
    with_tmem(32, 1, function(taddr, tid, warp)
      local tc = ptx.tcgen05
      local base = taddr + warp * bw.tmem_offset(32, 0)
      for h = 0, (shape == "32x32b" and 0 or 1) do
        local v = regs(T.b32, nregs)
        for j = 1, nregs do ptx.inst.mad.lo.u32(v[j], tid, 1000, 100 * h + j - 1) end
        tc.st { taddr = h == 0 and base or base + bw.tmem_offset(16, 0), src = v, shape = shape,
                split = shape == "16x32bx2" and SPLIT or nil, unpack = wide == 2 or nil }
      end
      tc.wait("st")
      local row = po + (tid * ncols):mul_wide(4)
      read_lanes(base, ncols, function(c, r) ptx.inst.st.global.u32(ptx.addr(row, c * 4), r) end)
    end)
  end)
  local function reference()
    local out = {}
    for t = 0, 127 do
      local w, l = math.floor(t / 32), t % 32
      for h = 0, (shape == "32x32b" and 0 or 1) do
        for j = 0, nregs - 1 do
          local v = 1000 * t + 100 * h + j
          local ln, c = placed(shape, l, j, wide)
          local lane = 32 * w + 16 * h + ln
          if wide == 2 then
            out[lane * ncols + c + 1] = v % 65536
            out[lane * ncols + c + 2] = math.floor(v / 65536)
          else
            out[lane * ncols + c + 1] = v
          end
        end
      end
    end
    return out
  end
  return { name = name, kernel = kern, inputs = function() return {} end, args = function() return {} end,
           reference = reference, tolerance = { atol = 0, rtol = 0 } }
end

--- ld_<shape>: each warp stores 32 columns with 32x32b (value 1000 * lane +
-- col of its TMEM lanes), then loads them back with the shape: out[tid][j].
local function ld_case(shape, nregs, wide)
  local name = "tc_ld_" .. shape .. (wide == 2 and "_pack" or "")
  local kern = k(name, { out_specs = { Tile(128, nregs, T.u32) } }, function(O)
    local po = ptx.global_ptrs(O)
    with_tmem(32, 1, function(taddr, tid, warp)
      local tc = ptx.tcgen05
      local base = taddr + warp * bw.tmem_offset(32, 0)
      local v = regs(T.b32, 32)
      for j = 1, 32 do ptx.inst.mad.lo.u32(v[j], tid, 1000, j - 1) end
      tc.st { taddr = base, src = v, shape = "32x32b" }
      tc.wait("st")
      local r = regs(T.b32, nregs)
      local lane_off = shape == "32x32b" and 0 or 16
      tc.ld { dst = r, taddr = base + bw.tmem_offset(lane_off, 0), shape = shape,
              split = shape == "16x32bx2" and SPLIT or nil, pack = wide == 2 or nil }
      tc.wait("ld")
      local row = po + (tid * nregs):mul_wide(4)
      for j = 1, nregs do ptx.inst.st.global.u32(ptx.addr(row, (j - 1) * 4), r[j]) end
    end)
  end)
  local function reference()
    local out = {}
    for t = 0, 127 do
      local w, l = math.floor(t / 32), t % 32
      for j = 0, nregs - 1 do
        local ln, c = placed(shape, l, j, wide)
        local lane = 32 * w + (shape == "32x32b" and 0 or 16) + ln
        local v = 1000 * lane + c
        if wide == 2 then v = (v % 65536) + (1000 * lane + c + 1) % 65536 * 65536 end
        out[t * nregs + j + 1] = v
      end
    end
    return out
  end
  return { name = name, kernel = kern, inputs = function() return {} end, args = function() return {} end,
           reference = reference, tolerance = { atol = 0, rtol = 0 } }
end

-- ------------------------------------------------------------------ mma

local KIND_K = { f16 = 16, tf32 = 8, f8f6f4 = 32, i8 = 32 }

--- An MMA case: c = { name, kind, a, b, d, M, N, steps (MMAs of K each),
-- a_major, b_major, swizzle, a_tmem, scale_d, mask, cta (1 or 2) }.
-- A (M x K*steps) and B (N x K*steps) are drawn, laid out on the host,
-- copied into shared memory; one thread issues the MMAs and commits to an
-- mbarrier; every warp waits on it and reads its D rows out.
local function mma_case(c)
  local cta, e_a, e_b = c.cta or 1, ELEM[c.a], ELEM[c.b or c.a]
  local Mt, N, steps = c.M, c.N, c.steps or 2
  local Mc = Mt / cta                                   -- rows of A and D in each CTA
  local Kd = KIND_K[c.kind] * steps
  local LA = M.layout { major = c.a_major or "K", swizzle = c.swizzle, strided = (c.a_major == "MN") and Kd or Mc,
                        bytes = (c.a_major == "MN") and Mc * e_a.bytes or Kd * e_a.bytes }
  local LB = M.layout { major = c.b_major or "K", swizzle = c.swizzle, strided = (c.b_major == "MN") and Kd or N / cta,
                        bytes = (c.b_major == "MN") and N / cta * e_b.bytes or Kd * e_b.bytes }
  local dcols = 32
  while dcols < N + (c.a_tmem and Kd * e_a.bytes / 4 or 0) do dcols = dcols * 2 end
  local dt = c.d == "s32" and T.s32 or T.f32
  local idesc_v = bw.idesc { kind = c.kind, a = c.a, b = c.b or c.a, d = c.d, M = Mt, N = N, cta_group = cta,
                             a_major = c.a_major, b_major = c.b_major }
  local wa, wb = LA.size / 4, LB.size / 4
  local kern = k("tc_mma_" .. c.name, {
    in_specs = { Tile(cta * wa, T.u32), Tile(cta * wb, T.u32) }, out_specs = { Tile(Mt, N, dt) },
    grid = { cta, 1, 1 }, cluster = cta == 2 and { 2, 1, 1 } or nil,
  }, function(A, B, D)
    local pa, pb, pd = ptx.global_ptrs(A, B, D)
    local sA = smem.alloc(T.b8, LA.size, { align = 1024 })
    local sB = smem.alloc(T.b8, LB.size, { align = 1024 })
    local bar = smem.mbarrier(1)
    local tid0 = reg.from(ptx.special.tid.x(), T.u32)
    local rank = cta == 2 and ptx.cluster.ctarank() or nil
    copy_words(sA:base(), pa, rank and rank * wa or 0, wa, tid0)
    copy_words(sB:base(), pb, rank and rank * wb or 0, wb, tid0)
    ptx.fence.proxy_async("shared::cta")               -- the generic stores, before the async proxy reads them
    ptx.if_(tid0:eq(0), function()
      ptx.mbarrier.init(bar[0], 1)
      if cta == 2 then ptx.fence.mbarrier_init() end
    end)
    with_tmem(dcols, cta, function(taddr, tid, warp)
      local tc = ptx.tcgen05
      local lanes = taddr + warp * bw.tmem_offset(32, 0)
      local acol = N                                    -- A in tensor memory: the columns after D
      if c.a_tmem then
        -- row 32w + lane of A: K elements packed low first into 32-bit columns (words of the global A)
        local nw = Kd * e_a.bytes / 4
        local v = regs(T.b32, nw)
        for j = 1, nw do ptx.inst.ld.global.u32(v[j], ptx.addr(pa + (tid * nw + j - 1):mul_wide(4))) end
        tc.st { taddr = lanes + acol, src = v, shape = "32x32b" }
        tc.wait("st")
        tc.fence_before_thread_sync()
        ptx.bar_sync(0)
        tc.fence_after_thread_sync()
      end
      local issuer = tid:eq(0)
      if cta == 2 then issuer = issuer:band(rank:eq(0)) end
      ptx.if_(issuer, function()
        local idesc = reg.scalar(T.b32, idesc_v)
        local ad = bw.smem_desc_reg(sA:base(), { lbo = LA.lbo, sbo = LA.sbo, swizzle = LA.swizzle })
        local bd = bw.smem_desc_reg(sB:base(), { lbo = LB.lbo, sbo = LB.sbo, swizzle = LB.swizzle })
        local mask = c.mask and regs(T.b32, 4 * cta) or nil
        if mask then for i = 1, 4 * cta do ptx.mov(mask[i], c.mask[i] or 0) end end
        local kpm = KIND_K[c.kind]
        for s = 0, steps - 1 do
          local aoff = c.a_major == "MN" and LA.start(kpm * s, 0) or LA.start(0, 32 * s)
          local boff = c.b_major == "MN" and LB.start(kpm * s, 0) or LB.start(0, 32 * s)
          local a_op = c.a_tmem and (taddr + acol + s * kpm * e_a.bytes / 4) or (aoff == 0 and ad or ad + aoff / 16)
          local last = s == steps - 1
          tc.mma { d = taddr, a = a_op, b = boff == 0 and bd or bd + boff / 16, idesc = idesc, kind = c.kind, cta_group = cta,
                   enable_d = s == 0 and -issuer or issuer,
                   scale_d = last and c.scale_d or nil, disable_output_lane = last and mask or nil }
        end
        tc.commit { mbar = bar[0], cta_group = cta, multicast = cta == 2 and reg.scalar(T.b16, 3) or nil }
      end)
      ptx.mbarrier.wait(bar[0], 0)
      tc.fence_after_thread_sync()
      -- D row r of this CTA: lane r (M = 128, 256: layouts D, A); lane 32 (r / 16)
      -- + r % 16 (M = 64: F); 2-CTA M = 128 (B): lane r holds columns 0..N/2-1,
      -- lane 64 + r columns N/2..N-1
      local lane = tid % 32
      local folded = cta == 2 and Mc == 64
      local row = folded and tid % 64 or (Mc == 64 and warp * 16 + lane or tid)
      if rank then row = row + rank * Mc end
      local prow = pd + (row * N):mul_wide(4)
      if folded then prow = prow + tid:shr(6):mul_wide(N * 2) end      -- lanes 64..: the second half of the columns
      local keep = (Mc == 64 and not folded) and lane:lt(16) or nil
      read_lanes(lanes, folded and N / 2 or N, function(col, r)
        local st = keep and ptx.at(keep).inst or ptx.inst
        if c.d == "f16" then
          local h, f = reg.scalar(T.b16), reg.scalar(T.f32)
          ptx.inst.cvt.u16.u32(h, r)
          ptx.inst.cvt.f32.f16(f, h)
          st.st.global.f32(ptx.addr(prow, col * 4), f)
        else
          st.st.global.b32(ptx.addr(prow, col * 4), r)
        end
      end)
    end)
  end)

  local function inputs(seed)
    math.randomseed(seed or 1)
    local a, b = {}, {}
    for i = 1, Mt * Kd do a[i] = e_a.draw(math.random() * 2 - 1) end
    for i = 1, N * Kd do b[i] = e_b.draw(math.random() * 2 - 1) end
    return { a = a, b = b }
  end
  local function args(inp)
    local wa_all, wb_all = {}, {}
    for r = 0, cta - 1 do
      local ra, rb = {}, {}
      for i = 1, Mc * Kd do ra[i] = inp.a[r * Mc * Kd + i] end
      for i = 1, N / cta * Kd do rb[i] = inp.b[r * N / cta * Kd + i] end
      local words
      if c.a_tmem then   -- A for tcgen05.st: each row's K elements packed into words
        local img = image(Mc * Kd * e_a.bytes)
        for i = 0, Mc * Kd - 1 do img.put(i * e_a.bytes, e_a.bytes, e_a.bits(ra[i + 1])) end
        words = img.words()
        for i = #words + 1, wa do words[i] = 0 end
      else
        words = M.operand_words(ra, Mc, Kd, c.a, LA, c.a_major == "MN")
      end
      for _, x in ipairs(words) do wa_all[#wa_all + 1] = x end
      for _, x in ipairs(M.operand_words(rb, N / cta, Kd, c.b or c.a, LB, c.b_major == "MN")) do wb_all[#wb_all + 1] = x end
    end
    return { { wa_all, { cta * wa }, dtype = T.u32 }, { wb_all, { cta * wb }, dtype = T.u32 } }
  end
  local function reference(inp)
    local d, scale = {}, c.scale_d and 2 ^ -c.scale_d or 1
    for i = 0, Mt - 1 do
      for j = 0, N - 1 do
        local s, last = 0, 0
        for kk = 0, Kd - 1 do
          local p = inp.a[i * Kd + kk + 1] * inp.b[j * Kd + kk + 1]
          s = s + p
          if kk >= Kd - KIND_K[c.kind] then last = last + p end
        end
        local lane = (Mc == 64) and (32 * math.floor((i % Mc) / 16) + i % 16) or i % Mc
        local bitn = math.floor(i / Mc) * 128 + lane
        local masked = c.mask and bit.band(bit.rshift(c.mask[math.floor(bitn / 32) + 1] or 0, bitn % 32), 1) == 1
        if masked then s = s - last                     -- the last MMA left this lane alone
        elseif c.scale_d then s = (s - last) * scale + last end
        d[i * N + j + 1] = s
      end
    end
    return d
  end
  local tol = c.d == "f16" and { atol = 2e-2, rtol = 4e-3 } or c.d == "s32" and { atol = 0, rtol = 0 } or { atol = 1e-5 * Kd, rtol = 1e-4 }
  return { name = "mma_" .. c.name, kernel = kern, inputs = inputs, args = args, reference = reference, tolerance = tol,
           spec = c }
end

M.MMA_CASES = {
  { name = "bf16_128B", kind = "f16", a = "bf16", d = "f32", M = 128, N = 64, swizzle = "128B" },
  { name = "f16_f16acc_m64", kind = "f16", a = "f16", d = "f16", M = 64, N = 32, swizzle = "none" },
  { name = "tf32_64B", kind = "tf32", a = "tf32", d = "f32", M = 128, N = 48, swizzle = "64B" },
  { name = "e4m3_e5m2_32B", kind = "f8f6f4", a = "e4m3", b = "e5m2", d = "f32", M = 128, N = 32, swizzle = "32B", steps = 1 },
  { name = "s8_u8", kind = "i8", a = "s8", b = "u8", d = "s32", M = 128, N = 64, swizzle = "128B" },
  { name = "bf16_mn_major", kind = "f16", a = "bf16", d = "f32", M = 128, N = 64, swizzle = "128B", a_major = "MN", b_major = "MN" },
  { name = "bf16_mn_none", kind = "f16", a = "bf16", d = "f32", M = 64, N = 64, swizzle = "none", b_major = "MN" },
  { name = "bf16_a_tmem", kind = "f16", a = "bf16", d = "f32", M = 128, N = 64, swizzle = "128B", a_tmem = true },
  { name = "scale_mask", kind = "f16", a = "f16", d = "f32", M = 128, N = 32, swizzle = "64B", scale_d = 1,
    mask = { 0x0000ffff, 0, 0xf0f0f0f0, 0 } },
  { name = "cta2_m256", kind = "f16", a = "bf16", d = "f32", M = 256, N = 64, swizzle = "128B", cta = 2 },
  { name = "cta2_m128", kind = "f16", a = "f16", d = "f32", M = 128, N = 64, swizzle = "64B", cta = 2 },
}

-- ------------------------------------------------------------------ cp, shift

-- tcgen05.cp shapes: { shape, multicast, rows, bytes a row }.
local CP = {
  { "128x256b", nil, 128, 32 }, { "128x128b", nil, 128, 16 }, { "4x256b", nil, 4, 32 },
  { "64x128b", "warpx2::02_13", 64, 16 }, { "64x128b", "warpx2::01_23", 64, 16 }, { "32x128b", "warpx4", 32, 16 },
}

--- The TMEM lanes row r of a cp shape lands in (the ISA's shapes and multicasts).
local function cp_lanes(shape, mc, r)
  if shape == "4x256b" then return { 32 * r } end
  if mc == "warpx2::02_13" then return { r, r + 64 } end
  if mc == "warpx2::01_23" then local b = 64 * math.floor(r / 32) + r % 32 return { b, b + 32 } end
  if mc == "warpx4" then return { r, r + 32, r + 64, r + 96 } end
  return { r }
end

--- cp_<shape>: every warp zeroes 8 columns of its lanes (tcgen05.st), then
-- thread 0 copies a K-major no-swizzle shared matrix (rows x bytes of
-- random words) into tensor memory at column 0, commits, waits; every warp
-- reads its lanes' 8 columns out.
local function cp_case(row)
  local shape, mc, rows, bytes = row[1], row[2], row[3], row[4]
  local L = M.layout { major = "K", swizzle = "none", strided = math.max(rows, 8), bytes = bytes }
  local name = "tc_cp_" .. shape .. (mc and ("_" .. mc:gsub("::", "_")) or "")
  local kern = k(name, { in_specs = { Tile(L.size / 4, T.u32) }, out_specs = { Tile(128, 8, T.u32) } }, function(S, O)
    local ps, po = ptx.global_ptrs(S, O)
    local sm = smem.alloc(T.b8, L.size, { align = 1024 })
    local bar = smem.mbarrier(1)
    local tid0 = reg.from(ptx.special.tid.x(), T.u32)
    copy_words(sm:base(), ps, 0, L.size / 4, tid0)
    ptx.fence.proxy_async("shared::cta")
    ptx.if_(tid0:eq(0), function() ptx.mbarrier.init(bar[0], 1) end)
    with_tmem(32, 1, function(taddr, tid, warp)
      local tc = ptx.tcgen05
      local zero = regs(T.b32, 8)
      for j = 1, 8 do ptx.mov(zero[j], 0) end
      tc.st { taddr = taddr + warp * bw.tmem_offset(32, 0), src = zero, shape = "32x32b" }
      tc.wait("st")
      tc.fence_before_thread_sync()
      ptx.bar_sync(0)
      tc.fence_after_thread_sync()
      ptx.if_(tid:eq(0), function()
        local sd = bw.smem_desc_reg(sm:base(), { lbo = L.lbo, sbo = L.sbo })
        tc.cp { taddr = taddr, desc = sd, shape = shape, multicast = mc }
        tc.commit { mbar = bar[0] }
      end)
      ptx.mbarrier.wait(bar[0], 0)
      tc.fence_after_thread_sync()
      local prow = po + (tid * 8):mul_wide(4)
      read_lanes(taddr + warp * bw.tmem_offset(32, 0), 8, function(col, r) ptx.inst.st.global.u32(ptx.addr(prow, col * 4), r) end)
    end)
  end)
  local function inputs(seed)
    math.randomseed(seed or 1)
    local v = {}
    for i = 1, rows * bytes / 4 do v[i] = math.random(0, 0x7fffffff) end
    return { v = v }
  end
  local function args(inp)
    local img = image(L.size)
    for r = 0, rows - 1 do
      for wd = 0, bytes / 4 - 1 do img.put(L.at(r, 4 * wd), 4, inp.v[r * bytes / 4 + wd + 1]) end
    end
    return { { img.words(), { L.size / 4 }, dtype = T.u32 } }
  end
  local function reference(inp)
    local out = {}
    for i = 1, 128 * 8 do out[i] = 0 end
    for r = 0, rows - 1 do
      for _, lane in ipairs(cp_lanes(shape, mc, r)) do
        for wd = 0, bytes / 4 - 1 do out[lane * 8 + wd + 1] = inp.v[r * bytes / 4 + wd + 1] end
      end
    end
    return out
  end
  return { name = name, kernel = kern, inputs = inputs, args = args, reference = reference, tolerance = { atol = 0, rtol = 0 } }
end

--- shift: each warp stores 8 columns (value 1000 * lane + col), thread 0
-- shifts every 32-lane block down one lane (tcgen05.shift per block),
-- commits and waits; every warp reads its lanes back.
local function shift_case()
  local kern = k("tc_shift", { out_specs = { Tile(128, 8, T.u32) } }, function(O)
    local po = ptx.global_ptrs(O)
    local bar = smem.mbarrier(1)
    local tid0 = reg.from(ptx.special.tid.x(), T.u32)
    ptx.if_(tid0:eq(0), function() ptx.mbarrier.init(bar[0], 1) end)
    with_tmem(32, 1, function(taddr, tid, warp)
      local tc = ptx.tcgen05
      local lanes = taddr + warp * bw.tmem_offset(32, 0)
      local v = regs(T.b32, 8)
      for j = 1, 8 do ptx.inst.mad.lo.u32(v[j], tid, 1000, j - 1) end
      tc.st { taddr = lanes, src = v, shape = "32x32b" }
      tc.wait("st")
      tc.fence_before_thread_sync()
      ptx.bar_sync(0)
      tc.fence_after_thread_sync()
      ptx.if_(tid:eq(0), function()
        for q = 0, 3 do tc.shift { taddr = q == 0 and taddr or taddr + bw.tmem_offset(32 * q, 0) } end
        tc.commit { mbar = bar[0] }
      end)
      ptx.mbarrier.wait(bar[0], 0)
      tc.fence_after_thread_sync()
      local prow = po + (tid * 8):mul_wide(4)
      read_lanes(lanes, 8, function(col, r) ptx.inst.st.global.u32(ptx.addr(prow, col * 4), r) end)
    end)
  end)
  local function reference()
    local out = {}
    for lane = 0, 127 do
      local from = lane % 32 == 0 and lane or lane - 1     -- the first lane of a block keeps its row
      for c = 0, 7 do out[lane * 8 + c + 1] = 1000 * from + c end
    end
    return out
  end
  return { name = "shift", kernel = kern, inputs = function() return {} end, args = function() return {} end,
           reference = reference, tolerance = { atol = 0, rtol = 0 } }
end

-- ------------------------------------------------------------------ the cases

--- Every case, in order: { name, kernel, inputs(seed), args(inputs), reference(inputs), tolerance }.
M.cases = { alloc_case() }
for _, s in ipairs { { "32x32b", 8 }, { "16x64b", 8 }, { "16x128b", 8 }, { "16x256b", 8 }, { "16x32bx2", 8 } } do
  M.cases[#M.cases + 1] = st_case(s[1], s[2], 1)
  M.cases[#M.cases + 1] = ld_case(s[1], s[2], 1)
end
M.cases[#M.cases + 1] = st_case("32x32b", 8, 2)
M.cases[#M.cases + 1] = ld_case("16x256b", 8, 2)
for _, c in ipairs(M.MMA_CASES) do M.cases[#M.cases + 1] = mma_case(c) end
for _, row in ipairs(CP) do M.cases[#M.cases + 1] = cp_case(row) end
M.cases[#M.cases + 1] = shift_case()

M.case = {}
for _, c in ipairs(M.cases) do M.case[c.name] = c end

--- Run case (a name or an entry of M.cases) on fresh inputs; returns ok, report.
function M.check(case, seed)
  local check = require "pyptx.tools.verify"
  local c = type(case) == "string" and assert(M.case[case], "no tcgen05_suite case " .. case) or case
  local inputs = c.inputs(seed or check.fresh_seed())
  return check.run { kernel = c.kernel, args = c.args(inputs), reference = c.reference(inputs), tolerance = c.tolerance }
end

-- ------------------------------------------------------------ assembled only

--- Forms the emulator does not run yet: sparse A (tcgen05.mma.sp, metadata
-- in tensor memory) and tcgen05.cp decompressing 6-bit elements.
M.ptxas_only = {
  k("tc_mma_sp", {}, function()
    with_tmem(256, 1, function(taddr, tid)
      local ad = bw.smem_desc_reg(smem.alloc(T.b8, 128 * 64, { align = 1024 }), { sbo = 1024, swizzle = "128B" })
      local bd = bw.smem_desc_reg(smem.alloc(T.b8, 128 * 128, { align = 1024 }), { sbo = 1024, swizzle = "128B" })
      local idesc = reg.scalar(T.b32, bw.idesc { a = "f16", M = 128, N = 128, sparse = true })
      local p = tid:eq(0)
      ptx.if_(p, function()
        ptx.tcgen05.mma { d = taddr, a = ad, b = bd, idesc = idesc, enable_d = p, sp_meta = taddr + 128 }
      end)
    end)
  end),
  k("tc_cp_b6x16", {}, function()
    with_tmem(128, 1, function(taddr, tid)
      local sd = bw.smem_desc_reg(smem.alloc(T.b8, 128 * 32, { align = 1024 }), { sbo = 1024, swizzle = "128B" })
      ptx.if_(tid:eq(0), function() ptx.tcgen05.cp { taddr = taddr, desc = sd, shape = "128x256b", src_fmt = "b6x16_p32" } end)
    end)
  end),
}

--- Every kernel of the suite, for `luaptx ptx/check`.
-- The kernel helpers, for examples/blackwell/tcgen05_probes.lua.
M.regs, M.with_tmem, M.k, M.copy_words, M.read_lanes = regs, with_tmem, k, copy_words, read_lanes

M.kernels = {}
for _, c in ipairs(M.cases) do M.kernels[#M.kernels + 1] = c.kernel end
for _, kn in ipairs(M.ptxas_only) do M.kernels[#M.kernels + 1] = kn end

--- `luaptx run examples/blackwell/tcgen05_suite.lua [case...] [--summary]`:
-- run the cases (all by default) on the current device against their references.
function M.main(args)
  args = args or {}
  if args[1] == "--summary" then return require("examples.lib.runner").summary(M.kernels) end
  local check = require "pyptx.tools.verify"
  local rc = 0
  local todo = #args > 0 and args or nil
  for _, c in ipairs(M.cases) do
    local wanted = not todo
    for _, n in ipairs(todo or {}) do wanted = wanted or n == c.name end
    if wanted then
      local ok, report = M.check(c)
      rc = math.max(rc, check.report("tcgen05 " .. c.name, ok, report))
    end
  end
  return rc
end

return M
