#include "cc/kernels/cpu/depthwise_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "cc/kernels/conv_shape.h"
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

// R rows that share the w operand: acc[r][l] = Step(acc[r][l], x[r * terms + t][l], w[t][l]) for
// t ascending, 16 lanes per step (the tail masked). The R accumulators are independent
// dependency chains, so the latency of the step (two directed-rounding FMAs and two
// conversions) overlaps, as in the R rows of the conv kernel (cc/kernels/cpu/accumulate.cc).
template <int R, bool kHalfAcc>
__attribute__((target("avx512f,avx512vl,avx512dq,f16c,fma"))) void Multi512(
    float* const* acc, int64_t len, const float* const* x, const float* const* w, int64_t terms) {
  for (int64_t l = 0; l < len; l += 16) {
    const __mmask16 mask = len - l >= 16 ? static_cast<__mmask16>(0xFFFF)
                                         : static_cast<__mmask16>((1u << (len - l)) - 1u);
    __m512 a[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) a[r] = _mm512_maskz_loadu_ps(mask, acc[r] + l);
    for (int64_t t = 0; t < terms; ++t) {
      const __m512 wv = _mm512_maskz_loadu_ps(mask, w[t] + l);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512 xv = _mm512_maskz_loadu_ps(mask, x[r * terms + t] + l);
        a[r] = kHalfAcc ? HalfStep512(a[r], xv, wv) : _mm512_fmadd_ps(xv, wv, a[r]);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(acc[r] + l, mask, a[r]);
  }
}

template <bool kHalfAcc>
__attribute__((target("avx512f,avx512vl,avx512dq,f16c,fma"))) void Multi512Dispatch(
    int rows, float* const* acc, int64_t len, const float* const* x, const float* const* w,
    int64_t terms) {
  switch (rows) {
    case 1:
      return Multi512<1, kHalfAcc>(acc, len, x, w, terms);
    case 2:
      return Multi512<2, kHalfAcc>(acc, len, x, w, terms);
    case 3:
      return Multi512<3, kHalfAcc>(acc, len, x, w, terms);
    case 4:
      return Multi512<4, kHalfAcc>(acc, len, x, w, terms);
    case 5:
      return Multi512<5, kHalfAcc>(acc, len, x, w, terms);
    case 6:
      return Multi512<6, kHalfAcc>(acc, len, x, w, terms);
    case 7:
      return Multi512<7, kHalfAcc>(acc, len, x, w, terms);
    default:
      return Multi512<8, kHalfAcc>(acc, len, x, w, terms);
  }
}

// The same rows on binary16 buffers (IEEE bit patterns), as MultiHalf256 below: x and w widened
// by F16C as they are loaded, the accumulators from +0 (`first`) or from acc, stored back
// narrowed (exact: every kHalf accumulator is a binary16 value); each output gets the steps of
// Multi512<R, true> in the same order. A tail of fewer than 16 lanes goes through a zeroed
// 16-lane copy (the AVX-512 path does not require AVX512BW's masked 16-bit loads).
__attribute__((target("avx512f,avx512vl,avx512dq,f16c,fma"))) inline __m512 LoadHalf16(
    const uint16_t* p, int64_t n) {
  if (n >= 16) return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  alignas(32) uint16_t buf[16] = {};
  std::memcpy(buf, p, static_cast<size_t>(n) * sizeof(uint16_t));
  return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(buf)));
}

__attribute__((target("avx512f,avx512vl,avx512dq,f16c,fma"))) inline void StoreHalf16(uint16_t* p,
                                                                                      int64_t n,
                                                                                      __m512 v) {
  const __m256i h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  if (n >= 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), h);
    return;
  }
  alignas(32) uint16_t buf[16];
  _mm256_store_si256(reinterpret_cast<__m256i*>(buf), h);
  std::memcpy(p, buf, static_cast<size_t>(n) * sizeof(uint16_t));
}

template <int R>
__attribute__((target("avx512f,avx512vl,avx512dq,f16c,fma"))) void MultiHalf512(
    uint16_t* const* acc, int64_t len, bool first, const uint16_t* const* x,
    const uint16_t* const* w, int64_t terms) {
  for (int64_t l = 0; l < len; l += 16) {
    const int64_t n = len - l;
    __m512 a[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) a[r] = first ? _mm512_setzero_ps() : LoadHalf16(acc[r] + l, n);
    for (int64_t t = 0; t < terms; ++t) {
      const __m512 wv = LoadHalf16(w[t] + l, n);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) a[r] = HalfStep512(a[r], LoadHalf16(x[r * terms + t] + l, n), wv);
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) StoreHalf16(acc[r] + l, n, a[r]);
  }
}

// MultiHalf512 by its number of rows (1 to kElemRows = 8).
using MultiHalf512Fn = void (*)(uint16_t* const*, int64_t, bool, const uint16_t* const*,
                                const uint16_t* const*, int64_t);
