// Direct convolution kernels (see direct_conv.h for the accumulation order contract).
#include "cc/kernels/gpu/direct_conv.h"

#include <algorithm>
#include <cstdint>

#include "cc/kernels/gpu/device_numerics.h"

namespace tf_fp16ops {
namespace gpu {
namespace internal {
namespace {

constexpr int kThreads = 256;

// Sizes copied into kernel parameters (all int64: no 32-bit index anywhere).
struct DevProblem {
  int64_t N, H, W, C, KH, KW, K, Cg, Kg, P, Q, sh, sw, dh, dw, pt, pl;
  bool nchw;
};

DevProblem ToDev(const Conv2DProblem& p) {
  return {p.N,  p.H,           p.W,           p.C,        p.KH,       p.KW,
          p.K,  p.C / p.groups, p.K / p.groups, p.P,        p.Q,        p.stride_h,
          p.stride_w, p.dil_h,  p.dil_w,       p.pad_top,  p.pad_left, p.nchw};
}

// Offset of activation element (n, h, w, c) of a [N, H, W, C] tensor in NHWC or NCHW order.
__device__ __forceinline__ int64_t ActOffset(bool nchw, int64_t n, int64_t h, int64_t w, int64_t c,
                                             int64_t H, int64_t W, int64_t C) {
  return nchw ? ((n * C + c) * H + h) * W + w : ((n * H + h) * W + w) * C + c;
}

// Inverse of ActOffset: decodes a linear index in memory order.
__device__ __forceinline__ void ActCoord(bool nchw, int64_t i, int64_t H, int64_t W, int64_t C,
                                         int64_t* n, int64_t* h, int64_t* w, int64_t* c) {
  if (nchw) {
    *w = i % W; i /= W; *h = i % H; i /= H; *c = i % C; *n = i / C;
  } else {
    *c = i % C; i /= C; *w = i % W; i /= W; *h = i % H; *n = i / H;
  }
}

template <typename T, typename Acc>
__global__ void FpropKernel(DevProblem p, const T* __restrict__ x, const T* __restrict__ w,
                            T* __restrict__ y) {
  const int64_t total = p.N * p.P * p.Q * p.K;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t n, op, oq, k;
    ActCoord(p.nchw, i, p.P, p.Q, p.K, &n, &op, &oq, &k);
    const int64_t g = k / p.Kg;
    Acc acc = Zero<Acc>();
    for (int64_t kh = 0; kh < p.KH; ++kh) {
      const int64_t ih = op * p.sh - p.pt + kh * p.dh;
      for (int64_t kw = 0; kw < p.KW; ++kw) {
        const int64_t iw = oq * p.sw - p.pl + kw * p.dw;
        const bool inside = ih >= 0 && ih < p.H && iw >= 0 && iw < p.W;
        const T* wp = w + (kh * p.KW + kw) * p.Cg * p.K + k;
        for (int64_t ci = 0; ci < p.Cg; ++ci) {
          const T xv = inside ? x[ActOffset(p.nchw, n, ih, iw, g * p.Cg + ci, p.H, p.W, p.C)]
                              : Zero<T>();
          acc = MulAdd(xv, wp[ci * p.K], acc);
        }
      }
    }
    y[i] = Convert<T>(acc);
  }
}

template <typename T, typename Acc>
__global__ void DgradKernel(DevProblem p, const T* __restrict__ w, const T* __restrict__ dy,
                            T* __restrict__ dx) {
  const int64_t total = p.N * p.H * p.W * p.C;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t n, ih, iw, c;
    ActCoord(p.nchw, i, p.H, p.W, p.C, &n, &ih, &iw, &c);
    const int64_t g = c / p.Cg, cl = c % p.Cg;
    Acc acc = Zero<Acc>();
    for (int64_t kh = 0; kh < p.KH; ++kh) {
      const int64_t th = ih + p.pt - kh * p.dh;  // = op * stride_h when the tap maps to output op
      if (th < 0 || th % p.sh != 0 || th / p.sh >= p.P) continue;  // no output row maps here
      const int64_t op = th / p.sh;
      for (int64_t kw = 0; kw < p.KW; ++kw) {
        const int64_t tw = iw + p.pl - kw * p.dw;
        if (tw < 0 || tw % p.sw != 0 || tw / p.sw >= p.Q) continue;
        const int64_t oq = tw / p.sw;
        const T* wp = w + ((kh * p.KW + kw) * p.Cg + cl) * p.K + g * p.Kg;
        const T* dp = dy + ActOffset(p.nchw, n, op, oq, g * p.Kg, p.P, p.Q, p.K);
        const int64_t dstep = p.nchw ? p.P * p.Q : 1;
        for (int64_t kk = 0; kk < p.Kg; ++kk) acc = MulAdd(dp[kk * dstep], wp[kk], acc);
      }
    }
    dx[i] = Convert<T>(acc);
  }
}

template <typename T, typename Acc>
__global__ void WgradKernel(DevProblem p, const T* __restrict__ x, const T* __restrict__ dy,
                            T* __restrict__ dw) {
  const int64_t total = p.KH * p.KW * p.Cg * p.K;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t t = i;
    const int64_t k = t % p.K; t /= p.K;
    const int64_t cl = t % p.Cg; t /= p.Cg;
    const int64_t kw = t % p.KW;
    const int64_t kh = t / p.KW;
    const int64_t c = (k / p.Kg) * p.Cg + cl;
    Acc acc = Zero<Acc>();
    for (int64_t n = 0; n < p.N; ++n) {
      for (int64_t op = 0; op < p.P; ++op) {
        const int64_t ih = op * p.sh - p.pt + kh * p.dh;
        for (int64_t oq = 0; oq < p.Q; ++oq) {
          const int64_t iw = oq * p.sw - p.pl + kw * p.dw;
          const bool inside = ih >= 0 && ih < p.H && iw >= 0 && iw < p.W;
          const T xv = inside ? x[ActOffset(p.nchw, n, ih, iw, c, p.H, p.W, p.C)] : Zero<T>();
          acc = MulAdd(xv, dy[ActOffset(p.nchw, n, op, oq, k, p.P, p.Q, p.K)], acc);
        }
      }
    }
    dw[i] = Convert<T>(acc);
  }
}

int64_t Blocks(int64_t total) {
  return std::max<int64_t>(1, std::min<int64_t>((total + kThreads - 1) / kThreads, 1 << 20));
}

}  // namespace

