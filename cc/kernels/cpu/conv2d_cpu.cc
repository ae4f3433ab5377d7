#include "cc/kernels/cpu/conv2d_cpu.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "cc/kernels/conv_shape.h"
#include "cc/kernels/cpu/fprop_fp16.h"

namespace tf_fp16ops {
namespace cpu {
namespace {

// Product of work sizes for the shard cost estimate, saturating instead of overflowing.
int64_t CostOf(std::initializer_list<int64_t> factors) {
  int64_t c = 1;
  for (int64_t f : factors) {
    if (__builtin_mul_overflow(c, f, &c)) return std::numeric_limits<int64_t>::max();
  }
  return std::max<int64_t>(c, 1);
}

}  // namespace

void Conv2DFprop(const ConvGeometry& g, Accumulation acc, const float* x, const float* w, float* y,
                 const ParallelFor& parallel_for) {
  if (!HasWork(g)) {  // an empty sum per output (or no output): +0
    std::fill(y, y + g.OutputElements(), 0.0f);
    return;
  }
  if (acc == Accumulation::kHalf && Conv2DFpropFp16Spatial(g, x, w, y, parallel_for)) return;
  const int64_t Kg = g.K / g.groups;
  const int64_t rows = g.N * g.P;  // one shard unit: one output row (n, p)
  const int64_t cost = CostOf({2, g.Q, g.KH, g.KW, g.Cg, g.K});
  // With one group and no horizontal dilation, the (kw, ci) terms of a window row are
  // contiguous in x and in the filter, so one call covers a whole kernel row.
  const bool contiguous_row = g.groups == 1 && g.dilation_w == 1;
  // Output columns [q_lo, q_hi) have their whole window row inside the input; the tiles of
  // positions are cut at q_lo and q_hi, so that only the border columns take the per-tap calls.
  const int64_t span = (g.KW - 1) * g.dilation_w;  // < 2^62 (cc/kernels/conv_shape.h)
  const int64_t q_lo =
      std::min(g.Q, g.pad_left <= 0 ? 0 : (g.pad_left + g.stride_w - 1) / g.stride_w);
  const int64_t last_start = g.W - 1 + g.pad_left - span;  // largest fitting q * stride_w
  const int64_t q_hi =
      last_start < 0 ? q_lo : std::max(q_lo, std::min(g.Q, last_start / g.stride_w + 1));
  parallel_for(rows, cost, [&](int64_t begin, int64_t end) {
    const std::vector<float> zeros(static_cast<size_t>(g.Cg), 0.0f);
    float* accs[kMaxRows];
    const float* xs[kMaxRows];
    for (int64_t r = begin; r < end; ++r) {
      const int64_t n = r / g.P;
      const int64_t p = r % g.P;
      float* yrow = y + r * g.Q * g.K;
      std::fill(yrow, yrow + g.Q * g.K, 0.0f);
      for (int64_t q0 = 0, q1 = 0; q0 < g.Q; q0 = q1) {
        const int64_t cut = q0 < q_lo ? q_lo : q0 < q_hi ? q_hi : g.Q;
        q1 = std::min<int64_t>(q0 + kMaxRows, cut);
        const int m = static_cast<int>(q1 - q0);
        const int64_t w_first = q0 * g.stride_w - g.pad_left;
        const int64_t w_last = (q0 + m - 1) * g.stride_w - g.pad_left + (g.KW - 1) * g.dilation_w;
        const bool row_fits = contiguous_row && w_first >= 0 && w_last < g.W;
        for (int64_t gr = 0; gr < g.groups; ++gr) {
          for (int i = 0; i < m; ++i) accs[i] = yrow + (q0 + i) * g.K + gr * Kg;
          for (int64_t kh = 0; kh < g.KH; ++kh) {
            const int64_t h = p * g.stride_h - g.pad_top + kh * g.dilation_h;
            const bool h_inside = h >= 0 && h < g.H;
            if (row_fits && h_inside) {
              for (int i = 0; i < m; ++i)
                xs[i] = x + ((n * g.H + h) * g.W + w_first + i * g.stride_w) * g.C;
              AccumulateRowsMulti(acc, m, accs, Kg, xs, g.KW * g.C, w + kh * g.KW * g.C * g.K, g.K);
              continue;
            }
            for (int64_t kw = 0; kw < g.KW; ++kw) {
              for (int i = 0; i < m; ++i) {
                const int64_t wi = (q0 + i) * g.stride_w - g.pad_left + kw * g.dilation_w;
                const bool inside = h_inside && wi >= 0 && wi < g.W;
                xs[i] = inside ? x + ((n * g.H + h) * g.W + wi) * g.C + gr * g.Cg : zeros.data();
              }
              const float* wrows = w + (kh * g.KW + kw) * g.Cg * g.K + gr * Kg;
              AccumulateRowsMulti(acc, m, accs, Kg, xs, g.Cg, wrows, g.K);
            }
          }
        }
      }
    }
  });
}

bool Conv2DFpropHalfBuffers(const ConvGeometry& g, const uint16_t* x, const uint16_t* w,
                            uint16_t* y, const ParallelFor& parallel_for) {
  return HasWork(g) && Conv2DFpropFp16SpatialHalf(g, x, w, y, parallel_for);
}

void Conv2DDgrad(const ConvGeometry& g, Accumulation acc, const float* dy, const float* w,
                 float* dx, const ParallelFor& parallel_for) {
  if (!HasWork(g)) {  // no (p, q) or no term reaches any input element
    std::fill(dx, dx + g.InputElements(), 0.0f);
    return;
  }
  const int64_t Kg = g.K / g.groups;
  // Filter transposed per group to [KH, KW, groups, Kg, Cg] so that rows run over input channels.
  std::vector<float> wt(static_cast<size_t>(g.FilterElements()));
  for (int64_t khw = 0; khw < g.KH * g.KW; ++khw) {
    for (int64_t ci = 0; ci < g.Cg; ++ci) {
      for (int64_t k = 0; k < g.K; ++k) {
        const int64_t gr = k / Kg, ko = k % Kg;
        wt[((khw * g.groups + gr) * Kg + ko) * g.Cg + ci] = w[(khw * g.Cg + ci) * g.K + k];
      }
    }
  }
  const int64_t rows = g.N * g.H;
  const int64_t cost = CostOf({2, g.W, g.KH, g.KW, g.Cg, g.K});
  parallel_for(rows, cost, [&](int64_t begin, int64_t end) {
    float* accs[kMaxRows];
    const float* xs[kMaxRows];
    for (int64_t r = begin; r < end; ++r) {
      const int64_t n = r / g.H;
      const int64_t h = r % g.H;
      float* dxrow = dx + r * g.W * g.C;
      std::fill(dxrow, dxrow + g.W * g.C, 0.0f);
      for (int64_t gr = 0; gr < g.groups; ++gr) {
        for (int64_t kh = 0; kh < g.KH; ++kh) {
          const int64_t ph = h + g.pad_top - kh * g.dilation_h;
          if (ph < 0 || ph % g.stride_h != 0 || ph / g.stride_h >= g.P) continue;
          const int64_t p = ph / g.stride_h;
          for (int64_t kw = 0; kw < g.KW; ++kw) {
            const float* wrows = wt.data() + ((kh * g.KW + kw) * g.groups + gr) * Kg * g.Cg;
            int m = 0;
            for (int64_t wi = 0; wi < g.W; ++wi) {
              const int64_t qw = wi + g.pad_left - kw * g.dilation_w;
              if (qw >= 0 && qw % g.stride_w == 0 && qw / g.stride_w < g.Q) {
                accs[m] = dxrow + wi * g.C + gr * g.Cg;
                xs[m] = dy + ((n * g.P + p) * g.Q + qw / g.stride_w) * g.K + gr * Kg;
                if (++m == kMaxRows) {
                  AccumulateRowsMulti(acc, m, accs, g.Cg, xs, Kg, wrows, g.Cg);
                  m = 0;
                }
              }
            }
            AccumulateRowsMulti(acc, m, accs, g.Cg, xs, Kg, wrows, g.Cg);
          }
        }
      }
    }
  });
}

void Conv2DWgrad(const ConvGeometry& g, Accumulation acc, const float* x, const float* dy,
                 float* dw, const ParallelFor& parallel_for) {
  // Checked first: an empty batch or output leaves every sum empty, and its sizes (the
  // output width can be anything when N = 0) must not size any buffer.
  if (!HasWork(g)) {
    std::fill(dw, dw + g.FilterElements(), 0.0f);
    return;
  }
  const int64_t Kg = g.K / g.groups;
  const int64_t ci_blocks = (g.Cg + kMaxRows - 1) / kMaxRows;
  // One shard unit: up to kMaxRows filter rows dw[kh, kw, ci, :] that share the dy rows.
  const int64_t units = g.KH * g.KW * ci_blocks;
  // Terms are gathered kQChunk output columns at a time (q stays ascending across chunks), so
  // the scratch of a shard is at most kMaxRows * kQChunk floats, whatever Q is.
  constexpr int64_t kQChunk = 256;
  const int64_t q_chunk = std::min<int64_t>(g.Q, kQChunk);
  const int64_t cost = CostOf({2 * kMaxRows, g.N, g.P, g.Q, g.K});
  parallel_for(units, cost, [&](int64_t begin, int64_t end) {
    std::vector<float> gathered(static_cast<size_t>(kMaxRows * q_chunk));
    float* accs[kMaxRows];
    const float* xs[kMaxRows];
    for (int64_t u = begin; u < end; ++u) {
      const int64_t khw = u / ci_blocks;
      const int64_t kh = khw / g.KW, kw = khw % g.KW;
      const int64_t ci0 = (u % ci_blocks) * kMaxRows;
      const int m = static_cast<int>(std::min<int64_t>(kMaxRows, g.Cg - ci0));
      float* out = dw + (khw * g.Cg + ci0) * g.K;
      std::fill(out, out + m * g.K, 0.0f);
      for (int64_t gr = 0; gr < g.groups; ++gr) {
        for (int i = 0; i < m; ++i) {
          accs[i] = out + i * g.K + gr * Kg;
          xs[i] = gathered.data() + i * q_chunk;
        }
        for (int64_t n = 0; n < g.N; ++n) {
          for (int64_t p = 0; p < g.P; ++p) {
            const int64_t h = p * g.stride_h - g.pad_top + kh * g.dilation_h;
            const bool row_inside = h >= 0 && h < g.H;
            for (int64_t q0 = 0; q0 < g.Q; q0 += q_chunk) {
              const int64_t nq = std::min<int64_t>(q_chunk, g.Q - q0);
              for (int64_t j = 0; j < nq; ++j) {
                const int64_t wi = (q0 + j) * g.stride_w - g.pad_left + kw * g.dilation_w;
                const bool inside = row_inside && wi >= 0 && wi < g.W;
                const float* src =
                    inside ? x + ((n * g.H + h) * g.W + wi) * g.C + gr * g.Cg + ci0 : nullptr;
                for (int i = 0; i < m; ++i) gathered[i * q_chunk + j] = inside ? src[i] : 0.0f;
              }
              const float* dyrows = dy + ((n * g.P + p) * g.Q + q0) * g.K + gr * Kg;
              AccumulateRowsMulti(acc, m, accs, Kg, xs, nq, dyrows, g.K);
            }
          }
        }
      }
    }
  });
}

int64_t FpropHalfCeilingProbe(int64_t reps, float* sink) {
  if (reps <= 0) return 0;
  constexpr int64_t kTerms = 256;
  const int64_t fp16_steps = Fp16MicroKernelProbe(reps * kTerms, sink);
  if (fp16_steps > 0) return fp16_steps;
  const int64_t lanes = std::strcmp(AccumulateIsa(), "avx2") == 0 ? 32 : 16;
  constexpr int kRows = 8;  // the rows the AVX-512 kHalf kernel holds in registers
  // 8 x 256 x-terms and 256 x 32 w-lanes: 40 KiB at most, in L1 with the accumulators.
  std::vector<float> acc(static_cast<size_t>(kRows * lanes), 1024.0f);
  const std::vector<float> x(static_cast<size_t>(kRows * kTerms), 1.0f);
  const std::vector<float> w(static_cast<size_t>(kTerms * lanes), 0.25f);
  float* accs[kRows];
  const float* xs[kRows];
  for (int r = 0; r < kRows; ++r) {
    accs[r] = acc.data() + r * lanes;
    xs[r] = x.data() + r * kTerms;
  }
  for (int64_t i = 0; i < reps; ++i) {
    AccumulateRowsMulti(Accumulation::kHalf, kRows, accs, lanes, xs, kTerms, w.data(), lanes);
  }
  *sink = acc[0];
  return reps * kRows * lanes * kTerms;
}

}  // namespace cpu
}  // namespace tf_fp16ops
