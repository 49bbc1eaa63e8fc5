-- #gpu specs: the same kernels on a real device. They need a CUDA driver and
-- a GPU; without one every test here is reported pending, with the reason.
local pyptx = require "pyptx"
local runtime = require "pyptx.runtime"
local tensor = require "pyptx.runtime.tensor"

local H = require "spec.helpers"

local dev, why = H.gpu()

describe("on a CUDA GPU #gpu", function()
  if not dev then pending(why) return end

  local examples = {
    "examples.hopper.rms_norm", "examples.hopper.layer_norm", "examples.hopper.softmax", "examples.hopper.swiglu",
  }
  for _, name in ipairs(examples) do
    it("runs " .. name .. " and matches its CPU reference", function()
      local mod = require(name)
      runtime.use(dev)
      local passed, report = mod.check(64, 4096, { arch = "auto" })
      assert.is_true(passed, report.message)
    end)
  end

  it("launches with more than 48 KB of dynamic shared memory", function()
    local f32, u32 = pyptx.types.f32, pyptx.types.u32
    local k = pyptx.kernel "big_smem" {
      arch = "auto", in_specs = { pyptx.Tile(256, f32) }, out_specs = { pyptx.Tile(256, f32) }, block = { 256 },
      function(X, Y)
        local px, py = pyptx.ptx.global_ptrs(X, Y)
        local buf = pyptx.smem.alloc(f32, 64 * 256)
        local t = pyptx.reg.from(pyptx.ptx.special.tid.x(), u32)
        local off = t:mul_wide(4)
        local v = pyptx.reg.scalar(f32)
        pyptx.ptx.ld.global(v, pyptx.ptx.addr(px + off))
        local s = buf:base() + t:shl(2) + 60000
        pyptx.ptx.st.shared(pyptx.ptx.addr(s), v)
        pyptx.ptx.bar_sync(0)
        pyptx.ptx.ld.shared(v, pyptx.ptx.addr(s))
        pyptx.ptx.st.global(pyptx.ptx.addr(py + off), v)
        pyptx.ptx.ret()
      end,
    }
    runtime.use(dev)
    local x = tensor.rand({ 256 }, f32, { seed = 5 })
    local y = k(x)
    local same, report = tensor.compare(y, x, { atol = 0, rtol = 0 })
    assert.is_true(same, report.message)
  end)
end)

describe("make gpu-check", function()
  it("refuses, naming what is missing, when there is no GPU", function()
    if dev then H.pending("has a GPU: make gpu-check itself is the test here") return end
    local out, err, status = H.luaptx({ "bench/gpu_check.lua" })
    assert.are.equal(2, status)
    assert.are.equal("", out)
    assert.matches("make gpu%-check needs an NVIDIA GPU and its driver: ", err)
    assert.matches("make test", err)
  end)

  it("builds its cuBLAS reference helper with nvcc", function()
    local nvcc = H.need_tool("nvcc")
    local dir = H.temp_dir()
    local exe = dir .. "/cublas_gemm"
    local res = H.run({ nvcc, "-O2", "-arch=compute_80", "-o", exe, "bench/cublas_gemm.cu", "-lcublas" }, { merge = true })
    assert.are.equal(0, res.status, res.stdout)
    res = H.run({ exe, "100" }, { merge = true })
    assert.are.equal(2, res.status)
    assert.matches("usage: cublas_gemm N", res.stdout)
    if dev then
      res = H.run({ exe, "256", "3" }, { merge = true })
      assert.are.equal(0, res.status, res.stdout)
      assert.matches("^cublas 256 [%d.]+ [%d.]+\n$", res.stdout)
    else
      res = H.run({ exe, "256", "3" }, { merge = true })
      assert.are.equal(2, res.status)
      assert.matches("^cublas_gemm: cudaGetDeviceCount: ", res.stdout)
    end
  end)
end)
