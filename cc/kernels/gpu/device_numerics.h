// Element types and the single-rounding multiply-add of each accumulator, for device code.
#ifndef TF_FP16OPS_CC_KERNELS_GPU_DEVICE_NUMERICS_H_
#define TF_FP16OPS_CC_KERNELS_GPU_DEVICE_NUMERICS_H_

#include <type_traits>

#include <cuda_fp16.h>

#include "cc/kernels/gpu/conv2d_gpu.h"

namespace tf_fp16ops {
namespace gpu {
namespace internal {

template <DataType D>
using DevElem = std::conditional_t<D == DataType::kHalf, __half, float>;

template <typename To, typename From>
__device__ __forceinline__ To Convert(From v);
template <>
__device__ __forceinline__ float Convert<float, float>(float v) { return v; }
template <>
__device__ __forceinline__ float Convert<float, __half>(__half v) { return __half2float(v); }
template <>
__device__ __forceinline__ __half Convert<__half, float>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __half Convert<__half, __half>(__half v) { return v; }

// acc + a*b with the product exact and one rounding to Acc (CUDA __hfma / fmaf semantics).
__device__ __forceinline__ __half MulAdd(__half a, __half b, __half acc) { return __hfma(a, b, acc); }
__device__ __forceinline__ float MulAdd(float a, float b, float acc) { return fmaf(a, b, acc); }
// fp16 x fp16 products are exact in fp32 (22 significant bits), so this is one rounding too.
__device__ __forceinline__ float MulAdd(__half a, __half b, float acc) {
  return fmaf(__half2float(a), __half2float(b), acc);
}

__device__ __forceinline__ __half Add(__half a, __half b) { return __hadd(a, b); }
__device__ __forceinline__ float Add(float a, float b) { return a + b; }

template <typename T>
__device__ __forceinline__ T Zero() { return Convert<T, float>(0.0f); }

}  // namespace internal
}  // namespace gpu
}  // namespace tf_fp16ops

#endif  // TF_FP16OPS_CC_KERNELS_GPU_DEVICE_NUMERICS_H_
