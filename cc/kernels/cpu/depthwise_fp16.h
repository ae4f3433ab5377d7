// The depthwise fprop (depth multiplier 1) with Tacc=half on AVX512-FP16, on binary16 NHWC
// buffers read in place: channels as the 32 lanes of a vector, up to 12 output positions of one
// output row in registers over the whole (kh, kw) reduction, one VFMADD231PH per step (x and w
// loaded as vectors: no broadcast, no conversion), padded taps reading zeros (0 * inf gives
// NaN). The steps and their order are those of cc/kernels/cpu/depthwise_cpu.h, so the same bits.
#ifndef TF_FP16OPS_CC_KERNELS_CPU_DEPTHWISE_FP16_H_
#define TF_FP16OPS_CC_KERNELS_CPU_DEPTHWISE_FP16_H_

#include <cstdint>

#include "cc/kernels/cpu/conv2d_cpu.h"

namespace tf_fp16ops {
namespace cpu {

// g: the grouped problem of a depthwise convolution (groups = C, Cg = 1, K = C: multiplier 1).
// x [N, H, W, C], w [KH, KW, 1, C], y [N, P, Q, C], IEEE binary16 bit patterns. Returns false
// without touching y on a CPU without AVX512-FP16 (or capped by TF_FP16OPS_CPU_ISA), for another
// multiplier, or without output.
bool DepthwiseFpropFp16(const ConvGeometry& g, const uint16_t* x, const uint16_t* w, uint16_t* y,
                        const ParallelFor& parallel_for);

// Whether DepthwiseFpropFp16 runs g (true) or returns false.
bool DepthwiseFpropFp16Applies(const ConvGeometry& g);

}  // namespace cpu
}  // namespace tf_fp16ops

#endif  // TF_FP16OPS_CC_KERNELS_CPU_DEPTHWISE_FP16_H_
