--- tcgen05 probes (sm_100a): small kernels that each check one property of
-- the tensor-memory pipeline against a CPU reference on fresh random inputs.
--
-- accumulate: a bf16 x bf16 -> f32 D (128 x N) built by `steps` rounds of
-- tcgen05.mma (K = 16 each), every round committed to the mbarrier and
-- waited on (phase s % 2) before the next one accumulates into the same D
-- (enable_d on), so D holds the whole K = 16 * steps product only if each
-- commit/wait orders the rounds. A CTA barrier between rounds keeps a slow
-- warp from missing a phase (the parity would alias two rounds later). Helpers and layouts: tcgen05_suite.lua.
--
-- epilogue partition: the same MMA read out by two warpgroups (256
-- threads): warp w reads the 32 lanes of its quadrant w % 4 (the PTX ISA:
-- a warp reaches lanes 32 (warp id % 4) .. + 31 only; data-path layout D:
-- row i of D in lane i), warpgroup g the columns g N/2 .. (g + 1) N/2 - 1.
--
-- ld phases: tensor memory filled by tcgen05.cp.128x256b from shared
-- memory (row r of the source in lane r, its eight words in eight columns),
-- then every tcgen05.ld shape and several .num each (.32x32b, .16x64b,
-- .16x128b, .16x256b; the 16-lane shapes at lane 0 and 16 of the warp's
-- quadrant): which lane and column each register of each thread gets.
--
-- ld to registers: three tcgen05.ld in flight at once (32x32b.x16,
-- 16x256b.x1, 32x32b.x8.pack::16b) and one tcgen05.wait::ld, the registers
-- then used (an xor) and stored: the values tensor memory holds.
--
-- round trip: tcgen05.st of every shape (and .unpack::16b) then
-- tcgen05.wait::st then tcgen05.ld of the same shape (.pack::16b) returns
-- what was stored; the cells it wrote, read back with .32x32b, lie where
-- the fragment layout says; a matrix tcgen05.cp copied from shared memory
-- comes back with tcgen05.ld.
--
-- The expected layouts are not the emulator's: the ISA's text gives each
-- shape's lanes (16 or 32 from taddr's lane) and bits per lane (shape bits
-- x .num); its fragment figures (Figures 183-187, images only) are taken
-- as CUTLASS encodes them (cute/atom/copy_traits_sm100.hpp, the
-- SM100_TMEM_LOAD_* Copy_Traits DstLayout: (thread, value bit) -> bit of a
-- lane-major 16 x W or 32 x W bit tile), and every expectation is checked
-- to cover exactly the lanes x bits the ISA's text states (TILES below).
--
-- `luaptx run examples/blackwell/tcgen05_probes.lua [--summary]`.
local bit = require "bit"
local pyptx = require "pyptx"
local bw = require "pyptx.blackwell"
local suite = require "examples.blackwell.tcgen05_suite"
local reg, ptx, smem, Tile = pyptx.reg, pyptx.ptx, pyptx.smem, pyptx.Tile
local T = pyptx.types

local M = {}
local E = suite.ELEM.bf16

