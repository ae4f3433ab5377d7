// Fp16MatMul with T=half and Tacc=half on AVX512-FP16: binary16 operands read in place, the
// result written as binary16, no binary32 copies.
//
//   y[b, m, n] = RN16(... RN16(RN16(0 + a[m, 0] * bt[0, n]) + a[m, 1] * bt[1, n]) ...
//                      + a[m, K-1] * bt[K-1, n])
//
// one VFMADD231PH per step (Intel SDM, "VFMADD231PH": one rounding, to nearest even by
// MXCSR.RC, binary16 subnormals kept whatever MXCSR.DAZ/FTZ say), k ascending from +0: the steps
// and order of cc/kernels/cpu/matmul_cpu.h, so the same bits on every instruction-set path.
// The N output columns are the lanes: the register tile of cc/kernels/cpu/gemm_fp16.h (up to 6
// rows x 128 columns or 8 x 96) over the whole reduction, each a[m, k] taken by broadcast from
// memory (x read in place with or without adj_x). With adj_y the y matrices are transposed once
// into [K, N] (binary16, 8 x 8 blocks).
#ifndef TF_FP16OPS_CC_KERNELS_CPU_MATMUL_FP16_H_
#define TF_FP16OPS_CC_KERNELS_CPU_MATMUL_FP16_H_

#include <cstdint>

#include "cc/kernels/cpu/matmul_cpu.h"
#include "cc/kernels/matmul_shape.h"

namespace tf_fp16ops {
namespace cpu {

// x: p.x_matrices matrices [M, K] ([K, M] with adj_x), y: p.y_matrices [K, N] ([N, K] with
// adj_y), out: [p.batch, M, N], all IEEE binary16 bit patterns. Runs the product and returns
// true, or returns false without touching out when this path does not apply (CPU without
// AVX512-FP16, or capped by TF_FP16OPS_CPU_ISA; p.K == 0).
bool MatMulHalfNative(const MatMulProblem& p, const uint16_t* x, bool adj_x, const uint16_t* y,
                      bool adj_y, uint16_t* out, const MatMulParallelFor& parallel_for);

}  // namespace cpu
}  // namespace tf_fp16ops

#endif  // TF_FP16OPS_CC_KERNELS_CPU_MATMUL_FP16_H_
