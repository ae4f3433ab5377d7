// Explicit instantiations of the CUTLASS 2.x wgrad kernels, one per (T, Tacc) pair.
#include "cc/kernels/gpu/cutlass_sm80.h"

namespace tf_fp16ops {
namespace gpu {
namespace internal {

TF_FP16OPS_SM80_WGRAD(DataType::kHalf, DataType::kHalf)
TF_FP16OPS_SM80_WGRAD(DataType::kHalf, DataType::kFloat)
TF_FP16OPS_SM80_WGRAD(DataType::kFloat, DataType::kFloat)

}  // namespace internal
}  // namespace gpu
}  // namespace tf_fp16ops