constexpr MultiHalf512Fn kMultiHalf512[8] = {&MultiHalf512<1>, &MultiHalf512<2>, &MultiHalf512<3>,
                                             &MultiHalf512<4>, &MultiHalf512<5>, &MultiHalf512<6>,
                                             &MultiHalf512<7>, &MultiHalf512<8>};

// ---------------------------------------------------------------- AVX2 (8 lanes)

// R rows x NV vectors of 8 lanes from lane l on: acc[r][l..] = Step(acc[r][l..], x[r * terms +
// t][l..], w[t][l..]) for t ascending; the R * NV accumulators are independent dependency chains.
template <int R, int NV, bool kHalfAcc>
__attribute__((target("avx2,f16c,fma"))) inline void Block256(float* const* acc, int64_t l,
                                                              const float* const* x,
                                                              const float* const* w,
                                                              int64_t terms) {
  __m256 a[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) a[r][v] = _mm256_loadu_ps(acc[r] + l + 8 * v);
  for (int64_t t = 0; t < terms; ++t) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const __m256 wv = _mm256_loadu_ps(w[t] + l + 8 * v);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m256 xv = _mm256_loadu_ps(x[r * terms + t] + l + 8 * v);
        a[r][v] = kHalfAcc ? HalfStep256(a[r][v], xv, wv) : _mm256_fmadd_ps(xv, wv, a[r][v]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) _mm256_storeu_ps(acc[r] + l + 8 * v, a[r][v]);
}

// R rows that share the w operand, as Multi512, NV vectors of 8 lanes at a time (then single
// vectors); a lane tail of fewer than 8 lanes runs the scalar step. Every output accumulates its
// terms in order from its own start, so the tile shape changes no bit.
template <int R, int NV, bool kHalfAcc>
__attribute__((target("avx2,f16c,fma"))) void Multi256(float* const* acc, int64_t len,
                                                       const float* const* x, const float* const* w,
                                                       int64_t terms) {
  int64_t l = 0;
  for (; l + 8 * NV <= len; l += 8 * NV) Block256<R, NV, kHalfAcc>(acc, l, x, w, terms);
  for (; l + 8 <= len; l += 8) Block256<R, 1, kHalfAcc>(acc, l, x, w, terms);
  for (; l < len; ++l) {
    for (int r = 0; r < R; ++r) {
      float a = acc[r][l];
      for (int64_t t = 0; t < terms; ++t) {
        const float xv = x[r * terms + t][l], wv = w[t][l];
        a = kHalfAcc ? HalfFmaStep(a, xv, wv) : std::fma(xv, wv, a);
      }
      acc[r][l] = a;
    }
  }
}

// Rows in groups of up to 4, each group holding at least 4 accumulator chains where the lanes
// allow (4 rows x 1 vector, 3 or 2 rows x 2, 1 row x 4): four chains of one vector each were the
// fastest measured tile on AVX2 (more rows or vectors gave no more), and fewer chains leave the
// kHalf step's latency exposed.
template <bool kHalfAcc>
__attribute__((target("avx2,f16c,fma"))) void Multi256Dispatch(int rows, float* const* acc,
                                                               int64_t len, const float* const* x,
                                                               const float* const* w,
                                                               int64_t terms) {
  for (int r0 = 0; r0 < rows; r0 += 4) {
    const int m = rows - r0 < 4 ? rows - r0 : 4;
    float* const* a = acc + r0;
    const float* const* xr = x + r0 * terms;
    switch (m) {
      case 1:
        Multi256<1, 4, kHalfAcc>(a, len, xr, w, terms);
        break;
      case 2:
        Multi256<2, 2, kHalfAcc>(a, len, xr, w, terms);
        break;
      case 3:
        Multi256<3, 2, kHalfAcc>(a, len, xr, w, terms);
        break;
      default:
        Multi256<4, 1, kHalfAcc>(a, len, xr, w, terms);
        break;
    }
  }
}

// The same tiles on binary16 buffers (IEEE bit patterns): x and w are widened by F16C as they
// are loaded, the accumulators start at +0 (`first`) or from acc and are stored back narrowed,
// which is exact (every kHalf accumulator is a binary16 value). So no binary32 copies of the
// operands or of the result are made; each output gets the steps of Multi256, in the same order.
__attribute__((target("avx2,f16c,fma"))) inline __m256 LoadHalf8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

__attribute__((target("avx2,f16c,fma"))) inline float HalfBitsToFloat(uint16_t h) {
  return _cvtsh_ss(h);
}

