// Fprop with Tacc=half on AVX512-FP16, vectorized over output positions.
//
// The input is converted once to binary16 planes [N][C][Hp][Wp] (padding included, zeros), so
// that for stride 1 the inputs of 32 consecutive output positions o = p * Wp + q at filter tap
// (kh, kw) are the 32 consecutive plane elements at o + kh * dh * Wp + kw * dw. Each vector FMA
// then takes one filter value by embedded broadcast from memory, and 8 output channels x 96
// positions stay in registers over the whole (kh, kw, ci) reduction: the step rate is the
// FMA rate. Columns q >= Q of the flattened positions are computed and dropped.
// Reduction order and numerics are the contract's (cc/kernels/cpu/conv2d_cpu.h): per output,
// acc = RN16(x * w + acc) over (kh, kw, ci) ascending from +0, one VFMADD231PH per step.
#ifndef TF_FP16OPS_CC_KERNELS_CPU_FPROP_FP16_H_
#define TF_FP16OPS_CC_KERNELS_CPU_FPROP_FP16_H_

#include <cstdint>

#include "cc/kernels/cpu/conv2d_cpu.h"

namespace tf_fp16ops {
namespace cpu {

// Runs the fprop (y: [N, P, Q, K] float holding binary16 values) and returns true, or returns
// false without touching y when this path does not apply: CPU without AVX512-FP16 (or capped
// by TF_FP16OPS_CPU_ISA), strides other than 1, or padding so large that the padded planes
// would be much larger than the input.
bool Conv2DFpropFp16Spatial(const ConvGeometry& g, const float* x, const float* w, float* y,
                            const ParallelFor& parallel_for);

// The same on binary16 buffers (IEEE binary16 bit patterns: x NHWC, w HWIO, y [N, P, Q, K]), for
// the op's T=half: no binary32 copies of the operands or of the result.
bool Conv2DFpropFp16SpatialHalf(const ConvGeometry& g, const uint16_t* x, const uint16_t* w,
                                uint16_t* y, const ParallelFor& parallel_for);

// dst[c * dst_stride + r] = src[r * src_stride + c] for r < rows, c < cols: 16-bit values
// (binary16 bit patterns) moved bit for bit; other dst elements untouched. x86-64 only (SSE2).
void Transpose16(const uint16_t* src, int64_t rows, int64_t cols, int64_t src_stride, uint16_t* dst,
                 int64_t dst_stride);

// Benchmark ceiling of this path: `terms` steps of its micro-kernel (8 rows x 96 lanes of
// independent accumulators, operands in L1). Returns the number of steps done (0 when the
// CPU has no AVX512-FP16 path); `sink` receives one result so the work is not optimized away.
int64_t Fp16MicroKernelProbe(int64_t terms, float* sink);

}  // namespace cpu
}  // namespace tf_fp16ops

#endif  // TF_FP16OPS_CC_KERNELS_CPU_FPROP_FP16_H_
