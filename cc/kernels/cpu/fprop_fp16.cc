#include "cc/kernels/cpu/fprop_fp16.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "cc/kernels/cpu/fp16_target.h"
#include "cc/kernels/cpu/gemm_fp16.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tf_fp16ops {
namespace cpu {

#if defined(__x86_64__)
// See fprop_fp16.h. 8 x 8 blocks in SSE2 registers (three rounds of unpacks), the edges one by
// one. The layout passes of the spatial fprop below took about a third of the CPU time of a 1x1x128
// fprop as scalar loops (perf, Intel Xeon with AVX512-FP16).
void Transpose16(const uint16_t* src, int64_t rows, int64_t cols, int64_t src_stride, uint16_t* dst,
                 int64_t dst_stride) {
  int64_t r = 0;
  for (; r + 8 <= rows; r += 8) {
    int64_t c = 0;
    for (; c + 8 <= cols; c += 8) {
      __m128i v[8];
      for (int i = 0; i < 8; ++i) {
        v[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + (r + i) * src_stride + c));
      }
      __m128i t[8], u[8];
      for (int i = 0; i < 4; ++i) {
        t[2 * i] = _mm_unpacklo_epi16(v[2 * i], v[2 * i + 1]);      // columns 0-3 of rows 2i, 2i+1
        t[2 * i + 1] = _mm_unpackhi_epi16(v[2 * i], v[2 * i + 1]);  // columns 4-7
      }
      for (int h = 0; h < 2; ++h) {  // rows 0-3 (h = 0) and 4-7 (h = 1)
        u[4 * h + 0] = _mm_unpacklo_epi32(t[4 * h], t[4 * h + 2]);      // columns 0, 1
        u[4 * h + 1] = _mm_unpackhi_epi32(t[4 * h], t[4 * h + 2]);      // columns 2, 3
        u[4 * h + 2] = _mm_unpacklo_epi32(t[4 * h + 1], t[4 * h + 3]);  // columns 4, 5
        u[4 * h + 3] = _mm_unpackhi_epi32(t[4 * h + 1], t[4 * h + 3]);  // columns 6, 7
      }
      for (int j = 0; j < 4; ++j) {  // columns 2j and 2j + 1, all 8 rows
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (c + 2 * j) * dst_stride + r),
                         _mm_unpacklo_epi64(u[j], u[4 + j]));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (c + 2 * j + 1) * dst_stride + r),
                         _mm_unpackhi_epi64(u[j], u[4 + j]));
      }
    }
    for (; c < cols; ++c)
      for (int i = 0; i < 8; ++i) dst[c * dst_stride + r + i] = src[(r + i) * src_stride + c];
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
  // Scratch (planes of all input channels, output planes) within a few times the tensors.
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

// n binary16 values into binary16 storage, from binary32 (exact for binary16 values) or binary16.
void LoadHalf(const float* src, uint16_t* dst, int64_t n) {
  ToHalf(src, reinterpret_cast<_Float16*>(dst), n);
}
void LoadHalf(const uint16_t* src, uint16_t* dst, int64_t n) {
  std::memcpy(dst, src, sizeof(uint16_t) * static_cast<size_t>(n));
}
void StoreHalf(const uint16_t* src, float* dst, int64_t n) {
  ToFloat(reinterpret_cast<const _Float16*>(src), dst, n);
}
void StoreHalf(const uint16_t* src, uint16_t* dst, int64_t n) {
  std::memcpy(dst, src, sizeof(uint16_t) * static_cast<size_t>(n));
}

