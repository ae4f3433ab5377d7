// Internal interface between the implementation table (conv2d_gpu.cu.cc) and the CUTLASS
// instantiations: one ungrouped convolution in CUTLASS's layouts (activations NHWC, filter KRSC)
// described by the one problem type, ConvProblem; the table has checked that every extent fits
// int32. Operands in CUTLASS's implicit-GEMM order (A, B -> D):
//   fprop: x, w_krsc -> y      dgrad: dy, w_krsc -> dx      wgrad: dy, x -> dw (KRSC)
// Pointers are device pointers to elements of T; wgrad partial buffers hold Tacc.
#ifndef TF_FP16OPS_CC_KERNELS_GPU_IMPLICIT_GEMM_H_
#define TF_FP16OPS_CC_KERNELS_GPU_IMPLICIT_GEMM_H_

#include <cstddef>

#include "cc/kernels/gpu/conv2d_gpu.h"
#include "cc/kernels/gpu/platform.h"

namespace tf_fp16ops {
namespace gpu {
namespace internal {

enum class IgCode : int { kOk = 0, kNotApplicable = 1, kError = 2 };

struct IgResult {
  IgCode code;
  const char* what;  // static string: the CUTLASS or CUDA error, or why the kernel does not apply
};

inline IgResult IgOk() { return {IgCode::kOk, ""}; }
inline IgResult IgNotApplicable(const char* why) { return {IgCode::kNotApplicable, why}; }
inline IgResult IgError(const char* what) { return {IgCode::kError, what}; }

// CUTLASS 2.x, mma.sync (T=half) or SIMT FFMA (T=float); compute capability >= 8.0.
// CanImplement is CUTLASS's ImplicitGemmConvolution::can_implement (host code, no device needed).
// wgrad runs parallel split-K with `splits` slices into `d` (splits KRSC tensors of Tacc,
// d_bytes bytes); fprop and dgrad ignore splits and d_bytes.
template <Pass P, DataType T, DataType Tacc>
IgResult Sm80CanImplement(const ConvProblem& p, int splits);
template <Pass P, DataType T, DataType Tacc>
IgResult Sm80Run(const ConvProblem& p, const void* a, const void* b, void* d, int splits,
                 size_t d_bytes, cudaStream_t s);

// CUTLASS 2.x Volta tensor ops (mma.sync 8x8x4), T=half, compute capability 7.0 and 7.2. Same
// contract as Sm80CanImplement/Sm80Run (wgrad: split-K partials of Tacc into `d`). CodeBuilt:
// whether this library holds the sm_70 kernels (false when sm_70 was not a build target).
template <Pass P, DataType Tacc>
IgResult Sm70CanImplement(const ConvProblem& p, int splits);
template <Pass P, DataType Tacc>
IgResult Sm70Run(const ConvProblem& p, const void* a, const void* b, void* d, int splits,
                 size_t d_bytes, cudaStream_t s);
template <Pass P, DataType Tacc>
bool Sm70CodeBuilt();

// CUTLASS 3.x, wgmma + TMA im2col (T=half only), sm_90a. CanImplement: our restrictions, then
// ConvUniversalAdapter::can_implement (host code). CodePresent: the sm_90a kernel image is in the
// library and loads on the current device (device builds only). Run writes wgrad as KRSC of T;
// a failed TMA descriptor encode (cuTensorMapEncode*) is returned as an error.
template <Pass P, DataType Tacc>
IgResult Sm90CanImplement(const ConvProblem& p);
template <Pass P, DataType Tacc>
bool Sm90CodePresent();
template <Pass P, DataType Tacc>
IgResult Sm90Run(const ConvProblem& p, const void* a, const void* b, void* d, cudaStream_t s);

}  // namespace internal
}  // namespace gpu
}  // namespace tf_fp16ops

#endif  // TF_FP16OPS_CC_KERNELS_GPU_IMPLICIT_GEMM_H_
