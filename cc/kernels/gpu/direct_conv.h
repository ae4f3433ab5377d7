// Direct (non-GEMM) convolution kernels: one thread per output element, sequential accumulation,
// 64-bit indexing, any layout/groups/stride/dilation/padding. The path for every problem the
// implicit-GEMM kernels cannot take, and the bit-exact GPU twin of the CPU contract for Tacc=half:
//   fprop  y[n,p,q,k]   : acc over (kh, kw, cin)  acc = fma(x, w, acc)
//   dgrad  dx[n,h,w,c]  : acc over (kh, kw, k)
//   wgrad  dw[kh,kw,c,k]: acc over (n, p, q)
// with one fp16 rounding per step (__hfma) for Tacc=half, fp32 FMA and one final rounding for
// Tacc=float. As in cc/kernels/cpu/conv2d_cpu.h: padded input positions are zeros that take part in
// fprop and wgrad (0 * inf gives NaN); dgrad visits only the output positions that exist.
#ifndef TF_FP16OPS_CC_KERNELS_GPU_DIRECT_CONV_H_
#define TF_FP16OPS_CC_KERNELS_GPU_DIRECT_CONV_H_

#include <cuda_runtime_api.h>

#include "cc/kernels/gpu/conv2d_gpu.h"

namespace tf_fp16ops {
namespace gpu {
namespace internal {

// Layouts as in conv2d_gpu.h (NHWC/NCHW activations, HWIO filter). Return the launch error.
template <DataType T, DataType Tacc>
cudaError_t DirectFprop(const Conv2DProblem& p, const void* x, const void* w, void* y,
                        cudaStream_t s);
template <DataType T, DataType Tacc>
cudaError_t DirectDgrad(const Conv2DProblem& p, const void* w, const void* dy, void* dx,
                        cudaStream_t s);
template <DataType T, DataType Tacc>
cudaError_t DirectWgrad(const Conv2DProblem& p, const void* x, const void* dy, void* dw,
                        cudaStream_t s);

}  // namespace internal
}  // namespace gpu
}  // namespace tf_fp16ops

#endif  // TF_FP16OPS_CC_KERNELS_GPU_DIRECT_CONV_H_
