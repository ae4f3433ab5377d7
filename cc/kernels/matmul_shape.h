// Size rules of Fp16MatMul, TensorFlow-free: the one place for the rank, inner-dimension,
// batch-broadcast and element-count rules, used by the shape function (cc/ops/fp16_matmul_ops.cc)
// and the kernel (cc/kernels/fp16_matmul_op.cc). Functions return an empty string on success and
// otherwise the error message (the caller wraps it in InvalidArgument).
//
// The rules are those of TensorFlow's BatchMatMulV2 (tensorflow/core/ops/math_ops.cc,
// BatchMatMulV2Shape, and tensorflow/core/util/matmul_bcast.h):
//   x [..., M, K] (adj_x: [..., K, M]), y [..., K, N] (adj_y: [..., N, K]), both of rank >= 2;
//   the K of x equals the K of y;
//   the batch dimensions (all but the last two) broadcast as NumPy's: right-aligned, each pair
//   equal or one of them 1 (a missing dimension counts as 1);
//   output [broadcast batch..., M, N].
// Sizes are int64 >= 0, or -1 for unknown (shape inference): only the checks whose sizes are
// known are made and an output size that depends on an unknown one is -1. The output element
// count, when every size is known, must fit int64 (checked in 128-bit arithmetic).
#ifndef TF_FP16OPS_CC_KERNELS_MATMUL_SHAPE_H_
#define TF_FP16OPS_CC_KERNELS_MATMUL_SHAPE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace tf_fp16ops {

// `x` and `y` are the operand shapes; *out receives the output shape.
std::string MatMulOutputDims(const std::vector<int64_t>& x, const std::vector<int64_t>& y,
                             bool adj_x, bool adj_y, std::vector<int64_t>* out);

// One product of the batch, in the kernel's terms (all sizes known): the output is
// [batch, M, N] in row-major order, the contraction has K terms. x_batch_strides and
// y_batch_strides, one per output batch dimension, give the offset (in matrices) of each
// operand's matrix for an output batch index: 0 where the operand broadcasts.
struct MatMulProblem {
  int64_t batch = 1, M = 0, N = 0, K = 0;
  std::vector<int64_t> out_batch;  // output batch dimensions
  std::vector<int64_t> x_batch_strides, y_batch_strides;
  int64_t x_matrices = 1, y_matrices = 1;  // matrices held by x and y
};

// MatMulOutputDims with every size known, and the problem of the kernel.
std::string ComputeMatMulProblem(const std::vector<int64_t>& x, const std::vector<int64_t>& y,
                                 bool adj_x, bool adj_y, MatMulProblem* p);

// Matrix offsets of x and y for output batch index b in [0, p.batch).
void MatMulBatchOffsets(const MatMulProblem& p, int64_t b, int64_t* x_matrix, int64_t* y_matrix);

}  // namespace tf_fp16ops

#endif  // TF_FP16OPS_CC_KERNELS_MATMUL_SHAPE_H_
