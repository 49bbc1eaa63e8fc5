--- Hopper FlashAttention-2 forward (full or causal):
--   O[h, i, :] (f32) = sum_j softmax_j(Q[h, i, :] . K[h, j, :] / sqrt(D)) V[h, j, :]
-- for H heads of L tokens, head dim D = 64, Q/K/V in bf16.
--
-- Layouts (row-major, heads stacked): Q and K are (H*L) x D, O is (H*L) x D
-- (f32). V is passed transposed, Vt = (H*D) x L (head h's D rows of L
-- tokens): O += P.V is a wgmma with B = V, and wgmma reads B K-major, K
-- being the token dimension here. With V stored token-major a kernel would
-- set imm-trans-b = 1 instead (an N-major B, which the CPU emulator also
-- runs); this example keeps V's transpose on the host.
--
-- A CTA of three warpgroups owns BM = 128 query rows of one head
-- (grid L/128 x H), warp-specialized like examples/hopper/gemm.lua (the
-- ring, roles and epilogue of examples/lib/tma_pipeline.lua):
--  * warpgroup 0, one thread: the TMA producer. It loads the CTA's Q tile
--    (128 x 64, 128B swizzle) once on qbar, then walks the key/value
--    blocks j (BN = 64 tokens): waits until ring stage s is empty, arms
--    full[s] and issues the K block (64 tokens x D) and the Vt block
--    (D x 64 tokens) as two TMA loads;
--  * warpgroups 1 and 2 are consumers, 64 query rows each. Per block:
--    S = Q.K^T with four wgmma m64n64k16 (A = Q, B = K through 128B-swizzled
--    descriptors); the online softmax on S's fragments (each thread holds
--    two rows, 16 values each: row max over the thread, then across the
--    four lanes of the row with shfl.bfly; m_new = max(m, rowmax * c),
--    p = 2^(s*c - m_new), alpha = 2^(m - m_new), l = l*alpha + rowsum(p),
--    O *= alpha, with c = log2(e)/sqrt(D)); P converted to bf16x2 in
--    registers, which the accumulator layout of m64n64 hands over as the
--    A-from-registers fragments of four k16 steps unchanged; O += P.V with
--    four wgmma m64n64k16 (A = P from registers, B = Vt's stage through a
--    descriptor); then each consumer warp releases the stage.
--  * at the end each row's l is summed over its four lanes and O / l goes
--    to global memory from the accumulator fragments.
--
-- With opts.causal, query i sees keys j <= i: a CTA visits only the blocks
-- left of its last query, and blocks that reach past a consumer's first
-- query set S to -inf where the key is after the query (guarded movs), so
-- a row whose blocks so far are all masked keeps m = -1e30, p = 0, l = 0.
--
-- With opts.SPLITS = P (split-KV, for few query tiles over many keys), the
-- grid gains a z dimension: CTA (x, y, z) visits only key blocks
-- z*NB/P .. (z+1)*NB/P - 1 (NB = L/64; causal: those left of its last
-- query, possibly none) and writes, instead of O / l, its unnormalized O
-- and each row's (m, l) (running max in base-2 units and sum of 2^(s*c - m))
-- at rows z*H*L.. of two outputs. A second kernel (M.build_combine, one
-- thread per element) merges the P partials: O = sum_z 2^(m_z - mx) O_z /
-- sum_z 2^(m_z - mx) l_z with mx = max_z m_z; M.splitkv runs both.
--
-- Shape rules: D == 64, L % 128 == 0, H >= 1, (L / 64) % SPLITS == 0.
local pyptx = require "pyptx"
local pipeline = require "pyptx.pipeline"
local tp = require "examples.lib.tma_pipeline"
local kernel, reg, ptx, smem, Tile = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.smem, pyptx.Tile
local T = pyptx.types
local bf16, f32, u32, b32 = T.bf16, T.f32, T.u32, T.b32

local M = {}

local BM, BN = 128, 64                     -- query rows per CTA, key/value tokens per block

