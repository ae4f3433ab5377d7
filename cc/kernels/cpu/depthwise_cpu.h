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

}  // namespace cpu
}  // namespace tf_fp16ops

#endif  // TF_FP16OPS_CC_KERNELS_CPU_DEPTHWISE_CPU_H_
