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
#include <functional>

#include "cc/kernels/cpu/accumulate.h"

namespace tf_fp16ops {
namespace cpu {

struct DepthwiseGeometry {
  int64_t N, H, W, C, M, KH, KW, P, Q;
  int64_t stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_left;
};

using DepthwiseParallelFor = std::function<void(int64_t total, int64_t cost_per_unit,
                                                const std::function<void(int64_t, int64_t)>& fn)>;

// y: [N, P, Q, C*M]
void DepthwiseFprop(const DepthwiseGeometry& g, Accumulation acc, const float* x, const float* w,
                    float* y, const DepthwiseParallelFor& parallel_for);

// acc[l] = Step(acc[l], x[t][l], w[t][l]) for t in [0, terms), l in [0, len): the elementwise
// form of the accumulation, DepthwiseFprop's inner loop (vectorized on the path of
// cc/kernels/cpu/accumulate.h).
void AccumulateElementwise(Accumulation accumulation, float* acc, int64_t len,
                           const float* const* x, const float* const* w, int64_t terms);

}  // namespace cpu
}  // namespace tf_fp16ops

#endif  // TF_FP16OPS_CC_KERNELS_CPU_DEPTHWISE_CPU_H_