template <int R, int NV>
__attribute__((target("avx2,f16c,fma"))) inline void BlockHalf256(uint16_t* const* acc, int64_t l,
                                                                  bool first,
                                                                  const uint16_t* const* x,
                                                                  const uint16_t* const* w,
                                                                  int64_t terms) {
  __m256 a[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      a[r][v] = first ? _mm256_setzero_ps() : LoadHalf8(acc[r] + l + 8 * v);
  for (int64_t t = 0; t < terms; ++t) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const __m256 wv = LoadHalf8(w[t] + l + 8 * v);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        a[r][v] = HalfStep256(a[r][v], LoadHalf8(x[r * terms + t] + l + 8 * v), wv);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(acc[r] + l + 8 * v),
                       _mm256_cvtps_ph(a[r][v], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
}

template <int R, int NV>
__attribute__((target("avx2,f16c,fma"))) void MultiHalf256(uint16_t* const* acc, int64_t len,
                                                           bool first, const uint16_t* const* x,
                                                           const uint16_t* const* w,
                                                           int64_t terms) {
  int64_t l = 0;
  for (; l + 8 * NV <= len; l += 8 * NV) BlockHalf256<R, NV>(acc, l, first, x, w, terms);
  for (; l + 8 <= len; l += 8) BlockHalf256<R, 1>(acc, l, first, x, w, terms);
  for (; l < len; ++l) {
    for (int r = 0; r < R; ++r) {
      float a = first ? 0.0f : HalfBitsToFloat(acc[r][l]);
      for (int64_t t = 0; t < terms; ++t) {
        a = HalfFmaStep(a, HalfBitsToFloat(x[r * terms + t][l]), HalfBitsToFloat(w[t][l]));
      }
      acc[r][l] = _cvtss_sh(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    }
  }
}

// Rows in groups as Multi256Dispatch.
__attribute__((target("avx2,f16c,fma"))) void MultiHalf256Dispatch(int rows, uint16_t* const* acc,
                                                                   int64_t len, bool first,
                                                                   const uint16_t* const* x,
                                                                   const uint16_t* const* w,
                                                                   int64_t terms) {
  for (int r0 = 0; r0 < rows; r0 += 4) {
    const int m = rows - r0 < 4 ? rows - r0 : 4;
    uint16_t* const* a = acc + r0;
    const uint16_t* const* xr = x + r0 * terms;
    switch (m) {
      case 1:
        MultiHalf256<1, 4>(a, len, first, xr, w, terms);
        break;
      case 2:
        MultiHalf256<2, 2>(a, len, first, xr, w, terms);
        break;
      case 3:
        MultiHalf256<3, 2>(a, len, first, xr, w, terms);
        break;
      default:
        MultiHalf256<4, 1>(a, len, first, xr, w, terms);
        break;
    }
  }
}

// Stride 1 and dilation 1 along W: the R outputs q0 .. q0+R-1 of one row read, for tap (kh, kw),
// the x vectors of positions q0 + i + kw, so one window of R x vectors per kernel row serves
// every kw, shifted by one position per tap (R + KW - 1 loads instead of R * KW, and no pointer
// per step). xp: per kernel row kh, the R + KW - 1 positions' rows of L binary16 lanes (a zero
// row where the position is padding); wp: the KH * KW taps' filter rows. Each output gets the
// steps of MultiHalf256 in the same order ((kh, kw) ascending from +0, padded positions zeros
// that take part), so the bits are the same.
template <int R>
__attribute__((target("avx2,f16c,fma"))) void SlideHalf256(uint16_t* const* acc, int64_t len,
                                                           const uint16_t* const* xp,
                                                           const uint16_t* const* wp, int64_t kh_n,
                                                           int64_t kw_n) {
  const int64_t span = R + kw_n - 1;
  int64_t l = 0;
  for (; l + 8 <= len; l += 8) {
    __m256 a[R];
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) a[i] = _mm256_setzero_ps();
    for (int64_t kh = 0; kh < kh_n; ++kh) {
      const uint16_t* const* xr = xp + kh * span;
      const uint16_t* const* wr = wp + kh * kw_n;
      __m256 win[R];
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) win[i] = LoadHalf8(xr[i] + l);
      for (int64_t kw = 0; kw < kw_n; ++kw) {
        const __m256 wv = LoadHalf8(wr[kw] + l);
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) a[i] = HalfStep256(a[i], win[i], wv);
        if (kw + 1 < kw_n) {
#pragma GCC unroll 8
          for (int i = 0; i + 1 < R; ++i) win[i] = win[i + 1];
          win[R - 1] = LoadHalf8(xr[R + kw] + l);
        }
      }
    }
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(acc[i] + l),
                       _mm256_cvtps_ph(a[i], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
  }
  for (; l < len; ++l) {
    for (int i = 0; i < R; ++i) {
      float a = 0.0f;
      for (int64_t kh = 0; kh < kh_n; ++kh) {
        for (int64_t kw = 0; kw < kw_n; ++kw) {
          a = HalfFmaStep(a, HalfBitsToFloat(xp[kh * span + i + kw][l]),
                          HalfBitsToFloat(wp[kh * kw_n + kw][l]));
        }
      }
      acc[i][l] = _cvtss_sh(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    }
  }
}
constexpr int kSlideRows = 4;  // R: 4 accumulators + 4 window vectors + the step's constants
#endif

// The path of the shared accumulation primitive (it honours TF_FP16OPS_CPU_ISA), so the ISA a
// process reports holds for this functor too.
enum class Path { kScalar, kAvx2, kAvx512 };

Path ChosenPath() {
  // AVX512-FP16 CPUs have AVX-512 and run its kernels (the same bits: every path is exact).
  static const Path path =
      std::strcmp(AccumulateIsa(), "avx512") == 0 || std::strcmp(AccumulateIsa(), "avx512fp16") == 0
          ? Path::kAvx512
      : std::strcmp(AccumulateIsa(), "avx2") == 0 ? Path::kAvx2
                                                  : Path::kScalar;
  return path;
}

// Up to kElemRows rows sharing w (x as [rows][terms]): the multi-row AVX-512 or AVX2 kernel, or
// ElementwiseScalar per row on the scalar path (the same bits).
constexpr int kElemRows = 8;
void ElementwiseRows(Accumulation accumulation, int rows, float* const* acc, int64_t len,
                     const float* const* x, const float* const* w, int64_t terms) {
  if (rows <= 0 || len <= 0 || terms <= 0) return;
#if defined(__x86_64__)
  const bool half = accumulation == Accumulation::kHalf;
  if (ChosenPath() == Path::kAvx512) {
    half ? Multi512Dispatch<true>(rows, acc, len, x, w, terms)
         : Multi512Dispatch<false>(rows, acc, len, x, w, terms);
    return;
  }
  if (ChosenPath() == Path::kAvx2) {
    half ? Multi256Dispatch<true>(rows, acc, len, x, w, terms)
         : Multi256Dispatch<false>(rows, acc, len, x, w, terms);
    return;
  }
#endif
  for (int r = 0; r < rows; ++r)
    ElementwiseScalar(accumulation, acc[r], len, x + r * terms, w, terms);
}

// Terms are handed to the kernels at most kTermChunk at a time (t stays ascending; the
// accumulators are stored exactly between chunks), so that no pointer table grows with the
// reduction length.
constexpr int64_t kTermChunk = 512;

}  // namespace

namespace {

// With a depth multiplier M > 1, lane c*M + m reads input channel c: the input is expanded once
// to [N, H, W, C*M] so that every lane reads its own element. Returns x itself when M = 1.
const float* ExpandChannels(const ConvGeometry& g, int64_t M, const float* x,
                            std::vector<float>* expanded, const ParallelFor& parallel_for) {
  if (M <= 1) return x;
  const int64_t L = g.K;
  expanded->resize(static_cast<size_t>(g.N * g.H * g.W * L));
  parallel_for(g.N * g.H * g.W, std::max<int64_t>(1, L), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float* src = x + i * g.C;
      float* dst = expanded->data() + i * L;
      for (int64_t c = 0; c < g.C; ++c) std::fill(dst + c * M, dst + (c + 1) * M, src[c]);
    }
  });
  return expanded->data();
}

}  // namespace

