// The reference for bench/sass_compare.lua: a CUTLASS 3.x (4.2) Hopper
// bf16 GEMM built from CUTLASS's documented collective-builder API only
// (TMA warp-specialised cooperative, tile 128x256x64, cluster 2x1, fp32
// accumulation, bf16 output), compiled to an sm_90a cubin for its SASS.
// The headers come from the `nvidia-cutlass` PyPI wheel; none of CUTLASS's
// code is in this tree. The host function below only instantiates the
// kernel (a cubin needs it referenced); nothing here launches it.
#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>

using namespace cute;

using Element = cutlass::bfloat16_t;
using Accumulator = float;
constexpr int kAlign = 128 / cutlass::sizeof_bits<Element>::value;   // 16-byte TMA rows
using TileShape = Shape<_128, _256, _64>;
using ClusterShape = Shape<_2, _1, _1>;

using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, Accumulator, Accumulator,
    Element, cutlass::layout::RowMajor, kAlign, Element, cutlass::layout::RowMajor, kAlign,
    cutlass::epilogue::TmaWarpSpecializedCooperative>::CollectiveOp;

using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
    Element, cutlass::layout::RowMajor, kAlign,          // A: M x K, K contiguous
    Element, cutlass::layout::ColumnMajor, kAlign,       // B: K x N, K contiguous
    Accumulator, TileShape, ClusterShape,
    cutlass::gemm::collective::StageCountAutoCarveout<
        static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
    cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;

using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, Epilogue>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

// The kernel's entry point, referenced so that nvcc emits it into the cubin.
void *luaptx_cutlass_gemm_entry() {
  return reinterpret_cast<void *>(&cutlass::device_kernel<Kernel>);
}
