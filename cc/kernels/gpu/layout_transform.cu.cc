// Layout transforms: one thread per destination element (coalesced writes), 64-bit indices.
#include "cc/kernels/gpu/layout_transform.h"

#include <algorithm>

#include "cc/kernels/gpu/device_numerics.h"

namespace tf_fp16ops {
namespace gpu {
namespace internal {
namespace {

constexpr int kThreads = 256;

int64_t Blocks(int64_t total) {
  return std::max<int64_t>(1, std::min<int64_t>((total + kThreads - 1) / kThreads, 1 << 20));
}

#define TF_FP16OPS_GRID_LOOP(i, total)                                              \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (total); \
       i += int64_t(gridDim.x) * blockDim.x)

template <typename E>
__global__ void HwioToKrscKernel(const E* __restrict__ src, E* __restrict__ dst, int64_t R,
                                 int64_t S, int64_t C, int64_t K) {
  TF_FP16OPS_GRID_LOOP(i, K * R * S * C) {
    int64_t t = i;
    const int64_t c = t % C; t /= C;
    const int64_t sx = t % S; t /= S;
    const int64_t r = t % R;
    const int64_t k = t / R;
    dst[i] = src[((r * S + sx) * C + c) * K + k];
  }
}

// dst[n, a, b] = src[n, b, a] for a [N, A, B] destination: NCHW->NHWC has A = H*W, B = C.
template <typename E>
__global__ void BatchedTransposeKernel(const E* __restrict__ src, E* __restrict__ dst, int64_t N,
                                       int64_t A, int64_t B) {
  TF_FP16OPS_GRID_LOOP(i, N * A * B) {
    const int64_t b = i % B;
    const int64_t a = (i / B) % A;
    const int64_t n = i / (A * B);
    dst[i] = src[(n * B + b) * A + a];
  }
}

template <typename E, typename Acc>
__global__ void ReduceKernel(const Acc* __restrict__ partial, int splits, E* __restrict__ hwio,
                             int64_t K, int64_t R, int64_t S, int64_t C) {
  const int64_t one = K * R * S * C;
  TF_FP16OPS_GRID_LOOP(i, one) {
    int64_t t = i;
    const int64_t k = t % K; t /= K;
    const int64_t c = t % C; t /= C;
    const int64_t sx = t % S;
    const int64_t r = t / S;
    const int64_t src = ((k * R + r) * S + sx) * C + c;
    Acc acc = partial[src];
    for (int i_split = 1; i_split < splits; ++i_split) acc = Add(acc, partial[i_split * one + src]);
    hwio[i] = Convert<E>(acc);
  }
}

template <typename E>
cudaError_t Transpose(const void* src, void* dst, int64_t N, int64_t A, int64_t B, cudaStream_t s) {
  const int64_t total = N * A * B;
  if (total == 0) return cudaSuccess;
  BatchedTransposeKernel<E><<<Blocks(total), kThreads, 0, s>>>(static_cast<const E*>(src),
                                                               static_cast<E*>(dst), N, A, B);
  return cudaPeekAtLastError();
}

}  // namespace

cudaError_t HwioToKrsc(DataType T, const void* hwio, void* krsc, int64_t R, int64_t S, int64_t C,
                       int64_t K, cudaStream_t s) {
  const int64_t total = K * R * S * C;
  if (total == 0) return cudaSuccess;
  if (T == DataType::kHalf) {
    HwioToKrscKernel<__half><<<Blocks(total), kThreads, 0, s>>>(
        static_cast<const __half*>(hwio), static_cast<__half*>(krsc), R, S, C, K);
  } else {
    HwioToKrscKernel<float><<<Blocks(total), kThreads, 0, s>>>(
        static_cast<const float*>(hwio), static_cast<float*>(krsc), R, S, C, K);
  }
  return cudaPeekAtLastError();
}

cudaError_t NchwToNhwc(DataType T, const void* src, void* dst, int64_t N, int64_t C, int64_t H,
                       int64_t W, cudaStream_t s) {
  return T == DataType::kHalf ? Transpose<__half>(src, dst, N, H * W, C, s)
                              : Transpose<float>(src, dst, N, H * W, C, s);
}

cudaError_t NhwcToNchw(DataType T, const void* src, void* dst, int64_t N, int64_t C, int64_t H,
                       int64_t W, cudaStream_t s) {
  return T == DataType::kHalf ? Transpose<__half>(src, dst, N, C, H * W, s)
                              : Transpose<float>(src, dst, N, C, H * W, s);
}

cudaError_t ReduceKrscToHwio(DataType T, DataType Tacc, const void* partial, int splits,
                             void* hwio, int64_t K, int64_t R, int64_t S, int64_t C,
                             cudaStream_t s) {
  const int64_t total = K * R * S * C;
  if (total == 0) return cudaSuccess;
  const int64_t b = Blocks(total);
  if (T == DataType::kHalf && Tacc == DataType::kHalf) {
    ReduceKernel<__half, __half><<<b, kThreads, 0, s>>>(static_cast<const __half*>(partial),
                                                        splits, static_cast<__half*>(hwio), K,
                                                        R, S, C);
  } else if (T == DataType::kHalf) {
    ReduceKernel<__half, float><<<b, kThreads, 0, s>>>(static_cast<const float*>(partial), splits,
                                                       static_cast<__half*>(hwio), K, R, S, C);
  } else {
    ReduceKernel<float, float><<<b, kThreads, 0, s>>>(static_cast<const float*>(partial), splits,
                                                      static_cast<float*>(hwio), K, R, S, C);
  }
  return cudaPeekAtLastError();
}

}  // namespace internal
}  // namespace gpu
}  // namespace tf_fp16ops