void DepthwiseFprop(const ConvGeometry& g, Accumulation acc, const float* x, const float* w,
                    float* y, const ParallelFor& parallel_for) {
  const int64_t M = g.K / g.groups;  // the depth multiplier (groups = C)
  const int64_t L = g.K;             // C * M lanes, output channel c * M + m
  if (L == 0 || g.N == 0 || g.P == 0 || g.Q == 0) return;
  const int64_t T = g.KH * g.KW;
  std::vector<float> expanded;
  const float* xs = ExpandChannels(g, M, x, &expanded, parallel_for);
  const int64_t chunk = std::min(T, kTermChunk);
  const int64_t rows = g.N * g.P;  // one shard unit: one output row (n, p)
  const int64_t cost = std::max<int64_t>(1, 2 * g.Q * T * L);
  parallel_for(rows, cost, [&](int64_t begin, int64_t end) {
    const std::vector<float> zeros(static_cast<size_t>(L), 0.0f);
    std::vector<const float*> xp(static_cast<size_t>(kElemRows * chunk));
    std::vector<const float*> wp(static_cast<size_t>(chunk));
    float* accs[kElemRows];
    for (int64_t r = begin; r < end; ++r) {
      const int64_t n = r / g.P;
      const int64_t p = r % g.P;
      float* yrow = y + r * g.Q * L;
      std::fill(yrow, yrow + g.Q * L, 0.0f);
      // kElemRows output positions at once, each over (kh, kw) ascending.
      for (int64_t q0 = 0; q0 < g.Q; q0 += kElemRows) {
        const int m = static_cast<int>(std::min<int64_t>(kElemRows, g.Q - q0));
        for (int i = 0; i < m; ++i) accs[i] = yrow + (q0 + i) * L;
        for (int64_t t0 = 0; t0 < T; t0 += chunk) {
          const int64_t nt = std::min(chunk, T - t0);
          for (int64_t j = 0; j < nt; ++j) {
            const int64_t kh = (t0 + j) / g.KW, kw = (t0 + j) % g.KW;
            wp[j] = w + (t0 + j) * L;
            const int64_t h = p * g.stride_h - g.pad_top + kh * g.dilation_h;
            for (int i = 0; i < m; ++i) {
              const int64_t wi = (q0 + i) * g.stride_w - g.pad_left + kw * g.dilation_w;
              const bool inside = h >= 0 && h < g.H && wi >= 0 && wi < g.W;
              xp[i * nt + j] = inside ? xs + ((n * g.H + h) * g.W + wi) * L : zeros.data();
            }
          }
          ElementwiseRows(acc, m, accs, L, xp.data(), wp.data(), nt);
        }
      }
    }
  });
}

