// Element types and the single-rounding multiply-add of each accumulator, for kernel bodies.
//
// nvcc: binary16 is CUDA's __half and the half step is __hfma (one rounding, round to nearest
// even: CUDA Math API, "Half Precision Intrinsics"). Host build (TF_FP16OPS_HOST_BUILD): binary16
// is GCC's _Float16 and the step is computed as binary16(binary64(a) * binary64(b) + binary64(acc))
// -- the product of two binary16 numbers is exact in binary64, and the binary64 sum is exact
// whenever its rounding could move the result across a binary16 rounding boundary; GCC converts
// binary64 to _Float16 with one rounding (libgcc __truncdfhf2). tests/support/reference.py uses
// the same argument for its NumPy reference.
#ifndef TF_FP16OPS_CC_KERNELS_GPU_DEVICE_NUMERICS_H_
#define TF_FP16OPS_CC_KERNELS_GPU_DEVICE_NUMERICS_H_

#include <cmath>
#include <type_traits>

#include "cc/kernels/gpu/conv2d_gpu.h"
#include "cc/kernels/gpu/platform.h"

#if !defined(TF_FP16OPS_HOST_BUILD)
#include <cuda_fp16.h>
#endif

namespace tf_fp16ops {
namespace gpu {
namespace internal {

#if defined(TF_FP16OPS_HOST_BUILD)
using Half = _Float16;
#else
using Half = __half;
#endif

template <DataType D>
using DevElem = std::conditional_t<D == DataType::kHalf, Half, float>;

template <typename To, typename From>
TFO_DEVICE To Convert(From v);
template <>
TFO_DEVICE float Convert<float, float>(float v) {
  return v;
}

#if defined(TF_FP16OPS_HOST_BUILD)
template <>
TFO_DEVICE float Convert<float, Half>(Half v) {
  return static_cast<float>(v);
}
template <>
TFO_DEVICE Half Convert<Half, float>(float v) {
  return static_cast<Half>(v);
}
template <>
TFO_DEVICE Half Convert<Half, Half>(Half v) {
  return v;
}
TFO_DEVICE Half MulAdd(Half a, Half b, Half acc) {
  return static_cast<Half>(static_cast<double>(a) * static_cast<double>(b) +
                           static_cast<double>(acc));
}
TFO_DEVICE float MulAdd(float a, float b, float acc) { return std::fma(a, b, acc); }
TFO_DEVICE float MulAdd(Half a, Half b, float acc) {
  return std::fma(static_cast<float>(a), static_cast<float>(b), acc);
}
TFO_DEVICE Half Add(Half a, Half b) {
  return static_cast<Half>(static_cast<double>(a) + static_cast<double>(b));
}
#else
template <>
TFO_DEVICE float Convert<float, Half>(Half v) {
  return __half2float(v);
}
template <>
TFO_DEVICE Half Convert<Half, float>(float v) {
  return __float2half_rn(v);
}
template <>
TFO_DEVICE Half Convert<Half, Half>(Half v) {
  return v;
}
// acc + a*b with the product exact and one rounding to Acc (CUDA __hfma / fmaf semantics).
TFO_DEVICE Half MulAdd(Half a, Half b, Half acc) { return __hfma(a, b, acc); }
TFO_DEVICE float MulAdd(float a, float b, float acc) { return fmaf(a, b, acc); }
// fp16 x fp16 products are exact in fp32 (22 significant bits), so this is one rounding too.
TFO_DEVICE float MulAdd(Half a, Half b, float acc) {
  return fmaf(__half2float(a), __half2float(b), acc);
}
TFO_DEVICE Half Add(Half a, Half b) { return __hadd(a, b); }
#endif

TFO_DEVICE float Add(float a, float b) { return a + b; }

template <typename T>
TFO_DEVICE T Zero() {
  return Convert<T, float>(0.0f);
}

}  // namespace internal
}  // namespace gpu
}  // namespace tf_fp16ops

#endif  // TF_FP16OPS_CC_KERNELS_GPU_DEVICE_NUMERICS_H_
