// Direct (non-GEMM) convolution kernels: 64-bit indexing, any layout, groups, stride, dilation
// and padding. The implementation for every problem the implicit-GEMM kernels cannot take, and the
// bit-exact GPU twin of the CPU contract (cc/kernels/cpu/conv2d_cpu.h) for Tacc=half:
//   fprop  y[n,p,q,k]   : one thread per output, acc over (kh, kw, cin)   acc = fma(x, w, acc)
//   dgrad  dx[n,h,w,c]  : one thread per output, acc over (kh, kw, k)
//   wgrad  dw[kh,kw,c,k]: Tacc=half: one thread per output, acc over (n, p, q) in that order;
//                         Tacc=float: the (n, p, q) range is cut into `splits` consecutive slices,
//                         one thread per (slice, output) sums its slice in fp32 into the
//                         workspace, and a second pass adds the slices in order and rounds once.
// with one fp16 rounding per step (__hfma) for Tacc=half, fp32 FMA and one final rounding for
// Tacc=float. Padded input positions are zeros that take part in fprop and wgrad (0 * inf gives
// NaN); dgrad visits only the output positions that exist.
//
// The bodies are functors run by Launch (launch.h): kernels under nvcc, loops in the host build.
#ifndef TF_FP16OPS_CC_KERNELS_GPU_DIRECT_CONV_H_
#define TF_FP16OPS_CC_KERNELS_GPU_DIRECT_CONV_H_

#include <algorithm>
#include <cstdint>

#include "cc/kernels/gpu/conv2d_gpu.h"
#include "cc/kernels/gpu/device_numerics.h"
#include "cc/kernels/gpu/platform.h"

