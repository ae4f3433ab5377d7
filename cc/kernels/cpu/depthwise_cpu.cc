#include "cc/kernels/cpu/depthwise_cpu.h"

#include "cc/kernels/cpu/depthwise_fp16.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
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

// The sliding kernels read float copies of the binary16 rows (RowCache below) and of the filter:
// on a Zen 1 the F16C conversions of the step (binary32 -> binary16 -> binary32) bound its rate,
// and widening the operands as they are loaded added 0.75 more per step (R + KW - 1 window
// vectors and KW filter vectors per R * KW steps); the copies widen each input row about once
// (the next output rows of the shard reuse it). R outputs of one row, i = 0 .. R-1, each over the
// KH' kernel rows `xr` (a = 0 .. kh_n-1) and KW taps ascending: for output i and tap kw the step
// reads xr[a] + i * ld + kw * kw_step (lanes l) and wr[a * kw_n + kw]. Each output gets the steps
// of MultiHalf256 in the same order ((kh, kw) ascending from +0, padded positions +0 that take
// part), so the bits are the same.
//
// The outputs are stored as HalfFpropIo's epilogue: Out = uint16_t the binary16 value of
// sum (+ bias[l] in binary32 where bias is given), Out = float the same in binary32.
template <int R, typename Out>
__attribute__((target("avx2,f16c,fma"))) void SlideRows256(Out* const* acc, int64_t len,
                                                           const float* const* xr, int64_t ld,
                                                           int64_t kw_step, const float* const* wr,
                                                           int64_t kh_n, int64_t kw_n,
                                                           const float* bias) {
  constexpr bool kHalfOut = std::is_same<Out, uint16_t>::value;
  int64_t l = 0;
  for (; l + 8 <= len; l += 8) {
    __m256 a[R];
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) a[i] = _mm256_setzero_ps();
    for (int64_t kh = 0; kh < kh_n; ++kh) {
      const float* x = xr[kh] + l;
      const float* const* w = wr + kh * kw_n;
      for (int64_t kw = 0; kw < kw_n; ++kw, x += kw_step) {
        const __m256 wv = _mm256_loadu_ps(w[kw] + l);
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) a[i] = HalfStep256(a[i], _mm256_loadu_ps(x + i * ld), wv);
      }
    }
    const __m256 b = bias != nullptr ? _mm256_loadu_ps(bias + l) : _mm256_setzero_ps();
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      const __m256 v = bias != nullptr ? _mm256_add_ps(a[i], b) : a[i];
      if constexpr (kHalfOut) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(acc[i] + l),
                         _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      } else {
        _mm256_storeu_ps(acc[i] + l, v);
      }
    }
  }
  for (; l < len; ++l) {
    for (int i = 0; i < R; ++i) {
      float a = 0.0f;
      for (int64_t kh = 0; kh < kh_n; ++kh) {
        for (int64_t kw = 0; kw < kw_n; ++kw) {
          a = HalfFmaStep(a, xr[kh][i * ld + kw * kw_step + l], wr[kh * kw_n + kw][l]);
        }
      }
      if (bias != nullptr) a += bias[l];
      if constexpr (kHalfOut) {
        acc[i][l] = _cvtss_sh(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      } else {
        acc[i][l] = a;
      }
    }
  }
}
constexpr int kSlideRows = 4;  // R: 4 accumulators, the filter vector and the step's constants
template <typename Out>
using SlideRowsFn = void (*)(Out* const*, int64_t, const float* const*, int64_t, int64_t,
                             const float* const*, int64_t, int64_t, const float*);
// SlideRows256<m, Out>, m = 1 .. kSlideRows (the rest of a row runs a narrower block).
template <typename Out>
constexpr SlideRowsFn<Out> kSlideRows256[kSlideRows] = {
    &SlideRows256<1, Out>, &SlideRows256<2, Out>, &SlideRows256<3, Out>, &SlideRows256<4, Out>};

