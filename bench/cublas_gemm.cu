// cuBLAS reference for `make gpu-check` (bench/gpu_check.lua, bench/perf.lua):
// the time and TFLOP/s of an M x N x K GEMM through cublasGemmEx with bf16
// inputs, f32 accumulation and output, D = A B^T with A (M x K) and B
// (N x K) row-major as the luaptx GEMM examples take them; and the
// bandwidth of a device-to-device copy (cudaMemcpy), the HBM yardstick of
// the memory-bound kernels.
// usage: cublas_gemm N [reps]          prints: cublas N ms TFLOP/s (N^3)
//        cublas_gemm M N K [reps]      prints: cublas MxNxK ms TFLOP/s
//        cublas_gemm copy MiB [reps]   prints: copy BYTES ms GB/s (read + written)
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>

// Fill n bf16 values with a hash of their index in [-1, 1): never all zeros,
// so the tensor cores switch as they would on real data.
__global__ void fill(__nv_bfloat16 *p, size_t n, unsigned seed)
{
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned h = (unsigned)i * 2654435761u ^ seed;
  h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
  p[i] = __float2bfloat16((float)(h & 0xffff) / 32768.0f - 1.0f);
}

// Exit with a message naming the failing call when a CUDA runtime call fails.
static void cuda_ok(cudaError_t e, const char *what)
{
  if (e == cudaSuccess) return;
  fprintf(stderr, "cublas_gemm: %s: %s\n", what, cudaGetErrorString(e));
  exit(2);
}

// Exit with a message naming the failing call when a cuBLAS call fails.
static void blas_ok(cublasStatus_t s, const char *what)
{
  if (s == CUBLAS_STATUS_SUCCESS) return;
  fprintf(stderr, "cublas_gemm: %s: %s\n", what, cublasGetStatusString(s));
  exit(2);
}

// Median milliseconds of reps runs of fn (after three warm-ups), by events.
template <class F> static double median_ms(int reps, F fn)
{
  cudaEvent_t e0, e1;
  cuda_ok(cudaEventCreate(&e0), "cudaEventCreate");
  cuda_ok(cudaEventCreate(&e1), "cudaEventCreate");
  std::vector<float> ms(reps + 3);
  for (int r = 0; r < reps + 3; r++) {   // the first three are warm-up
    cuda_ok(cudaEventRecord(e0), "cudaEventRecord");
    fn();
    cuda_ok(cudaEventRecord(e1), "cudaEventRecord");
    cuda_ok(cudaEventSynchronize(e1), "cudaEventSynchronize");
    cuda_ok(cudaEventElapsedTime(&ms[r], e0, e1), "cudaEventElapsedTime");
  }
  std::sort(ms.begin() + 3, ms.end());
  return ms[3 + reps / 2];
}

// Time a device-to-device copy of mib MiB; prints bytes moved (read and
// written) per second.
static int copy_bench(long mib, int reps)
{
  size_t bytes = (size_t)mib << 20;
  void *src, *dst;
  cuda_ok(cudaMalloc(&src, bytes), "cudaMalloc src");
  cuda_ok(cudaMalloc(&dst, bytes), "cudaMalloc dst");
  cuda_ok(cudaMemset(src, 1, bytes), "cudaMemset");
  double t = median_ms(reps, [&] { cuda_ok(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy"); });
  printf("copy %zu %.4f %.1f\n", bytes, t, 2.0 * bytes / (t * 1e-3) / 1e9);
  cudaFree(src); cudaFree(dst);
  return 0;
}

// Time D = A B^T (M x N x K, bf16 in, f32 out) through cublasGemmEx. In
// cuBLAS's column-major terms D^T (N x M) = B (N x K) A^T: op T on B's
// K x N column-major view, op N on A's K x M one.
static int gemm_bench(int m, int n, int k, int reps, bool square)
{
  size_t na = (size_t)m * k, nb = (size_t)n * k, nc = (size_t)m * n;
  __nv_bfloat16 *a, *b; float *c;
  cuda_ok(cudaMalloc(&a, na * sizeof *a), "cudaMalloc A");
  cuda_ok(cudaMalloc(&b, nb * sizeof *b), "cudaMalloc B");
  cuda_ok(cudaMalloc(&c, nc * sizeof *c), "cudaMalloc C");
  fill<<<(unsigned)((na + 255) / 256), 256>>>(a, na, 1u);
  fill<<<(unsigned)((nb + 255) / 256), 256>>>(b, nb, 2u);
  cuda_ok(cudaGetLastError(), "fill");
  cublasHandle_t h;
  blas_ok(cublasCreate(&h), "cublasCreate");
  float one = 1.0f, zero = 0.0f;
  double t = median_ms(reps, [&] {
    blas_ok(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, b, CUDA_R_16BF, k, a, CUDA_R_16BF, k,
                         &zero, c, CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT), "cublasGemmEx");
  });
  double tflops = 2.0 * m * n * k / (t * 1e-3) / 1e12;
  if (square) printf("cublas %d %.3f %.1f\n", n, t, tflops);
  else printf("cublas %dx%dx%d %.3f %.1f\n", m, n, k, t, tflops);
  cublasDestroy(h);
  cudaFree(a); cudaFree(b); cudaFree(c);
  return 0;
}

int main(int argc, char **argv)
{
  int count = 0;
  if (argc > 1 && !strcmp(argv[1], "copy")) {
    long mib = argc > 2 ? atol(argv[2]) : 512;
    int reps = argc > 3 ? atoi(argv[3]) : 20;
    if (mib <= 0 || reps <= 0) { fprintf(stderr, "usage: cublas_gemm copy MiB [reps]\n"); return 2; }
    cuda_ok(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
    return copy_bench(mib, reps);
  }
  bool square = argc <= 3;
  int m = argc > 1 ? atoi(argv[1]) : 4096;
  int n = square ? m : atoi(argv[2]), k = square ? m : atoi(argv[3]);
  int reps = square ? (argc > 2 ? atoi(argv[2]) : 20) : (argc > 4 ? atoi(argv[4]) : 20);
  if (m <= 0 || n <= 0 || k <= 0 || m % 8 || n % 8 || k % 8 || reps <= 0) {
    fprintf(stderr, "usage: cublas_gemm N [reps] | cublas_gemm M N K [reps] (multiples of 8) | cublas_gemm copy MiB [reps]\n");
    return 2;
  }
  cuda_ok(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  return gemm_bench(m, n, k, reps, square);
}