template <DataType T, DataType Tacc>
cudaError_t DirectFprop(const Conv2DProblem& p, const void* x, const void* w, void* y,
                        cudaStream_t s) {
  using E = DevElem<T>;
  const int64_t total = p.N * p.P * p.Q * p.K;
  if (total == 0) return cudaSuccess;
  FpropKernel<E, DevElem<Tacc>><<<Blocks(total), kThreads, 0, s>>>(
      ToDev(p), static_cast<const E*>(x), static_cast<const E*>(w), static_cast<E*>(y));
  return cudaPeekAtLastError();
}

template <DataType T, DataType Tacc>
cudaError_t DirectDgrad(const Conv2DProblem& p, const void* w, const void* dy, void* dx,
                        cudaStream_t s) {
  using E = DevElem<T>;
  const int64_t total = p.N * p.H * p.W * p.C;
  if (total == 0) return cudaSuccess;
  DgradKernel<E, DevElem<Tacc>><<<Blocks(total), kThreads, 0, s>>>(
      ToDev(p), static_cast<const E*>(w), static_cast<const E*>(dy), static_cast<E*>(dx));
  return cudaPeekAtLastError();
}

template <DataType T, DataType Tacc>
cudaError_t DirectWgrad(const Conv2DProblem& p, const void* x, const void* dy, void* dw,
                        cudaStream_t s) {
  using E = DevElem<T>;
  const int64_t total = p.KH * p.KW * (p.C / p.groups) * p.K;
  if (total == 0) return cudaSuccess;
  WgradKernel<E, DevElem<Tacc>><<<Blocks(total), kThreads, 0, s>>>(
      ToDev(p), static_cast<const E*>(x), static_cast<const E*>(dy), static_cast<E*>(dw));
  return cudaPeekAtLastError();
}

#define TF_FP16OPS_DIRECT(T, TACC)                                                              \
  template cudaError_t DirectFprop<T, TACC>(const Conv2DProblem&, const void*, const void*,    \
                                            void*, cudaStream_t);                               \
  template cudaError_t DirectDgrad<T, TACC>(const Conv2DProblem&, const void*, const void*,    \
                                            void*, cudaStream_t);                               \
  template cudaError_t DirectWgrad<T, TACC>(const Conv2DProblem&, const void*, const void*,    \
                                            void*, cudaStream_t);
TF_FP16OPS_DIRECT(DataType::kHalf, DataType::kHalf)
TF_FP16OPS_DIRECT(DataType::kHalf, DataType::kFloat)
TF_FP16OPS_DIRECT(DataType::kFloat, DataType::kFloat)
#undef TF_FP16OPS_DIRECT

}  // namespace internal
}  // namespace gpu
}  // namespace tf_fp16ops