// SlideRows256 with 16 lanes per step (HalfStep512, the steps of MultiHalf512 in the same
// order): on a Zen 4 MultiHalf512, which widens every x vector as it is loaded, ran the
// 8x56x56x144 * 3x3 forward at 58% of the AVX-512 ceiling in a tf.function; a lane tail of
// fewer than 16 reads the float copies masked and stores through StoreHalf16.
template <int R, typename Out>
__attribute__((target("avx512f,avx512vl,avx512dq,f16c,fma"))) void SlideRows512(
    Out* const* acc, int64_t len, const float* const* xr, int64_t ld, int64_t kw_step,
    const float* const* wr, int64_t kh_n, int64_t kw_n, const float* bias) {
  for (int64_t l = 0; l < len; l += 16) {
    const int64_t n = len - l;
    const __mmask16 mask =
        n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
    __m512 a[R];
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) a[i] = _mm512_setzero_ps();
    for (int64_t kh = 0; kh < kh_n; ++kh) {
      const float* x = xr[kh] + l;
      const float* const* w = wr + kh * kw_n;
      for (int64_t kw = 0; kw < kw_n; ++kw, x += kw_step) {
        const __m512 wv = _mm512_maskz_loadu_ps(mask, w[kw] + l);
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) {
          a[i] = HalfStep512(a[i], _mm512_maskz_loadu_ps(mask, x + i * ld), wv);
        }
      }
    }
    const __m512 b = bias != nullptr ? _mm512_maskz_loadu_ps(mask, bias + l) : _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      const __m512 v = bias != nullptr ? _mm512_add_ps(a[i], b) : a[i];
      if constexpr (std::is_same<Out, uint16_t>::value) {
        StoreHalf16(acc[i] + l, n, v);
      } else {
        _mm512_mask_storeu_ps(acc[i] + l, mask, v);
      }
    }
  }
}
constexpr int kSlideRows512 = 8;  // R: 8 accumulators (16 spilled and ran 10-20% slower, Zen 4)
// SlideRows512<m, Out>, m = 1 .. kSlideRows512.
template <typename Out>
constexpr SlideRowsFn<Out> kSlideRows512Fns[kSlideRows512] = {
    &SlideRows512<1, Out>, &SlideRows512<2, Out>, &SlideRows512<3, Out>, &SlideRows512<4, Out>,
    &SlideRows512<5, Out>, &SlideRows512<6, Out>, &SlideRows512<7, Out>, &SlideRows512<8, Out>};

// wgrad's sliding kernel: R taps of one lane block, each summing over the Q outputs of one dy row
// in ascending order, on float copies. acc: R rows of `len` floats (binary16 values), loaded at
// the start and stored at the end; tap i reads x at xr[i] + q * x_step and dy at dyr + q * len
// (lanes l). The steps are those of MultiHalf256 in the same order, so the bits are the same.
// WgradSlideBlock: V vectors of 8 lanes from lane l (R x V accumulators); up to kWgradPairTaps
// taps run two vectors at once.
constexpr int kWgradPairTaps = 4;
template <int R, int V>
__attribute__((target("avx2,f16c,fma"))) inline void WgradSlideBlock(
    float* acc, int64_t len, int64_t l, const float* const* xr, int64_t x_step, const float* dyr,
    int64_t q_n) {
  __m256 a[R][V];
  const float* x[R];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) a[i][v] = _mm256_loadu_ps(acc + i * len + l + 8 * v);
    x[i] = xr[i] + l;
  }
  const float* d = dyr + l;
  for (int64_t q = 0; q < q_n; ++q, d += len) {
    __m256 dv[V];
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) dv[v] = _mm256_loadu_ps(d + 8 * v);
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v)
        a[i][v] = HalfStep256(a[i][v], _mm256_loadu_ps(x[i] + 8 * v), dv[v]);
      x[i] += x_step;
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) _mm256_storeu_ps(acc + i * len + l + 8 * v, a[i][v]);
  }
}

template <int R>
__attribute__((target("avx2,f16c,fma"))) void WgradSlide256(float* acc, int64_t len,
                                                            const float* const* xr, int64_t x_step,
                                                            const float* dyr, int64_t q_n) {
  int64_t l = 0;
  if constexpr (R <= kWgradPairTaps) {
    for (; l + 16 <= len; l += 16) WgradSlideBlock<R, 2>(acc, len, l, xr, x_step, dyr, q_n);
  }
  for (; l + 8 <= len; l += 8) WgradSlideBlock<R, 1>(acc, len, l, xr, x_step, dyr, q_n);
  for (; l < len; ++l) {
    for (int i = 0; i < R; ++i) {
      float a = acc[i * len + l];
      for (int64_t q = 0; q < q_n; ++q) a = HalfFmaStep(a, xr[i][q * x_step + l], dyr[q * len + l]);
      acc[i * len + l] = a;
    }
  }
}
using WgradSlideFn = void (*)(float*, int64_t, const float* const*, int64_t, const float*, int64_t);
constexpr int kWgradSlideTaps = 8;  // R: 8 accumulators, dy, x and the step's constants
constexpr WgradSlideFn kWgradSlide256[kWgradSlideTaps] = {
    &WgradSlide256<1>, &WgradSlide256<2>, &WgradSlide256<3>, &WgradSlide256<4>,
    &WgradSlide256<5>, &WgradSlide256<6>, &WgradSlide256<7>, &WgradSlide256<8>};

