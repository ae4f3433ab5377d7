// Layout transforms between TensorFlow's layouts and CUTLASS's, and the split-K reduction.
// Bodies are functors run by Launch (launch.h): kernels under nvcc, loops in the host build;
// one thread per destination element (coalesced writes), 64-bit indices.
#ifndef TF_FP16OPS_CC_KERNELS_GPU_LAYOUT_TRANSFORM_H_
#define TF_FP16OPS_CC_KERNELS_GPU_LAYOUT_TRANSFORM_H_

#include <cstdint>

#include "cc/kernels/gpu/conv2d_gpu.h"
#include "cc/kernels/gpu/device_numerics.h"
#include "cc/kernels/gpu/platform.h"

namespace tf_fp16ops {
namespace gpu {
namespace internal {

template <typename E>
struct HwioToKrscBody {  // dst[k,r,s,c] = src[r,s,c,k]
  const E* TFO_RESTRICT src;
  E* TFO_RESTRICT dst;
  int64_t R, S, C, K;
  TFO_DEVICE void operator()(int64_t i) const {
    int64_t t = i;
    const int64_t c = t % C;
    t /= C;
    const int64_t sx = t % S;
    t /= S;
    const int64_t r = t % R;
    const int64_t k = t / R;
    dst[i] = src[((r * S + sx) * C + c) * K + k];
  }
};

template <typename E>
struct BatchedTransposeBody {  // dst[n, a, b] = src[n, b, a] for a [N, A, B] destination
  const E* TFO_RESTRICT src;
  E* TFO_RESTRICT dst;
  int64_t A, B;
  TFO_DEVICE void operator()(int64_t i) const {
    const int64_t b = i % B;
    const int64_t a = (i / B) % A;
    const int64_t n = i / (A * B);
    dst[i] = src[(n * B + b) * A + a];
  }
};

template <typename E, typename Acc>
struct ReduceKrscToHwioBody {  // hwio[r,s,c,k] = round_E(sum over splits of partial[i][k,r,s,c])
  const Acc* TFO_RESTRICT partial;
  E* TFO_RESTRICT hwio;
  int64_t splits, K, R, S, C;
  TFO_DEVICE void operator()(int64_t i) const {
    const int64_t one = K * R * S * C;
    int64_t t = i;
    const int64_t k = t % K;
    t /= K;
    const int64_t c = t % C;
    t /= C;
    const int64_t sx = t % S;
    const int64_t r = t / S;
    const int64_t src = ((k * R + r) * S + sx) * C + c;
    Acc acc = partial[src];
    for (int64_t j = 1; j < splits; ++j) acc = Add(acc, partial[j * one + src]);
    hwio[i] = Convert<E>(acc);
  }
};

// krsc[k,r,s,c] = hwio[r,s,c,k]; element type T.
cudaError_t HwioToKrsc(DataType T, const void* hwio, void* krsc, int64_t R, int64_t S, int64_t C,
                       int64_t K, cudaStream_t s);
// dst NHWC [N,H,W,C] from src NCHW, and back.
cudaError_t NchwToNhwc(DataType T, const void* src, void* dst, int64_t N, int64_t C, int64_t H,
                       int64_t W, cudaStream_t s);
cudaError_t NhwcToNchw(DataType T, const void* src, void* dst, int64_t N, int64_t C, int64_t H,
                       int64_t W, cudaStream_t s);
// hwio[r,s,c,k] = round_T(sum_{i < splits} partial[i][k,r,s,c]), summed in order in Tacc
// (partials hold Tacc elements; one split is a plain KRSC -> HWIO transpose).
cudaError_t ReduceKrscToHwio(DataType T, DataType Tacc, const void* partial, int64_t splits,
                             void* hwio, int64_t K, int64_t R, int64_t S, int64_t C,
                             cudaStream_t s);

}  // namespace internal
}  // namespace gpu
}  // namespace tf_fp16ops

#endif  // TF_FP16OPS_CC_KERNELS_GPU_LAYOUT_TRANSFORM_H_
