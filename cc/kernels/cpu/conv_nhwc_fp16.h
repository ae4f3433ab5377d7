// Fprop, dgrad and wgrad with Tacc=half on AVX512-FP16 over binary16 NHWC buffers read in place,
// channels as lanes: the register tile of cc/kernels/cpu/gemm_fp16.h, its rows consecutive
// positions of the result, one segment per filter tap (kh, kw) ascending, each a contiguous run of
// channels of one operand position. No layout passes and no binary32 copies. The steps and their
// order are the contract's (cc/kernels/cpu/conv2d_cpu.h), one VFMADD231PH each:
//   fprop  y[n,p,q,k]  over (kh, kw, ci): rows output positions (n, p, q), lanes output channels
//          k of one group, the run x[n, hi, wi, g*Cg : (g+1)*Cg], b the filter's HWIO rows
//          (kh, kw, ci); a padded tap reads zeros (0 * inf gives NaN, as zero padding defines it).
//   dgrad  dx[n,h,w,c] over (kh, kw, ko): rows input positions (n, h, w), lanes input channels ci
//          of one group, the run dy[n, p, q, g*Kg : (g+1)*Kg] of the (p, q) that the tap reaches
//          from (h, w), b the filter transposed once to [groups, KH, KW, Kg, Cg] (binary16); a tap
//          that reaches no (p, q) takes no step (masked), as the contract says.
//   wgrad  dw[kh,kw,ci,k] over (n, p, q): rows the filter rows (kh, kw, ci) of one group, lanes
//          output channels k, one segment per output row (n, p) whose Q terms are x values
//          stride_w * C apart (x copied once with its left and right zero padding where it has
//          any; rows above and below x read zeros), b the rows of dy in (n, p, q) order. The
//          segments go in calls of about 256 terms that resume from the stored binary16
//          accumulators, each over all row tiles of a thread while its dy rows are in cache.
// Any stride, dilation, padding and group count. Each returns false without touching its result
// on a CPU without AVX512-FP16 (or capped by TF_FP16OPS_CPU_ISA) or when its lanes (K / groups
// for fprop and wgrad, Cg for dgrad) are fewer than kNhwcMinLanes; wgrad also with explicit
// padding wider than the input (a vector would be mostly empty; the
// spatial fprop of cc/kernels/cpu/fprop_fp16.h takes those).
#ifndef TF_FP16OPS_CC_KERNELS_CPU_CONV_NHWC_FP16_H_
#define TF_FP16OPS_CC_KERNELS_CPU_CONV_NHWC_FP16_H_

#include <cstdint>

#include "cc/kernels/cpu/conv2d_cpu.h"

namespace tf_fp16ops {
namespace cpu {

constexpr int64_t kNhwcMinLanes = 32;

// x [N, H, W, C], w [KH, KW, Cg, K], y [N, P, Q, K], IEEE binary16 bit patterns.
bool Conv2DFpropFp16NhwcHalf(const ConvGeometry& g, const uint16_t* x, const uint16_t* w,
                             uint16_t* y, const ParallelFor& parallel_for);

// dy [N, P, Q, K], w [KH, KW, Cg, K], dx [N, H, W, C], IEEE binary16 bit patterns.
bool Conv2DDgradFp16NhwcHalf(const ConvGeometry& g, const uint16_t* dy, const uint16_t* w,
                             uint16_t* dx, const ParallelFor& parallel_for);

// x [N, H, W, C], dy [N, P, Q, K], dw [KH, KW, Cg, K], IEEE binary16 bit patterns.
bool Conv2DWgradFp16NhwcHalf(const ConvGeometry& g, const uint16_t* x, const uint16_t* dy,
                             uint16_t* dw, const ParallelFor& parallel_for);

}  // namespace cpu
}  // namespace tf_fp16ops

#endif  // TF_FP16OPS_CC_KERNELS_CPU_CONV_NHWC_FP16_H_