bool DepthwiseFpropHalfBuffers(const ConvGeometry& g, const uint16_t* x, const uint16_t* w,
                               uint16_t* y, const ParallelFor& parallel_for) {
#if defined(__x86_64__)
  const int64_t M = g.K / g.groups;  // the depth multiplier (groups = C)
  const int64_t L = g.K;             // C lanes (M = 1), output channel c
  const Path path = ChosenPath();
  if (path == Path::kScalar || M != 1) return false;
  if (L == 0 || g.N == 0 || g.P == 0 || g.Q == 0) return false;
  const int64_t T = g.KH * g.KW;
  const int64_t chunk = std::min(T, kTermChunk);
  const int64_t rows = g.N * g.P;  // one shard unit: one output row (n, p)
  const int64_t cost = std::max<int64_t>(1, 2 * g.Q * T * L);
  // AVX2 with stride and dilation 1 along W and every term in one chunk: SlideHalf256 on whole
  // blocks of kSlideRows outputs (the rest of a row as below).
  const bool slide = path == Path::kAvx2 && g.stride_w == 1 && g.dilation_w == 1 && T <= chunk;
  const int64_t span = kSlideRows + g.KW - 1;
  parallel_for(rows, cost, [&](int64_t begin, int64_t end) {
    const std::vector<uint16_t> zeros(static_cast<size_t>(L), 0);  // binary16 +0
    std::vector<const uint16_t*> xp(static_cast<size_t>(kElemRows * chunk));
    std::vector<const uint16_t*> wp(static_cast<size_t>(chunk));
    std::vector<const uint16_t*> sx(slide ? static_cast<size_t>(g.KH * span) : 0);
    uint16_t* accs[kElemRows];
    if (slide) {
      for (int64_t t = 0; t < T; ++t) wp[t] = w + t * L;
    }
    for (int64_t r = begin; r < end; ++r) {
      const int64_t n = r / g.P;
      const int64_t p = r % g.P;
      uint16_t* yrow = y + r * g.Q * L;
      int64_t q_done = 0;
      if (slide) {
        for (; q_done + kSlideRows <= g.Q; q_done += kSlideRows) {
          for (int64_t kh = 0; kh < g.KH; ++kh) {
            const int64_t h = p * g.stride_h - g.pad_top + kh * g.dilation_h;
            for (int64_t j = 0; j < span; ++j) {
              const int64_t wi = q_done + j - g.pad_left;
              const bool inside = h >= 0 && h < g.H && wi >= 0 && wi < g.W;
              sx[kh * span + j] = inside ? x + ((n * g.H + h) * g.W + wi) * L : zeros.data();
            }
          }
          for (int i = 0; i < kSlideRows; ++i) accs[i] = yrow + (q_done + i) * L;
          SlideHalf256<kSlideRows>(accs, L, sx.data(), wp.data(), g.KH, g.KW);
        }
      }
      // kElemRows output positions at once, each over (kh, kw) ascending from +0.
      for (int64_t q0 = q_done; q0 < g.Q; q0 += kElemRows) {
        const int m = static_cast<int>(std::min<int64_t>(kElemRows, g.Q - q0));
        for (int i = 0; i < m; ++i) accs[i] = yrow + (q0 + i) * L;
        for (int64_t t0 = 0; t0 < T; t0 += chunk) {
          const int64_t nt = std::min(chunk, T - t0);
          for (int64_t j = 0; j < nt; ++j) {
            const int64_t kh = (t0 + j) / g.KW, kw = (t0 + j) % g.KW;
            wp[j] = w + (t0 + j) * L;
            const int64_t h = p * g.stride_h - g.pad_top + kh * g.dilation_h;
            for (int i = 0; i < m; ++i) {
              const int64_t wi = (q0 + i) * g.stride_w - g.pad_left + kw * g.dilation_w;
              const bool inside = h >= 0 && h < g.H && wi >= 0 && wi < g.W;
              xp[i * nt + j] = inside ? x + ((n * g.H + h) * g.W + wi) * L : zeros.data();
            }
          }
          if (path == Path::kAvx512) {
            kMultiHalf512[m - 1](accs, L, t0 == 0, xp.data(), wp.data(), nt);
          } else {
            MultiHalf256Dispatch(m, accs, L, t0 == 0, xp.data(), wp.data(), nt);
          }
        }
      }
    }
  });
  return true;
#else
  (void)g, (void)x, (void)w, (void)y, (void)parallel_for;
  return false;
#endif
}