--- Why (H, L, D, opts) breaks the shape rules, or nil.
function M.shape_error(H, L, D, o)
  if type(H) ~= "number" or H < 1 or H ~= math.floor(H) then return "H must be a positive integer" end
  if D ~= 64 then return "D must be 64 (one 128-byte swizzled row of bf16 per tile row)" end
  if type(L) ~= "number" or L < BM or L % BM ~= 0 then return "L % 128 == 0 (and L >= 128) is required" end
  if o.STAGES < 1 or o.STAGES > 8 then return "STAGES must be 1..8" end
  if type(o.SPLITS) ~= "number" or o.SPLITS < 1 or (L / BN) % o.SPLITS ~= 0 then
    return ("SPLITS must be a positive integer dividing the %d key blocks (L / 64); got %s"):format(L / BN, tostring(o.SPLITS))
  end
  return nil
end

--- The attention kernel for H heads of L tokens, head dim D; opts: STAGES (2),
-- causal (false; true: query i attends to keys j <= i only), SPLITS (1; P:
-- the split-KV kernel, whose partial outputs M.build_combine merges).
function M.build(H, L, D, opts)
  opts = opts or {}
  local o = { STAGES = opts.STAGES or 2, causal = opts.causal or false, SPLITS = opts.SPLITS or 1 }
  local err = M.shape_error(H, L, D, o)
  if err then error("hopper flash attention: " .. err, 2) end
  local S, P, NB = o.STAGES, o.SPLITS, L / BN
  local NBS = NB / P                                     -- key blocks per split
  local C = 1.4426950408889634 / math.sqrt(D)           -- log2(e) / sqrt(D): softmax in base 2
  return kernel("hopper_flash_attention" .. (P > 1 and "_splitkv" or "") .. (o.causal and "_causal" or "")) {
    arch = "sm_90a",
    in_specs = { Tile(H * L, D, bf16), Tile(H * L, D, bf16), Tile(H * D, L, bf16) },
    -- split-KV: per split z, rows z*H*L.. of the unnormalized O and of (m, l)
    out_specs = P > 1 and { Tile(P * H * L, D, f32), Tile(P * H * L, 2, f32) } or { Tile(H * L, D, f32) },
    grid = { L / BM, H, P }, block = { 384, 1, 1 }, maxnreg = 168,
    function(Q, K, Vt, O, ML)
      local sQ = smem.wgmma_tile(bf16, { BM, D })
      local sK = smem.wgmma_tile(bf16, { BN, D }, { stages = S })    -- BN tokens of D
      local sV = smem.wgmma_tile(bf16, { D, BN }, { stages = S })    -- Vt: D rows of BN tokens
      local tid = reg.from(ptx.special.tid.x(), u32)
      local head = reg.from(ptx.special.ctaid.y(), u32)
      local qt = reg.from(ptx.special.ctaid.x(), u32) * BM            -- first query token of the CTA
      local q0 = head * L + qt                                           -- its row in the stacked Q/O
      -- key/value blocks to visit: all, or (causal) those left of the CTA's last query;
      -- split z visits blocks j0 = z*NBS .. of them (none, or fewer, past a causal end)
      local nblocks = o.causal and (qt + BM) / BN or NB
      local split = P > 1 and reg.from(ptx.special.ctaid.z(), u32) or nil
      local j0 = split and split * NBS or 0
      if split then nblocks = o.causal and nblocks:min(j0 + NBS):max(j0) - j0 or NBS end
      local function block(i) return split and j0 + i or i end
      local pipe = tp.new { stages = S, bytes = sK.stage_bytes + sV.stage_bytes }
      local qbar = pipeline.barriers(1, 1)
      pipe:init(tid, { qbar })

      local producer = function()
        qbar:at(0):arrive_expect_tx(sQ.stage_bytes)
        ptx.cp.async.bulk.tensor_2d{ dst = sQ, coord = { 0, q0 }, mbar = qbar:at(0), src = Q:tma_desc{ tile = sQ } }
        local kv0 = head * L
        pipe:producer():loop(nblocks, function(i, s, full)
          local j = block(i)
          ptx.cp.async.bulk.tensor_2d{ dst = sK:stage(s), coord = { 0, kv0 + j * BN }, mbar = full, src = K:tma_desc{ tile = sK } }
          ptx.cp.async.bulk.tensor_2d{ dst = sV:stage(s), coord = { j * BN, head * D }, mbar = full,
            src = Vt:tma_desc{ tile = sV } }
        end)
      end

      local consumer = function(cw)                 -- consumer 0 or 1: query rows 64*cw..
        -- S block: 64 x 64; every block's first wgmma has scale-d = 0, so it needs no zeroing.
        local sacc = ptx.wgmma.fragments(BN)
        local oacc = ptx.wgmma.fragments(D, true)            -- O: 64 x D
        local pa = reg.array(b32, BN / 4)                    -- P in bf16x2: 4 registers per k16 step
        local m, l = {}, {}                                  -- per thread row h (0: +0, 1: +8)
        for h = 0, 1 do m[h], l[h] = reg.scalar(f32, -1e30), reg.scalar(f32, 0) end
        local q = sQ:stage(0, cw * 64)                      -- this warpgroup's 64 query rows
        qbar:at(0):wait(0)
        local lane = tid % 32
        local rtok = qt + cw * 64 + (tid % 128):shr(5) * 16 + lane:shr(2)   -- this thread's first query token
        pipe:consumer(tid):loop(nblocks, function(b, s)
          local j = block(b)
          -- S = Q . K^T
          tp.mma { d = sacc, n = BN, k = D, a = q, b = sK:stage(s), scale_d = 0 }
          if o.causal then                   -- blocks reaching past the warpgroup's first query: mask j > i
            ptx.if_((j * BN + BN):gt(qt + cw * 64 + 1), function()
              local ctok = j * BN + (lane % 4) * 2            -- key token of register 0
              for h = 0, 1 do
                local qtok = rtok + 8 * h
                for nb = 0, BN / 8 - 1 do
                  for jj = 0, 1 do
                    local x = sacc[4 * nb + 2 * h + jj]
                    ptx.at((ctok + (8 * nb + jj)):gt(qtok)).inst.mov.f32(x, -math.huge)
                  end
                end
              end
            end)
          end
          -- online softmax: register 4*nb + 2*h + jj holds row +8h, column 8*nb + 2*(lane%4) + jj
          for h = 0, 1 do
            local mx = sacc[2 * h]:max(sacc[2 * h + 1])
            for nb = 1, BN / 8 - 1 do mx = mx:max(sacc[4 * nb + 2 * h]):max(sacc[4 * nb + 2 * h + 1]) end
            ptx.warp.reduce_max(mx, 4)                         -- the four lanes holding the row
            local mnew = (mx * C):max(m[h])
            local alpha = m[h] - mnew
            ptx.inst.ex2.approx.ftz.f32(alpha, alpha)
            ptx.mov(m[h], mnew)
            local negm = -mnew
            local sum = nil
            for nb = 0, BN / 8 - 1 do
              for jj = 0, 1 do
                local x = sacc[4 * nb + 2 * h + jj]
                ptx.inst.fma.rn.f32(x, x, C, negm)
                ptx.inst.ex2.approx.ftz.f32(x, x)
                sum = sum and sum + x or x + 0
              end
            end
            ptx.inst.fma.rn.f32(l[h], l[h], alpha, sum)        -- this thread's part of the row sum
            for nb = 0, D / 8 - 1 do
              for jj = 0, 1 do
                local y = oacc[4 * nb + 2 * h + jj]
                ptx.inst.mul.f32(y, y, alpha)
              end
            end
          end
          -- P (f32 fragments) -> bf16x2 A registers: k16 step kk, register r = columns 16kk + 8(r/2), row +8(r%2)
          for i = 0, BN / 4 - 1 do                              -- i = 4kk + r: nb = 2kk + r/2, h = r%2
            local kk, r = math.floor(i / 4), i % 4
            local base = 4 * (2 * kk + math.floor(r / 2)) + 2 * (r % 2)
            ptx.inst.cvt.rn.bf16x2.f32(pa[i], sacc[base + 1], sacc[base])   -- high half: the odd column
          end
          -- O += P . V
          tp.mma { d = oacc, n = D, k = BN, a = function(kk) return { pa[4 * kk], pa[4 * kk + 1], pa[4 * kk + 2],
            pa[4 * kk + 3] } end, b = sV:stage(s) }
        end)
        -- epilogue: O / l, f32, from the accumulator fragments (each row's l summed over its four lanes)
        for h = 0, 1 do ptx.warp.reduce_sum(l[h], 4) end
        if split then           -- split-KV: O unnormalized, and each row's (m, l) from its first lane
          local row0 = split * (H * L) + q0 + cw * 64
          tp.store_acc(tid, oacc, D, { ptr = ptx.global_ptrs(O), ld = D, row = row0, col = 0 })
          local pml = ptx.global_ptrs(ML) + (row0 + (tid % 128):shr(5) * 16 + lane:shr(2)):mul_wide(8)
          local first = (lane % 4):eq(0)
          for h = 0, 1 do ptx.at(first).st.global(ptx.addr(pml, 8 * h * 8), { m[h], l[h] }) end
          return
        end
        local inv = {}
        for h = 0, 1 do
          inv[h] = reg.scalar(f32)
          ptx.inst.rcp.rn.f32(inv[h], l[h])
        end
        tp.store_acc(tid, oacc, D, { ptr = ptx.global_ptrs(O), ld = D, row = q0 + cw * 64, col = 0, scale = inv })
      end

      tp.roles(tid, producer, consumer)
      ptx.ret()
    end,
  }
end

--- The split-KV combine kernel: P partials of H*L rows (O unnormalized,
-- (P*H*L) x D, and (m, l), (P*H*L) x 2, in base-2 units) merged into O
-- ((H*L) x D): with mx = max_z m_z and w_z = 2^(m_z - mx),
-- O = sum_z w_z O_z / sum_z w_z l_z. One thread per element, 4 rows a CTA;
-- a split that saw no key of a row (m = -1e30, l = 0, O = 0) weighs 0.
function M.build_combine(H, L, D, P)
  local ROWS = 256 / D
  return kernel "hopper_flash_attention_combine" {
    arch = "sm_90a",
    in_specs = { Tile(P * H * L, D, f32), Tile(P * H * L, 2, f32) },
    out_specs = { Tile(H * L, D, f32) },
    grid = { H * L / ROWS, 1, 1 }, block = { 256, 1, 1 },
    function(Op, ML, O)
      local po, pml, pout = ptx.global_ptrs(Op, ML, O)
      local tid = reg.from(ptx.special.tid.x(), u32)
      local row = reg.from(ptx.special.ctaid.x(), u32) * ROWS + tid / D
      local e = row * D + tid % D                              -- this thread's element of O
      local m, l = {}, {}
      for z = 0, P - 1 do
        m[z], l[z] = reg.scalar(f32), reg.scalar(f32)
        ptx.ld.global({ m[z], l[z] }, ptx.addr(pml + row:mul_wide(8), z * H * L * 8))
      end
      local mx = m[0]
      for z = 1, P - 1 do mx = mx:max(m[z]) end
      local acc, lsum = reg.scalar(f32, 0), reg.scalar(f32, 0)
      for z = 0, P - 1 do
        local w, x = m[z] - mx, reg.scalar(f32)
        ptx.inst.ex2.approx.ftz.f32(w, w)
        ptx.ld.global(x, ptx.addr(po + e:mul_wide(4), z * H * L * D * 4))
        ptx.inst.fma.rn.f32(acc, w, x, acc)
        ptx.inst.fma.rn.f32(lsum, w, l[z], lsum)
      end
      local inv = reg.scalar(f32)
      ptx.inst.rcp.rn.f32(inv, lsum)
      ptx.st.global(ptx.addr(pout + e:mul_wide(4)), acc * inv)
      ptx.ret()
    end,
  }
end

--- The split-KV attention as one callable { attn =, combine = }: the
-- split kernel, then the combine; (Q, K, Vt) -> O.
function M.splitkv(H, L, D, opts)
  local run = { attn = M.build(H, L, D, opts), combine = M.build_combine(H, L, D, opts.SPLITS) }
  return setmetatable(run, { __call = function(_, q, k, vt) return run.combine(run.attn(q, k, vt)) end })
end

local to_bf16 = require("pyptx.floats").round_bf16

--- Random inputs: q, k in [-2, 2), v in [-1, 1), all (H*L) x D row-major.
function M.inputs(H, L, D, seed)
  math.randomseed(seed or 1)
  local q, k, v = {}, {}, {}
  for i = 1, H * L * D do q[i] = math.random() * 4 - 2 end
  for i = 1, H * L * D do k[i] = math.random() * 4 - 2 end
  for i = 1, H * L * D do v[i] = math.random() * 2 - 1 end
  return { q = q, k = k, v = v, H = H, L = L, D = D }
end

--- CPU reference in double on the bf16-rounded inputs: softmax(Q K^T / sqrt(D)) V per head
-- (inputs.causal: row i over keys 0..i).
function M.reference(inputs)
  local H, L, D, causal = inputs.H, inputs.L, inputs.D, inputs.causal
  local q, k, v, out = {}, {}, {}, {}
  for i = 1, H * L * D do q[i], k[i], v[i] = to_bf16(inputs.q[i]), to_bf16(inputs.k[i]), to_bf16(inputs.v[i]) end
  local scale = 1 / math.sqrt(D)
  local s = {}
  for h = 0, H - 1 do
    for i = 0, L - 1 do
      local qo, mx, last = (h * L + i) * D, -math.huge, causal and i or L - 1
      for j = 0, last do
        local ko, acc = (h * L + j) * D, 0
        for d = 1, D do acc = acc + q[qo + d] * k[ko + d] end
        s[j] = acc * scale
        if s[j] > mx then mx = s[j] end
      end
      local sum = 0
      for j = 0, last do s[j] = math.exp(s[j] - mx); sum = sum + s[j] end
      for d = 1, D do
        local acc = 0
        for j = 0, last do acc = acc + s[j] * v[(h * L + j) * D + d] end
        out[qo + d] = acc / sum
      end
    end
  end
  return out
end

--- V transposed per head: Vt[h*D + d][j] = V[h*L + j][d].
function M.transpose_v(v, H, L, D)
  local vt = {}
  for h = 0, H - 1 do
    for j = 0, L - 1 do
      for d = 0, D - 1 do vt[(h * D + d) * L + j + 1] = v[(h * L + j) * D + d + 1] end
    end
  end
  return vt
end

--- The tensors a launch takes: Q, K ((H*L) x D) and Vt ((H*D) x L).
function M.args(inputs)
  local H, L, D = inputs.H, inputs.L, inputs.D
  return { { inputs.q, { H * L, D }, dtype = bf16 }, { inputs.k, { H * L, D }, dtype = bf16 },
    { M.transpose_v(inputs.v, H, L, D), { H * D, L }, dtype = bf16 } }
end

--- Per-element tolerance, bf16-sized: P is rounded to bf16 before P.V (relative
-- 2^-9 per weight, so at most 2^-9 * max |v| on O / l) and exponentials use
-- ex2.approx; the emulator's error is about 5e-4 (1.3e-3 causal, short rows).
M.TOLERANCE = { atol = 2 ^ -8, rtol = 2 ^ -7 }

--- Build, launch on fresh random inputs, compare every element.
function M.check(H, L, D, opts)
  local check = require "pyptx.tools.verify"
  local k = (opts and opts.SPLITS or 1) > 1 and M.splitkv(H, L, D, opts) or M.build(H, L, D, opts)
  local inputs = M.inputs(H, L, D, check.fresh_seed())
  inputs.causal = opts and opts.causal
  return check.run { kernel = k, args = M.args(inputs), reference = M.reference(inputs), tolerance = M.TOLERANCE }
end

-- The default (realistic) size: 16 heads of 4096 tokens, head dim 64.
M.kernels = { M.build(16, 4096, 64), M.build(16, 4096, 64, { causal = true }),
  M.build(16, 4096, 64, { SPLITS = 4 }), M.build_combine(16, 4096, 64, 4) }

--- `luaptx run examples/hopper/flash_attention.lua [H L [STAGES [causal|full [SPLITS]]]] [--summary]`:
-- run 2 heads of 256 tokens (D = 64) by default and check against the CPU
-- reference; SPLITS > 1 runs the split-KV kernel and the combine.
function M.main(args)
  args = args or {}
  if args[1] == "--summary" then return require("examples.lib.runner").summary(M.kernels) end
  local H, L, S = tonumber(args[1]) or 2, tonumber(args[2]) or 256, tonumber(args[3]) or 2
  local causal, P = args[4] == "causal", tonumber(args[5]) or 1
  local ok, report = M.check(H, L, 64, { STAGES = S, causal = causal, SPLITS = P })
  return require("pyptx.tools.verify").report(("hopper flash attention(%d heads, %d tokens, d 64, %d stages%s%s)"):format(H, L, S,
    causal and ", causal" or "", P > 1 and (", split-KV " .. P) or ""), ok, report)
end

return M