// WgradSlide256 with 16 lanes per vector (HalfStep512, the same steps in the same order): V = 2
// vectors (R * 2 accumulators, 16 at most, with the two dy vectors and the step's constants
// within the 32 registers) over a whole 32-lane block, else one vector at a time, the last one
// masked. On AVX-512 without this kernel the wgrad ran MultiHalf512, which widens every operand
// as it loads it.
template <int R, int V>
__attribute__((target("avx512f,avx512vl,avx512dq,f16c,fma"))) inline void WgradSlideBlock512(
    float* acc, int64_t len, int64_t l, __mmask16 mask, const float* const* xr, int64_t x_step,
    const float* dyr, int64_t q_n) {
  __m512 a[R][V];
  const float* x[R];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) a[i][v] = _mm512_maskz_loadu_ps(mask, acc + i * len + l + 16 * v);
    x[i] = xr[i] + l;
  }
  const float* d = dyr + l;
  for (int64_t q = 0; q < q_n; ++q, d += len) {
    __m512 dv[V];
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) dv[v] = _mm512_maskz_loadu_ps(mask, d + 16 * v);
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) {
        a[i][v] = HalfStep512(a[i][v], _mm512_maskz_loadu_ps(mask, x[i] + 16 * v), dv[v]);
      }
      x[i] += x_step;
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) _mm512_mask_storeu_ps(acc + i * len + l + 16 * v, mask, a[i][v]);
  }
}

template <int R>
__attribute__((target("avx512f,avx512vl,avx512dq,f16c,fma"))) void WgradSlide512(
    float* acc, int64_t len, const float* const* xr, int64_t x_step, const float* dyr,
    int64_t q_n) {
  const __mmask16 all = static_cast<__mmask16>(0xFFFF);
  int64_t l = 0;
  for (; l + 32 <= len; l += 32) WgradSlideBlock512<R, 2>(acc, len, l, all, xr, x_step, dyr, q_n);
  for (; l < len; l += 16) {
    const int64_t n = len - l;
    const __mmask16 mask = n >= 16 ? all : static_cast<__mmask16>((1u << n) - 1u);
    WgradSlideBlock512<R, 1>(acc, len, l, mask, xr, x_step, dyr, q_n);
  }
}
constexpr WgradSlideFn kWgradSlide512[kWgradSlideTaps] = {
    &WgradSlide512<1>, &WgradSlide512<2>, &WgradSlide512<3>, &WgradSlide512<4>,
    &WgradSlide512<5>, &WgradSlide512<6>, &WgradSlide512<7>, &WgradSlide512<8>};

// `runs` runs of `lanes` binary16 values, run j at src + j * src_stride, widened (exactly) to
// dst + j * lanes: contiguous runs by HalfToFloat; strided runs (wgrad's 32-lane runs, one call
// per position) inline: a HalfToFloat call per run measured slower (8x56x56x144 wgrad at
// 54-59% of the probe against 65-67%, one standalone run each).
__attribute__((target("avx2,f16c,fma"))) void WidenRuns(const uint16_t* src, int64_t src_stride,
                                                        float* dst, int64_t runs, int64_t lanes) {
  if (src_stride == lanes) return HalfToFloat(src, dst, runs * lanes);
  for (int64_t j = 0; j < runs; ++j, src += src_stride, dst += lanes) {
    int64_t i = 0;
    for (; i + 8 <= lanes; i += 8) _mm256_storeu_ps(dst + i, LoadHalf8(src + i));
    for (; i < lanes; ++i) dst[i] = HalfBitsToFloat(src[i]);
  }
}

// WidenRuns for binary32 sources: each value rounded to binary16 (to nearest even, F16C) and
// widened back, the value a binary16 copy of the source holds.
__attribute__((target("avx2,f16c,fma"))) void RoundRuns(const float* src, int64_t src_stride,
                                                        float* dst, int64_t runs, int64_t lanes) {
  constexpr int kRne = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  for (int64_t j = 0; j < runs; ++j, src += src_stride, dst += lanes) {
    int64_t i = 0;
    for (; i + 8 <= lanes; i += 8) {
      _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(src + i), kRne)));
    }
    for (; i < lanes; ++i) dst[i] = _cvtsh_ss(_cvtss_sh(src[i], kRne));
  }
}

