// CPU functor for Fp16DepthwiseConv2D (fprop), vectorized over channels.
//
// Layouts: x NHWC [N, H, W, C], filter [KH, KW, C, M] (tf.nn.depthwise_conv2d's), y NHWC
// [N, P, Q, C*M]; values are binary16 or binary32 numbers held in float buffers.
//
//   y[n, p, q, c*M + m] = sum over (kh, kw) ascending of
//       x[n, p*sh - pt + kh*dh, q*sw - pl + kw*dw, c] * w[kh, kw, c, m]
//
// one accumulator per output starting at +0, padded positions zeros that take part (as in the
// grouped Fp16Conv2D with groups = C, whose order (kh, kw, ci) with one ci per group is the
// same, so both give identical bits). The step is that of cc/kernels/cpu/accumulate.h:
// kFloat one binary32 FMA, kHalf round_binary16(x * w + acc) with one rounding.
// The lanes are the C*M output channels of one output position (16 per AVX-512 vector, 8 per
// AVX2 vector, on the path cc/kernels/cpu/accumulate.h chose).
#ifndef TF_FP16OPS_CC_KERNELS_CPU_DEPTHWISE_CPU_H_
#define TF_FP16OPS_CC_KERNELS_CPU_DEPTHWISE_CPU_H_

#include <cstdint>

#include "cc/kernels/cpu/accumulate.h"
#include "cc/kernels/cpu/conv2d_cpu.h"

namespace tf_fp16ops {
namespace cpu {

// g: the grouped problem of DepthwiseConvProblem (cc/kernels/conv_shape.h): groups = C, Cg = 1,
// K = C * M (the filter [KH, KW, C, M] is HWIO [KH, KW, 1, C * M]), NHWC. y: [N, P, Q, C * M].
void DepthwiseFprop(const ConvGeometry& g, Accumulation acc, const float* x, const float* w,
                    float* y, const ParallelFor& parallel_for);

// Tacc=half fprop on binary16 buffers (IEEE binary16 bit patterns: the op's T=half; same layouts
// and bits as DepthwiseFprop with kHalf): no binary32 copies of the tensors are made. On
// AVX512-FP16 the kernel of cc/kernels/cpu/depthwise_fp16.h (32 binary16 lanes); the AVX-512
// kernels widen x and w as they load them; on AVX2 (stride and dilation 1 along W) the kernel reads
// binary32 copies of the filter and of the few input rows an output row reads (at most 8 MiB per
// worker thread; each row widened once and reused by the next output rows), as F16C widening
// costs as much as a step there. Returns false without touching y where it does not apply (the
// scalar path, a depth multiplier other than 1, no output); the caller then takes the binary32
// route. AVX-512 and AVX2 (16 and 8 lanes per vector).
bool DepthwiseFpropHalfBuffers(const ConvGeometry& g, const uint16_t* x, const uint16_t* w,
                               uint16_t* y, const ParallelFor& parallel_for);

// The operands and the result of DepthwiseFpropHalf: exactly one of x16 / x32 and one of
// y16 / y32 set. x32: binary32 values rounded to binary16 (to nearest even) as the kernel reads
// them, the same values as a binary16 copy would hold. bias (optional, [C * M]) and the epilogue
// of every output: v = the binary16 sum widened (exact); with a bias v = v + bias[channel] in
// binary32 (one rounding); then y32 = v, or y16 = v rounded to binary16 (to nearest even) --
// the bits of TensorFlow's Cast and BiasAdd after the binary16 result (a binary16 BiasAdd
// computes in binary32 and rounds the sum to binary16, as here).
struct HalfFpropIo {
  const uint16_t* x16 = nullptr;
  const float* x32 = nullptr;
  const float* bias = nullptr;
  uint16_t* y16 = nullptr;
  float* y32 = nullptr;
};

// DepthwiseFpropHalfBuffers with the operands and epilogue of `io` (w: binary16, [KH, KW, 1, C]):
// the sliding kernels round x32 as they copy its rows and apply the epilogue in their stores, the
// other AVX2/AVX-512 kernels (which read the input in place: a binary16 copy of x32) after each
// output row; on AVX512-FP16 the binary16 kernel runs on a binary16 copy of x32 and the epilogue
// is a pass of its own. Returns false without touching the output where it does not apply, as
// DepthwiseFpropHalfBuffers; the caller then takes the binary32 route.
bool DepthwiseFpropHalf(const ConvGeometry& g, const uint16_t* w, const HalfFpropIo& io,
                        const ParallelFor& parallel_for);

// The epilogue of HalfFpropIo on `rows` rows of L outputs: acc (binary32 values; for Tacc=half
// binary16 values) -> y16 (rounded) or y32, with the bias [L] added in binary32 first where given;
// for y16 acc is first rounded to binary16 (Tacc=float: the op's one rounding to T) and the bias
// added to that, as TensorFlow's BiasAdd after the op's binary16 output. In place (y32 == acc)
// allowed.
void FpropEpilogue(const float* acc, int64_t rows, int64_t L, const float* bias, uint16_t* y16,
                   float* y32);

// dst[i] = src[i] rounded to binary16 (to nearest even) and widened back: binary32 buffers
// holding the binary16 values TensorFlow's Cast to float16 gives.
void RoundToHalfValues(const float* src, float* dst, int64_t n);

// The gradients of the same problem (or of any grouped convolution with one input channel per
// group, Cg = 1 and groups = C), with the bits of Conv2DDgrad and Conv2DWgrad
// (cc/kernels/cpu/conv2d_cpu.h), vectorized over channels instead of one lane per group:
// clang-format off
//   dgrad  dx[n, h, w, c]         = sum over (kh, kw, m) ascending of dy[n, p, q, c*M + m] * w[kh, kw, 0, c*M + m]
//                                   for the (p, q) with hi == h and wi == w (only those)
//   wgrad  dw[kh, kw, 0, c*M + m] = sum over (n, p, q) ascending of x[n, hi, wi, c] * dy[n, p, q, c*M + m]
//                                   padded positions zeros that take part
// clang-format on
// dx: [N, H, W, C] from dy [N, P, Q, C*M]; dw: [KH, KW, 1, C*M].
void DepthwiseDgrad(const ConvGeometry& g, Accumulation acc, const float* dy, const float* w,
                    float* dx, const ParallelFor& parallel_for);
void DepthwiseWgrad(const ConvGeometry& g, Accumulation acc, const float* x, const float* dy,
                    float* dw, const ParallelFor& parallel_for);

// Tacc=half gradients on binary16 buffers (the op's T=half, same layouts and bits as
// DepthwiseDgrad / DepthwiseWgrad with kHalf): no binary32 copies of the tensors are made (on AVX2,
// copies of rows as for the forward pass: dgrad's with stride and dilation 1 along W, wgrad's for
// every geometry whose rows fit). Return false without touching the output where they do not apply
// (the scalar path, a depth multiplier other than 1); the caller then takes the binary32 route.
bool DepthwiseDgradHalfBuffers(const ConvGeometry& g, const uint16_t* dy, const uint16_t* w,
                               uint16_t* dx, const ParallelFor& parallel_for);
bool DepthwiseWgradHalfBuffers(const ConvGeometry& g, const uint16_t* x, const uint16_t* dy,
                               uint16_t* dw, const ParallelFor& parallel_for);

}  // namespace cpu
}  // namespace tf_fp16ops

#endif  // TF_FP16OPS_CC_KERNELS_CPU_DEPTHWISE_CPU_H_
