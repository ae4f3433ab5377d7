#include "cc/kernels/cpu/fprop_fp16.h"

#include <algorithm>
#include <memory>
#include <type_traits>
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

#define TF_FP16OPS_AVX512BW_TARGET __attribute__((target("avx512f,avx512bw,avx512vl")))

// The three rounds of unpacks that transpose an 8 x 8 block of 16-bit values: on entry v[i] holds
// row i, on return v[c] holds column c.
inline void Unpack8x8(__m128i (&v)[8]) {
  __m128i t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm_unpacklo_epi16(v[2 * i], v[2 * i + 1]);      // columns 0-3 of rows 2i, 2i+1
    t[2 * i + 1] = _mm_unpackhi_epi16(v[2 * i], v[2 * i + 1]);  // columns 4-7
  }
  for (int h = 0; h < 2; ++h) {                                 // rows 0-3 (h = 0) and 4-7 (h = 1)
    u[4 * h + 0] = _mm_unpacklo_epi32(t[4 * h], t[4 * h + 2]);  // columns 0, 1
    u[4 * h + 1] = _mm_unpackhi_epi32(t[4 * h], t[4 * h + 2]);  // columns 2, 3
    u[4 * h + 2] = _mm_unpacklo_epi32(t[4 * h + 1], t[4 * h + 3]);  // columns 4, 5
    u[4 * h + 3] = _mm_unpackhi_epi32(t[4 * h + 1], t[4 * h + 3]);  // columns 6, 7
  }
  for (int j = 0; j < 4; ++j) {  // columns 2j and 2j + 1, all 8 rows
    v[2 * j] = _mm_unpacklo_epi64(u[j], u[4 + j]);
    v[2 * j + 1] = _mm_unpackhi_epi64(u[j], u[4 + j]);
  }
}

// One 8 x 8 block at (r, c) with only its first `in_rows` rows and `in_cols` columns in the
// matrix: masked loads read nothing past the edges, masked stores write nothing there.
TF_FP16OPS_AVX512BW_TARGET void EdgeBlock(const uint16_t* src, int64_t src_stride, uint16_t* dst,
                                          int64_t dst_stride, int in_rows, int in_cols) {
  const __mmask8 load = static_cast<__mmask8>((1u << in_cols) - 1u);  // src lanes: columns
  const __mmask8 keep = static_cast<__mmask8>((1u << in_rows) - 1u);  // dst lanes: rows
  __m128i v[8];
  for (int i = 0; i < 8; ++i) {
    v[i] = i < in_rows ? _mm_maskz_loadu_epi16(load, src + i * src_stride) : _mm_setzero_si128();
  }
  Unpack8x8(v);
  for (int j = 0; j < in_cols; ++j) _mm_mask_storeu_epi16(dst + j * dst_stride, keep, v[j]);
}

}  // namespace

// See fprop_fp16.h. 8 x 8 blocks in SSE2 registers; the blocks that the edges cut in masked
// AVX-512BW loads and stores where the CPU has them (all callers run on AVX512-FP16 CPUs), else
// one element at a time. The layout passes of the spatial fprop below took about a third of the
// CPU time of a 1x1x128 fprop as scalar loops (perf, Intel Xeon with AVX512-FP16).
void Transpose16(const uint16_t* src, int64_t rows, int64_t cols, int64_t src_stride, uint16_t* dst,
                 int64_t dst_stride) {
  static const bool kMasked =
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  int64_t r = 0;
  for (; r + 8 <= rows; r += 8) {
    int64_t c = 0;
    for (; c + 8 <= cols; c += 8) {
      __m128i v[8];
      for (int i = 0; i < 8; ++i) {
        v[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + (r + i) * src_stride + c));
      }
      Unpack8x8(v);
      for (int j = 0; j < 8; ++j) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (c + j) * dst_stride + r), v[j]);
      }
    }
    if (c < cols && kMasked) {
      EdgeBlock(src + r * src_stride + c, src_stride, dst + c * dst_stride + r, dst_stride, 8,
                static_cast<int>(cols - c));
    } else {
      for (; c < cols; ++c)
        for (int i = 0; i < 8; ++i) dst[c * dst_stride + r + i] = src[(r + i) * src_stride + c];
    }
  }
  if (r < rows && kMasked) {
    for (int64_t c = 0; c < cols; c += 8) {
      EdgeBlock(src + r * src_stride + c, src_stride, dst + c * dst_stride + r, dst_stride,
                static_cast<int>(rows - r), static_cast<int>(std::min<int64_t>(8, cols - c)));
    }
    return;
  }
  for (; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[c * dst_stride + r] = src[r * src_stride + c];
}