// The spatial fprop on binary32 (E = float) or binary16 (E = uint16_t bit patterns) buffers.
template <typename E>
bool Spatial(const ConvGeometry& g, const E* x, const E* w, E* y, const ParallelFor& parallel_for) {
  int64_t Hp = 0, Wp = 0;
  if (!Fp16TileAvailable() || !SpatialGeometry(g, &Hp, &Wp)) return false;
  const int64_t positions = g.P * Wp;
  const int64_t plane = Hp * Wp + 32 + (g.KW - 1) * g.dilation_w;  // + reads past the last row
  const int64_t out_pitch = (positions + 31) / 32 * 32;
  const int64_t Kg = g.K / g.groups;

  // Binary16 values are moved as uint16_t outside the FP16-target functions.
  std::vector<uint16_t> xh(static_cast<size_t>(g.N * g.C * plane), 0);
  parallel_for(g.N * g.H, 4 * g.W * g.C, [&](int64_t begin, int64_t end) {
    std::vector<uint16_t> row(static_cast<size_t>(g.W * g.C));
    for (int64_t r = begin; r < end; ++r) {
      const int64_t n = r / g.H, h = r % g.H;
      LoadHalf(x + r * g.W * g.C, row.data(), g.W * g.C);
      uint16_t* dst = xh.data() + n * g.C * plane + (h + g.pad_top) * Wp + g.pad_left;
      Transpose16(row.data(), g.W, g.C, g.C, dst, plane);  // `row` is in L1
    }
  });
  // Filter [KH*KW][Cg][K] as binary16.
  std::vector<uint16_t> wh(static_cast<size_t>(g.FilterElements()));
  LoadHalf(w, wh.data(), g.FilterElements());
  std::vector<int64_t> offsets(static_cast<size_t>(g.KH * g.KW));
  for (int64_t kh = 0; kh < g.KH; ++kh)
    for (int64_t kw = 0; kw < g.KW; ++kw)
      offsets[kh * g.KW + kw] = kh * g.dilation_h * Wp + kw * g.dilation_w;

  // Every element the output pass reads is written by a micro-kernel first: no zeroing.
  std::unique_ptr<uint16_t[]> yh(new uint16_t[static_cast<size_t>(g.N * g.K * out_pitch)]);
  const _Float16* xp = reinterpret_cast<const _Float16*>(xh.data());
  const _Float16* wp = reinterpret_cast<const _Float16*>(wh.data());
  _Float16* yp = reinterpret_cast<_Float16*>(yh.get());
  const int64_t kblocks = (Kg + kRows - 1) / kRows;
  const int64_t chunk = 32 * kBlocks;
  const int64_t pchunks = (positions + chunk - 1) / chunk;
  const int64_t units = g.N * g.groups * pchunks * kblocks;
  const int64_t cost = 2 * chunk * kRows * g.KH * g.KW * g.Cg;
  parallel_for(units, cost, [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      const int64_t kb = u % kblocks;
      const int64_t pc = (u / kblocks) % pchunks;
      const int64_t gr = (u / kblocks / pchunks) % g.groups;
      const int64_t n = u / kblocks / pchunks / g.groups;
      const int64_t k0 = gr * Kg + kb * kRows;
      const int m = static_cast<int>(std::min<int64_t>(kRows, Kg - kb * kRows));
      const int64_t o0 = pc * chunk;
      const int nb = static_cast<int>((std::min(chunk, positions - o0) + 31) / 32);
      kTable[m - 1][nb - 1](xp + (n * g.C + gr * g.Cg) * plane + o0, plane, offsets.data(),
                            static_cast<int>(g.KH * g.KW), g.Cg, wp + k0, g.Cg * g.K, g.K,
                            yp + (n * g.K + k0) * out_pitch + o0, out_pitch);
    }
  });
  parallel_for(g.N * g.P, 4 * g.Q * g.K, [&](int64_t begin, int64_t end) {
    std::vector<uint16_t> row(static_cast<size_t>(g.Q * g.K));
    for (int64_t r = begin; r < end; ++r) {
      const int64_t n = r / g.P, p = r % g.P;
      const uint16_t* src = yh.get() + n * g.K * out_pitch + p * Wp;
      Transpose16(src, g.K, g.Q, out_pitch, row.data(), g.K);
      StoreHalf(row.data(), y + r * g.Q * g.K, g.Q * g.K);
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
