// MakeStatus: a Status (conv2d_gpu.h) whose message is printf-formatted, for the launchers of
// conv2d_gpu.cu.cc and matmul_gpu.cu.cc. The message is cut to Status::message's 511 characters;
// the format attribute lets the compiler check every call's arguments against its format.
#ifndef TF_FP16OPS_CC_KERNELS_GPU_MAKE_STATUS_H_
#define TF_FP16OPS_CC_KERNELS_GPU_MAKE_STATUS_H_

#include <cstdarg>
#include <cstdio>

#include "cc/kernels/gpu/conv2d_gpu.h"

namespace tf_fp16ops {
namespace gpu {
namespace internal {

__attribute__((format(printf, 2, 3))) inline Status MakeStatus(StatusCode code, const char* fmt,
                                                               ...) {
  Status s;
  s.code = code;
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(s.message, sizeof(s.message), fmt, ap);
  va_end(ap);
  return s;
}

}  // namespace internal
}  // namespace gpu
}  // namespace tf_fp16ops

#endif  // TF_FP16OPS_CC_KERNELS_GPU_MAKE_STATUS_H_