namespace {

constexpr int kRows = 8;    // output channels per micro-kernel
constexpr int kBlocks = 3;  // 32-lane position blocks per micro-kernel (96 positions)

// acc[m][b] over taps (offsets[0..taps)) x channels [0, cg): x from plane(ci) + offset, w from
// w[tap * w_tap + ci * w_ci + m] by embedded broadcast. The FMA rounds by MXCSR.RC (embedded
// rounding and embedded broadcast exclude each other), round to nearest even: neither C++ nor
// TensorFlow changes it (checked bit for bit by tests/ops/test_isa_paths.py).
template <int M, int NB>
TF_FP16OPS_FP16_TARGET void Micro(const _Float16* x, int64_t plane, const int64_t* offsets,
                                  int taps, int64_t cg, const _Float16* w, int64_t w_tap,
                                  int64_t w_ci, _Float16* out, int64_t out_stride) {
  __m512h acc[M][NB];
#pragma GCC unroll 8
  for (int m = 0; m < M; ++m)
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) acc[m][b] = _mm512_setzero_ph();
  for (int tap = 0; tap < taps; ++tap) {
    const _Float16* xt = x + offsets[tap];
    const _Float16* wt = w + tap * w_tap;
    for (int64_t ci = 0; ci < cg; ++ci, xt += plane, wt += w_ci) {
      __m512h xv[NB];
#pragma GCC unroll 4
      for (int b = 0; b < NB; ++b) xv[b] = _mm512_loadu_ph(xt + 32 * b);
#pragma GCC unroll 8
      for (int m = 0; m < M; ++m) {
        const __m512h wv = _mm512_set1_ph(wt[m]);
#pragma GCC unroll 4
        for (int b = 0; b < NB; ++b) acc[m][b] = _mm512_fmadd_ph(xv[b], wv, acc[m][b]);
      }
    }
  }
#pragma GCC unroll 8
  for (int m = 0; m < M; ++m)
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) _mm512_storeu_ph(out + m * out_stride + 32 * b, acc[m][b]);
}

using MicroFn = void (*)(const _Float16*, int64_t, const int64_t*, int, int64_t, const _Float16*,
                         int64_t, int64_t, _Float16*, int64_t);

template <int M>
constexpr MicroFn kByBlocks[kBlocks] = {&Micro<M, 1>, &Micro<M, 2>, &Micro<M, 3>};
constexpr const MicroFn* kTable[kRows] = {kByBlocks<1>, kByBlocks<2>, kByBlocks<3>, kByBlocks<4>,
                                          kByBlocks<5>, kByBlocks<6>, kByBlocks<7>, kByBlocks<8>};

// Padded extents for the spatial kernels, or false when they do not apply.
bool SpatialGeometry(const ConvGeometry& g, int64_t* Hp, int64_t* Wp) {
  if (g.stride_h != 1 || g.stride_w != 1) return false;
  *Hp = g.P + (g.KH - 1) * g.dilation_h;  // padded extents (stride 1)
  *Wp = g.Q + (g.KW - 1) * g.dilation_w;
  // The planes must stay of the order of the input (huge explicit padding goes the general way).
  if (*Hp > 2 * g.H + 64 || *Wp > 2 * g.W + 64 || g.KH * g.KW > 4096) return false;
  if (*Hp - g.H - g.pad_top < 0 || *Wp - g.W - g.pad_left < 0) return false;
  // Scratch within a few times the tensors (counted as planes of whole images: a band, what one
  // thread holds, is at most that).
  const int64_t scratch = g.N * (g.C * (*Hp * *Wp + 64 + *Wp) + g.K * (g.P * *Wp + 64));
  return scratch <= 4 * (g.InputElements() + g.OutputElements()) + (int64_t{1} << 20);
}

// Vector conversions (exact for binary16 values; RN for others), 16 lanes at a time.
TF_FP16OPS_FP16_TARGET void ToHalf(const float* src, _Float16* dst, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, src + i),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_mask_storeu_epi16(dst + i, m, h);
  }
}

TF_FP16OPS_FP16_TARGET void ToFloat(const _Float16* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(dst + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, src + i)));
  }
}

