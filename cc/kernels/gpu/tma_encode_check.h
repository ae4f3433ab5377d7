// Makes a failed TMA descriptor encode visible. CUTLASS calls cuTensorMapEncodeIm2col and
// cuTensorMapEncodeTiled through CUTLASS_CUDA_DRIVER_WRAPPER_CALL (cutlass/cuda_host_adapter.hpp)
// and only assert()s their result, which -DNDEBUG compiles out: a bad descriptor would surface as
// a device fault. This header, included before any CUTE copy-traits header, routes those calls
// through wrappers that record the first failing CUresult of the calling thread; the Hopper
// launcher (cutlass_sm90.h) clears it before initialize() and returns an error if it is set.
#ifndef TF_FP16OPS_CC_KERNELS_GPU_TMA_ENCODE_CHECK_H_
#define TF_FP16OPS_CC_KERNELS_GPU_TMA_ENCODE_CHECK_H_

#include "cutlass/cuda_host_adapter.hpp"

namespace tf_fp16ops {
namespace gpu {
namespace internal {
namespace tma_check {

struct Failure {
  int result = 0;  // CUresult of the first failing encode since Clear() (0: none)
  const char* function = nullptr;
};
inline Failure& LastFailure() {
  static thread_local Failure failure;
  return failure;
}
inline void Clear() { LastFailure() = Failure(); }

template <typename... Args>
CUresult call_cuTensorMapEncodeIm2col(Args... args) {
  const CUresult r = cutlass::call_cuTensorMapEncodeIm2col(args...);
  if (r != CUDA_SUCCESS && LastFailure().result == 0) {
    LastFailure() = {static_cast<int>(r), "cuTensorMapEncodeIm2col"};
  }
  return r;
}

template <typename... Args>
CUresult call_cuTensorMapEncodeTiled(Args... args) {
  const CUresult r = cutlass::call_cuTensorMapEncodeTiled(args...);
  if (r != CUDA_SUCCESS && LastFailure().result == 0) {
    LastFailure() = {static_cast<int>(r), "cuTensorMapEncodeTiled"};
  }
  return r;
}

}  // namespace tma_check
}  // namespace internal
}  // namespace gpu
}  // namespace tf_fp16ops

#undef CUTLASS_CUDA_DRIVER_WRAPPER_CALL
#define CUTLASS_CUDA_DRIVER_WRAPPER_CALL(func) ::tf_fp16ops::gpu::internal::tma_check::call_##func

#endif  // TF_FP16OPS_CC_KERNELS_GPU_TMA_ENCODE_CHECK_H_