namespace {

// DgradRows and WgradRows run on element type E (float buffers holding the values, or binary16
// bit patterns) through rows_fn(m, accs, len, first, x, w, terms): m rows sharing w over `terms`
// steps, the accumulators from +0 when `first` (the float rows read the zeros stored here) or
// from acc. Both store +0 first in every output they own, so outputs without terms stay +0.

// dgrad of a problem with one input channel per group on rows of C lanes: dy [N, P, Q, M, C] and
// w [KH, KW, M, C] (M = 1: the op's own layouts; M > 1: the transposed copies of DepthwiseDgrad).
// `slide` (binary16 buffers on AVX2, M = 1, stride and dilation 1 along W, KH * KW <= kTermChunk):
// blocks of kSlideRows columns that every filter column reaches run SlideHalf256. Column wi + i
// takes, for tap kw, dy at q = wi + i + pad_left - kw; with the outputs in reverse order
// (i' = R - 1 - i) that is window position i' + kw of the positions q = wi + pad_left + R - 1 - j,
// j = 0 .. R + KW - 2, so the kernel's taps (kh, kw) ascending from +0 are this function's.
template <typename E, typename Rows>
void DgradRows(const ConvGeometry& g, int64_t M, const E* dyc, const E* wc, E* dx,
               const ParallelFor& parallel_for, const Rows& rows_fn, bool slide) {
  const int64_t C = g.C;
#if defined(__x86_64__)
  // The columns every filter column reaches (stride 1): wi + pad_left - kw in [0, Q) for all kw.
  const int64_t inner_lo = std::max<int64_t>(0, g.KW - 1 - g.pad_left);
  const int64_t inner_hi = std::min<int64_t>(g.W, g.Q - g.pad_left);
  const int64_t span = kSlideRows + g.KW - 1;
#else
  (void)slide;
#endif
  const int64_t rows = g.N * g.H;  // one shard unit: one input row (n, h)
  const int64_t cost = std::max<int64_t>(1, 2 * g.W * g.KH * g.KW * g.K);
  parallel_for(rows, cost, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> khs, ps, kws, batch_kws, q_of;
    std::vector<int64_t> qs[kElemRows];
    std::vector<const E*> xp(static_cast<size_t>(kElemRows * kTermChunk));
    std::vector<const E*> wp(static_cast<size_t>(kTermChunk));
    E* accs[kElemRows];
    std::vector<const E*> sx, sw;  // SlideHalf256's window and tap tables
    for (int64_t r = begin; r < end; ++r) {
      const int64_t n = r / g.H, h = r % g.H;
      E* dxrow = dx + r * g.W * C;
      std::fill(dxrow, dxrow + g.W * C, E(0));  // +0 in both element types
      khs.clear();
      ps.clear();
      for (int64_t kh = 0; kh < g.KH; ++kh) {  // the filter rows that reach row h, ascending
        const int64_t ph = h + g.pad_top - kh * g.dilation_h;
        if (ph < 0 || ph % g.stride_h != 0 || ph / g.stride_h >= g.P) continue;
        khs.push_back(kh);
        ps.push_back(ph / g.stride_h);
      }
      if (khs.empty()) continue;
      // Columns whose valid filter columns (kw) are the same run as one batch of rows; each
      // column sums over (kh, kw, m) ascending, visiting only the (p, q) that exist.
      int m_rows = 0;
      auto flush = [&]() {
        if (m_rows == 0) return;
        const int64_t per_kh = static_cast<int64_t>(batch_kws.size()) * M;
        const int64_t total = static_cast<int64_t>(khs.size()) * per_kh;
        for (int64_t t0 = 0; t0 < total; t0 += kTermChunk) {
          const int64_t nt = std::min(kTermChunk, total - t0);
          for (int64_t j = 0; j < nt; ++j) {
            const int64_t t = t0 + j;
            const int64_t a = t / per_kh, b = (t % per_kh) / M, mm = t % M;
            wp[j] = wc + ((khs[a] * g.KW + batch_kws[b]) * M + mm) * C;
            for (int i = 0; i < m_rows; ++i) {
              xp[i * nt + j] = dyc + (((n * g.P + ps[a]) * g.Q + qs[i][b]) * M + mm) * C;
            }
          }
          rows_fn(m_rows, accs, C, t0 == 0, xp.data(), wp.data(), nt);
        }
        m_rows = 0;
      };
#if defined(__x86_64__)
      if constexpr (std::is_same<E, uint16_t>::value) {
        if (slide) {
          const int64_t kh_n = static_cast<int64_t>(khs.size());
          sw.resize(static_cast<size_t>(kh_n * g.KW));
          sx.resize(static_cast<size_t>(kh_n * span));
          for (int64_t a = 0; a < kh_n; ++a)
            for (int64_t kw = 0; kw < g.KW; ++kw) sw[a * g.KW + kw] = wc + (khs[a] * g.KW + kw) * C;
        }
      }
#endif
      for (int64_t wi = 0; wi < g.W; ++wi) {
#if defined(__x86_64__)
        if constexpr (std::is_same<E, uint16_t>::value) {
          if (slide && wi >= inner_lo && wi + kSlideRows <= inner_hi) {
            flush();
            const int64_t kh_n = static_cast<int64_t>(khs.size());
            for (int64_t a = 0; a < kh_n; ++a) {
              const E* dyrow = dyc + (n * g.P + ps[a]) * g.Q * C;
              for (int64_t j = 0; j < span; ++j)
                sx[a * span + j] = dyrow + (wi + g.pad_left + kSlideRows - 1 - j) * C;
            }
            for (int i = 0; i < kSlideRows; ++i) accs[i] = dxrow + (wi + kSlideRows - 1 - i) * C;
            SlideHalf256<kSlideRows>(accs, C, sx.data(), sw.data(), kh_n, g.KW);
            wi += kSlideRows - 1;
            continue;
          }
        }
#endif
        kws.clear();
        q_of.clear();
        for (int64_t kw = 0; kw < g.KW; ++kw) {
          const int64_t qw = wi + g.pad_left - kw * g.dilation_w;
          if (qw < 0 || qw % g.stride_w != 0 || qw / g.stride_w >= g.Q) continue;
          kws.push_back(kw);
          q_of.push_back(qw / g.stride_w);
        }
        if (kws.empty()) continue;  // no term: dx stays +0
        if (m_rows > 0 && (kws != batch_kws || m_rows == kElemRows)) flush();
        if (m_rows == 0) batch_kws = kws;
        accs[m_rows] = dxrow + wi * C;
        qs[m_rows].swap(q_of);
        ++m_rows;
      }
      flush();
    }
  });
}

