#include "cc/kernels/cpu/depthwise_fp16.h"

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "cc/kernels/cpu/fp16_target.h"
#include "cc/kernels/cpu/gemm_fp16.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tf_fp16ops {
namespace cpu {

#if defined(__x86_64__)
namespace {

constexpr int kPositions = 12;  // output positions per tile (12 accumulators)

// y[t * ldy + l] = sum over taps ascending of xs[tap * NT + t][l] * w[tap * w_tap + l], for
// t < NT and the lanes of `mask` (all 32 when !Masked).
template <int NT, bool Masked>
TF_FP16OPS_FP16_TARGET void Tile(const uint16_t* const* xs, int64_t taps, const uint16_t* w,
                                 int64_t w_tap, __mmask32 mask, uint16_t* y, int64_t ldy) {
  __m512h acc[NT];
#pragma GCC unroll 12
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ph();
  for (int64_t tap = 0; tap < taps; ++tap, xs += NT, w += w_tap) {
    const __m512h wv =
        Masked ? _mm512_castsi512_ph(_mm512_maskz_loadu_epi16(mask, w)) : _mm512_loadu_ph(w);
#pragma GCC unroll 12
    for (int t = 0; t < NT; ++t) {
      const __m512h xv = Masked ? _mm512_castsi512_ph(_mm512_maskz_loadu_epi16(mask, xs[t]))
                                : _mm512_loadu_ph(xs[t]);
      acc[t] = _mm512_fmadd_ph(xv, wv, acc[t]);
    }
  }
#pragma GCC unroll 12
  for (int t = 0; t < NT; ++t)
    _mm512_mask_storeu_epi16(y + t * ldy, Masked ? mask : ~__mmask32{0},
                             _mm512_castph_si512(acc[t]));
}

using TileFn = void (*)(const uint16_t* const*, int64_t, const uint16_t*, int64_t, __mmask32,
                        uint16_t*, int64_t);
template <bool Masked, int... NT>
constexpr std::array<TileFn, sizeof...(NT)> MakeTiles(std::integer_sequence<int, NT...>) {
  return {&Tile<NT + 1, Masked>...};
}
constexpr auto kFull = MakeTiles<false>(std::make_integer_sequence<int, kPositions>{});
constexpr auto kMasked = MakeTiles<true>(std::make_integer_sequence<int, kPositions>{});

}  // namespace

bool DepthwiseFpropFp16Applies(const ConvGeometry& g) {
  return Fp16TileAvailable() && g.Cg == 1 && g.groups == g.C && g.K == g.C && g.N > 0 && g.P > 0 &&
         g.Q > 0 && g.C > 0;
}

bool DepthwiseFpropFp16(const ConvGeometry& g, const uint16_t* x, const uint16_t* w, uint16_t* y,
                        const ParallelFor& parallel_for) {
  if (!DepthwiseFpropFp16Applies(g)) return false;
  const int64_t C = g.C, taps = g.KH * g.KW;
  const std::vector<uint16_t> zeros(static_cast<size_t>(C), 0);  // padded taps read these
  const int64_t rows = g.N * g.P;                                // one unit: one output row (n, p)
  parallel_for(rows, 2 * g.Q * taps * C / 32 + 1, [&](int64_t begin, int64_t end) {
    // xs[tap * nt + t]: the input position (channel 0) of output position q0 + t for that tap.
    std::vector<const uint16_t*> xs(static_cast<size_t>(taps * kPositions));
    for (int64_t r = begin; r < end; ++r) {
      const int64_t n = r / g.P, p = r % g.P;
      for (int64_t q0 = 0; q0 < g.Q; q0 += kPositions) {
        const int nt = static_cast<int>(std::min<int64_t>(kPositions, g.Q - q0));
        for (int64_t kh = 0; kh < g.KH; ++kh) {
          const int64_t hi = p * g.stride_h - g.pad_top + kh * g.dilation_h;
          const bool row_in = hi >= 0 && hi < g.H;
          for (int64_t kw = 0; kw < g.KW; ++kw) {
            for (int t = 0; t < nt; ++t) {
              const int64_t wi = (q0 + t) * g.stride_w - g.pad_left + kw * g.dilation_w;
              xs[(kh * g.KW + kw) * nt + t] = row_in && wi >= 0 && wi < g.W
                                                  ? x + ((n * g.H + hi) * g.W + wi) * C
                                                  : zeros.data();
            }
          }
        }
        uint16_t* yr = y + ((n * g.P + p) * g.Q + q0) * C;
        for (int64_t c0 = 0; c0 < C; c0 += 32) {
          if (c0 > 0) {  // the same positions, the next 32 channels
            for (int64_t i = 0; i < taps * nt; ++i) xs[i] += 32;
          }
          const int64_t lanes = std::min<int64_t>(32, C - c0);
          if (lanes == 32) {
            kFull[nt - 1](xs.data(), taps, w + c0, C, ~__mmask32{0}, yr + c0, C);
          } else {
            kMasked[nt - 1](xs.data(), taps, w + c0, C, static_cast<__mmask32>((1u << lanes) - 1u),
                            yr + c0, C);
          }
        }
      }
    }
  });
  return true;
}

#else  // !__x86_64__

bool DepthwiseFpropFp16Applies(const ConvGeometry&) { return false; }

bool DepthwiseFpropFp16(const ConvGeometry&, const uint16_t*, const uint16_t*, uint16_t*,
                        const ParallelFor&) {
  return false;
}

#endif

}  // namespace cpu
}  // namespace tf_fp16ops