// n binary16 values into binary16 storage from binary32 (exact for binary16 values), and back.
void LoadHalf(const float* src, uint16_t* dst, int64_t n) {
  ToHalf(src, reinterpret_cast<_Float16*>(dst), n);
}
void StoreHalf(const uint16_t* src, float* dst, int64_t n) {
  ToFloat(reinterpret_cast<const _Float16*>(src), dst, n);
}

// Output positions per unit of the spatial fprop (a band of whole output rows of one image).
constexpr int64_t kBandPositions = 768;

// The spatial fprop on binary32 (E = float) or binary16 (E = uint16_t bit patterns) buffers.
// Each unit is one band of output rows of one image: it lays out the input rows its windows read
// as channel planes (zeros for the padding), runs the micro-kernels over them and transposes its
// output rows into y, all in scratch of its own thread, so that the layout passes touch data the
// thread's caches hold and the op takes one pass over TensorFlow's pool (the input rows in a
// band's halo, (KH - 1) * dilation_h of them, are laid out by both bands that read them).
template <typename E>
bool Spatial(const ConvGeometry& g, const E* x, const E* w, E* y, const ParallelFor& parallel_for) {
  int64_t Hp = 0, Wp = 0;
  if (!Fp16TileAvailable() || !SpatialGeometry(g, &Hp, &Wp)) return false;
  constexpr bool kHalfIn = std::is_same<E, uint16_t>::value;
  const int64_t halo = (g.KH - 1) * g.dilation_h;
  const int64_t tail = 32 + (g.KW - 1) * g.dilation_w;  // reads past a band's last row
  // About kBandPositions positions per band, the P rows shared out as evenly as whole rows allow.
  const int64_t wanted_bands = (g.P * Wp + kBandPositions - 1) / kBandPositions;
  const int64_t band_rows = (g.P + wanted_bands - 1) / wanted_bands;
  const int64_t bands = (g.P + band_rows - 1) / band_rows;
  const int64_t max_plane = (band_rows + halo) * Wp + tail;
  const int64_t max_pitch = (band_rows * Wp + 31) / 32 * 32;
  const int64_t pad_right = Wp - g.pad_left - g.W;  // >= 0 (SpatialGeometry)
  const int64_t Kg = g.K / g.groups;

  // Filter [KH*KW][Cg][K] as binary16 (a binary16 filter read in place). Binary16 values are
  // moved as uint16_t outside the FP16-target functions.
  std::vector<uint16_t> wh(kHalfIn ? 0 : static_cast<size_t>(g.FilterElements()));
  const uint16_t* w16 = nullptr;
  if constexpr (kHalfIn) {
    w16 = w;
  } else {
    LoadHalf(w, wh.data(), g.FilterElements());
    w16 = wh.data();
  }
  std::vector<int64_t> offsets(static_cast<size_t>(g.KH * g.KW));
  for (int64_t kh = 0; kh < g.KH; ++kh)
    for (int64_t kw = 0; kw < g.KW; ++kw)
      offsets[kh * g.KW + kw] = kh * g.dilation_h * Wp + kw * g.dilation_w;

  const _Float16* wp = reinterpret_cast<const _Float16*>(w16);
  const int64_t kblocks = (Kg + kRows - 1) / kRows;
  const int64_t chunk = 32 * kBlocks;
  const int64_t cost = 2 * band_rows * Wp * kblocks * kRows * g.groups * g.KH * g.KW * g.Cg;
  parallel_for(g.N * bands, cost, [&](int64_t begin, int64_t end) {
    // Every element of xh a micro-kernel reads is written first, a value or a zero, and every
    // element of yh the output pass reads: neither is zero-filled.
    std::unique_ptr<uint16_t[]> xh(new uint16_t[static_cast<size_t>(g.C * max_plane)]);
    std::unique_ptr<uint16_t[]> yh(new uint16_t[static_cast<size_t>(g.K * max_pitch)]);
    std::vector<uint16_t> row(kHalfIn ? 0 : static_cast<size_t>(std::max(g.W * g.C, g.Q * g.K)));
    for (int64_t u = begin; u < end; ++u) {
      const int64_t n = u / bands, p0 = u % bands * band_rows;
      const int64_t rows = std::min(band_rows, g.P - p0), in_rows = rows + halo;
      const int64_t plane = in_rows * Wp + tail, positions = rows * Wp;
      const int64_t pitch = (positions + 31) / 32 * 32;
      for (int64_t i = 0; i < in_rows; ++i) {  // padded row p0 + i = input row h
        const int64_t h = p0 + i - g.pad_top;
        uint16_t* const dst = xh.get() + i * Wp;
        if (h < 0 || h >= g.H) {
          for (int64_t c = 0; c < g.C; ++c) std::fill_n(dst + c * plane, Wp, uint16_t{0});
          continue;
        }
        const E* src = x + (n * g.H + h) * g.W * g.C;
        if constexpr (kHalfIn) {
          Transpose16(src, g.W, g.C, g.C, dst + g.pad_left, plane);
        } else {
          LoadHalf(src, row.data(), g.W * g.C);
          Transpose16(row.data(), g.W, g.C, g.C, dst + g.pad_left, plane);  // `row` is in L1
        }
        for (int64_t c = 0; c < g.C; ++c) {
          std::fill_n(dst + c * plane, g.pad_left, uint16_t{0});
          std::fill_n(dst + c * plane + g.pad_left + g.W, pad_right, uint16_t{0});
        }
      }
      // The reads past the last row feed only lanes of columns q >= Q, which no output keeps:
      // zeros, so that no lane reads memory never written.
      for (int64_t c = 0; c < g.C; ++c)
        std::fill_n(xh.get() + c * plane + in_rows * Wp, tail, uint16_t{0});

      const _Float16* xp = reinterpret_cast<const _Float16*>(xh.get());
      _Float16* yp = reinterpret_cast<_Float16*>(yh.get());
      for (int64_t gr = 0; gr < g.groups; ++gr)
        for (int64_t o0 = 0; o0 < positions; o0 += chunk) {
          const int nb = static_cast<int>((std::min(chunk, positions - o0) + 31) / 32);
          for (int64_t kb = 0; kb < kblocks; ++kb) {
            const int64_t k0 = gr * Kg + kb * kRows;
            const int m = static_cast<int>(std::min<int64_t>(kRows, Kg - kb * kRows));
            kTable[m - 1][nb - 1](xp + gr * g.Cg * plane + o0, plane, offsets.data(),
                                  static_cast<int>(g.KH * g.KW), g.Cg, wp + k0, g.Cg * g.K, g.K,
                                  yp + k0 * pitch + o0, pitch);
          }
        }

      for (int64_t i = 0; i < rows; ++i) {
        E* out = y + ((n * g.P + p0 + i) * g.Q) * g.K;
        if constexpr (kHalfIn) {  // straight into y
          Transpose16(yh.get() + i * Wp, g.K, g.Q, pitch, out, g.K);
        } else {
          Transpose16(yh.get() + i * Wp, g.K, g.Q, pitch, row.data(), g.K);
          StoreHalf(row.data(), out, g.Q * g.K);
        }
      }
    }
  });
  return true;
}

}  // namespace