// wgrad of a problem with one input channel per group on rows of lanes: x [N, H, W, L] (the
// expanded input where M > 1), dy [N, P, Q, L], dw [KH, KW, 1, L].
template <typename E, typename Rows>
void WgradRows(const ConvGeometry& g, const E* xs, const E* dy, E* dw,
               const ParallelFor& parallel_for, const Rows& rows_fn) {
  const int64_t L = g.K;  // lanes: the C*M filter columns of a tap, dw[kh, kw, 0, c*M + m]
  const int64_t T = g.KH * g.KW;
  // One shard unit: up to kElemRows taps (the rows, sharing the dy operand) x one lane block.
  const int64_t tap_batches = (T + kElemRows - 1) / kElemRows;
  const int64_t taps_per = (T + tap_batches - 1) / tap_batches;  // balanced
  constexpr int64_t kLaneBlock = 32;
  const int64_t lane_blocks = (L + kLaneBlock - 1) / kLaneBlock;
  const int64_t terms = g.N * g.P * g.Q;     // the reduction (n, p, q), ascending
  int64_t cost = 2 * taps_per * kLaneBlock;  // flops per unit, saturating (a shard estimate)
  if (__builtin_mul_overflow(cost, terms, &cost)) cost = std::numeric_limits<int64_t>::max();
  parallel_for(tap_batches * lane_blocks, cost, [&](int64_t begin, int64_t end) {
    const std::vector<E> zeros(static_cast<size_t>(kLaneBlock), E(0));
    std::vector<const E*> xp(static_cast<size_t>(kElemRows * kTermChunk));
    std::vector<const E*> wp(static_cast<size_t>(kTermChunk));
    E* accs[kElemRows];
    for (int64_t u = begin; u < end; ++u) {
      const int64_t tb = u / lane_blocks, l0 = (u % lane_blocks) * kLaneBlock;
      const int64_t len = std::min(kLaneBlock, L - l0);
      const int64_t t_first = tb * taps_per;
      const int m = static_cast<int>(std::min(taps_per, T - t_first));
      for (int i = 0; i < m; ++i) {
        accs[i] = dw + (t_first + i) * L + l0;
        std::fill(accs[i], accs[i] + len, E(0));
      }
      for (int64_t u0 = 0; u0 < terms; u0 += kTermChunk) {
        const int64_t nt = std::min(kTermChunk, terms - u0);
        int64_t q = u0 % g.Q, p = (u0 / g.Q) % g.P, n = u0 / (g.P * g.Q);
        for (int64_t j = 0; j < nt; ++j, ++q) {
          if (q == g.Q) q = 0, ++p;  // (n, p, q) of term u0 + j, counted on
          if (p == g.P) p = 0, ++n;
          const int64_t e = u0 + j;
          wp[j] = dy + e * L + l0;
          for (int i = 0; i < m; ++i) {
            const int64_t kh = (t_first + i) / g.KW, kw = (t_first + i) % g.KW;
            const int64_t h = p * g.stride_h - g.pad_top + kh * g.dilation_h;
            const int64_t wi = q * g.stride_w - g.pad_left + kw * g.dilation_w;
            const bool inside = h >= 0 && h < g.H && wi >= 0 && wi < g.W;
            xp[i * nt + j] = inside ? xs + ((n * g.H + h) * g.W + wi) * L + l0 : zeros.data();
          }
        }
        rows_fn(m, accs, len, u0 == 0, xp.data(), wp.data(), nt);
      }
    }
  });
}

