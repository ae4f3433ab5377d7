// Layout transforms between TensorFlow's layouts and CUTLASS's, and the split-K reduction.
#ifndef TF_FP16OPS_CC_KERNELS_GPU_LAYOUT_TRANSFORM_H_
#define TF_FP16OPS_CC_KERNELS_GPU_LAYOUT_TRANSFORM_H_

#include <cstdint>

#include <cuda_runtime_api.h>

#include "cc/kernels/gpu/conv2d_gpu.h"

namespace tf_fp16ops {
namespace gpu {
namespace internal {

// krsc[k,r,s,c] = hwio[r,s,c,k]; element type T.
cudaError_t HwioToKrsc(DataType T, const void* hwio, void* krsc, int64_t R, int64_t S, int64_t C,
                       int64_t K, cudaStream_t s);
// dst NHWC [N,H,W,C] from src NCHW, and back.
cudaError_t NchwToNhwc(DataType T, const void* src, void* dst, int64_t N, int64_t C, int64_t H,
                       int64_t W, cudaStream_t s);
cudaError_t NhwcToNchw(DataType T, const void* src, void* dst, int64_t N, int64_t C, int64_t H,
                       int64_t W, cudaStream_t s);
// hwio[r,s,c,k] = round_T(sum_{i < splits} partial[i][k,r,s,c]), summed in order in Tacc
// (partials hold Tacc elements; one split is a plain KRSC -> HWIO transpose).
cudaError_t ReduceKrscToHwio(DataType T, DataType Tacc, const void* partial, int splits,
                             void* hwio, int64_t K, int64_t R, int64_t S, int64_t C,
                             cudaStream_t s);

}  // namespace internal
}  // namespace gpu
}  // namespace tf_fp16ops

#endif  // TF_FP16OPS_CC_KERNELS_GPU_LAYOUT_TRANSFORM_H_
