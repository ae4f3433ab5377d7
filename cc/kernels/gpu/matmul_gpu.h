// GPU launchers for Fp16MatMul (BatchMatMulV2's product with Tacc), on the implementation table
// of the convolutions (conv2d_gpu.h).
//
// A product [M, K] x [K, N] is the 1x1 fprop of an NHWC image [1, 1, M, K] with an HWIO filter
// [1, 1, K, N] (stride 1, no padding): the fprop's implicit GEMM is then exactly the matrix
// product (GEMM M = M, N = N, K = K), so every implementation of the table serves it, selected
// once per call with the table's rules (CUTLASS's can_implement included: for T=half the tensor
// core paths need K and N multiples of 8).
//
// Layouts (row-major, as the CPU kernel of cc/kernels/fp16_matmul_op.cc):
//   x   [x_matrices, M, K], or [x_matrices, K, M] when adj_x;
//   y   [y_matrices, K, N], or [y_matrices, N, K] when adj_y;
//   out [batch, M, N].
// adj_x / adj_y go through the layout transform (NCHW -> NHWC of [matrices, K, 1, M] is the
// batched transpose) into the workspace. Output matrix b is the product of x matrix
// x_offsets[b] and y matrix y_offsets[b] (the broadcast offsets of cc/kernels/matmul_shape.h);
// a batch whose y operand is one shared matrix and whose x matrices are in order is one fprop
// of an image [batch, 1, M, K], any other batch one fprop per output matrix on the stream.
//
// Numerics: those of the fprop (conv2d_gpu.h). The direct implementation gives the CPU
// contract (cc/kernels/cpu/matmul_cpu.h) bit for bit: one accumulator per output starting at
// +0, k ascending, Tacc=half one fp16 rounding per step (__hfma), Tacc=float binary32 FMA and
// one rounding to T. K = 0 writes zeros.
#ifndef TF_FP16OPS_CC_KERNELS_GPU_MATMUL_GPU_H_
#define TF_FP16OPS_CC_KERNELS_GPU_MATMUL_GPU_H_

#include <cstddef>
#include <cstdint>

#include "cc/kernels/conv_problem.h"
#include "cc/kernels/gpu/conv2d_gpu.h"

namespace tf_fp16ops {
namespace gpu {

struct MatMulShape {
  int64_t batch = 1, M = 0, N = 0, K = 0;
  int64_t x_matrices = 1, y_matrices = 1;  // matrices held by x and y
  bool adj_x = false, adj_y = false;
  // Host arrays of `batch` matrix indices into x and y (null: output matrix b reads matrix b).
  const int64_t* x_offsets = nullptr;
  const int64_t* y_offsets = nullptr;
};

// One selection for one call: the fprop plan of the table and the problem it was made for.
struct MatMulPlan {
  LaunchPlan conv;
  ConvProblem problem;         // the 1x1 fprop of one launch
  bool folded = false;         // the whole batch is one fprop (problem.N = batch)
  size_t transpose_bytes = 0;  // the adj_x / adj_y copies at the start of the workspace
  size_t workspace_bytes = 0;  // transpose_bytes + the fprop's workspace
};

// Checks the device (CheckDevice), validates the shape (kInvalidArgument naming the field and
// value: negative sizes, offsets outside [0, matrices), sizes whose products overflow) and
// selects as the fprop's PlanOn does, taking only implementations whose total workspace is at
// most `max_workspace_bytes` (kResourceExhausted when even the transposes do not fit).
Status MatMulPlanOn(const DeviceInfo& device, const MatMulShape& s, DataType T, DataType Tacc,
                    ConvPath requested, size_t max_workspace_bytes, MatMulPlan* plan);
// Runs `plan` (made for `s`) on `stream`: device pointers x, y, out; `workspace` holds
// plan.workspace_bytes. `used` (may be null) receives the implementation that ran.
Status MatMulRunPlan(const MatMulPlan& plan, cudaStream_t stream, const MatMulShape& s, DataType T,
                     DataType Tacc, const void* x, const void* y, void* out, void* workspace,
                     size_t workspace_bytes, ConvPath* used);
// MatMulPlanOn with any workspace, then MatMulRunPlan (the host tests' entry).
Status MatMulLaunchOn(const DeviceInfo& device, cudaStream_t stream, const MatMulShape& s,
                      DataType T, DataType Tacc, const void* x, const void* y, void* out,
                      void* workspace, size_t workspace_bytes, ConvPath requested, ConvPath* used);

}  // namespace gpu
}  // namespace tf_fp16ops

#endif  // TF_FP16OPS_CC_KERNELS_GPU_MATMUL_GPU_H_