--- The accumulate probe for D = 128 x n and steps MMA rounds; returns a
-- case. wgs = 2: the epilogue-partition probe (two warpgroups read D).
function M.accumulate(n, steps, wgs)
  wgs = wgs or 1
  local Kd, Mt = 16 * steps, 128
  local LA = suite.layout { major = "K", swizzle = "128B", strided = Mt, bytes = Kd * 2 }
  local LB = suite.layout { major = "K", swizzle = "128B", strided = n, bytes = Kd * 2 }
  local wa, wb = LA.size / 4, LB.size / 4
  local dcols = 32
  while dcols < n do dcols = dcols * 2 end
  local idesc_v = bw.idesc { kind = "f16", a = "bf16", b = "bf16", d = "f32", M = Mt, N = n }
  local name = wgs == 1 and ("accumulate_" .. n .. "_" .. steps) or ("epilogue_partition_" .. n)
  local kern = suite.k("tc_probe_" .. name, {
    in_specs = { Tile(wa, T.u32), Tile(wb, T.u32) }, out_specs = { Tile(Mt, n, T.f32) }, block = { 128 * wgs, 1, 1 },
  }, function(A, B, D)
    local pa, pb, pd = ptx.global_ptrs(A, B, D)
    local sA = smem.alloc(T.b8, LA.size, { align = 1024 })
    local sB = smem.alloc(T.b8, LB.size, { align = 1024 })
    local bar = smem.mbarrier(1)
    local tid0 = reg.from(ptx.special.tid.x(), T.u32)
    ptx.if_(tid0:lt(128), function()
      suite.copy_words(sA:base(), pa, 0, wa, tid0)
      suite.copy_words(sB:base(), pb, 0, wb, tid0)
      ptx.fence.proxy_async("shared::cta")
    end)
    ptx.if_(tid0:eq(0), function() ptx.mbarrier.init(bar[0], 1) end)
    suite.with_tmem(dcols, 1, function(taddr, tid, warp)
      local tc = ptx.tcgen05
      local issuer = tid:eq(0)
      local idesc = reg.scalar(T.b32, idesc_v)
      local ad = bw.smem_desc_reg(sA:base(), { lbo = LA.lbo, sbo = LA.sbo, swizzle = LA.swizzle })
      local bd = bw.smem_desc_reg(sB:base(), { lbo = LB.lbo, sbo = LB.sbo, swizzle = LB.swizzle })
      for s = 0, steps - 1 do
        ptx.if_(issuer, function()
          local aoff, boff = LA.start(0, 32 * s), LB.start(0, 32 * s)
          tc.mma { d = taddr, a = aoff == 0 and ad or ad + aoff / 16, b = boff == 0 and bd or bd + boff / 16,
                   idesc = idesc, kind = "f16", enable_d = s == 0 and -issuer or issuer }
          tc.commit { mbar = bar[0] }
        end)
        ptx.mbarrier.wait(bar[0], s % 2)
        tc.fence_after_thread_sync()
        if s < steps - 1 then           -- every thread saw phase s before round s + 1 can complete it again
          tc.fence_before_thread_sync()
          ptx.bar_sync(0)
          tc.fence_after_thread_sync()
        end
      end
      -- warp w: the lanes of quadrant w % 4 (its rows of D), columns of its warpgroup
      local quad, cols = wgs == 1 and warp or warp:band(3), n / wgs
      local lanes = taddr + quad * bw.tmem_offset(32, 0)
      local row = wgs == 1 and tid or quad * 32 + tid:band(31)
      local prow = pd + (row * n):mul_wide(4)
      if wgs > 1 then
        local c0 = warp:shr(2) * cols
        lanes, prow = lanes + c0, prow + c0:mul_wide(4)
      end
      suite.read_lanes(lanes, cols, function(col, r) ptx.inst.st.global.b32(ptx.addr(prow, col * 4), r) end)
    end)
  end)
  local function inputs(seed)
    math.randomseed(seed or 1)
    local a, b = {}, {}
    for i = 1, Mt * Kd do a[i] = E.draw(math.random() * 2 - 1) end
    for i = 1, n * Kd do b[i] = E.draw(math.random() * 2 - 1) end
    return { a = a, b = b }
  end
  local function args(inp)
    return { { suite.operand_words(inp.a, Mt, Kd, "bf16", LA), { wa }, dtype = T.u32 },
             { suite.operand_words(inp.b, n, Kd, "bf16", LB), { wb }, dtype = T.u32 } }
  end
  local function reference(inp)
    local d = {}
    for i = 0, Mt - 1 do
      for j = 0, n - 1 do
        local s = 0
        for kk = 0, Kd - 1 do s = s + inp.a[i * Kd + kk + 1] * inp.b[j * Kd + kk + 1] end
        d[i * n + j + 1] = s
      end
    end
    return d
  end
  return { name = name, kernel = kern, inputs = inputs, args = args,
           reference = reference, tolerance = { atol = 1e-5 * Kd, rtol = 1e-4 } }
end

