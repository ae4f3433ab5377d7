#include "cc/kernels/cpu/gemm_fp16.h"

#include <cstring>
#include <vector>

#include "cc/kernels/cpu/accumulate.h"
#include "cc/kernels/cpu/fp16_target.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tf_fp16ops {
namespace cpu {

bool Fp16TileAvailable() { return std::strcmp(AccumulateIsa(), "avx512fp16") == 0; }

#if defined(__x86_64__)
namespace {

// The steps of one segment: b rows loaded whole (Masked false: every lane in use) or masked at
// the tile's lanes; with Skips, row m takes them only where on[m] is all ones (merge-masked
// FMAs keep the other rows' accumulators, and their a pointers stay put).
template <int M, int NB, bool Masked, bool Skips>
TF_FP16OPS_FP16_TARGET __attribute__((always_inline)) inline void Steps(
    const _Float16* (&ar)[M], const __mmask32 (&on)[M], int64_t seg_len, int64_t a_k,
    const _Float16* b, int64_t ldb, const __mmask32 (&mask)[NB], __m512h (&acc)[M][NB]) {
  for (int64_t t = 0; t < seg_len; ++t, b += ldb) {
    __m512h bv[NB];
#pragma GCC unroll 4
    for (int j = 0; j < NB; ++j) {
      bv[j] = Masked ? _mm512_castsi512_ph(_mm512_maskz_loadu_epi16(mask[j], b + 32 * j))
                     : _mm512_loadu_ph(b + 32 * j);
    }
#pragma GCC unroll 8
    for (int m = 0; m < M; ++m) {
      const __m512h av = _mm512_set1_ph(*ar[m]);
      if (!Skips || on[m]) ar[m] += a_k;
#pragma GCC unroll 4
      for (int j = 0; j < NB; ++j) {
        acc[m][j] = Skips ? _mm512_mask3_fmadd_ph(bv[j], av, acc[m][j], on[m])
                          : _mm512_fmadd_ph(bv[j], av, acc[m][j]);
      }
    }
  }
}

template <int M, int NB>
TF_FP16OPS_FP16_TARGET void Tile(const uint16_t* const* a, int segments, int64_t seg_len,
                                 int64_t a_k, const uint16_t* b16, int64_t ldb, int lanes,
                                 uint16_t* out16, int64_t ldo, bool resume) {
  const _Float16* b = reinterpret_cast<const _Float16*>(b16);
  __mmask32 mask[NB];
#pragma GCC unroll 4
  for (int j = 0; j < NB; ++j) {
    const int rest = lanes - 32 * j;
    mask[j] = rest >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((1u << rest) - 1u);
  }
  __m512h acc[M][NB];
#pragma GCC unroll 8
  for (int m = 0; m < M; ++m)
#pragma GCC unroll 4
    for (int j = 0; j < NB; ++j) {
      acc[m][j] =
          resume ? _mm512_castsi512_ph(_mm512_maskz_loadu_epi16(mask[j], out16 + m * ldo + 32 * j))
                 : _mm512_setzero_ph();
    }
  static const _Float16 kZero = 0;  // what a row that skips a segment points at
  for (int s = 0; s < segments; ++s, a += M, b += seg_len * ldb) {
    const _Float16* ar[M];
    __mmask32 on[M];
    bool all_rows = true, any_row = false;
#pragma GCC unroll 8
    for (int m = 0; m < M; ++m) {
      on[m] = a[m] != nullptr ? ~__mmask32{0} : 0;
      ar[m] = a[m] != nullptr ? reinterpret_cast<const _Float16*>(a[m]) : &kZero;
      all_rows = all_rows && a[m] != nullptr;
      any_row = any_row || a[m] != nullptr;
    }
    if (!any_row) continue;  // no row takes this segment's steps
    if (!all_rows) {
      Steps<M, NB, true, true>(ar, on, seg_len, a_k, b, ldb, mask, acc);
    } else if (lanes == 32 * NB) {
      Steps<M, NB, false, false>(ar, on, seg_len, a_k, b, ldb, mask, acc);
    } else {
      Steps<M, NB, true, false>(ar, on, seg_len, a_k, b, ldb, mask, acc);
    }
  }
#pragma GCC unroll 8
  for (int m = 0; m < M; ++m)
#pragma GCC unroll 4
    for (int j = 0; j < NB; ++j)
      _mm512_mask_storeu_epi16(out16 + m * ldo + 32 * j, mask[j], _mm512_castph_si512(acc[m][j]));
}

using TileFn = void (*)(const uint16_t* const*, int, int64_t, int64_t, const uint16_t*, int64_t,
                        int, uint16_t*, int64_t, bool);
template <int M>
constexpr TileFn FourBlocks() {
  if constexpr (M <= Fp16TileRows(4)) {
    return &Tile<M, 4>;
  } else {
    return nullptr;  // never called: Fp16TileRows bounds the rows
  }
}
template <int M>
constexpr TileFn kByBlocks[kTileMaxBlocks] = {&Tile<M, 1>, &Tile<M, 2>, &Tile<M, 3>,
                                              FourBlocks<M>()};
constexpr const TileFn* kTiles[kTileMaxRows] = {kByBlocks<1>, kByBlocks<2>, kByBlocks<3>,
                                                kByBlocks<4>, kByBlocks<5>, kByBlocks<6>,
                                                kByBlocks<7>, kByBlocks<8>};

}  // namespace

void Fp16Tile(int rows, int blocks, const uint16_t* const* a, int segments, int64_t seg_len,
              int64_t a_k, const uint16_t* b, int64_t ldb, int lanes, uint16_t* out, int64_t ldo,
              bool resume) {
  kTiles[rows - 1][blocks - 1](a, segments, seg_len, a_k, b, ldb, lanes, out, ldo, resume);
}

int64_t Fp16TileProbe(int64_t reps, float* sink) {
  if (!Fp16TileAvailable() || reps <= 0) return 0;
  constexpr int kRowsProbe = Fp16TileRows(kTileMaxBlocks);
  constexpr int64_t kTerms = 128, kLanes = 32 * kTileMaxBlocks;
  const std::vector<uint16_t> a(static_cast<size_t>(kRowsProbe * kTerms), 0x3C00);  // 1.0
  const std::vector<uint16_t> b(static_cast<size_t>(kTerms * kLanes), 0x3400);      // 0.25
  std::vector<uint16_t> out(static_cast<size_t>(kRowsProbe * kLanes));
  const uint16_t* rows[kRowsProbe];
  for (int r = 0; r < kRowsProbe; ++r) rows[r] = a.data() + r * kTerms;
  for (int64_t i = 0; i < reps; ++i) {
    Fp16Tile(kRowsProbe, kTileMaxBlocks, rows, 1, kTerms, 1, b.data(), kLanes,
             static_cast<int>(kLanes), out.data(), kLanes);
  }
  HalfToFloat(out.data(), sink, 1);  // the bits of out[0] as a binary16 value
  return reps * kRowsProbe * kLanes * kTerms;
}

#else  // !__x86_64__

int64_t Fp16TileProbe(int64_t, float*) { return 0; }

void Fp16Tile(int, int, const uint16_t* const*, int, int64_t, int64_t, const uint16_t*, int64_t,
              int, uint16_t*, int64_t, bool) {}

#endif

}  // namespace cpu
}  // namespace tf_fp16ops
