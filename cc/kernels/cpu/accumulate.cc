#include "cc/kernels/cpu/accumulate.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "cc/kernels/cpu/fp16_target.h"
#include "cc/kernels/cpu/half_step.h"

namespace tf_fp16ops {
namespace cpu {
namespace {

// Why the kHalf step is exact in binary32 arithmetic:
//  * x and w have 11-bit significands, so p = x * w (22 bits) is exact in binary32.
//  * s = fl32(p + acc) may be inexact; TwoSum (Knuth, TAOCP vol. 2, 4.2.2) gives the exact
//    error e with s + e == p + acc.
//  * s is replaced by its round-to-odd value (s itself when e == 0 or its last bit is odd,
//    else its neighbour towards s + e).  Rounding to odd at 24 bits followed by round to
//    nearest even at 11 bits equals one direct rounding, because 24 >= 11 + 2 (Boldo and
//    Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms using
//    rounding to odd", IEEE Trans. Computers 57(4), 2008, Theorem 1).
//  * The final binary32 -> binary16 conversion rounds to nearest even and overflows to inf
//    at |v| >= 65520 (IEEE 754-2019, 4.3.1 and 7.4).
inline float RoundHalf(float v) { return static_cast<float>(static_cast<_Float16>(v)); }

inline float RoundToOddSum(float p, float acc) {
  const float s = p + acc;
  const float bb = s - p;
  const float e = (p - (s - bb)) + (acc - bb);
  if (e != 0.0f && std::isfinite(s)) {
    uint32_t bits;
    std::memcpy(&bits, &s, sizeof(bits));
    if ((bits & 1u) == 0u) {
      bits += (std::signbit(e) == std::signbit(s)) ? 1u : static_cast<uint32_t>(-1);
      float odd;
      std::memcpy(&odd, &bits, sizeof(odd));
      return odd;
    }
  }
  return s;
}

void AccumulateScalar(Accumulation accumulation, float* acc, int64_t len, const float* xs,
                      int64_t terms, const float* rows, int64_t row_stride) {
  for (int64_t l = 0; l < len; ++l) {
    float a = acc[l];
    const float* w = rows + l;
    if (accumulation == Accumulation::kHalf) {
      for (int64_t t = 0; t < terms; ++t) a = HalfFmaStep(a, xs[t], w[t * row_stride]);
    } else {
      for (int64_t t = 0; t < terms; ++t) a = std::fma(xs[t], w[t * row_stride], a);
    }
    acc[l] = a;
  }
}

#if defined(__x86_64__)
// ---------------------------------------------------------------- AVX-512 (16 lanes)

// M output rows at once, 16 lanes per step, the lane tail masked.
// With `segments` segments of `terms` terms (AccumulateRowsMultiSegments): segment s reads its
// terms from xs[r] + s * x_stride and the filter rows after those of segment s - 1, the
// accumulators held in registers across segments.
template <int M, bool kHalfAcc>
__attribute__((target("avx512f,avx512vl,avx512dq,f16c,fma"))) void Multi512(
    float* const* acc, int64_t len, const float* const* xs, int64_t terms, const float* rows,
    int64_t row_stride, int64_t segments, int64_t x_stride) {
  for (int64_t l = 0; l < len; l += 16) {
    const __mmask16 mask = len - l >= 16 ? static_cast<__mmask16>(0xFFFF)
                                         : static_cast<__mmask16>((1u << (len - l)) - 1u);
    __m512 a[M];
    for (int r = 0; r < M; ++r) a[r] = _mm512_maskz_loadu_ps(mask, acc[r] + l);
    const float* w = rows + l;
    for (int64_t s = 0, xo = 0; s < segments; ++s, xo += x_stride) {
      for (int64_t t = 0; t < terms; ++t, w += row_stride) {
        const __m512 wv = _mm512_maskz_loadu_ps(mask, w);
        for (int r = 0; r < M; ++r) {
          const __m512 x = _mm512_set1_ps(xs[r][xo + t]);
          a[r] = kHalfAcc ? HalfStep512(a[r], x, wv) : _mm512_fmadd_ps(x, wv, a[r]);
        }
      }
    }
    for (int r = 0; r < M; ++r) _mm512_mask_storeu_ps(acc[r] + l, mask, a[r]);
  }
}

template <bool kHalfAcc>
__attribute__((target("avx512f,avx512vl,avx512dq,f16c,fma"))) void Multi512Dispatch(
    int m, float* const* acc, int64_t len, const float* const* xs, int64_t terms, const float* rows,
    int64_t row_stride, int64_t segments = 1, int64_t x_stride = 0) {
  switch (m) {
    case 1:
      return Multi512<1, kHalfAcc>(acc, len, xs, terms, rows, row_stride, segments, x_stride);
    case 2:
      return Multi512<2, kHalfAcc>(acc, len, xs, terms, rows, row_stride, segments, x_stride);
    case 3:
      return Multi512<3, kHalfAcc>(acc, len, xs, terms, rows, row_stride, segments, x_stride);
    case 4:
      return Multi512<4, kHalfAcc>(acc, len, xs, terms, rows, row_stride, segments, x_stride);
    case 5:
      return Multi512<5, kHalfAcc>(acc, len, xs, terms, rows, row_stride, segments, x_stride);
    case 6:
      return Multi512<6, kHalfAcc>(acc, len, xs, terms, rows, row_stride, segments, x_stride);
    case 7:
      return Multi512<7, kHalfAcc>(acc, len, xs, terms, rows, row_stride, segments, x_stride);
    default:
      return Multi512<8, kHalfAcc>(acc, len, xs, terms, rows, row_stride, segments, x_stride);
  }
}

// ---------------------------------------------------------------- AVX-512 kFloat (wide tiles)
// kFloat on M rows x NV vectors of 16 lanes held in registers (up to 24 accumulators), the last
// vector masked: per term NV filter-row loads, M broadcasts and M * NV FMAs. Each output still
// gets acc = fl32(x * w + acc) over t ascending, so the tile shape changes no bit of the result.
template <int M, int NV>
__attribute__((target("avx512f,avx512vl,avx512dq,fma"))) void F32Tile(
    float* const* acc, int64_t l, __mmask16 last, const float* const* xs, int64_t terms,
    const float* rows, int64_t row_stride) {
  __m512 a[M][NV];
#pragma GCC unroll 16
  for (int r = 0; r < M; ++r) {
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) {
      a[r][v] = v == NV - 1 ? _mm512_maskz_loadu_ps(last, acc[r] + l + 16 * v)
                            : _mm512_loadu_ps(acc[r] + l + 16 * v);
    }
  }
  const float* w = rows + l;
  for (int64_t t = 0; t < terms; ++t, w += row_stride) {
    __m512 wv[NV];
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) {
      wv[v] = v == NV - 1 ? _mm512_maskz_loadu_ps(last, w + 16 * v) : _mm512_loadu_ps(w + 16 * v);
    }
#pragma GCC unroll 16
    for (int r = 0; r < M; ++r) {
      const __m512 x = _mm512_set1_ps(xs[r][t]);
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) a[r][v] = _mm512_fmadd_ps(x, wv[v], a[r][v]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < M; ++r) {
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) {
      if (v == NV - 1) {
        _mm512_mask_storeu_ps(acc[r] + l + 16 * v, last, a[r][v]);
      } else {
        _mm512_storeu_ps(acc[r] + l + 16 * v, a[r][v]);
      }
    }
  }
}

using F32TileFn = void (*)(float* const*, int64_t, __mmask16, const float* const*, int64_t,
                           const float*, int64_t);
template <int M>
constexpr F32TileFn kF32TileByVectors[3] = {&F32Tile<M, 1>, &F32Tile<M, 2>, &F32Tile<M, 3>};
constexpr const F32TileFn* kF32Tiles[kMaxRows] = {
    kF32TileByVectors<1>,  kF32TileByVectors<2>,  kF32TileByVectors<3>,  kF32TileByVectors<4>,
    kF32TileByVectors<5>,  kF32TileByVectors<6>,  kF32TileByVectors<7>,  kF32TileByVectors<8>,
    kF32TileByVectors<9>,  kF32TileByVectors<10>, kF32TileByVectors<11>, kF32TileByVectors<12>,
    kF32TileByVectors<13>, kF32TileByVectors<14>, kF32TileByVectors<15>, kF32TileByVectors<16>};

// Rows per tile for NV vectors (at most 24 accumulators of the 32 vector registers).
// One vector: 12 rows, not 16, so that the row pointers of the broadcasts stay in the 16
// general-purpose registers instead of being reloaded from the stack at every term.
constexpr int kF32RowsFor[4] = {0, 12, 12, 8};

__attribute__((target("avx512f,avx512vl,avx512dq,fma"))) void MultiF32(
    int m, float* const* acc, int64_t len, const float* const* xs, int64_t terms, const float* rows,
    int64_t row_stride) {
  const int nv = len >= 48 ? 3 : len >= 32 ? 2 : 1;
  const int chunks = (m + kF32RowsFor[nv] - 1) / kF32RowsFor[nv];
  const int per_chunk = (m + chunks - 1) / chunks;  // balanced row chunks
  // Lane blocks outermost: the row chunks of one lane block read the same filter columns, which
  // stay in L1 between them.
  for (int64_t l = 0; l < len; l += 16 * nv) {
    const int64_t rest = len - l;
    const int vecs = rest >= 16 * nv ? nv : static_cast<int>((rest + 15) / 16);
    const int64_t in_last = rest - 16 * (vecs - 1);
    const __mmask16 last = in_last >= 16 ? static_cast<__mmask16>(0xFFFF)
                                         : static_cast<__mmask16>((1u << in_last) - 1u);
    for (int r0 = 0; r0 < m; r0 += per_chunk) {
      const int mm = m - r0 < per_chunk ? m - r0 : per_chunk;
      kF32Tiles[mm - 1][vecs - 1](acc + r0, l, last, xs + r0, terms, rows, row_stride);
    }
  }
}

// ---------------------------------------------------------------- AVX512-FP16 (32 / 16 lanes)
// The kHalf step is one native binary16 FMA: VFMADD231PH computes x * w + acc with a single
// rounding (Intel AVX512-FP16 Architecture Specification, document 347407), which is the
// __hfma step itself. Rounding is explicit (embedded round-to-nearest-even) in the 32-lane
// form; the 16-lane form (tails of at most 16 lanes) uses MXCSR.RC, round to nearest even unless
// a program changes it (TensorFlow does not). FP16 instructions ignore MXCSR.DAZ and FTZ
// (same specification), so binary16 subnormals are exact under TensorFlow's thread settings
// (tested in tests/ops/test_isa_paths.py). Values stay float in memory: binary16 <-> binary32
// conversions of binary16 values are exact.
TF_FP16OPS_FP16_TARGET inline __m512h Load32h(const float* p, __mmask32 mask) {
  const __m256i lo = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(static_cast<__mmask16>(mask), p),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256i hi =
      _mm512_cvtps_ph(_mm512_maskz_loadu_ps(static_cast<__mmask16>(mask >> 16), p + 16),
                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  return _mm512_castsi512_ph(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1));
}

TF_FP16OPS_FP16_TARGET inline void Store32h(float* p, __mmask32 mask, __m512h v) {
  const __m512i bits = _mm512_castph_si512(v);
  _mm512_mask_storeu_ps(p, static_cast<__mmask16>(mask),
                        _mm512_cvtph_ps(_mm512_castsi512_si256(bits)));
  _mm512_mask_storeu_ps(p + 16, static_cast<__mmask16>(mask >> 16),
                        _mm512_cvtph_ps(_mm512_extracti64x4_epi64(bits, 1)));
}

template <int M>
TF_FP16OPS_FP16_TARGET void MultiFp16(float* const* acc, int64_t len, const float* const* xs,
                                      int64_t terms, const float* rows, int64_t row_stride) {
  int64_t l = 0;
  for (; len - l > 16; l += 32) {  // 32-lane blocks (the last one masked)
    const __mmask32 mask = len - l >= 32 ? ~__mmask32{0} : ((__mmask32{1} << (len - l)) - 1u);
    __m512h a[M];
    for (int r = 0; r < M; ++r) a[r] = Load32h(acc[r] + l, mask);
    const float* w = rows + l;
    for (int64_t t = 0; t < terms; ++t, w += row_stride) {
      const __m512h wv = Load32h(w, mask);
      for (int r = 0; r < M; ++r) {
        const __m512h x = _mm512_set1_ph(static_cast<_Float16>(xs[r][t]));
        a[r] = _mm512_fmadd_round_ph(x, wv, a[r], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      }
    }
    for (int r = 0; r < M; ++r) Store32h(acc[r] + l, mask, a[r]);
  }
  if (l >= len) return;
  // A tail of 1..16 lanes: 16-lane registers.
  const __mmask16 mask = static_cast<__mmask16>((1u << (len - l)) - 1u);
  __m256h a[M];
  for (int r = 0; r < M; ++r) {
    a[r] = _mm256_castsi256_ph(_mm512_cvtps_ph(_mm512_maskz_loadu_ps(mask, acc[r] + l),
                                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  const float* w = rows + l;
  for (int64_t t = 0; t < terms; ++t, w += row_stride) {
    const __m256h wv = _mm256_castsi256_ph(_mm512_cvtps_ph(
        _mm512_maskz_loadu_ps(mask, w), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (int r = 0; r < M; ++r) {
      a[r] = _mm256_fmadd_ph(_mm256_set1_ph(static_cast<_Float16>(xs[r][t])), wv, a[r]);
    }
  }
  for (int r = 0; r < M; ++r) {
    _mm512_mask_storeu_ps(acc[r] + l, mask, _mm512_cvtph_ps(_mm256_castph_si256(a[r])));
  }
}

TF_FP16OPS_FP16_TARGET void MultiFp16Dispatch(int m, float* const* acc, int64_t len,
                                              const float* const* xs, int64_t terms,
                                              const float* rows, int64_t row_stride) {
  switch (m) {
    case 1:
      return MultiFp16<1>(acc, len, xs, terms, rows, row_stride);
    case 2:
      return MultiFp16<2>(acc, len, xs, terms, rows, row_stride);
    case 3:
      return MultiFp16<3>(acc, len, xs, terms, rows, row_stride);
    case 4:
      return MultiFp16<4>(acc, len, xs, terms, rows, row_stride);
    case 5:
      return MultiFp16<5>(acc, len, xs, terms, rows, row_stride);
    case 6:
      return MultiFp16<6>(acc, len, xs, terms, rows, row_stride);
    case 7:
      return MultiFp16<7>(acc, len, xs, terms, rows, row_stride);
    default:
      return MultiFp16<8>(acc, len, xs, terms, rows, row_stride);
  }
}

// ---------------------------------------------------------------- AVX2 (8 lanes)

// `segments` segments of `terms` terms (see AccumulateRowsMultiSegments): segment s reads its
// terms from xs + s * x_stride and the filter rows after those of segment s - 1, the
// accumulators held in registers across segments.
template <bool kHalfAcc>
__attribute__((target("avx2,f16c,fma"))) void Accumulate256(float* acc, int64_t len,
                                                            const float* xs, int64_t terms,
                                                            const float* rows, int64_t row_stride,
                                                            int64_t segments = 1,
                                                            int64_t x_stride = 0) {
  int64_t l = 0;
  for (; l + 32 <= len; l += 32) {
    __m256 a[4];
    for (int v = 0; v < 4; ++v) a[v] = _mm256_loadu_ps(acc + l + 8 * v);
    const float* w = rows + l;
    for (int64_t s = 0; s < segments; ++s) {
      const float* xseg = xs + s * x_stride;
      for (int64_t t = 0; t < terms; ++t, w += row_stride) {
        const __m256 x = _mm256_set1_ps(xseg[t]);
        for (int v = 0; v < 4; ++v) {
          const __m256 wv = _mm256_loadu_ps(w + 8 * v);
          a[v] = kHalfAcc ? HalfStep256(a[v], x, wv) : _mm256_fmadd_ps(x, wv, a[v]);
        }
      }
    }
    for (int v = 0; v < 4; ++v) _mm256_storeu_ps(acc + l + 8 * v, a[v]);
  }
  for (; l + 8 <= len; l += 8) {
    __m256 a = _mm256_loadu_ps(acc + l);
    const float* w = rows + l;
    for (int64_t s = 0; s < segments; ++s) {
      const float* xseg = xs + s * x_stride;
      for (int64_t t = 0; t < terms; ++t, w += row_stride) {
        const __m256 x = _mm256_set1_ps(xseg[t]);
        const __m256 wv = _mm256_loadu_ps(w);
        a = kHalfAcc ? HalfStep256(a, x, wv) : _mm256_fmadd_ps(x, wv, a);
      }
    }
    _mm256_storeu_ps(acc + l, a);
  }
  if (l < len) {
    for (int64_t s = 0; s < segments; ++s) {
      AccumulateScalar(kHalfAcc ? Accumulation::kHalf : Accumulation::kFloat, acc + l, len - l,
                       xs + s * x_stride, terms, rows + s * terms * row_stride + l, row_stride);
    }
  }
}

// ---------------------------------------------------------------- AVX2 kHalf (row tiles)
// kHalf on M rows x one vector of 8 lanes (M <= kHalfRows independent dependency chains; the
// other registers hold the step's temporaries), the rows sharing each filter-row load. `last`
// masks the lanes (all ones for a full vector); vmaskmov never touches the masked-out lanes. Each
// output still takes its steps over t ascending: the tile changes no bit of the result.
template <int M>
__attribute__((target("avx2,f16c,fma"))) void HalfTile256(float* const* acc, int64_t l,
                                                          __m256i last, const float* const* xs,
                                                          int64_t terms, const float* rows,
                                                          int64_t row_stride, int64_t segments,
                                                          int64_t x_stride) {
  __m256 a[M];
#pragma GCC unroll 8
  for (int r = 0; r < M; ++r) a[r] = _mm256_maskload_ps(acc[r] + l, last);
  const float* w = rows + l;
  for (int64_t s = 0, xo = 0; s < segments; ++s, xo += x_stride) {
    for (int64_t t = 0; t < terms; ++t, w += row_stride) {
      const __m256 wv = _mm256_maskload_ps(w, last);
#pragma GCC unroll 8
      for (int r = 0; r < M; ++r) {
        a[r] = HalfStep256(a[r], _mm256_broadcast_ss(xs[r] + xo + t), wv);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < M; ++r) _mm256_maskstore_ps(acc[r] + l, last, a[r]);
}

// kHalf on M rows x two whole vectors (16 lanes) from lane l: per term two filter-row loads and M
// broadcasts for 2 * M steps, M * 2 chains. Each output gets the steps of HalfTile256 in the same
// order, so the bits are the same. On a Zen 1, 2 rows (4 chains, no spilled constants) ran the
// probe's 16-lane rows at 0.99x the rate of Accumulate256's four chains, against 0.85x for the
// 8-row single-vector tiles and 0.97x for 4 rows.
template <int M>
__attribute__((target("avx2,f16c,fma"))) void HalfPair256(float* const* acc, int64_t l,
                                                          const float* const* xs, int64_t terms,
                                                          const float* rows, int64_t row_stride,
                                                          int64_t segments, int64_t x_stride) {
  __m256 a[M][2];
#pragma GCC unroll 8
  for (int r = 0; r < M; ++r) {
    a[r][0] = _mm256_loadu_ps(acc[r] + l);
    a[r][1] = _mm256_loadu_ps(acc[r] + l + 8);
  }
  const float* w = rows + l;
  for (int64_t s = 0, xo = 0; s < segments; ++s, xo += x_stride) {
    for (int64_t t = 0; t < terms; ++t, w += row_stride) {
      const __m256 w0 = _mm256_loadu_ps(w);
      const __m256 w1 = _mm256_loadu_ps(w + 8);
#pragma GCC unroll 8
      for (int r = 0; r < M; ++r) {
        const __m256 x = _mm256_broadcast_ss(xs[r] + xo + t);
        a[r][0] = HalfStep256(a[r][0], x, w0);
        a[r][1] = HalfStep256(a[r][1], x, w1);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < M; ++r) {
    _mm256_storeu_ps(acc[r] + l, a[r][0]);
    _mm256_storeu_ps(acc[r] + l + 8, a[r][1]);
  }
}
constexpr int kPairRows = 2;
using HalfPair256Fn = void (*)(float* const*, int64_t, const float* const*, int64_t, const float*,
                               int64_t, int64_t, int64_t);
constexpr HalfPair256Fn kHalfPairs256[kPairRows] = {&HalfPair256<1>, &HalfPair256<2>};

using HalfTile256Fn = void (*)(float* const*, int64_t, __m256i, const float* const*, int64_t,
                               const float*, int64_t, int64_t, int64_t);
constexpr HalfTile256Fn kHalfTiles256[kHalfRows] = {
    &HalfTile256<1>, &HalfTile256<2>, &HalfTile256<3>, &HalfTile256<4>,
    &HalfTile256<5>, &HalfTile256<6>, &HalfTile256<7>, &HalfTile256<8>};

// kHalf on m rows: the lanes of whole 32-lane blocks row by row (Accumulate256's four chains
// per row: measured faster than the row tiles on wide rows), the other lanes (fewer than 32) in
// balanced tiles of at most kPairRows rows x 2 vectors (HalfPair256) while two whole vectors
// remain, then of at most kHalfRows rows x 1 vector, lane vectors outermost, terms in blocks of 128
// (ascending; the accumulators are stored exactly between blocks) so that the filter rows of a
// block stay in L1 while every lane vector and row chunk reads them. With `segments` segments of
// `terms` terms (AccumulateRowsMultiSegments), consecutive whole segments make one block while
// their filter rows of those lanes stay within the same 16 KiB (the 3 x 48 terms of the 16-lane
// rows of a 3x3x16 fprop window make one block), the accumulators in registers across them.
__attribute__((target("avx2,f16c,fma"))) void MultiHalfAvx2(int m, float* const* acc, int64_t len,
                                                            const float* const* xs, int64_t terms,
                                                            const float* rows, int64_t row_stride,
                                                            int64_t segments, int64_t x_stride) {
  const int64_t wide = len / 32 * 32;
  for (int r = 0; r < m && wide > 0; ++r) {
    Accumulate256<true>(acc[r], wide, xs[r], terms, rows, row_stride, segments, x_stride);
  }
  if (wide == len) return;
  const int chunks = (m + kHalfRows - 1) / kHalfRows;
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  constexpr int64_t kTermBlock = 128;
  // Filter floats of one block: kTermBlock rows of 32 lanes (the most the rest can have).
  const int64_t budget = kTermBlock * 32 / ((len - wide + 7) / 8 * 8);
  const int64_t seg_block = segments > 1 && terms <= budget ? budget / terms : 1;
  const int64_t term_block = seg_block > 1 ? terms : kTermBlock;
  for (int64_t s0 = 0; s0 < segments; s0 += seg_block) {
    const int64_t ns = segments - s0 < seg_block ? segments - s0 : seg_block;
    for (int64_t t0 = 0; t0 < terms; t0 += term_block) {
      const int64_t nt = terms - t0 < term_block ? terms - t0 : term_block;
      const float* xb[kMaxRows];
      for (int r = 0; r < m; ++r) xb[r] = xs[r] + s0 * x_stride + t0;
      const float* wb = rows + (s0 * terms + t0) * row_stride;
      int64_t l = wide;
      const int pchunks = (m + kPairRows - 1) / kPairRows;
      for (; l + 16 <= len; l += 16) {  // pairs of whole vectors, rows in chunks of kPairRows
        for (int c = 0; c < pchunks; ++c) {
          const int r0 = c * m / pchunks;
          const int mm = (c + 1) * m / pchunks - r0;
          kHalfPairs256[mm - 1](acc + r0, l, xb + r0, nt, wb, row_stride, ns, x_stride);
        }
      }
      for (; l < len; l += 8) {  // the rest: single vectors, the last masked
        const int64_t in_last = len - l < 8 ? len - l : 8;
        const __m256i last = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(in_last)), lane);
        for (int c = 0; c < chunks; ++c) {  // row chunks whose sizes differ by at most one
          const int r0 = c * m / chunks;
          const int mm = (c + 1) * m / chunks - r0;
          kHalfTiles256[mm - 1](acc + r0, l, last, xb + r0, nt, wb, row_stride, ns, x_stride);
        }
      }
    }
  }
}

// ---------------------------------------------------------------- AVX2 kFloat (row tiles)
// kFloat on M rows x NV vectors of 8 lanes held in registers (at most 12 accumulators of the 16
// vector registers), the last vector masked when kTail: per term NV filter-row loads, M
// broadcasts and M * NV FMAs, so that M * NV independent chains hide the FMA latency. Each
// output still gets acc = fl32(x * w + acc) over t ascending (VFMADD rounds once, as std::fma),
// so the tile shape changes no bit of the result. Masked lanes load as 0 and are never stored.
template <int M, int NV, bool kTail>
__attribute__((target("avx2,fma"))) void F32Tile256(float* const* acc, int64_t l, __m256i tail,
                                                    const float* const* xs, int64_t terms,
                                                    const float* rows, int64_t row_stride) {
  __m256 a[M][NV];
#pragma GCC unroll 8
  for (int r = 0; r < M; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      a[r][v] = kTail && v == NV - 1 ? _mm256_maskload_ps(acc[r] + l + 8 * v, tail)
                                     : _mm256_loadu_ps(acc[r] + l + 8 * v);
    }
  }
  const float* w = rows + l;
  for (int64_t t = 0; t < terms; ++t, w += row_stride) {
    __m256 wv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      wv[v] =
          kTail && v == NV - 1 ? _mm256_maskload_ps(w + 8 * v, tail) : _mm256_loadu_ps(w + 8 * v);
    }
#pragma GCC unroll 8
    for (int r = 0; r < M; ++r) {
      const __m256 x = _mm256_broadcast_ss(xs[r] + t);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) a[r][v] = _mm256_fmadd_ps(x, wv[v], a[r][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < M; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      if (kTail && v == NV - 1) {
        _mm256_maskstore_ps(acc[r] + l + 8 * v, tail, a[r][v]);
      } else {
        _mm256_storeu_ps(acc[r] + l + 8 * v, a[r][v]);
      }
    }
  }
}

using F32Tile256Fn = void (*)(float* const*, int64_t, __m256i, const float* const*, int64_t,
                              const float*, int64_t);
template <int M, int NV>
constexpr F32Tile256Fn kF32Tile256Pair[2] = {&F32Tile256<M, NV, false>, &F32Tile256<M, NV, true>};
template <int M>
constexpr const F32Tile256Fn* kF32Tile256ByVectors[4] = {
    kF32Tile256Pair<M, 1>, kF32Tile256Pair<M, 2>, kF32Tile256Pair<M, 3>, kF32Tile256Pair<M, 4>};
constexpr int kF32Rows256Max = 8;
constexpr const F32Tile256Fn* const* kF32Tiles256[kF32Rows256Max] = {
    kF32Tile256ByVectors<1>, kF32Tile256ByVectors<2>, kF32Tile256ByVectors<3>,
    kF32Tile256ByVectors<4>, kF32Tile256ByVectors<5>, kF32Tile256ByVectors<6>,
    kF32Tile256ByVectors<7>, kF32Tile256ByVectors<8>};

// Rows per tile for NV vectors of 8 lanes: at most 12 accumulators, leaving registers for the
// filter vectors and the broadcast.
constexpr int kF32Rows256For[5] = {0, 8, 6, 4, 3};

// Vectors per tile for rows of `len` lanes: rows of up to 24 lanes in one block; rows of 96 lanes
// or more in blocks of 3 vectors on 4 rows (per term 3 filter loads and 4 broadcasts for 12 FMAs;
// on a Zen 1 the 8x28x28x128 * 3x3x128 wgrad went from 0.81-0.91x to 0.97-0.99x of TensorFlow's
// in CPU seconds, A/B in alternating runs), the rows between in blocks of 2 vectors on 6 rows
// (measured faster than 4 vectors on 3 rows at 128 lanes, on a Zen 3).
inline int F32Vectors256(int64_t len) {
  return len >= 96 ? 3 : len > 24 ? 2 : static_cast<int>((len + 7) / 8);
}

__attribute__((target("avx2,fma"))) void MultiF32Avx2(int m, float* const* acc, int64_t len,
                                                      const float* const* xs, int64_t terms,
                                                      const float* rows, int64_t row_stride) {
  const int nv = F32Vectors256(len);
  const int chunks = (m + kF32Rows256For[nv] - 1) / kF32Rows256For[nv];
  // Terms in blocks whose filter columns (8 KiB per lane block) stay in L1 while every row chunk
  // reads them; blocks ascending, the accumulators stored exactly between them. One chunk reads
  // them once: no blocks. Nor for 128 terms or fewer (at most 12 KiB of 3 vectors): cutting the
  // 128 terms of the 8x28x28x128 * 1x1x128 fprop into 85 + 43 cost it 2-3% against TensorFlow's
  // (Zen 1, A/B in alternating processes, 4 pairs).
  const int64_t term_block = chunks > 1 && terms > 128 ? 256 / nv : terms;
  for (int64_t t0 = 0; t0 < terms; t0 += term_block) {
    const int64_t nt = terms - t0 < term_block ? terms - t0 : term_block;
    const float* const* x0 = xs;
    const float* xb[kMaxRows];
    if (t0 > 0) {
      for (int r = 0; r < m; ++r) xb[r] = xs[r] + t0;
      x0 = xb;
    }
    const float* rows0 = rows + t0 * row_stride;
    // Lane blocks outside the row chunks: the chunks of one lane block read the same columns.
    for (int64_t l = 0; l < len; l += 8 * nv) {
      const int64_t rest = len - l;
      const int vecs = rest >= 8 * nv ? nv : static_cast<int>((rest + 7) / 8);
      const int in_last = static_cast<int>(rest - 8 * (vecs - 1));  // 1..8 lanes
      const __m256i tail =
          _mm256_cmpgt_epi32(_mm256_set1_epi32(in_last), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
      const int masked = in_last < 8 ? 1 : 0;
      for (int c = 0; c < chunks; ++c) {  // row chunks whose sizes differ by at most one
        const int r0 = c * m / chunks;
        const int mm = (c + 1) * m / chunks - r0;
        kF32Tiles256[mm - 1][vecs - 1][masked](acc + r0, l, tail, x0 + r0, nt, rows0, row_stride);
      }
    }
  }
}
#endif  // __x86_64__

enum class Isa { kScalar, kAvx2, kAvx512, kAvx512Fp16 };

// TF_FP16OPS_CPU_ISA=avx512|avx2|scalar caps the instruction set (read once), so that every
// path can be tested on one machine.
Isa DetectIsa() {
  const char* cap = std::getenv("TF_FP16OPS_CPU_ISA");
  if (cap != nullptr && std::strcmp(cap, "scalar") == 0) return Isa::kScalar;
  const bool uncapped = cap == nullptr || cap[0] == '\0' || std::strcmp(cap, "avx512fp16") == 0;
  const bool allow_avx512 = uncapped || std::strcmp(cap, "avx512") == 0;
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (uncapped && __builtin_cpu_supports("avx512fp16") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
    return Isa::kAvx512Fp16;
  }
  if (allow_avx512 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("f16c") &&
      __builtin_cpu_supports("fma")) {
    return Isa::kAvx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") &&
      __builtin_cpu_supports("fma")) {
    return Isa::kAvx2;
  }
#endif
  return Isa::kScalar;
}

Isa ChosenIsa() {
  static const Isa isa = DetectIsa();  // CPU features do not change during a process.
  return isa;
}

}  // namespace

float HalfFmaStep(float acc, float x, float w) { return RoundHalf(RoundToOddSum(x * w, acc)); }

void AccumulateRows(Accumulation accumulation, float* acc, int64_t len, const float* xs,
                    int64_t terms, const float* rows, int64_t row_stride) {
  if (len <= 0 || terms <= 0) return;
#if defined(__x86_64__)
  switch (ChosenIsa()) {
    case Isa::kAvx512Fp16:
    case Isa::kAvx512:
      AccumulateRowsMulti(accumulation, 1, &acc, len, &xs, terms, rows, row_stride);
      return;
    case Isa::kAvx2:
      if (accumulation == Accumulation::kHalf) {
        Accumulate256<true>(acc, len, xs, terms, rows, row_stride);
      } else {
        Accumulate256<false>(acc, len, xs, terms, rows, row_stride);
      }
      return;
    case Isa::kScalar:
      break;
  }
#endif
  AccumulateScalar(accumulation, acc, len, xs, terms, rows, row_stride);
}

void AccumulateRowsMulti(Accumulation accumulation, int m, float* const* acc, int64_t len,
                         const float* const* xs, int64_t terms, const float* rows,
                         int64_t row_stride) {
  if (len <= 0 || terms <= 0 || m <= 0) return;
#if defined(__x86_64__)
  const Isa isa = ChosenIsa();
  if (isa == Isa::kAvx512 || isa == Isa::kAvx512Fp16) {
    if (accumulation == Accumulation::kFloat) {
      MultiF32(m, acc, len, xs, terms, rows, row_stride);
      return;
    }
    for (int r0 = 0; r0 < m; r0 += kHalfRows) {
      const int mm = m - r0 < kHalfRows ? m - r0 : kHalfRows;
      if (isa == Isa::kAvx512Fp16) {
        MultiFp16Dispatch(mm, acc + r0, len, xs + r0, terms, rows, row_stride);
      } else {
        Multi512Dispatch<true>(mm, acc + r0, len, xs + r0, terms, rows, row_stride);
      }
    }
    return;
  }
  if (isa == Isa::kAvx2 && accumulation == Accumulation::kHalf && m > 1) {
    for (int r0 = 0; r0 < m; r0 += kMaxRows) {
      MultiHalfAvx2(m - r0 < kMaxRows ? m - r0 : kMaxRows, acc + r0, len, xs + r0, terms, rows,
                    row_stride, 1, 0);
    }
    return;
  }
  if (isa == Isa::kAvx2 && accumulation == Accumulation::kFloat) {
    MultiF32Avx2(m, acc, len, xs, terms, rows, row_stride);
    return;
  }
#endif
  for (int r = 0; r < m; ++r)
    AccumulateRows(accumulation, acc[r], len, xs[r], terms, rows, row_stride);
}

void AccumulateRowsMultiSegments(Accumulation accumulation, int m, float* const* acc, int64_t len,
                                 const float* const* xs, int64_t terms, int64_t segments,
                                 int64_t x_stride, const float* rows, int64_t row_stride) {
  if (len <= 0 || terms <= 0 || m <= 0 || segments <= 0) return;
#if defined(__x86_64__)
  if (ChosenIsa() == Isa::kAvx2 && accumulation == Accumulation::kHalf && m > 1) {
    for (int r0 = 0; r0 < m; r0 += kMaxRows) {
      MultiHalfAvx2(m - r0 < kMaxRows ? m - r0 : kMaxRows, acc + r0, len, xs + r0, terms, rows,
                    row_stride, segments, x_stride);
    }
    return;
  }
  if (ChosenIsa() == Isa::kAvx512 && accumulation == Accumulation::kHalf) {
    for (int r0 = 0; r0 < m; r0 += kHalfRows) {
      Multi512Dispatch<true>(m - r0 < kHalfRows ? m - r0 : kHalfRows, acc + r0, len, xs + r0, terms,
                             rows, row_stride, segments, x_stride);
    }
    return;
  }
#endif
  const float* xseg[kMaxRows];
  for (int64_t s = 0; s < segments; ++s) {
    for (int r0 = 0; r0 < m; r0 += kMaxRows) {
      const int mm = m - r0 < kMaxRows ? m - r0 : kMaxRows;
      for (int r = 0; r < mm; ++r) xseg[r] = xs[r0 + r] + s * x_stride;
      AccumulateRowsMulti(accumulation, mm, acc + r0, len, xseg, terms,
                          rows + s * terms * row_stride, row_stride);
    }
  }
}

int RegisterTileRows(Accumulation accumulation, int64_t len) {
#if defined(__x86_64__)
  const Isa isa = ChosenIsa();
  if (accumulation == Accumulation::kFloat && (isa == Isa::kAvx512 || isa == Isa::kAvx512Fp16)) {
    return kF32RowsFor[len >= 48 ? 3 : len >= 32 ? 2 : 1];
  }
  if (accumulation == Accumulation::kFloat && isa == Isa::kAvx2) {
    return kF32Rows256For[F32Vectors256(len)];
  }
#endif
  (void)accumulation;
  (void)len;
  return kHalfRows;
}

#if defined(__x86_64__)
namespace {
__attribute__((target("avx2,f16c"))) void HalfToFloat256(const uint16_t* src, float* dst,
                                                         int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) {
    _Float16 h;
    std::memcpy(&h, src + i, sizeof(h));
    dst[i] = static_cast<float>(h);
  }
}

__attribute__((target("avx2,f16c"))) void FloatToHalf256(const float* src, uint16_t* dst,
                                                         int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h =
        _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) {
    const _Float16 h = static_cast<_Float16>(src[i]);
    std::memcpy(dst + i, &h, sizeof(h));
  }
}
}  // namespace
#endif

#if defined(__x86_64__)
namespace {
// One tile of TransposeInto: rows r0..r0+nr-1 (nr <= 16) and columns c0..c0+nc-1 (nc <= 16).
// Rows beyond nr read as zero; columns beyond nc are neither read nor stored. The 16 x 16 float
// transpose is the usual three stages: 32-bit then 64-bit interleaves within 128-bit lanes (each
// lane then holds a 4 x 4 block transposed), then 128-bit lane shuffles across the 4 row groups.
__attribute__((target("avx512f"))) void TransposeTile512(const float* src, int64_t src_stride,
                                                         int nr, int nc, float* dst,
                                                         int64_t dst_stride) {
  const __mmask16 cmask = static_cast<__mmask16>(nc >= 16 ? 0xFFFFu : (1u << nc) - 1u);
  const __mmask16 rmask = static_cast<__mmask16>(nr >= 16 ? 0xFFFFu : (1u << nr) - 1u);
  __m512 r[16], a[16], b[16];
  for (int i = 0; i < 16; ++i) {
    r[i] = i < nr ? _mm512_maskz_loadu_ps(cmask, src + i * src_stride) : _mm512_setzero_ps();
  }
  for (int i = 0; i < 16; i += 2) {
    a[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    a[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int g = 0; g < 16; g += 4) {
    const __m512d a0 = _mm512_castps_pd(a[g]), a1 = _mm512_castps_pd(a[g + 1]);
    const __m512d a2 = _mm512_castps_pd(a[g + 2]), a3 = _mm512_castps_pd(a[g + 3]);
    b[g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2));      // column 4j of rows g..g+3
    b[g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2));  // column 4j + 1
    b[g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3));  // column 4j + 2
    b[g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3));  // column 4j + 3
  }
  for (int k = 0; k < 4; ++k) {
    const __m512 c0 = _mm512_shuffle_f32x4(b[k], b[4 + k], 0x88);
    const __m512 c1 = _mm512_shuffle_f32x4(b[k], b[4 + k], 0xDD);
    const __m512 c2 = _mm512_shuffle_f32x4(b[8 + k], b[12 + k], 0x88);
    const __m512 c3 = _mm512_shuffle_f32x4(b[8 + k], b[12 + k], 0xDD);
    const __m512 out[4] = {_mm512_shuffle_f32x4(c0, c2, 0x88), _mm512_shuffle_f32x4(c1, c3, 0x88),
                           _mm512_shuffle_f32x4(c0, c2, 0xDD), _mm512_shuffle_f32x4(c1, c3, 0xDD)};
    for (int j = 0; j < 4; ++j) {
      const int c = 4 * j + k;
      if (c < nc) _mm512_mask_storeu_ps(dst + c * dst_stride, rmask, out[j]);
    }
  }
}
}  // namespace
#endif

void TransposeInto(const float* src, int64_t rows, int64_t cols, int64_t src_stride, float* dst,
                   int64_t dst_stride) {
#if defined(__x86_64__)
  if (ChosenIsa() == Isa::kAvx512 || ChosenIsa() == Isa::kAvx512Fp16) {
    for (int64_t r0 = 0; r0 < rows; r0 += 16) {
      const int nr = static_cast<int>(std::min<int64_t>(16, rows - r0));
      for (int64_t c0 = 0; c0 < cols; c0 += 16) {
        const int nc = static_cast<int>(std::min<int64_t>(16, cols - c0));
        TransposeTile512(src + r0 * src_stride + c0, src_stride, nr, nc, dst + c0 * dst_stride + r0,
                         dst_stride);
      }
    }
    return;
  }
#endif
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) dst[c * dst_stride + r] = src[r * src_stride + c];
  }
}

void HalfToFloat(const uint16_t* src, float* dst, int64_t n) {
#if defined(__x86_64__)
  if (ChosenIsa() != Isa::kScalar) return HalfToFloat256(src, dst, n);
#endif
  for (int64_t i = 0; i < n; ++i) {
    _Float16 h;
    std::memcpy(&h, src + i, sizeof(h));
    dst[i] = static_cast<float>(h);
  }
}

void FloatToHalf(const float* src, uint16_t* dst, int64_t n) {
#if defined(__x86_64__)
  if (ChosenIsa() != Isa::kScalar) return FloatToHalf256(src, dst, n);
#endif
  for (int64_t i = 0; i < n; ++i) {
    const _Float16 h = static_cast<_Float16>(src[i]);
    std::memcpy(dst + i, &h, sizeof(h));
  }
}

const char* AccumulateIsa() {
  switch (ChosenIsa()) {
    case Isa::kAvx512Fp16:
      return "avx512fp16";
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kScalar:
      break;
  }
  return "scalar";
}

}  // namespace cpu
}  // namespace tf_fp16ops