--- The epilogue-partition probe: D = 128 x n from one MMA, read by two warpgroups.
function M.epilogue_partition(n) return M.accumulate(n, 1, 2) end

-- ------------------------------------------------------------ fragment layouts

--- CUTLASS's TMEM load layouts (cute/atom/copy_traits_sm100.hpp,
-- Copy_Traits<SM100_TMEM_LOAD_{32dp32b,16dp64b,16dp128b,16dp256b}Nx>::DstLayout),
-- written as lists of { size, stride } modes (the first fastest): thr maps
-- a thread (0..31) and val a value bit (0..32 regs - 1) to a bit of the
-- tile the instruction moves, lane-major with W bits a lane. For .xN:
--   32dp32b:  thr 32:32N,                      val 32N:1
--   16dp64b:  thr (2,2,8):(512N,32,64N),       val (32,N):(1,64)
--   16dp128b: thr (4,8):(32,128N),             val (32,2,N):(1,1024N,128)
--   16dp256b: thr (4,8):(64,256N),             val (64,2,N):(1,2048N,256)
-- (the x1 and x2 rows of that file, e.g. 16dp64b2x thr (2,2,8):(1024,32,128)
-- val (32,2):(1,64), are these with N = 1 and 2).
local TILES = {
  ["32x32b"] = function(N) return 32, 32 * N, { { 32, 32 * N } }, { { 32 * N, 1 } } end,
  ["16x64b"] = function(N) return 16, 64 * N, { { 2, 512 * N }, { 2, 32 }, { 8, 64 * N } }, { { 32, 1 }, { N, 64 } } end,
  ["16x128b"] = function(N) return 16, 128 * N, { { 4, 32 }, { 8, 128 * N } }, { { 32, 1 }, { 2, 1024 * N }, { N, 128 } } end,
  ["16x256b"] = function(N) return 16, 256 * N, { { 4, 64 }, { 8, 256 * N } }, { { 64, 1 }, { 2, 2048 * N }, { N, 256 } } end,
}

--- A CuTe layout (modes { size, stride }, the first fastest) at index i.
local function at(modes, i)
  local off = 0
  for _, m in ipairs(modes) do
    off = off + (i % m[1]) * m[2]
    i = math.floor(i / m[1])
  end
  return off
end

--- placement(shape, N) -> fn(l, j): the lane (from the access's lane) and
-- 32-bit column of register j of thread l. Checks what the ISA's text
-- says first: the 32 threads' registers cover the 16 or 32 lanes x (shape
-- bits x N) bits of the access, each 32-bit cell once.
local placements = {}
local function placement(shape, N)
  local key = shape .. "x" .. N
  if placements[key] then return placements[key] end
  local lanes, W, thr, val = TILES[shape](N)
  local bits = tonumber(shape:match("x(%d+)b$"))
  assert(lanes == tonumber(shape:match("^(%d+)x")) and W == bits * N, "the layout of " .. key .. " is not the ISA's")
  local regs = lanes * W / 32 / 32
  local function place(l, j)
    local b = at(thr, l) + at(val, 32 * j)
    return math.floor(b / W), (b % W) / 32
  end
  local seen, count = {}, 0
  for l = 0, 31 do
    for j = 0, regs - 1 do
      local ln, c = place(l, j)
      local cell = ln * 1024 + c
      assert(ln < lanes and c < W / 32 and c == math.floor(c) and not seen[cell], key .. " places a register twice or outside")
      seen[cell], count = true, count + 1
    end
  end
  assert(count == lanes * W / 32, key .. " leaves cells of its access unread")
  placements[key] = { place = place, regs = regs, lanes = lanes, cols = W / 32 }
  return placements[key]
end
M.placement = placement

-- ------------------------------------------------------------ shared helpers

--- The u32 words of a 128-row K-major no-swizzle shared image of blocks
-- 32-byte column blocks (suite.layout): rows[r + 1][w + 1] is word w of row r.
local function cp_image(L, rows)
  local words = {}
  for i = 1, L.size / 4 do words[i] = 0 end
  for r = 0, 127 do
    for wd = 0, #rows[r + 1] - 1 do words[L.at(r, 4 * wd) / 4 + 1] = rows[r + 1][wd + 1] end
  end
  return words
