// The CUTLASS 3.x (sm_90a) fprop kernels for T=half, Tacc in {half, float}: can_implement, the
// code-present probe and run. Compiled for sm_90a only: the kernel bodies need wgmma/TMA.
#include "cc/kernels/gpu/cutlass_sm90.h"

namespace tf_fp16ops {
namespace gpu {
namespace internal {

TF_FP16OPS_SM90(Pass::kFprop, DataType::kHalf, sm90::FpropConv<DataType::kHalf>)
TF_FP16OPS_SM90(Pass::kFprop, DataType::kFloat, sm90::FpropConv<DataType::kFloat>)

}  // namespace internal
}  // namespace gpu
}  // namespace tf_fp16ops
