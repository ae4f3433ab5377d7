// CUTLASS's can_implement for every kernel of the implementation table, and nothing else: no
// kernel is instantiated, so this compiles quickly and runs without a GPU. Linked into the host
// build (libtf_fp16ops_gpu_host.so) so that tests/test_gpu_host.py evaluates, on a CPU, which
// CUTLASS kernel the table would pick for every shape the GPU check and the benchmark use. The
// device builds get the same functions from the cutlass_sm80_*/cutlass_sm90_* files.
#include "cc/kernels/gpu/cutlass_sm80.h"
#include "cc/kernels/gpu/cutlass_sm90.h"

namespace tf_fp16ops {
namespace gpu {
namespace internal {

#define TF_FP16OPS_ALL_PAIRS(P)                                      \
  TF_FP16OPS_SM80_CAN_IMPLEMENT(P, DataType::kHalf, DataType::kHalf)  \
  TF_FP16OPS_SM80_CAN_IMPLEMENT(P, DataType::kHalf, DataType::kFloat) \
  TF_FP16OPS_SM80_CAN_IMPLEMENT(P, DataType::kFloat, DataType::kFloat)
TF_FP16OPS_ALL_PAIRS(Pass::kFprop)
TF_FP16OPS_ALL_PAIRS(Pass::kDgrad)
TF_FP16OPS_ALL_PAIRS(Pass::kWgrad)
#undef TF_FP16OPS_ALL_PAIRS

TF_FP16OPS_SM90_CAN_IMPLEMENT(Pass::kFprop, DataType::kHalf, sm90::FpropConv<DataType::kHalf>)
TF_FP16OPS_SM90_CAN_IMPLEMENT(Pass::kFprop, DataType::kFloat, sm90::FpropConv<DataType::kFloat>)
TF_FP16OPS_SM90_CAN_IMPLEMENT(Pass::kDgrad, DataType::kHalf, sm90::DgradConv<DataType::kHalf>)
TF_FP16OPS_SM90_CAN_IMPLEMENT(Pass::kDgrad, DataType::kFloat, sm90::DgradConv<DataType::kFloat>)
TF_FP16OPS_SM90_CAN_IMPLEMENT(Pass::kWgrad, DataType::kHalf, sm90::WgradConv<DataType::kHalf>)
TF_FP16OPS_SM90_CAN_IMPLEMENT(Pass::kWgrad, DataType::kFloat, sm90::WgradConv<DataType::kFloat>)

}  // namespace internal
}  // namespace gpu
}  // namespace tf_fp16ops
