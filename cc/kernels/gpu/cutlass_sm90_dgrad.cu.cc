// Explicit instantiations of the CUTLASS 3.x (sm_90a) dgrad kernels for T=half, Tacc in {half, float}.
// Compile for sm_90a only: the kernel bodies need wgmma/TMA (__CUDA_ARCH_FEAT_SM90_ALL).
#include "cc/kernels/gpu/cutlass_sm90.h"

namespace tf_fp16ops {
namespace gpu {
namespace internal {

template <>
IgResult Sm90Dgrad<DataType::kHalf, DataType::kHalf>(const IgProblem& p, const void* dy, const void* w, void* dx,
                                                   cudaStream_t s) {
  if (p.stride_h != 1 || p.stride_w != 1 || p.dil_h != 1 || p.dil_w != 1) {
    return IgNotApplicable("Hopper dgrad path is used for unit strides and dilations only");
  }
  return sm90::Run<sm90::DgradConv<DataType::kHalf>>(p, dy, w, dx, s);
}

template <>
IgResult Sm90Dgrad<DataType::kHalf, DataType::kFloat>(const IgProblem& p, const void* dy, const void* w, void* dx,
                                                    cudaStream_t s) {
  if (p.stride_h != 1 || p.stride_w != 1 || p.dil_h != 1 || p.dil_w != 1) {
    return IgNotApplicable("Hopper dgrad path is used for unit strides and dilations only");
  }
  return sm90::Run<sm90::DgradConv<DataType::kFloat>>(p, dy, w, dx, s);
}

}  // namespace internal
}  // namespace gpu
}  // namespace tf_fp16ops