// `runs` runs of `lanes` floats holding binary16 values, run j from src + j * lanes narrowed
// (exactly) to dst + j * dst_stride by FloatToHalf.
void NarrowRuns(const float* src, uint16_t* dst, int64_t lanes, int64_t runs, int64_t dst_stride) {
  for (int64_t j = 0; j < runs; ++j) FloatToHalf(src + j * lanes, dst + j * dst_stride, lanes);
}

// Float copies of binary16 rows for one shard of a sliding kernel: `slots` rows of `width`
// floats, the copy of each row tagged with its key, so that the next output row reuses the
// rows it shares with this one. The caller gives each row of one output row its own slot.
// Zero-initialized: positions a copy does not write stay +0 (the padding of fprop's rows).
class RowCache {
 public:
  RowCache(int64_t slots, int64_t width)
      : data_(static_cast<size_t>(slots * width), 0.0f),
        tags_(static_cast<size_t>(slots), -1),
        width_(width) {}
  // The copy in `slot` of row `key`: `positions` runs of `lanes` binary16 values, run j at
  // src + j * src_stride, widened to row positions offset + j (`lanes` floats each).
  // A binary32 source (Src = float) is rounded to binary16 values (RoundRuns).
  template <typename Src>
  const float* Get(int64_t slot, int64_t key, const Src* src, int64_t offset, int64_t positions,
                   int64_t src_stride, int64_t lanes) {
    float* row = data_.data() + slot * width_;
    if (tags_[static_cast<size_t>(slot)] != key) {
      tags_[static_cast<size_t>(slot)] = key;
      if constexpr (std::is_same<Src, float>::value) {
        RoundRuns(src, src_stride, row + offset * lanes, positions, lanes);
      } else {
        WidenRuns(src, src_stride, row + offset * lanes, positions, lanes);
      }
    }
    return row;
  }

 private:
  std::vector<float> data_;
  std::vector<int64_t> tags_;
  int64_t width_;
};
// The float copies of one shard (rows, zero row, filter, accumulators) stay within this many
// floats (else the kernels without copies run): 8 MiB per worker thread.
constexpr int64_t kRowCacheFloats = int64_t{1} << 21;
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

void RoundToHalfValues(const float* src, float* dst, int64_t n) {
  constexpr int64_t kChunk = 1024;
  uint16_t h[kChunk];
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t m = std::min(kChunk, n - i);
    FloatToHalf(src + i, h, m);
    HalfToFloat(h, dst + i, m);
  }
}

namespace {

// A binary16 copy (to nearest even) of the n binary32 values x, converted in parallel.
std::vector<uint16_t> HalfCopy(const float* x, int64_t n, const ParallelFor& parallel_for) {
  std::vector<uint16_t> copy(static_cast<size_t>(n));
  constexpr int64_t kBlock = 4096;
  parallel_for((n + kBlock - 1) / kBlock, 2 * kBlock, [&](int64_t begin, int64_t end) {
    const int64_t lo = begin * kBlock, hi = std::min(n, end * kBlock);
    FloatToHalf(x + lo, copy.data() + lo, hi - lo);
  });
  return copy;
}

void AddBias(float* v, const float* bias, int64_t L) {
  for (int64_t l = 0; l < L; ++l) v[l] += bias[l];
}

// HalfFpropIo's epilogue on n positions of L binary16 sums (acc) to y16 or y32; tmp: L floats.
void HalfSumsEpilogue(const uint16_t* acc, int64_t n, int64_t L, const float* bias, float* tmp,
                      uint16_t* y16, float* y32) {
  for (int64_t q = 0; q < n; ++q) {
    float* v = y32 != nullptr ? y32 + q * L : tmp;
    HalfToFloat(acc + q * L, v, L);
    if (bias != nullptr) AddBias(v, bias, L);
    if (y16 != nullptr) FloatToHalf(v, y16 + q * L, L);
  }
}

}  // namespace

void FpropEpilogue(const float* acc, int64_t rows, int64_t L, const float* bias, uint16_t* y16,
                   float* y32) {
  std::vector<float> tmp(bias != nullptr && y16 != nullptr ? static_cast<size_t>(L) : 0);
  for (int64_t r = 0; r < rows; ++r) {
    const float* a = acc + r * L;
    if (y16 != nullptr) {
      uint16_t* out = y16 + r * L;
      FloatToHalf(a, out, L);  // the op's rounding to T
      if (bias != nullptr) HalfSumsEpilogue(out, 1, L, bias, tmp.data(), out, nullptr);
    } else {
      float* out = y32 + r * L;
      if (out != a) std::copy(a, a + L, out);
      if (bias != nullptr) AddBias(out, bias, L);
    }
  }
}

