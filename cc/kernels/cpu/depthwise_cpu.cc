#include "cc/kernels/cpu/depthwise_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "cc/kernels/cpu/half_step.h"

namespace tf_fp16ops {
namespace cpu {
namespace {

void ElementwiseScalar(Accumulation accumulation, float* acc, int64_t len, const float* const* x,
                       const float* const* w, int64_t terms) {
  for (int64_t l = 0; l < len; ++l) {
    float a = acc[l];
    for (int64_t t = 0; t < terms; ++t) {
      a = accumulation == Accumulation::kHalf ? HalfFmaStep(a, x[t][l], w[t][l])
                                              : std::fma(x[t][l], w[t][l], a);
    }
    acc[l] = a;
  }
}

#if defined(__x86_64__)

// Two vectors of 16 lanes per step, the tail masked; the accumulators stay in registers over
// all terms.
template <bool kHalfAcc>
__attribute__((target("avx512f,avx512vl,avx512dq,f16c,fma"))) void Elementwise512(
    float* acc, int64_t len, const float* const* x, const float* const* w, int64_t terms) {
  int64_t l = 0;
  for (; l + 32 <= len; l += 32) {
    __m512 a0 = _mm512_loadu_ps(acc + l), a1 = _mm512_loadu_ps(acc + l + 16);
    for (int64_t t = 0; t < terms; ++t) {
      const __m512 x0 = _mm512_loadu_ps(x[t] + l), x1 = _mm512_loadu_ps(x[t] + l + 16);
      const __m512 w0 = _mm512_loadu_ps(w[t] + l), w1 = _mm512_loadu_ps(w[t] + l + 16);
      a0 = kHalfAcc ? HalfStep512(a0, x0, w0) : _mm512_fmadd_ps(x0, w0, a0);
      a1 = kHalfAcc ? HalfStep512(a1, x1, w1) : _mm512_fmadd_ps(x1, w1, a1);
    }
    _mm512_storeu_ps(acc + l, a0);
    _mm512_storeu_ps(acc + l + 16, a1);
  }
  for (; l < len; l += 16) {
    const __mmask16 mask = len - l >= 16 ? static_cast<__mmask16>(0xFFFF)
                                         : static_cast<__mmask16>((1u << (len - l)) - 1u);
    __m512 a = _mm512_maskz_loadu_ps(mask, acc + l);
    for (int64_t t = 0; t < terms; ++t) {
      const __m512 xv = _mm512_maskz_loadu_ps(mask, x[t] + l);
      const __m512 wv = _mm512_maskz_loadu_ps(mask, w[t] + l);
      a = kHalfAcc ? HalfStep512(a, xv, wv) : _mm512_fmadd_ps(xv, wv, a);
    }
    _mm512_mask_storeu_ps(acc + l, mask, a);
  }
}

// ---------------------------------------------------------------- AVX2 (8 lanes)

// 8 lanes per step; the lane tail runs the scalar step.
template <bool kHalfAcc>
__attribute__((target("avx2,f16c,fma"))) void Elementwise256(float* acc, int64_t len,
                                                             const float* const* x,
                                                             const float* const* w, int64_t terms) {
  int64_t l = 0;
  for (; l + 8 <= len; l += 8) {
    __m256 a = _mm256_loadu_ps(acc + l);
    for (int64_t t = 0; t < terms; ++t) {
      const __m256 xv = _mm256_loadu_ps(x[t] + l);
      const __m256 wv = _mm256_loadu_ps(w[t] + l);
      a = kHalfAcc ? HalfStep256(a, xv, wv) : _mm256_fmadd_ps(xv, wv, a);
    }
    _mm256_storeu_ps(acc + l, a);
  }
  for (; l < len; ++l) {
    float a = acc[l];
    for (int64_t t = 0; t < terms; ++t) {
      a = kHalfAcc ? HalfFmaStep(a, x[t][l], w[t][l]) : std::fma(x[t][l], w[t][l], a);
    }
    acc[l] = a;
  }
}
#endif

// The path of the shared accumulation primitive (it honours TF_FP16OPS_CPU_ISA), so the ISA a
// process reports holds for this functor too.
enum class Path { kScalar, kAvx2, kAvx512 };

Path ChosenPath() {
  static const Path path = std::strcmp(AccumulateIsa(), "avx512") == 0 ? Path::kAvx512
                           : std::strcmp(AccumulateIsa(), "avx2") == 0 ? Path::kAvx2
                                                                       : Path::kScalar;
  return path;
}

// acc[l] = Step(acc[l], x[t][l], w[t][l]) for t in [0, terms), l in [0, len): the elementwise
// form of the accumulation, DepthwiseFprop's inner loop, on the path of ChosenPath.
void AccumulateElementwise(Accumulation accumulation, float* acc, int64_t len,
                           const float* const* x, const float* const* w, int64_t terms) {
  if (len <= 0 || terms <= 0) return;
#if defined(__x86_64__)
  const bool half = accumulation == Accumulation::kHalf;
  switch (ChosenPath()) {
    case Path::kAvx512:
      half ? Elementwise512<true>(acc, len, x, w, terms)
           : Elementwise512<false>(acc, len, x, w, terms);
      return;
    case Path::kAvx2:
      half ? Elementwise256<true>(acc, len, x, w, terms)
           : Elementwise256<false>(acc, len, x, w, terms);
      return;
    case Path::kScalar:
      break;
  }
#endif
  ElementwiseScalar(accumulation, acc, len, x, w, terms);
}

}  // namespace

void DepthwiseFprop(const ConvGeometry& g, Accumulation acc, const float* x, const float* w,
                    float* y, const ParallelFor& parallel_for) {
  const int64_t M = g.K / g.groups;  // the depth multiplier (groups = C)
  const int64_t L = g.K;             // C * M lanes, output channel c * M + m
  if (L == 0 || g.N == 0 || g.P == 0 || g.Q == 0) return;
  const int64_t T = g.KH * g.KW;
  // With a depth multiplier M > 1, lane c*M + m reads input channel c: the input is expanded
  // once to [N, H, W, C*M] so that every lane reads its own element.
  std::vector<float> expanded;
  const float* xs = x;
  if (M > 1) {
    expanded.resize(static_cast<size_t>(g.N * g.H * g.W * L));
    const int64_t pixels = g.N * g.H * g.W;
    parallel_for(pixels, std::max<int64_t>(1, L), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const float* src = x + i * g.C;
        float* dst = expanded.data() + i * L;
        for (int64_t c = 0; c < g.C; ++c) std::fill(dst + c * M, dst + (c + 1) * M, src[c]);
      }
    });
    xs = expanded.data();
  }
  const int64_t rows = g.N * g.P;  // one shard unit: one output row (n, p)
  const int64_t cost = std::max<int64_t>(1, 2 * g.Q * T * L);
  parallel_for(rows, cost, [&](int64_t begin, int64_t end) {
    const std::vector<float> zeros(static_cast<size_t>(L), 0.0f);
    std::vector<const float*> xp(static_cast<size_t>(T));
    std::vector<const float*> wp(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) wp[t] = w + t * L;
    for (int64_t r = begin; r < end; ++r) {
      const int64_t n = r / g.P;
      const int64_t p = r % g.P;
      for (int64_t q = 0; q < g.Q; ++q) {
        for (int64_t kh = 0; kh < g.KH; ++kh) {
          const int64_t h = p * g.stride_h - g.pad_top + kh * g.dilation_h;
          for (int64_t kw = 0; kw < g.KW; ++kw) {
            const int64_t wi = q * g.stride_w - g.pad_left + kw * g.dilation_w;
            const bool inside = h >= 0 && h < g.H && wi >= 0 && wi < g.W;
            xp[kh * g.KW + kw] = inside ? xs + ((n * g.H + h) * g.W + wi) * L : zeros.data();
          }
        }
        float* out = y + (r * g.Q + q) * L;
        std::fill(out, out + L, 0.0f);
        AccumulateElementwise(acc, out, L, xp.data(), wp.data(), T);
      }
    }
  });
}

}  // namespace cpu
}  // namespace tf_fp16ops
