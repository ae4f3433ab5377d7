// The thin launch shim between kernel bodies and the hardware. A body is a functor with
// `TFO_DEVICE void operator()(int64_t i) const` that computes element i of [0, total); Launch
// runs it once for every i. nvcc: a grid-stride loop kernel, 256 threads a block, at most 2^20
// blocks, 64-bit indices. Host build: the same loop on the calling thread, so the host tests run
// exactly the index math and accumulation order the GPU runs.
#ifndef TF_FP16OPS_CC_KERNELS_GPU_LAUNCH_H_
#define TF_FP16OPS_CC_KERNELS_GPU_LAUNCH_H_

#include <algorithm>
#include <cstdint>

#include "cc/kernels/gpu/conv2d_gpu.h"
#include "cc/kernels/gpu/platform.h"

namespace tf_fp16ops {
namespace gpu {
namespace internal {

#if defined(TF_FP16OPS_HOST_BUILD)

template <typename Body>
cudaError_t Launch(const Body& body, int64_t total, cudaStream_t /*stream*/) {
  for (int64_t i = 0; i < total; ++i) body(i);
  return cudaSuccess;
}

#else

constexpr int kLaunchThreads = 256;

template <typename Body>
__global__ void GridLoopKernel(Body body, int64_t total) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    body(i);
  }
}

template <typename Body>
cudaError_t Launch(const Body& body, int64_t total, cudaStream_t stream) {
  if (total <= 0) return cudaSuccess;
  const int64_t blocks = std::max<int64_t>(
      1, std::min<int64_t>((total + kLaunchThreads - 1) / kLaunchThreads, int64_t(1) << 20));
  // clang-format reads the CUDA launch brackets as shifts in a .h file.
  // clang-format off
  GridLoopKernel<Body><<<static_cast<unsigned>(blocks), kLaunchThreads, 0, stream>>>(body, total);
  // clang-format on
  return cudaPeekAtLastError();
}

#endif

}  // namespace internal
}  // namespace gpu
}  // namespace tf_fp16ops

#endif  // TF_FP16OPS_CC_KERNELS_GPU_LAUNCH_H_
