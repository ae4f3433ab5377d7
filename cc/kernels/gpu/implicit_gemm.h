// Internal interface between the launchers (conv2d_gpu.cu.cc) and the CUTLASS instantiations.
// One ungrouped convolution in CUTLASS's layouts: activations NHWC, filter KRSC, 32-bit sizes.
#ifndef TF_FP16OPS_CC_KERNELS_GPU_IMPLICIT_GEMM_H_
#define TF_FP16OPS_CC_KERNELS_GPU_IMPLICIT_GEMM_H_

#include <cstddef>

#include <cuda_runtime_api.h>

#include "cc/kernels/gpu/conv2d_gpu.h"

namespace tf_fp16ops {
namespace gpu {
namespace internal {

struct IgProblem {
  int N, H, W, C, K, R, S, P, Q;
  int pad_h, pad_w;  // top/left; bottom/right implied by P, Q
  int stride_h, stride_w, dil_h, dil_w;
};

enum class IgCode : int { kOk = 0, kNotApplicable = 1, kError = 2 };

struct IgResult {
  IgCode code;
  const char* what;  // static string: the CUTLASS or CUDA error, or why the kernel does not apply
};

inline IgResult IgOk() { return {IgCode::kOk, ""}; }
inline IgResult IgNotApplicable(const char* why) { return {IgCode::kNotApplicable, why}; }
inline IgResult IgError(const char* what) { return {IgCode::kError, what}; }

// Each function checks applicability (CUTLASS can_implement) first and returns kNotApplicable
// without touching memory if the kernel cannot run the problem. Pointers are device pointers to
// elements of T (half or float); `partial` buffers hold Tacc.

// CUTLASS 2.x, mma.sync (T=half) or SIMT FFMA (T=float). Needs compute capability >= 8.0.
template <DataType T, DataType Tacc>
IgResult Sm80Fprop(const IgProblem& p, const void* x, const void* w_krsc, void* y, cudaStream_t s);
template <DataType T, DataType Tacc>
IgResult Sm80Dgrad(const IgProblem& p, const void* dy, const void* w_krsc, void* dx, cudaStream_t s);
// Parallel split-K wgrad: writes `*splits` partial KRSC tensors of Tacc into `partial`
// (partial_bytes must be >= Sm80WgradPartialBytes(p, requested_splits)).
template <DataType T, DataType Tacc>
size_t Sm80WgradPartialBytes(const IgProblem& p, int requested_splits);
template <DataType T, DataType Tacc>
IgResult Sm80Wgrad(const IgProblem& p, const void* dy, const void* x, void* partial,
                   size_t partial_bytes, int requested_splits, int* splits, cudaStream_t s);

// CUTLASS 3.x, wgmma + TMA im2col (T=half only). Needs compute capability 9.0; returns
// kNotApplicable when the library holds no sm_90a code for the kernel.
template <DataType T, DataType Tacc>
IgResult Sm90Fprop(const IgProblem& p, const void* x, const void* w_krsc, void* y, cudaStream_t s);
template <DataType T, DataType Tacc>
IgResult Sm90Dgrad(const IgProblem& p, const void* dy, const void* w_krsc, void* dx, cudaStream_t s);
// Writes the filter gradient in KRSC, element type T.
template <DataType T, DataType Tacc>
IgResult Sm90Wgrad(const IgProblem& p, const void* dy, const void* x, void* dw_krsc, cudaStream_t s);

}  // namespace internal
}  // namespace gpu
}  // namespace tf_fp16ops

#endif  // TF_FP16OPS_CC_KERNELS_GPU_IMPLICIT_GEMM_H_