bool Conv2DFpropFp16Spatial(const ConvGeometry& g, const float* x, const float* w, float* y,
                            const ParallelFor& parallel_for) {
  return Spatial(g, x, w, y, parallel_for);
}

bool Conv2DFpropFp16SpatialHalf(const ConvGeometry& g, const uint16_t* x, const uint16_t* w,
                                uint16_t* y, const ParallelFor& parallel_for) {
  return Spatial(g, x, w, y, parallel_for);
}

int64_t Fp16MicroKernelProbe(int64_t terms, float* sink) {
  if (!Fp16TileAvailable()) return 0;
  std::vector<_Float16> x(32 * kBlocks, static_cast<_Float16>(1.0f));
  std::vector<_Float16> w(kRows, static_cast<_Float16>(0.25f));
  std::vector<_Float16> out(kRows * 32 * kBlocks);
  const int64_t offset = 0;
  // plane stride 0 and w_ci 0: the same L1-resident operands at every step. Called through a
  // volatile pointer, so that it is the compiled kernel of the conv, not a copy specialized for
  // these constant strides.
  MicroFn volatile micro = kTable[kRows - 1][kBlocks - 1];
  micro(x.data(), 0, &offset, 1, terms, w.data(), 0, 0, out.data(), 32 * kBlocks);
  *sink = static_cast<float>(out[0]);
  return terms * kRows * 32 * kBlocks;
}

#else  // !__x86_64__

bool Conv2DFpropFp16Spatial(const ConvGeometry&, const float*, const float*, float*,
                            const ParallelFor&) {
  return false;
}
bool Conv2DFpropFp16SpatialHalf(const ConvGeometry&, const uint16_t*, const uint16_t*, uint16_t*,
                                const ParallelFor&) {
  return false;
}
int64_t Fp16MicroKernelProbe(int64_t, float*) { return 0; }

#endif

}  // namespace cpu
}  // namespace tf_fp16ops