end

--- The args of a probe whose one input is the shared image of inp.rows in layout L.
local function image_args(L)
  return function(inp) return { { cp_image(L, inp.rows), { L.size / 4 }, dtype = T.u32 } } end
end

--- 128 rows of nwords random u32 words.
local function random_rows(nwords)
  local rows = {}
  for r = 1, 128 do
    rows[r] = {}
    for wd = 1, nwords do rows[r][wd] = math.random(0, 0x7fffffff) * 2 + math.random(0, 1) end
  end
  return rows
end

--- The inputs of a probe that reads 32-word rows: { rows = ... } from seed.
local function draw_rows32(seed)
  math.randomseed(seed or 1)
  return { rows = random_rows(32) }
end

--- In a kernel: thread 0 copies blocks x 8 columns of the shared image at
-- base (layout L) into tensor memory from column col0 with
-- tcgen05.cp.128x256b (row r in lane r), commits to bar; every thread
-- waits on phase `phase` and fences.
local function fill_by_cp(taddr, base, L, blocks, col0, bar, phase, tid)
  local tc = ptx.tcgen05
  ptx.if_(tid:eq(0), function()
    local d = bw.smem_desc_reg(base, { lbo = L.lbo, sbo = L.sbo })
    for b = 0, blocks - 1 do
      local off = L.start(0, 32 * b)
      local c = col0 + 8 * b
      tc.cp { taddr = c == 0 and taddr or taddr + c, desc = off == 0 and d or d + off / 16, shape = "128x256b" }
    end
    tc.commit { mbar = bar[0] }
  end)
  ptx.mbarrier.wait(bar[0], phase)
  tc.fence_after_thread_sync()
end

--- Shared memory for an image of `blocks` 32-byte column blocks, its
-- layout, and an mbarrier (initialized by thread 0); the image copied in
-- from global words (all 128 threads) and fenced for the async proxy.
local function staged(psrc, blocks, tid0)
  local L = suite.layout { major = "K", swizzle = "none", strided = 128, bytes = 32 * blocks }
  local sm = smem.alloc(T.b8, L.size, { align = 1024 })
  local bar = smem.mbarrier(1)
  suite.copy_words(sm:base(), psrc, 0, L.size / 4, tid0)
  ptx.fence.proxy_async("shared::cta")
  ptx.if_(tid0:eq(0), function() ptx.mbarrier.init(bar[0], 1) end)
  return sm:base(), L, bar
end

--- A case on u32 data: name, kernel, draw(seed) -> inputs, args, reference; exact.
local function exact(name, kern, draw, args, reference)
  return { name = name, kernel = kern, inputs = draw, args = args, reference = reference, tolerance = { atol = 0, rtol = 0 } }
end

-- ------------------------------------------------------------ ld phases

-- Each (shape, .num) the ld-phases probe loads.
local PHASES = {
  { "32x32b", 1 }, { "32x32b", 2 }, { "32x32b", 4 }, { "32x32b", 32 },
  { "16x64b", 1 }, { "16x64b", 2 }, { "16x64b", 4 }, { "16x64b", 16 },
  { "16x128b", 1 }, { "16x128b", 2 }, { "16x128b", 8 },
  { "16x256b", 1 }, { "16x256b", 2 }, { "16x256b", 4 },
}

--- The halves (lane offsets in the quadrant) a shape is loaded at.
local function halves(shape) return shape == "32x32b" and { 0 } or { 0, 16 } end

--- Output words per thread of the ld-phases probe.
local function phase_words()
  local n = 0
  for _, ph in ipairs(PHASES) do n = n + placement(ph[1], ph[2]).regs * #halves(ph[1]) end
  return n
end

