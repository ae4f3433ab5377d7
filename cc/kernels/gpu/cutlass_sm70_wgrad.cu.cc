// The CUTLASS 2.x Volta wgrad kernels (T=half), one per Tacc: can_implement and run.
#include "cc/kernels/gpu/cutlass_sm70.h"

namespace tf_fp16ops {
namespace gpu {
namespace internal {

TF_FP16OPS_SM70(Pass::kWgrad, DataType::kHalf)
TF_FP16OPS_SM70(Pass::kWgrad, DataType::kFloat)

}  // namespace internal
}  // namespace gpu
}  // namespace tf_fp16ops
