// The CUTLASS 2.x dgrad kernels, one per (T, Tacc) pair: can_implement and run.
#include "cc/kernels/gpu/cutlass_sm80.h"

namespace tf_fp16ops {
namespace gpu {
namespace internal {

TF_FP16OPS_SM80(Pass::kDgrad, DataType::kHalf, DataType::kHalf)
TF_FP16OPS_SM80(Pass::kDgrad, DataType::kHalf, DataType::kFloat)
TF_FP16OPS_SM80(Pass::kDgrad, DataType::kFloat, DataType::kFloat)

}  // namespace internal
}  // namespace gpu
}  // namespace tf_fp16ops