// The binary16-buffer rows of the path (AVX-512 or AVX2; callers rule out the scalar path).
void HalfRows(int m, uint16_t* const* accs, int64_t len, bool first, const uint16_t* const* x,
              const uint16_t* const* w, int64_t terms) {
#if defined(__x86_64__)
  if (ChosenPath() == Path::kAvx512) {
    kMultiHalf512[m - 1](accs, len, first, x, w, terms);
  } else {
    MultiHalf256Dispatch(m, accs, len, first, x, w, terms);
  }
#else
  (void)m, (void)accs, (void)len, (void)first, (void)x, (void)w, (void)terms;
#endif
}

// The rows of DgradRows / WgradRows on float buffers: ElementwiseRows, which reads the +0 those
// functions store, so `first` needs no handling.
auto FloatRows(Accumulation acc) {
  return [acc](int m, float* const* accs, int64_t len, bool /*first*/, const float* const* x,
               const float* const* w,
               int64_t terms) { ElementwiseRows(acc, m, accs, len, x, w, terms); };
}

// The binary16-buffer gradients apply with one filter per channel on a vector path.
bool HalfBuffersApply(const ConvGeometry& g) {
#if defined(__x86_64__)
  return ChosenPath() != Path::kScalar && g.K == g.groups && g.Cg == 1 && g.groups == g.C;
#else
  (void)g;
  return false;
#endif
}

}  // namespace

void DepthwiseDgrad(const ConvGeometry& g, Accumulation acc, const float* dy, const float* w,
                    float* dx, const ParallelFor& parallel_for) {
  if (!HasWork(g)) {  // no (p, q), or no term reaches any input element
    std::fill(dx, dx + g.InputElements(), 0.0f);
    return;
  }
  const int64_t C = g.C;             // the lanes: input channels
  const int64_t M = g.K / g.groups;  // terms (kh, kw, m) per input element
  // Lane c of term m reads dy[..., c*M + m] and w[kh, kw, 0, c*M + m]: with M > 1 both are
  // transposed once to [..., M, C], so that every term is a contiguous row of C lanes.
  std::vector<float> dyt, wt;
  const float* dyc = dy;
  const float* wc = w;
  if (M > 1) {
    dyt.resize(static_cast<size_t>(g.OutputElements()));
    wt.resize(static_cast<size_t>(g.FilterElements()));
    parallel_for(g.N * g.P * g.Q, std::max<int64_t>(1, g.K), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        for (int64_t c = 0; c < C; ++c)
          for (int64_t m = 0; m < M; ++m) dyt[(i * M + m) * C + c] = dy[i * g.K + c * M + m];
    });
    for (int64_t t = 0; t < g.KH * g.KW; ++t)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t m = 0; m < M; ++m) wt[(t * M + m) * C + c] = w[t * g.K + c * M + m];
    dyc = dyt.data();
    wc = wt.data();
  }
  DgradRows<float>(g, M, dyc, wc, dx, parallel_for, FloatRows(acc), /*slide=*/false);
}

bool DepthwiseDgradHalfBuffers(const ConvGeometry& g, const uint16_t* dy, const uint16_t* w,
                               uint16_t* dx, const ParallelFor& parallel_for) {
  if (!HalfBuffersApply(g)) return false;
  if (!HasWork(g)) {
    std::fill(dx, dx + g.InputElements(), uint16_t{0});
    return true;
  }
#if defined(__x86_64__)
  const bool slide = ChosenPath() == Path::kAvx2 && g.stride_w == 1 && g.dilation_w == 1 &&
                     g.KH * g.KW <= kTermChunk;
#else
  const bool slide = false;
#endif
  DgradRows<uint16_t>(g, 1, dy, w, dx, parallel_for, HalfRows, slide);
  return true;
}

void DepthwiseWgrad(const ConvGeometry& g, Accumulation acc, const float* x, const float* dy,
                    float* dw, const ParallelFor& parallel_for) {
  // Checked first: an empty batch or output leaves every sum empty (+0).
  if (!HasWork(g)) {
    std::fill(dw, dw + g.FilterElements(), 0.0f);
    return;
  }
  const int64_t M = g.K / g.groups;
  std::vector<float> expanded;
  const float* xs = ExpandChannels(g, M, x, &expanded, parallel_for);
  WgradRows<float>(g, xs, dy, dw, parallel_for, FloatRows(acc));
}

bool DepthwiseWgradHalfBuffers(const ConvGeometry& g, const uint16_t* x, const uint16_t* dy,
                               uint16_t* dw, const ParallelFor& parallel_for) {
  if (!HalfBuffersApply(g)) return false;
  if (!HasWork(g)) {
    std::fill(dw, dw + g.FilterElements(), uint16_t{0});
    return true;
  }
  WgradRows<uint16_t>(g, x, dy, dw, parallel_for, HalfRows);
  return true;
}

}  // namespace cpu
}  // namespace tf_fp16ops
