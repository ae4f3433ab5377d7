// What the GPU sources need from CUDA, for the two ways they are compiled:
//   nvcc (the op library and libtf_fp16ops_gpu.so): the CUDA runtime API, __half, kernels;
//   the host compiler with TF_FP16OPS_HOST_BUILD (libtf_fp16ops_gpu_host.so, loaded by
//   tests/gpu/test_gpu_host.py): no CUDA headers at all. Kernel bodies (TFO_DEVICE functions and
//   functors) are then plain inline C++, a "launch" is a loop over the grid on the calling thread,
//   and the few runtime calls are replaced by the definitions below.
#ifndef TF_FP16OPS_CC_KERNELS_GPU_PLATFORM_H_
#define TF_FP16OPS_CC_KERNELS_GPU_PLATFORM_H_

#if defined(TF_FP16OPS_HOST_BUILD)

#if defined(__CUDACC__)
#error "TF_FP16OPS_HOST_BUILD is for the host compiler (g++), not nvcc"
#endif

#include <cstddef>

#define TFO_DEVICE inline
#define TFO_RESTRICT __restrict__

// The subset of the CUDA runtime API's names the launchers use (driver_types.h spells them so).
typedef int cudaError_t;
constexpr cudaError_t cudaSuccess = 0;
inline const char* cudaGetErrorString(cudaError_t) { return "error"; }

#else  // nvcc

#include <cuda_runtime_api.h>

#define TFO_DEVICE __device__ __forceinline__
#define TFO_RESTRICT __restrict__

#endif  // TF_FP16OPS_HOST_BUILD

#endif  // TF_FP16OPS_CC_KERNELS_GPU_PLATFORM_H_
