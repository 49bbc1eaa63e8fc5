--- Named GPUs for the roofline of luaptx profile: SMs, compute capability,
-- dense peaks (no sparsity) in TFLOP/s and DRAM bandwidth in GB/s. The
-- sources are cited in docs/profile.md ("The GPU table").
local M = {}

--- fp32: CUDA-core FP32; bf16: FP16/BF16 tensor cores with FP32 accumulate;
-- fp8: FP8 tensor cores (nil: none); bw: memory bandwidth.
M.GPUS = {
  { name = "A100", full = "A100 SXM4 80GB", sm = 80, sms = 108, fp32 = 19.5, bf16 = 312, fp8 = nil, bw = 2039 },
  { name = "H100", full = "H100 SXM5", sm = 90, sms = 132, fp32 = 67, bf16 = 989.4, fp8 = 1978.9, bw = 3350 },
  { name = "H100-PCIe", full = "H100 PCIe", sm = 90, sms = 114, fp32 = 51, bf16 = 756, fp8 = 1513, bw = 2000 },
  { name = "H200", full = "H200 SXM", sm = 90, sms = 132, fp32 = 67, bf16 = 989.4, fp8 = 1978.9, bw = 4800 },
  { name = "B200", full = "B200 (HGX B200)", sm = 100, sms = 148, fp32 = 75, bf16 = 2250, fp8 = 4500, bw = 8000 },
  { name = "RTX4090", full = "GeForce RTX 4090", sm = 89, sms = 128, fp32 = 82.6, bf16 = 165.2, fp8 = 330.3, bw = 1008 },
  { name = "RTX5090", full = "GeForce RTX 5090", sm = 120, sms = 170, fp32 = 104.8, bf16 = 209.5, fp8 = 419, bw = 1792 },
}

--- A GPU by name, case and punctuation ignored ("h100", "H100 SXM", "rtx-4090"); nil and the list when unknown.
function M.find(name)
  local key = tostring(name):lower():gsub("[^%w]", "")
  local names = {}
  for _, g in ipairs(M.GPUS) do
    local k = g.name:lower():gsub("[^%w]", "")
    if k == key or (key == k .. "sxm") then return g end
    names[#names + 1] = g.name
  end
  return nil, ("unknown GPU '%s'; known: %s"):format(tostring(name), table.concat(names, ", "))
end

--- The roofline bound of counted work on gpu g: c = counters of a whole
-- launch (pyptx.tools.profile). Returns { seconds (lower bound), bound
-- ("tensor", "fp32" or "memory"), tensor_s, fp32_s, memory_s, intensity
-- (FLOP per byte), bytes, flops }.
function M.roofline(g, c)
  local bytes = 32 * (c.gld_sectors + c.gst_sectors) + c.tma_bytes + c.bulk_bytes
  local fp8 = g.fp8 and c.flops_fp8 or 0
  local tensor_s = ((c.flops - fp8) / g.bf16 + fp8 / (g.fp8 or g.bf16)) / 1e12
  local fp32_s = c.fp32_flops / g.fp32 / 1e12
  local memory_s = bytes / g.bw / 1e9
  local r = { tensor_s = tensor_s, fp32_s = fp32_s, memory_s = memory_s, bytes = bytes, flops = c.flops + c.fp32_flops }
  r.seconds, r.bound = memory_s, "memory"
  if tensor_s > r.seconds then r.seconds, r.bound = tensor_s, "tensor" end
  if fp32_s > r.seconds then r.seconds, r.bound = fp32_s, "fp32" end
  r.intensity = bytes > 0 and r.flops / bytes or math.huge
  return r
end

return M
