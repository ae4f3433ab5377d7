// CPU functor of Fp16MatMul: a batch of matrix products on float buffers holding binary16 or
// binary32 values, TensorFlow-free.
//
//   y[b, m, n] = sum over k ascending of a[xb(b), m, k] * bt[yb(b), k, n]
//
// with a [x_matrices, M, K] (the x operand with adj_x already applied) and bt
// [y_matrices, K, N] (y with adj_y applied), xb/yb the broadcast batch offsets of
// cc/kernels/matmul_shape.h. One accumulator per output starting at +0, each step that of
// cc/kernels/cpu/accumulate.h (kFloat: one binary32 FMA; kHalf: round_binary16(a * b + acc)
// with one rounding, the vector step of cc/kernels/cpu/half_step.h or VFMADD231PH), so the
// reduction order is k = 0, 1, ..., K - 1 on every instruction-set path. Work is split over
// blocks of up to kMaxRows output rows of one product (the rows share the bt operand); the
// lanes are the N output columns.
#ifndef TF_FP16OPS_CC_KERNELS_CPU_MATMUL_CPU_H_
#define TF_FP16OPS_CC_KERNELS_CPU_MATMUL_CPU_H_

#include <cstdint>
#include <functional>

#include "cc/kernels/cpu/accumulate.h"
#include "cc/kernels/matmul_shape.h"

namespace tf_fp16ops {
namespace cpu {

using MatMulParallelFor = std::function<void(int64_t total, int64_t cost_per_unit,
                                             const std::function<void(int64_t, int64_t)>& fn)>;

// y: [p.batch, p.M, p.N], written entirely (zeros when p.K == 0).
void MatMul(const MatMulProblem& p, Accumulation accumulation, const float* a, const float* bt,
            float* y, const MatMulParallelFor& parallel_for);

}  // namespace cpu
}  // namespace tf_fp16ops

#endif  // TF_FP16OPS_CC_KERNELS_CPU_MATMUL_CPU_H_