--- The ld-phases probe: 32 columns filled by tcgen05.cp, then each
-- (shape, .num) of PHASES loaded by every warp from its quadrant (16-lane
-- shapes at lane 0 and 16 of it), each register stored: out[tid][k].
function M.ld_phases()
  local words = phase_words()
  local kern = suite.k("tc_probe_ld_phases", { in_specs = { Tile(128 * 32, T.u32) }, out_specs = { Tile(128, words, T.u32) } },
    function(S, O)
      local ps, po = ptx.global_ptrs(S, O)
      local tid0 = reg.from(ptx.special.tid.x(), T.u32)
      local base, L, bar = staged(ps, 4, tid0)
      suite.with_tmem(32, 1, function(taddr, tid, warp)
        local tc = ptx.tcgen05
        fill_by_cp(taddr, base, L, 4, 0, bar, 0, tid)
        local quad = taddr + warp * bw.tmem_offset(32, 0)
        local prow = po + (tid * words):mul_wide(4)
        local k = 0
        for _, ph in ipairs(PHASES) do
          for _, h in ipairs(halves(ph[1])) do
            local v = suite.regs(T.b32, placement(ph[1], ph[2]).regs)
            tc.ld { dst = v, taddr = h == 0 and quad or quad + bw.tmem_offset(h, 0), shape = ph[1] }
            tc.wait("ld")
            for j = 1, #v do ptx.inst.st.global.u32(ptx.addr(prow, (k + j - 1) * 4), v[j]) end
            k = k + #v
          end
        end
      end)
    end)
  local L = suite.layout { major = "K", swizzle = "none", strided = 128, bytes = 128 }
  local function reference(inp)
    local out = {}
    for t = 0, 127 do
      local k = 0
      for _, ph in ipairs(PHASES) do
        local p = placement(ph[1], ph[2])
        for _, h in ipairs(halves(ph[1])) do
          for j = 0, p.regs - 1 do
            local ln, c = p.place(t % 32, j)
            out[t * words + k + j + 1] = inp.rows[32 * math.floor(t / 32) + h + ln + 1][c + 1]
          end
          k = k + p.regs
        end
      end
    end
    return out
  end
  return exact("ld_phases", kern, draw_rows32, image_args(L), reference)
end

-- ------------------------------------------------------------ ld to registers