namespace tf_fp16ops {
namespace gpu {
namespace internal {

// Offset of activation element (n, h, w, c) of a [N, H, W, C] tensor in NHWC or NCHW order.
TFO_DEVICE int64_t ActOffset(bool nchw, int64_t n, int64_t h, int64_t w, int64_t c, int64_t H,
                             int64_t W, int64_t C) {
  return nchw ? ((n * C + c) * H + h) * W + w : ((n * H + h) * W + w) * C + c;
}

// Inverse of ActOffset: decodes a linear index in memory order.
TFO_DEVICE void ActCoord(bool nchw, int64_t i, int64_t H, int64_t W, int64_t C, int64_t* n,
                         int64_t* h, int64_t* w, int64_t* c) {
  if (nchw) {
    *w = i % W;
    i /= W;
    *h = i % H;
    i /= H;
    *c = i % C;
    *n = i / C;
  } else {
    *c = i % C;
    i /= C;
    *w = i % W;
    i /= W;
    *h = i % H;
    *n = i / H;
  }
}

template <typename T, typename Acc>
struct FpropBody {
  ConvProblem p;
  const T* TFO_RESTRICT x;
  const T* TFO_RESTRICT w;
  T* TFO_RESTRICT y;
  TFO_DEVICE void operator()(int64_t i) const {
    int64_t n, op, oq, k;
    ActCoord(p.nchw, i, p.P, p.Q, p.K, &n, &op, &oq, &k);
    const int64_t g = k / (p.K / p.groups);
    Acc acc = Zero<Acc>();
    for (int64_t kh = 0; kh < p.KH; ++kh) {
      const int64_t ih = op * p.stride_h - p.pad_top + kh * p.dilation_h;
      for (int64_t kw = 0; kw < p.KW; ++kw) {
        const int64_t iw = oq * p.stride_w - p.pad_left + kw * p.dilation_w;
        const bool inside = ih >= 0 && ih < p.H && iw >= 0 && iw < p.W;
        const T* wp = w + (kh * p.KW + kw) * p.Cg * p.K + k;
        for (int64_t ci = 0; ci < p.Cg; ++ci) {
          const T xv =
              inside ? x[ActOffset(p.nchw, n, ih, iw, g * p.Cg + ci, p.H, p.W, p.C)] : Zero<T>();
          acc = MulAdd(xv, wp[ci * p.K], acc);
        }
      }
    }
    y[i] = Convert<T>(acc);
  }
};

template <typename T, typename Acc>
struct DgradBody {
  ConvProblem p;
  const T* TFO_RESTRICT w;
  const T* TFO_RESTRICT dy;
  T* TFO_RESTRICT dx;
  TFO_DEVICE void operator()(int64_t i) const {
    int64_t n, ih, iw, c;
    ActCoord(p.nchw, i, p.H, p.W, p.C, &n, &ih, &iw, &c);
    const int64_t Kg = p.K / p.groups;
    const int64_t g = c / p.Cg, cl = c % p.Cg;
    Acc acc = Zero<Acc>();
    for (int64_t kh = 0; kh < p.KH; ++kh) {
      const int64_t th = ih + p.pad_top - kh * p.dilation_h;  // = op * stride_h if a tap maps here
      if (th < 0 || th % p.stride_h != 0 || th / p.stride_h >= p.P) continue;
      const int64_t op = th / p.stride_h;
      for (int64_t kw = 0; kw < p.KW; ++kw) {
        const int64_t tw = iw + p.pad_left - kw * p.dilation_w;
        if (tw < 0 || tw % p.stride_w != 0 || tw / p.stride_w >= p.Q) continue;
        const int64_t oq = tw / p.stride_w;
        const T* wp = w + ((kh * p.KW + kw) * p.Cg + cl) * p.K + g * Kg;
        const T* dp = dy + ActOffset(p.nchw, n, op, oq, g * Kg, p.P, p.Q, p.K);
        const int64_t dstep = p.nchw ? p.P * p.Q : 1;
        for (int64_t kk = 0; kk < Kg; ++kk) acc = MulAdd(dp[kk * dstep], wp[kk], acc);
      }
    }
    dx[i] = Convert<T>(acc);
  }
};

// Sums terms [begin, end) of the (n, p, q) reduction of filter element i (HWIO linear index).
template <typename T, typename Acc>
TFO_DEVICE Acc WgradRange(const ConvProblem& p, const T* TFO_RESTRICT x, const T* TFO_RESTRICT dy,
                          int64_t i, int64_t begin, int64_t end) {
  int64_t t = i;
  const int64_t k = t % p.K;
  t /= p.K;
  const int64_t cl = t % p.Cg;
  t /= p.Cg;
  const int64_t kw = t % p.KW;
  const int64_t kh = t / p.KW;
  const int64_t c = (k / (p.K / p.groups)) * p.Cg + cl;
  int64_t oq = begin % p.Q, op = (begin / p.Q) % p.P, n = begin / (p.P * p.Q);
  Acc acc = Zero<Acc>();
  for (int64_t j = begin; j < end; ++j) {
    const int64_t ih = op * p.stride_h - p.pad_top + kh * p.dilation_h;
    const int64_t iw = oq * p.stride_w - p.pad_left + kw * p.dilation_w;
    const bool inside = ih >= 0 && ih < p.H && iw >= 0 && iw < p.W;
    const T xv = inside ? x[ActOffset(p.nchw, n, ih, iw, c, p.H, p.W, p.C)] : Zero<T>();
    acc = MulAdd(xv, dy[ActOffset(p.nchw, n, op, oq, k, p.P, p.Q, p.K)], acc);
    if (++oq == p.Q) {
      oq = 0;
      if (++op == p.P) {
        op = 0;
        ++n;
      }
    }
  }
  return acc;
}

template <typename T, typename Acc>
struct WgradBody {  // sequential: one thread per filter element
  ConvProblem p;
  const T* TFO_RESTRICT x;
  const T* TFO_RESTRICT dy;
  T* TFO_RESTRICT dw;
  TFO_DEVICE void operator()(int64_t i) const {
    dw[i] = Convert<T>(WgradRange<T, Acc>(p, x, dy, i, 0, p.N * p.P * p.Q));
  }
};

template <typename T>
struct WgradSliceBody {  // Tacc=float: slice s of filter element i, index s * outputs + i
  ConvProblem p;
  const T* TFO_RESTRICT x;
  const T* TFO_RESTRICT dy;
  float* TFO_RESTRICT partial;
  int64_t outputs, slice;
  TFO_DEVICE void operator()(int64_t j) const {
    const int64_t s = j / outputs, i = j % outputs;
    const int64_t total = p.N * p.P * p.Q;
    const int64_t begin = s * slice, end = begin + slice < total ? begin + slice : total;
    partial[j] = WgradRange<T, float>(p, x, dy, i, begin, end);
  }
};

template <typename T>
struct SliceSumBody {  // out[i] = round_T(sum over s ascending of partial[s * outputs + i])
  const float* TFO_RESTRICT partial;
  T* TFO_RESTRICT out;
  int64_t outputs, splits;
  TFO_DEVICE void operator()(int64_t i) const {
    float acc = partial[i];
    for (int64_t s = 1; s < splits; ++s) acc = Add(acc, partial[s * outputs + i]);
    out[i] = Convert<T>(acc);
  }
};

// Slices of the Tacc=float direct wgrad: enough (slice, output) threads to fill a large GPU
// (~2^17 threads), each slice at least 64 terms, at most 256 slices. 1 for Tacc=half.
int64_t DirectWgradSplits(const ConvProblem& p, DataType Tacc);
// Workspace of the direct wgrad: splits * outputs floats when splits > 1, else 0.
size_t DirectWgradWorkspaceBytes(const ConvProblem& p, DataType Tacc);

// Layouts as in conv2d_gpu.h (NHWC/NCHW activations, HWIO filter). Return the launch error.
template <DataType T, DataType Tacc>
cudaError_t DirectFprop(const ConvProblem& p, const void* x, const void* w, void* y,
                        cudaStream_t s);
template <DataType T, DataType Tacc>
cudaError_t DirectDgrad(const ConvProblem& p, const void* w, const void* dy, void* dx,
                        cudaStream_t s);
// `workspace` holds DirectWgradWorkspaceBytes(p, Tacc) bytes.
template <DataType T, DataType Tacc>
cudaError_t DirectWgrad(const ConvProblem& p, const void* x, const void* dy, void* dw,
                        void* workspace, cudaStream_t s);

}  // namespace internal
}  // namespace gpu
}  // namespace tf_fp16ops

#endif  // TF_FP16OPS_CC_KERNELS_GPU_DIRECT_CONV_H_