bool DepthwiseFpropHalfBuffers(const ConvGeometry& g, const uint16_t* x, const uint16_t* w,
                               uint16_t* y, const ParallelFor& parallel_for) {
  HalfFpropIo io;
  io.x16 = x;
  io.y16 = y;
  return DepthwiseFpropHalf(g, w, io, parallel_for);
}

bool DepthwiseFpropHalf(const ConvGeometry& g, const uint16_t* w, const HalfFpropIo& io,
                        const ParallelFor& parallel_for) {
  // AVX512-FP16: 32 binary16 lanes per step on binary16 buffers (a binary16 copy of x32), the
  // epilogue a pass of its own over binary16 sums (the result itself where it is binary16).
  if (DepthwiseFpropFp16Applies(g)) {
    const int64_t L = g.K, rows = g.N * g.P * g.Q;
    std::vector<uint16_t> x_copy, sums;
    const uint16_t* x = io.x16;
    if (x == nullptr) {
      x_copy = HalfCopy(io.x32, g.N * g.H * g.W * g.C, parallel_for);
      x = x_copy.data();
    }
    uint16_t* y = io.y16;
    if (y == nullptr) {
      sums.resize(static_cast<size_t>(rows * L));
      y = sums.data();
    }
    DepthwiseFpropFp16(g, x, w, y, parallel_for);
    if (y == io.y16 && io.bias == nullptr) return true;
    parallel_for(rows, 4 * L, [&](int64_t begin, int64_t end) {
      std::vector<float> tmp(static_cast<size_t>(L));
      const int64_t o = begin * L;
      HalfSumsEpilogue(y + o, end - begin, L, io.bias, tmp.data(),
                       io.y16 != nullptr ? io.y16 + o : nullptr,
                       io.y32 != nullptr ? io.y32 + o : nullptr);
    });
    return true;
  }
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
  // AVX2 or AVX-512 with stride and dilation 1 along W, every term in one chunk and the row
  // copies within kRowCacheFloats: SlideRows256 or SlideRows512 on float copies of the input
  // rows, padded with +0 to the Q + KW - 1 positions an output row reads, and of the filter (the
  // whole row in blocks of kSlideRows (256) or kSlideRows512 outputs and one narrower block).
  const int64_t padded = g.Q + g.KW - 1;  // positions of a padded row (stride 1, dilation 1)
  const bool slide =
      path != Path::kScalar && g.stride_w == 1 && g.dilation_w == 1 && T <= chunk &&
      // the row copies, the zero row and the filter's copy, per worker thread
      ((static_cast<double>(g.KH) + 1) * static_cast<double>(padded) + static_cast<double>(T)) *
              static_cast<double>(L) <=
          static_cast<double>(kRowCacheFloats);
  // x32 where the kernel reads the input in place: a binary16 copy of it.
  std::vector<uint16_t> x_copy;
  if (io.x32 != nullptr && !slide) x_copy = HalfCopy(io.x32, g.N * g.H * g.W * g.C, parallel_for);
  // The binary16 sums go straight to y16 without an epilogue, else to a row of their own.
  const bool direct = io.y16 != nullptr && io.bias == nullptr;
  parallel_for(rows, cost, [&](int64_t begin, int64_t end) {
    const std::vector<uint16_t> zeros(static_cast<size_t>(L), 0);  // binary16 +0
    std::vector<const uint16_t*> xp(static_cast<size_t>(kElemRows * chunk));
    std::vector<const uint16_t*> wp(static_cast<size_t>(chunk));
    uint16_t* accs[kElemRows];
    float* accf[kElemRows];
    std::vector<uint16_t> sums(direct || slide ? 0 : static_cast<size_t>(g.Q * L));
    std::vector<float> tmp(direct || slide ? 0 : static_cast<size_t>(L));
    // Output row r: where its sums go, and its epilogue once they are all there.
    const auto row_sums = [&](int64_t r) { return direct ? io.y16 + r * g.Q * L : sums.data(); };
    const auto finish_row = [&](int64_t r) {
      if (direct) return;
      const int64_t o = r * g.Q * L;
      HalfSumsEpilogue(sums.data(), g.Q, L, io.bias, tmp.data(),
                       io.y16 != nullptr ? io.y16 + o : nullptr,
                       io.y32 != nullptr ? io.y32 + o : nullptr);
    };
#if defined(__x86_64__)
    if (slide) {
      // Input columns 0 .. W-1 at positions pad_left .. (those an output reads: < padded).
      const int64_t w_lo = std::max<int64_t>(0, -g.pad_left);
      const int64_t w_hi = std::min<int64_t>(g.W, padded - g.pad_left);
      const std::vector<float> zero_row(static_cast<size_t>(padded * L), 0.0f);
      std::vector<float> wf(static_cast<size_t>(T * L));
      HalfToFloat(w, wf.data(), T * L);
      std::vector<const float*> wr(static_cast<size_t>(T)), xr(static_cast<size_t>(g.KH)),
          xq(static_cast<size_t>(g.KH));
      for (int64_t t = 0; t < T; ++t) wr[t] = wf.data() + t * L;
      RowCache cache(g.KH, padded * L);
      for (int64_t r = begin; r < end; ++r) {
        const int64_t n = r / g.P;
        const int64_t p = r % g.P;
        for (int64_t kh = 0; kh < g.KH; ++kh) {
          const int64_t h = p * g.stride_h - g.pad_top + kh * g.dilation_h;
          if (h < 0 || h >= g.H || w_hi <= w_lo) {
            xr[kh] = zero_row.data();
            continue;
          }
          // With dilation 1 the rows of one output row are consecutive, so h mod KH is a slot of
          // its own for each, and the next output row finds the rows it shares in place.
          const int64_t slot = g.dilation_h == 1 ? h % g.KH : kh;
          const int64_t at = ((n * g.H + h) * g.W + w_lo) * L;
          xr[kh] =
              io.x32 != nullptr
                  ? cache.Get(slot, n * g.H + h, io.x32 + at, w_lo + g.pad_left, w_hi - w_lo, L, L)
                  : cache.Get(slot, n * g.H + h, io.x16 + at, w_lo + g.pad_left, w_hi - w_lo, L, L);
        }
        // The epilogue in the kernel's stores: y16 or y32 directly.
        static_assert(kSlideRows <= kElemRows && kSlideRows512 <= kElemRows, "accs holds a block");
        const int block = path == Path::kAvx512 ? kSlideRows512 : kSlideRows;
        const int64_t o = r * g.Q * L;
        for (int64_t q0 = 0; q0 < g.Q; q0 += block) {
          const int m = static_cast<int>(std::min<int64_t>(block, g.Q - q0));
          for (int64_t kh = 0; kh < g.KH; ++kh) xq[kh] = xr[kh] + q0 * L;
          if (io.y16 != nullptr) {
            for (int i = 0; i < m; ++i) accs[i] = io.y16 + o + (q0 + i) * L;
            (path == Path::kAvx512 ? kSlideRows512Fns<uint16_t> : kSlideRows256<uint16_t>)[m - 1](
                accs, L, xq.data(), L, L, wr.data(), g.KH, g.KW, io.bias);
          } else {
            for (int i = 0; i < m; ++i) accf[i] = io.y32 + o + (q0 + i) * L;
            (path == Path::kAvx512 ? kSlideRows512Fns<float> : kSlideRows256<float>)[m - 1](
                accf, L, xq.data(), L, L, wr.data(), g.KH, g.KW, io.bias);
          }
        }
      }
      return;
    }
#endif
    const uint16_t* x = io.x16 != nullptr ? io.x16 : x_copy.data();
    for (int64_t r = begin; r < end; ++r) {
      const int64_t n = r / g.P;
      const int64_t p = r % g.P;
      uint16_t* yrow = row_sums(r);
      // kElemRows output positions at once, each over (kh, kw) ascending from +0.
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
      finish_row(r);
    }
  });
  return true;
#else
  (void)g, (void)w, (void)io, (void)parallel_for;
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
// `slide` (binary16 buffers on AVX2 or AVX-512, M = 1, stride and dilation 1 along W,
// KH * KW <= kTermChunk, the row copies within kRowCacheFloats): the columns that every filter
// column reaches run SlideRows256 or SlideRows512 on float copies of the dy rows and of the filter.
// Column wi + i takes, for tap kw, dy at q = wi + i + pad_left - kw: row pointer dy(q = wi +
// pad_left), step C per output and -C per tap, so the kernel's taps (kh, kw) ascending from +0 are
// this function's.
template <typename E, typename Rows>
void DgradRows(const ConvGeometry& g, int64_t M, const E* dyc, const E* wc, E* dx,
               const ParallelFor& parallel_for, const Rows& rows_fn, bool slide) {
  const int64_t C = g.C;
#if defined(__x86_64__)
  // The columns every filter column reaches (stride 1): wi + pad_left - kw in [0, Q) for all kw.
  const int64_t inner_lo = std::max<int64_t>(0, g.KW - 1 - g.pad_left);
  const int64_t inner_hi = std::min<int64_t>(g.W, g.Q - g.pad_left);
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
#if defined(__x86_64__)
    // SlideRows256's float copies: the filter, the dy rows, and their tables.
    std::vector<float> wf;
    std::vector<const float*> sx, sw, xq;
    std::unique_ptr<RowCache> cache;
    if constexpr (std::is_same<E, uint16_t>::value) {
      if (slide) {
        wf.resize(static_cast<size_t>(g.KH * g.KW * C));
        HalfToFloat(wc, wf.data(), g.KH * g.KW * C);
        cache = std::make_unique<RowCache>(g.KH, g.Q * C);
      }
    }
#endif
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
          // With stride and dilation 1 the dy rows of one dx row are consecutive, so p mod KH is
          // a slot of its own for each (else its index), and the next dx row finds those it
          // shares in place.
          const int64_t kh_n = static_cast<int64_t>(khs.size());
          const bool consecutive = g.stride_h == 1 && g.dilation_h == 1;
          sw.resize(static_cast<size_t>(kh_n * g.KW));
          sx.resize(static_cast<size_t>(kh_n));
          xq.resize(static_cast<size_t>(kh_n));
          for (int64_t a = 0; a < kh_n; ++a) {
            for (int64_t kw = 0; kw < g.KW; ++kw)
              sw[a * g.KW + kw] = wf.data() + (khs[a] * g.KW + kw) * C;
            const int64_t key = n * g.P + ps[a];
            sx[a] =
                cache->Get(consecutive ? ps[a] % g.KH : a, key, dyc + key * g.Q * C, 0, g.Q, C, C);
          }
        }
      }