--- The ld-to-registers probe: 32 columns filled by tcgen05.cp; every warp
-- issues 32x32b.x16 (columns 0..15), 16x256b.x1 at lane 16 (columns
-- 16..23) and 32x32b.x8.pack::16b (columns 16..31) before one
-- tcgen05.wait::ld, then stores the 28 registers and, for j < 8, the
-- first load's register j xor the third's: out[tid][36].
function M.ld_registers()
  local kern = suite.k("tc_probe_ld_registers", { in_specs = { Tile(128 * 32, T.u32) }, out_specs = { Tile(128, 36, T.u32) } },
    function(S, O)
      local ps, po = ptx.global_ptrs(S, O)
      local tid0 = reg.from(ptx.special.tid.x(), T.u32)
      local base, L, bar = staged(ps, 4, tid0)
      suite.with_tmem(32, 1, function(taddr, tid, warp)
        local tc = ptx.tcgen05
        fill_by_cp(taddr, base, L, 4, 0, bar, 0, tid)
        local quad = taddr + warp * bw.tmem_offset(32, 0)
        local a, b, c = suite.regs(T.b32, 16), suite.regs(T.b32, 4), suite.regs(T.b32, 8)
        tc.ld { dst = a, taddr = quad, shape = "32x32b" }
        tc.ld { dst = b, taddr = quad + bw.tmem_offset(16, 16), shape = "16x256b" }
        tc.ld { dst = c, taddr = quad + 16, shape = "32x32b", pack = true }
        tc.wait("ld")
        local prow = po + (tid * 36):mul_wide(4)
        local all = {}
        for _, v in ipairs { a, b, c } do for _, r in ipairs(v) do all[#all + 1] = r end end
        for i = 1, 8 do all[#all + 1] = a[i]:bxor(c[i]) end
        for i, r in ipairs(all) do ptx.inst.st.global.u32(ptx.addr(prow, (i - 1) * 4), r) end
      end)
    end)
  local L = suite.layout { major = "K", swizzle = "none", strided = 128, bytes = 128 }
  local function reference(inp)
    local out = {}
    local p = placement("16x256b", 1)
    for t = 0, 127 do
      local q, l, o = 32 * math.floor(t / 32), t % 32, {}
      local row = inp.rows[q + l + 1]
      for j = 0, 15 do o[#o + 1] = row[j + 1] end
      for j = 0, 3 do
        local ln, c = p.place(l, j)
        o[#o + 1] = inp.rows[q + 16 + ln + 1][16 + c + 1]
      end
      -- .pack::16b: the 16-bit elements of two adjacent columns in one register, the first column's low
      for j = 0, 7 do o[#o + 1] = row[17 + 2 * j] % 65536 + row[18 + 2 * j] % 65536 * 65536 end
      for j = 0, 7 do o[#o + 1] = bit.band(bit.bxor(o[j + 1], o[20 + j + 1]), 0xffffffff) % 2 ^ 32 end
      for i = 1, 36 do out[t * 36 + i] = o[i] end
    end
    return out
  end
  return exact("ld_registers", kern, draw_rows32, image_args(L), reference)
end

-- ------------------------------------------------------------ round trip

-- What the round-trip probe stores and loads back: shape, .num, unpack/pack,
-- its first column. The 16-lane shapes store at lane 0 and 16 of the quadrant.
local TRIPS = {
  { "32x32b", 4, false, 0 }, { "16x64b", 4, false, 4 }, { "16x128b", 2, false, 12 },
  { "16x256b", 2, false, 20 }, { "32x32b", 4, true, 36 },
}
local TRIP_COLS, CP_COL = 44, 48      -- columns the stores cover; the tcgen05.cp's 8 columns

--- Registers a trip stores per thread (both halves).
local function trip_regs(tr) return placement(tr[1], tr[2]).regs * #halves(tr[1]) end

--- The round-trip probe: every warp stores its input registers with each
-- trip's shape (tcgen05.st, then tcgen05.wait::st), loads them back with
-- the same shape; then reads columns 0..43 of its lanes with .32x32b; then
-- thread 0 copies a shared matrix to columns 48..55 (tcgen05.cp) and every
-- warp loads it back. out[tid] = loaded registers, the 44 cells, the 8 copied.
function M.round_trip()
  local nin = 0
  for _, tr in ipairs(TRIPS) do nin = nin + trip_regs(tr) end
  local words = nin + TRIP_COLS + 8
  local kern = suite.k("tc_probe_round_trip", {
    in_specs = { Tile(128, nin, T.u32), Tile(128 * 8, T.u32) }, out_specs = { Tile(128, words, T.u32) },
  }, function(I, S, O)
    local pi, ps, po = ptx.global_ptrs(I, S, O)
    local tid0 = reg.from(ptx.special.tid.x(), T.u32)
    local base, L, bar = staged(ps, 1, tid0)
    suite.with_tmem(64, 1, function(taddr, tid, warp)
      local tc = ptx.tcgen05
      local quad = taddr + warp * bw.tmem_offset(32, 0)
      local pin, prow = pi + (tid * nin):mul_wide(4), po + (tid * words):mul_wide(4)
      local k = 0
      for _, tr in ipairs(TRIPS) do
        for _, h in ipairs(halves(tr[1])) do
          local n = placement(tr[1], tr[2]).regs
          local v, back = suite.regs(T.b32, n), suite.regs(T.b32, n)
          for j = 1, n do ptx.inst.ld.global.u32(v[j], ptx.addr(pin, (k + j - 1) * 4)) end
          local at_ = quad + bw.tmem_offset(h, tr[4])
          tc.st { taddr = at_, src = v, shape = tr[1], unpack = tr[3] or nil }
          tc.wait("st")
          tc.ld { dst = back, taddr = at_, shape = tr[1], pack = tr[3] or nil }
          tc.wait("ld")
          for j = 1, n do ptx.inst.st.global.u32(ptx.addr(prow, (k + j - 1) * 4), back[j]) end
          k = k + n
        end
      end
      suite.read_lanes(quad, TRIP_COLS, function(col, r) ptx.inst.st.global.u32(ptx.addr(prow, (nin + col) * 4), r) end)
      fill_by_cp(taddr, base, L, 1, CP_COL, bar, 0, tid)
      suite.read_lanes(quad + CP_COL, 8, function(col, r) ptx.inst.st.global.u32(ptx.addr(prow, (nin + TRIP_COLS + col) * 4), r) end)
    end)
  end)
  local L = suite.layout { major = "K", swizzle = "none", strided = 128, bytes = 32 }
  local function draw(seed)
    math.randomseed(seed or 1)
    local v = {}
    for i = 1, 128 * nin do v[i] = math.random(0, 0x7fffffff) * 2 + math.random(0, 1) end
    return { v = v, rows = random_rows(8) }
  end
  local function args(inp)
    return { { inp.v, { 128, nin }, dtype = T.u32 }, { cp_image(L, inp.rows), { L.size / 4 }, dtype = T.u32 } }
  end
  local function reference(inp)
    local out, cells = {}, {}
    for t = 0, 127 do
      local q, k = 32 * math.floor(t / 32), 0
      for _, tr in ipairs(TRIPS) do
        local p = placement(tr[1], tr[2])
        for _, h in ipairs(halves(tr[1])) do
          for j = 0, p.regs - 1 do
            local x = inp.v[t * nin + k + j + 1]
            out[t * words + k + j + 1] = tr[3] and x % 65536 + math.floor(x / 65536) * 65536 or x
            local ln, c = p.place(t % 32, j)
            local lane = q + h + ln
            -- .unpack::16b: the low half to the first column, the high half to the next, zero-extended
            if tr[3] then
              cells[lane * 64 + tr[4] + 2 * c] = x % 65536
              cells[lane * 64 + tr[4] + 2 * c + 1] = math.floor(x / 65536)
            else
              cells[lane * 64 + tr[4] + c] = x
            end
          end
          k = k + p.regs
        end
      end
    end
    for t = 0, 127 do
      for c = 0, TRIP_COLS - 1 do out[t * words + nin + c + 1] = assert(cells[t * 64 + c], "a cell no store covers") end
      for c = 0, 7 do out[t * words + nin + TRIP_COLS + c + 1] = inp.rows[t + 1][c + 1] end
    end
    return out
  end
  return exact("round_trip", kern, draw, args, reference)
end

-- The example conventions (roundtrip, tools): build / inputs / args /
-- reference for the accumulate probe of D = 128 x n over `steps` rounds.
local made = {}
local function probe(n, steps)
  local key = n .. "_" .. steps
  made[key] = made[key] or M.accumulate(n, steps)
  return made[key]
end
function M.build(n, steps) return probe(n, steps).kernel end
function M.inputs(n, steps, seed)
  local inp = probe(n, steps).inputs(seed)
  inp.n, inp.steps = n, steps
  return inp
end
function M.args(inp) return probe(inp.n, inp.steps).args(inp) end
function M.reference(inp) return probe(inp.n, inp.steps).reference(inp) end

M.cases = { probe(32, 1), probe(32, 4), probe(64, 3), M.epilogue_partition(64), M.epilogue_partition(128),
            M.ld_phases(), M.ld_registers(), M.round_trip() }
M.kernels = {}
for _, c in ipairs(M.cases) do M.kernels[#M.kernels + 1] = c.kernel end

--- Run case c on fresh inputs; returns ok, report.
function M.check(c, seed)
  local check = require "pyptx.tools.verify"
  local inp = c.inputs(seed or check.fresh_seed())
  return check.run { kernel = c.kernel, args = c.args(inp), reference = c.reference(inp), tolerance = c.tolerance }
end

--- `luaptx run examples/blackwell/tcgen05_probes.lua [--summary]`: every probe against its reference.
function M.main(args)
  args = args or {}
  if args[1] == "--summary" then return require("examples.lib.runner").summary(M.kernels) end
  local check = require "pyptx.tools.verify"
  local rc = 0
  for _, c in ipairs(M.cases) do
    local ok, report = M.check(c)
    rc = math.max(rc, check.report("tcgen05 probe " .. c.name, ok, report))
  end
  return rc
end

return M
