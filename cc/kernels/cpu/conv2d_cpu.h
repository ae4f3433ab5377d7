// CPU functors for Fp16Conv2D (fprop) and its gradients (dgrad, wgrad).
//
// Layouts: activations NHWC, filter HWIO [KH, KW, Cg, K] with Cg = C / groups input channels
// and K output channels per filter (K / groups per group). All sizes are int64.
// Values are binary16 or binary32 numbers held in float buffers; the caller converts T.
//
// clang-format off
// Reduction order of every output (this is the order the kHalf accumulation rounds in), with
// the input row hi = p*sh - pt + kh*dh, column wi = q*sw - pl + kw*dw, g the group and
// kg = g*Kg + ko:
//   fprop  y[n,p,q,k]     = sum over (kh, kw, ci) of x[n, hi, wi, g*Cg + ci] * w[kh, kw, ci, k]
//   dgrad  dx[n,h,w,c]    = sum over (kh, kw, ko) of dy[n, p, q, kg] * w[kh, kw, ci, kg]
//                           for the (p, q) with hi == h and wi == w
//   wgrad  dw[kh,kw,ci,k] = sum over (n, p, q)    of x[n, hi, wi, g*Cg + ci] * dy[n, p, q, k]
// each index ascending, the first named outermost. Padded input positions are zeros that
// take part in fprop and wgrad (so 0 * inf gives NaN, as zero padding defines it); dgrad visits
// only the (p, q) that exist. The accumulator starts at +0.
// clang-format on
#ifndef TF_FP16OPS_CC_KERNELS_CPU_CONV2D_CPU_H_
#define TF_FP16OPS_CC_KERNELS_CPU_CONV2D_CPU_H_

#include <cstdint>
#include <functional>

#include "cc/kernels/conv_problem.h"
#include "cc/kernels/cpu/accumulate.h"

namespace tf_fp16ops {
namespace cpu {

// The problem type of cc/kernels/conv_problem.h (the CPU functors read NHWC buffers and ignore
// `nchw`).
using ConvGeometry = ::tf_fp16ops::ConvProblem;

// Runs fn(begin, end) over [0, total) split into shards; cost_per_unit is an estimate of the
// work per unit in floating-point operations. The op kernel passes TensorFlow's Shard.
using ParallelFor = std::function<void(int64_t total, int64_t cost_per_unit,
                                       const std::function<void(int64_t, int64_t)>& fn)>;

// y: [N, P, Q, K]
void Conv2DFprop(const ConvGeometry& g, Accumulation acc, const float* x, const float* w, float* y,
                 const ParallelFor& parallel_for);
// Tacc=half fprop on binary16 buffers (IEEE binary16 bit patterns, the op's T=half; same layouts
// and bits as Conv2DFprop): returns false without touching y where no binary16 kernel applies
// (CPU without AVX512-FP16; fewer than 32 output channels per group with strides other than 1 or
// huge padding; no work), and the caller then takes the binary32 route.
bool Conv2DFpropHalfBuffers(const ConvGeometry& g, const uint16_t* x, const uint16_t* w,
                            uint16_t* y, const ParallelFor& parallel_for);
// dx: [N, H, W, C] from dy: [N, P, Q, K]
void Conv2DDgrad(const ConvGeometry& g, Accumulation acc, const float* dy, const float* w,
                 float* dx, const ParallelFor& parallel_for);
// Tacc=half dgrad on binary16 buffers (same layouts and bits as Conv2DDgrad): returns false
// without touching dx where no binary16 kernel applies (CPU without AVX512-FP16, fewer than 32
// input channels per group, no work), and the caller then takes the binary32 route.
bool Conv2DDgradHalfBuffers(const ConvGeometry& g, const uint16_t* dy, const uint16_t* w,
                            uint16_t* dx, const ParallelFor& parallel_for);
// dw: [KH, KW, Cg, K] from x: [N, H, W, C] and dy: [N, P, Q, K]
void Conv2DWgrad(const ConvGeometry& g, Accumulation acc, const float* x, const float* dy,
                 float* dw, const ParallelFor& parallel_for);
// Tacc=half wgrad on binary16 buffers (same layouts and bits as Conv2DWgrad): returns false
// without touching dw where no binary16 kernel applies (CPU without AVX512-FP16, fewer than 32
// output channels per group, explicit padding wider than the input, no work).
bool Conv2DWgradHalfBuffers(const ConvGeometry& g, const uint16_t* x, const uint16_t* dy,
                            uint16_t* dw, const ParallelFor& parallel_for);

// Benchmark ceiling of the Tacc=half fprop on the instruction-set path in use (AccumulateIsa):
// `reps` runs of one micro-kernel Conv2DFprop runs on that path with a stride-1 problem, on its
// full accumulator tile, over 256 terms (128 for variant 1) whose operands stay in L1 (no layout
// passes, no conversions, no padding). A path with more than one kHalf micro-kernel has one
// `variant` per kernel, and its ceiling is the fastest of them (the caller times each):
//   AVX512-FP16: variant 0, the spatial kernel of cc/kernels/cpu/fprop_fp16.h (8 output channels
//     x 96 positions); variant 1, the register tile of cc/kernels/cpu/gemm_fp16.h that the NHWC
//     fprop, dgrad and wgrad and Fp16MatMul run (6 rows x 128 lanes, 128 terms per call);
//   AVX-512, AVX2 and scalar: AccumulateRowsMulti on 8 rows, variant 0 with 16 lanes (AVX-512:
//     the 8 accumulator vectors of its kHalf kernel; AVX2: its tiles of 2 rows x 2 vectors, which
//     rows with 16-31 lanes left run), variant 1 with 32 lanes (AVX2: its other kHalf kernel, four
//     8-lane chains per row, which rows of 32 lanes or more run; AVX-512 and scalar: the same
//     kernels on wider rows).
// Which AVX2 kernel is faster depends on the CPU, so neither alone bounds every shape.
// The operands (x 1, w 0.25; acc from 1024, where the sum rounds back to 1024, or from +0 on
// AVX512-FP16, which has no slow case) take no slow branch (no binary16 midpoint, no subnormal),
// so no data of a real convolution runs the kernel faster. Returns the steps done (0 for reps <= 0
// or a variant the path does not have); `sink` receives one accumulator so that the work is not
// optimized away.
int64_t FpropHalfCeilingProbe(int64_t reps, float* sink, int variant);

}  // namespace cpu
}  // namespace tf_fp16ops

#endif  // TF_FP16OPS_CC_KERNELS_CPU_CONV2D_CPU_H_
