// CUTLASS's can_implement for every kernel of the implementation table, and nothing else: no
// kernel is instantiated, so this compiles quickly and runs without a GPU. Linked into the host
// build (libtf_fp16ops_gpu_host.so) so that tests/gpu/test_gpu_host.py evaluates, on a CPU, which
// CUTLASS kernel the table would pick for every shape the GPU check and the benchmark use. The
// device builds get the same functions from the cutlass_sm70_*/sm80_*/sm90_* files.
#include <cstdio>

#include "cc/kernels/gpu/cutlass_sm90.h"  // first: its TMA hook precedes CUTE

#include "cc/kernels/gpu/cutlass_sm70.h"
#include "cc/kernels/gpu/cutlass_sm80.h"

namespace tf_fp16ops {
namespace gpu {
namespace internal {

#define TF_FP16OPS_ALL_PAIRS(P)                                       \
  TF_FP16OPS_SM80_CAN_IMPLEMENT(P, DataType::kHalf, DataType::kHalf)  \
  TF_FP16OPS_SM80_CAN_IMPLEMENT(P, DataType::kHalf, DataType::kFloat) \
  TF_FP16OPS_SM80_CAN_IMPLEMENT(P, DataType::kFloat, DataType::kFloat)
TF_FP16OPS_ALL_PAIRS(Pass::kFprop)
TF_FP16OPS_ALL_PAIRS(Pass::kDgrad)
TF_FP16OPS_ALL_PAIRS(Pass::kWgrad)
#undef TF_FP16OPS_ALL_PAIRS

TF_FP16OPS_SM70_CAN_IMPLEMENT(Pass::kFprop, DataType::kHalf)
TF_FP16OPS_SM70_CAN_IMPLEMENT(Pass::kFprop, DataType::kFloat)
TF_FP16OPS_SM70_CAN_IMPLEMENT(Pass::kDgrad, DataType::kHalf)
TF_FP16OPS_SM70_CAN_IMPLEMENT(Pass::kDgrad, DataType::kFloat)
TF_FP16OPS_SM70_CAN_IMPLEMENT(Pass::kWgrad, DataType::kHalf)
TF_FP16OPS_SM70_CAN_IMPLEMENT(Pass::kWgrad, DataType::kFloat)

TF_FP16OPS_SM90_CAN_IMPLEMENT(Pass::kFprop, DataType::kHalf, sm90::FpropConv<DataType::kHalf>)
TF_FP16OPS_SM90_CAN_IMPLEMENT(Pass::kFprop, DataType::kFloat, sm90::FpropConv<DataType::kFloat>)
TF_FP16OPS_SM90_CAN_IMPLEMENT(Pass::kDgrad, DataType::kHalf, sm90::DgradConv<DataType::kHalf>)
TF_FP16OPS_SM90_CAN_IMPLEMENT(Pass::kDgrad, DataType::kFloat, sm90::DgradConv<DataType::kFloat>)
TF_FP16OPS_SM90_CAN_IMPLEMENT(Pass::kWgrad, DataType::kHalf, sm90::WgradConv<DataType::kHalf>)
TF_FP16OPS_SM90_CAN_IMPLEMENT(Pass::kWgrad, DataType::kFloat, sm90::WgradConv<DataType::kFloat>)

}  // namespace internal
}  // namespace gpu
}  // namespace tf_fp16ops

// Host-test probe of tma_encode_check.h: builds a TMA load descriptor through CUTE's own
// make_tma_copy (the code path of the Hopper kernels' initialize()) for a 64x64 half tensor and
// returns the CUresult the hook recorded (0: the encode succeeded). Without a driver the encode
// fails, so tests/gpu/test_gpu_host.py sees that a failure reaches the hook rather than an assert
// compiled out by -DNDEBUG. `function` receives the failing entry point's name.
extern "C" __attribute__((visibility("default"))) int tfo_host_tma_encode_probe(char* function,
                                                                                int len) {
  using namespace cute;
  static cutlass::half_t buffer[64 * 64];
  auto gmem = make_tensor(make_gmem_ptr(&buffer[0]),
                          make_layout(make_shape(64, 64), make_stride(64, Int<1>{})));
  auto smem = make_layout(make_shape(Int<64>{}, Int<64>{}), make_stride(Int<64>{}, Int<1>{}));
  tf_fp16ops::gpu::internal::tma_check::Clear();
  auto tma = make_tma_copy(SM90_TMA_LOAD{}, gmem, smem);
  (void)tma;
  const auto& failure = tf_fp16ops::gpu::internal::tma_check::LastFailure();
  if (function != nullptr && len > 0) {
    std::snprintf(function, static_cast<size_t>(len), "%s",
                  failure.function == nullptr ? "" : failure.function);
  }
  return failure.result;
}
