// Host build only (TF_FP16OPS_HOST_BUILD): the CUTLASS kernels do not exist without a GPU
// compiler pass. Their run functions report so; their can_implement comes from
// cutlass_can_implement.cu.cc when nvcc is available (TF_FP16OPS_HOST_CUTLASS), else from the
// stubs below, which say that no CUTLASS check was compiled (tfo_host_has_cutlass() == 0).
#include "cc/kernels/gpu/implicit_gemm.h"

#define TFO_EXPORT __attribute__((visibility("default")))

namespace tf_fp16ops {
namespace gpu {
namespace internal {

namespace {
constexpr const char* kNoKernels = "host build: no GPU kernels";
constexpr const char* kNoCutlass = "host build without nvcc: CUTLASS can_implement not compiled";
}  // namespace

#define TFO_STUB_PASS(P)                                                                     \
  template <>                                                                                \
  IgResult Sm90Run<P, DataType::kHalf>(const ConvProblem&, const void*, const void*, void*,  \
                                       cudaStream_t) {                                       \
    return IgError(kNoKernels);                                                              \
  }                                                                                          \
  template <>                                                                                \
  IgResult Sm90Run<P, DataType::kFloat>(const ConvProblem&, const void*, const void*, void*, \
                                        cudaStream_t) {                                      \
    return IgError(kNoKernels);                                                              \
  }                                                                                          \
  template <>                                                                                \
  bool Sm90CodePresent<P, DataType::kHalf>() {                                               \
    return false;                                                                            \
  }                                                                                          \
  template <>                                                                                \
  bool Sm90CodePresent<P, DataType::kFloat>() {                                              \
    return false;                                                                            \
  }                                                                                          \
  TFO_STUB_SM80_RUN(P, DataType::kHalf, DataType::kHalf)                                     \
  TFO_STUB_SM80_RUN(P, DataType::kHalf, DataType::kFloat)                                    \
  TFO_STUB_SM80_RUN(P, DataType::kFloat, DataType::kFloat)

#define TFO_STUB_SM80_RUN(P, T, TACC)                                                            \
  template <>                                                                                    \
  IgResult Sm80Run<P, T, TACC>(const ConvProblem&, const void*, const void*, void*, int, size_t, \
                               cudaStream_t) {                                                   \
    return IgError(kNoKernels);                                                                  \
  }

TFO_STUB_PASS(Pass::kFprop)
TFO_STUB_PASS(Pass::kDgrad)
TFO_STUB_PASS(Pass::kWgrad)

#if !defined(TF_FP16OPS_HOST_CUTLASS)
#define TFO_STUB_SM80_CAN(P, T, TACC)                              \
  template <>                                                      \
  IgResult Sm80CanImplement<P, T, TACC>(const ConvProblem&, int) { \
    return IgNotApplicable(kNoCutlass);                            \
  }
#define TFO_STUB_CAN(P)                                                \
  TFO_STUB_SM80_CAN(P, DataType::kHalf, DataType::kHalf)               \
  TFO_STUB_SM80_CAN(P, DataType::kHalf, DataType::kFloat)              \
  TFO_STUB_SM80_CAN(P, DataType::kFloat, DataType::kFloat)             \
  template <>                                                          \
  IgResult Sm90CanImplement<P, DataType::kHalf>(const ConvProblem&) {  \
    return IgNotApplicable(kNoCutlass);                                \
  }                                                                    \
  template <>                                                          \
  IgResult Sm90CanImplement<P, DataType::kFloat>(const ConvProblem&) { \
    return IgNotApplicable(kNoCutlass);                                \
  }
TFO_STUB_CAN(Pass::kFprop)
TFO_STUB_CAN(Pass::kDgrad)
TFO_STUB_CAN(Pass::kWgrad)
#endif

}  // namespace internal
}  // namespace gpu
}  // namespace tf_fp16ops

extern "C" TFO_EXPORT int tfo_host_has_cutlass() {
#if defined(TF_FP16OPS_HOST_CUTLASS)
  return 1;
#else
  return 0;
#endif
}
