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
  TFO_STUB_SM80_RUN(P, DataType::kFloat, DataType::kFloat)                                   \
  TFO_STUB_SM70(P, DataType::kHalf)                                                          \
  TFO_STUB_SM70(P, DataType::kFloat)

#define TFO_STUB_SM80_RUN(P, T, TACC)                                                            \
  template <>                                                                                    \
  IgResult Sm80Run<P, T, TACC>(const ConvProblem&, const void*, const void*, void*, int, size_t, \
                               cudaStream_t) {                                                   \
    return IgError(kNoKernels);                                                                  \
  }

// The host build stands for the default device build, which holds the sm_70 kernels.
#define TFO_STUB_SM70(P, TACC)                                                                \
  template <>                                                                                 \
  IgResult Sm70Run<P, TACC>(const ConvProblem&, const void*, const void*, void*, int, size_t, \
                            cudaStream_t) {                                                   \
    return IgError(kNoKernels);                                                               \
  }                                                                                           \
  template <>                                                                                 \
  bool Sm70CodeBuilt<P, TACC>() {                                                             \
    return true;                                                                              \
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
#define TFO_STUB_CAN(P)                                                     \
  TFO_STUB_SM80_CAN(P, DataType::kHalf, DataType::kHalf)                    \
  TFO_STUB_SM80_CAN(P, DataType::kHalf, DataType::kFloat)                   \
  TFO_STUB_SM80_CAN(P, DataType::kFloat, DataType::kFloat)                  \
  template <>                                                               \
  IgResult Sm70CanImplement<P, DataType::kHalf>(const ConvProblem&, int) {  \
    return IgNotApplicable(kNoCutlass);                                     \
  }                                                                         \
  template <>                                                               \
  IgResult Sm70CanImplement<P, DataType::kFloat>(const ConvProblem&, int) { \
    return IgNotApplicable(kNoCutlass);                                     \
  }                                                                         \
  template <>                                                               \
  IgResult Sm90CanImplement<P, DataType::kHalf>(const ConvProblem&) {       \
    return IgNotApplicable(kNoCutlass);                                     \
  }                                                                         \
  template <>                                                               \
  IgResult Sm90CanImplement<P, DataType::kFloat>(const ConvProblem&) {      \
    return IgNotApplicable(kNoCutlass);                                     \
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
