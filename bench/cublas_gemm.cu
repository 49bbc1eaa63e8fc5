// cuBLAS reference for `make gpu-check` (bench/gpu_check.lua): the time and
// TFLOP/s of an n x n x n GEMM through cublasGemmEx with bf16 inputs and f32
// accumulation and output, the shapes the Hopper GEMM example is timed at.
// usage: cublas_gemm N [reps]   prints: cublas N ms TFLOP/s
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
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

int main(int argc, char **argv)
{
  int n = argc > 1 ? atoi(argv[1]) : 4096, reps = argc > 2 ? atoi(argv[2]) : 20;
  if (n <= 0 || n % 128 || reps <= 0) {
    fprintf(stderr, "usage: cublas_gemm N [reps]  (N a positive multiple of 128)\n");
    return 2;
  }
  int count = 0;
  cuda_ok(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  size_t nn = (size_t)n * n;
  __nv_bfloat16 *a, *b; float *c;
  cuda_ok(cudaMalloc(&a, nn * sizeof *a), "cudaMalloc A");
  cuda_ok(cudaMalloc(&b, nn * sizeof *b), "cudaMalloc B");
  cuda_ok(cudaMalloc(&c, nn * sizeof *c), "cudaMalloc C");
  fill<<<(unsigned)((nn + 255) / 256), 256>>>(a, nn, 1u);
  fill<<<(unsigned)((nn + 255) / 256), 256>>>(b, nn, 2u);
  cuda_ok(cudaGetLastError(), "fill");
  cublasHandle_t h;
  blas_ok(cublasCreate(&h), "cublasCreate");
  float one = 1.0f, zero = 0.0f;
  cudaEvent_t e0, e1;
  cuda_ok(cudaEventCreate(&e0), "cudaEventCreate");
  cuda_ok(cudaEventCreate(&e1), "cudaEventCreate");
  std::vector<float> ms(reps + 3);
  for (int r = 0; r < reps + 3; r++) {   // the first three are warm-up
    cuda_ok(cudaEventRecord(e0), "cudaEventRecord");
    blas_ok(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &one, a, CUDA_R_16BF, n, b, CUDA_R_16BF, n,
                         &zero, c, CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT), "cublasGemmEx");
    cuda_ok(cudaEventRecord(e1), "cudaEventRecord");
    cuda_ok(cudaEventSynchronize(e1), "cudaEventSynchronize");
    cuda_ok(cudaEventElapsedTime(&ms[r], e0, e1), "cudaEventElapsedTime");
  }
  std::sort(ms.begin() + 3, ms.end());
  double t = ms[3 + reps / 2];
  printf("cublas %d %.3f %.1f\n", n, t, 2.0 * n * n * n / (t * 1e-3) / 1e12);
  cublasDestroy(h);
  cudaFree(a); cudaFree(b); cudaFree(c);
  return 0;
}
