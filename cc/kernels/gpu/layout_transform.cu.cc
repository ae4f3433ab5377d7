// Layout transform launches (bodies in layout_transform.h).
#include "cc/kernels/gpu/layout_transform.h"

#include "cc/kernels/gpu/launch.h"

namespace tf_fp16ops {
namespace gpu {
namespace internal {
namespace {

template <typename E>
cudaError_t Transpose(const void* src, void* dst, int64_t N, int64_t A, int64_t B, cudaStream_t s) {
  BatchedTransposeBody<E> body{static_cast<const E*>(src), static_cast<E*>(dst), A, B};
  return Launch(body, N * A * B, s);
}

template <typename E>
cudaError_t Krsc(const void* hwio, void* krsc, int64_t R, int64_t S, int64_t C, int64_t K,
                 cudaStream_t s) {
  HwioToKrscBody<E> body{static_cast<const E*>(hwio), static_cast<E*>(krsc), R, S, C, K};
  return Launch(body, K * R * S * C, s);
}

template <typename E, typename Acc>
cudaError_t Reduce(const void* partial, int64_t splits, void* hwio, int64_t K, int64_t R, int64_t S,
                   int64_t C, cudaStream_t s) {
  ReduceKrscToHwioBody<E, Acc> body{
      static_cast<const Acc*>(partial), static_cast<E*>(hwio), splits, K, R, S, C};
  return Launch(body, K * R * S * C, s);
}

}  // namespace

cudaError_t HwioToKrsc(DataType T, const void* hwio, void* krsc, int64_t R, int64_t S, int64_t C,
                       int64_t K, cudaStream_t s) {
  return T == DataType::kHalf ? Krsc<Half>(hwio, krsc, R, S, C, K, s)
                              : Krsc<float>(hwio, krsc, R, S, C, K, s);
}

cudaError_t NchwToNhwc(DataType T, const void* src, void* dst, int64_t N, int64_t C, int64_t H,
                       int64_t W, cudaStream_t s) {
  return T == DataType::kHalf ? Transpose<Half>(src, dst, N, H * W, C, s)
                              : Transpose<float>(src, dst, N, H * W, C, s);
}

cudaError_t NhwcToNchw(DataType T, const void* src, void* dst, int64_t N, int64_t C, int64_t H,
                       int64_t W, cudaStream_t s) {
  return T == DataType::kHalf ? Transpose<Half>(src, dst, N, C, H * W, s)
                              : Transpose<float>(src, dst, N, C, H * W, s);
}

cudaError_t ReduceKrscToHwio(DataType T, DataType Tacc, const void* partial, int64_t splits,
                             void* hwio, int64_t K, int64_t R, int64_t S, int64_t C,
                             cudaStream_t s) {
  if (T == DataType::kHalf && Tacc == DataType::kHalf) {
    return Reduce<Half, Half>(partial, splits, hwio, K, R, S, C, s);
  }
  if (T == DataType::kHalf) return Reduce<Half, float>(partial, splits, hwio, K, R, S, C, s);
  return Reduce<float, float>(partial, splits, hwio, K, R, S, C, s);
}

}  // namespace internal
}  // namespace gpu
}  // namespace tf_fp16ops