#endif
      for (int64_t wi = 0; wi < g.W; ++wi) {
#if defined(__x86_64__)
        if constexpr (std::is_same<E, uint16_t>::value) {
          if (slide && wi >= inner_lo && wi < inner_hi) {
            flush();
            const bool wide = ChosenPath() == Path::kAvx512;
            const int m = static_cast<int>(
                std::min<int64_t>(wide ? kSlideRows512 : kSlideRows, inner_hi - wi));
            const int64_t kh_n = static_cast<int64_t>(khs.size());
            for (int64_t a = 0; a < kh_n; ++a) xq[a] = sx[a] + (wi + g.pad_left) * C;
            for (int i = 0; i < m; ++i) accs[i] = dxrow + (wi + i) * C;
            (wide ? kSlideRows512Fns<uint16_t> : kSlideRows256<uint16_t>)[m - 1](
                accs, C, xq.data(), C, -C, sw.data(), kh_n, g.KW, nullptr);
            wi += m - 1;
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

#if defined(__x86_64__)
// wgrad on binary16 buffers on AVX2 or AVX-512 (M = 1): the units of WgradRows (up to kElemRows
// taps x one lane block), each running WgradSlide256 or WgradSlide512 over the dy rows (n, p)
// ascending on float copies of the dy row's lanes and of the x rows its taps read, padded with +0
// to the positions q * stride_w + kw * dilation_w (q < Q, kw < KW) an output row reads. The rows of
// one unit stay within kRowCacheFloats (`WgradSlideFits`). The units are the lane blocks alone, so
// 32 channels or fewer run on one thread: splitting the taps too (each group widening its own dy
// rows and reading all of x and dy again) measured worse on a Zen 1 for 8x112x112x32 (CPU 21 ->
// 33-45 ms, wall 21 -> 18-24 ms; the kernels before these copies: 27 ms wall, 47 ms CPU). The lanes
// of one unit: 64 bytes of binary16, a whole cache line of each position it reads (each unit reads
// all of x and dy on its lanes; 16 lanes read half lines and ran at 0.8x).
constexpr int64_t kWgradLanes = 32;
int64_t WgradSlidePositions(const ConvGeometry& g) {
  return (g.Q - 1) * g.stride_w + (g.KW - 1) * g.dilation_w + 1;
}

bool WgradSlideFits(const ConvGeometry& g) {
  const double positions = static_cast<double>(g.Q - 1) * static_cast<double>(g.stride_w) +
                           static_cast<double>(g.KW - 1) * static_cast<double>(g.dilation_w) + 1;
  const double floats = (static_cast<double>(g.KH) + 1) * positions * kWgradLanes +
                        static_cast<double>(g.Q) * kWgradLanes +
                        static_cast<double>(g.KH) * static_cast<double>(g.KW) * kWgradLanes;
  return floats <= static_cast<double>(kRowCacheFloats);
}

void WgradSlideHalf(const ConvGeometry& g, const uint16_t* x, const uint16_t* dy, uint16_t* dw,
                    const ParallelFor& parallel_for) {
  const int64_t L = g.K;
  const int64_t T = g.KH * g.KW;
  const int64_t tap_batches = (T + kWgradSlideTaps - 1) / kWgradSlideTaps;
  const int64_t taps_per = (T + tap_batches - 1) / tap_batches;  // balanced
  const int64_t lane_blocks = (L + kWgradLanes - 1) / kWgradLanes;
  const int64_t positions = WgradSlidePositions(g);
  const bool wide = ChosenPath() == Path::kAvx512;
  // Input columns 0 .. W-1 at positions pad_left .. (those an output row reads: < positions).
  const int64_t w_lo = std::max<int64_t>(0, -g.pad_left);
  const int64_t w_hi = std::min<int64_t>(g.W, positions - g.pad_left);
  int64_t cost = 2 * T * kWgradLanes;  // flops per unit, saturating (a shard estimate)
  if (__builtin_mul_overflow(cost, g.N * g.P * g.Q, &cost)) {
    cost = std::numeric_limits<int64_t>::max();
  }
  parallel_for(lane_blocks, cost, [&](int64_t begin, int64_t end) {
    const std::vector<float> zero_row(static_cast<size_t>(positions * kWgradLanes), 0.0f);
    std::vector<float> acc(static_cast<size_t>(T * kWgradLanes));
    std::vector<float> dyf(static_cast<size_t>(g.Q * kWgradLanes));
    std::vector<const float*> xrow(static_cast<size_t>(g.KH));
    const float* xr[kWgradSlideTaps];
    for (int64_t u = begin; u < end; ++u) {
      const int64_t l0 = u * kWgradLanes;
      const int64_t len = std::min(kWgradLanes, L - l0);
      std::fill(acc.begin(), acc.end(), 0.0f);
      RowCache cache(g.KH, positions * len);
      for (int64_t n = 0; n < g.N; ++n) {
        for (int64_t p = 0; p < g.P; ++p) {
          WidenRuns(dy + (n * g.P + p) * g.Q * L + l0, L, dyf.data(), g.Q, len);
          for (int64_t kh = 0; kh < g.KH; ++kh) {
            const int64_t h = p * g.stride_h - g.pad_top + kh * g.dilation_h;
            xrow[kh] = zero_row.data();
            if (h >= 0 && h < g.H && w_lo < w_hi) {
              // With dilation 1 the rows of one output row are consecutive (a slot of its own
              // for each h mod KH); else each kh keeps its own slot.
              xrow[kh] = cache.Get(g.dilation_h == 1 ? h % g.KH : kh, n * g.H + h,
                                   x + ((n * g.H + h) * g.W + w_lo) * L + l0, w_lo + g.pad_left,
                                   w_hi - w_lo, L, len);
            }
          }
          for (int64_t t0 = 0; t0 < T; t0 += taps_per) {
            const int m = static_cast<int>(std::min(taps_per, T - t0));
            for (int i = 0; i < m; ++i) {
              const int64_t kh = (t0 + i) / g.KW, kw = (t0 + i) % g.KW;
              xr[i] = xrow[kh] + kw * g.dilation_w * len;
            }
            (wide ? kWgradSlide512 : kWgradSlide256)[m - 1](acc.data() + t0 * len, len, xr,
                                                            g.stride_w * len, dyf.data(), g.Q);
          }
        }
      }
      // The accumulators hold binary16 values: narrowing them is exact.
      NarrowRuns(acc.data(), dw + l0, len, T, L);
    }
  });
}
#endif

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
  const bool slide = ChosenPath() != Path::kScalar && g.stride_w == 1 && g.dilation_w == 1 &&
                     g.KH * g.KW <= kTermChunk &&
                     // the dy rows' copies and the filter's, per worker thread
                     static_cast<double>(g.KH) *
                             (static_cast<double>(g.Q) + static_cast<double>(g.KW)) *
                             static_cast<double>(g.C) <=
                         static_cast<double>(kRowCacheFloats);
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
#if defined(__x86_64__)
  if (ChosenPath() != Path::kScalar && WgradSlideFits(g)) {
    WgradSlideHalf(g, x, dy, dw, parallel_for);
    return true;
  }
#endif
  WgradRows<uint16_t>(g, x, dy, dw, parallel_for, HalfRows);
  return true;
}

}  // namespace cpu
}  // namespace tf_fp16ops
