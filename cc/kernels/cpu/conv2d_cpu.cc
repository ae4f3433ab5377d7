#include "cc/kernels/cpu/conv2d_cpu.h"

#include <algorithm>
#include <vector>

namespace tf_fp16ops {
namespace cpu {

void Conv2DFprop(const ConvGeometry& g, Accumulation acc, const float* x, const float* w, float* y,
                 const ParallelFor& parallel_for) {
  const int64_t Kg = g.K / g.groups;
  const int64_t rows = g.N * g.P;  // one shard unit: one output row (n, p)
  const int64_t cost = std::max<int64_t>(1, 2 * g.Q * g.KH * g.KW * g.Cg * g.K);
  parallel_for(rows, cost, [&](int64_t begin, int64_t end) {
    const std::vector<float> zeros(static_cast<size_t>(g.Cg), 0.0f);
    for (int64_t r = begin; r < end; ++r) {
      const int64_t n = r / g.P;
      const int64_t p = r % g.P;
      float* yrow = y + r * g.Q * g.K;
      std::fill(yrow, yrow + g.Q * g.K, 0.0f);
      for (int64_t q = 0; q < g.Q; ++q) {
        float* out = yrow + q * g.K;
        for (int64_t gr = 0; gr < g.groups; ++gr) {
          for (int64_t kh = 0; kh < g.KH; ++kh) {
            const int64_t h = p * g.stride_h - g.pad_top + kh * g.dilation_h;
            for (int64_t kw = 0; kw < g.KW; ++kw) {
              const int64_t wi = q * g.stride_w - g.pad_left + kw * g.dilation_w;
              const bool inside = h >= 0 && h < g.H && wi >= 0 && wi < g.W;
              const float* xs =
                  inside ? x + ((n * g.H + h) * g.W + wi) * g.C + gr * g.Cg : zeros.data();
              const float* wrows = w + (kh * g.KW + kw) * g.Cg * g.K + gr * Kg;
              AccumulateRows(acc, out + gr * Kg, Kg, xs, g.Cg, wrows, g.K);
            }
          }
        }
      }
    }
  });
}

void Conv2DDgrad(const ConvGeometry& g, Accumulation acc, const float* dy, const float* w, float* dx,
                 const ParallelFor& parallel_for) {
  const int64_t Kg = g.K / g.groups;
  // Filter transposed per group to [KH, KW, groups, Kg, Cg] so that rows run over input channels.
  std::vector<float> wt(static_cast<size_t>(g.KH * g.KW * g.Cg * g.K));
  for (int64_t khw = 0; khw < g.KH * g.KW; ++khw) {
    for (int64_t ci = 0; ci < g.Cg; ++ci) {
      for (int64_t k = 0; k < g.K; ++k) {
        const int64_t gr = k / Kg, ko = k % Kg;
        wt[((khw * g.groups + gr) * Kg + ko) * g.Cg + ci] = w[(khw * g.Cg + ci) * g.K + k];
      }
    }
  }
  const int64_t rows = g.N * g.H;
  const int64_t cost = std::max<int64_t>(1, 2 * g.W * g.KH * g.KW * g.Cg * g.K);
  parallel_for(rows, cost, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t n = r / g.H;
      const int64_t h = r % g.H;
      float* dxrow = dx + r * g.W * g.C;
      std::fill(dxrow, dxrow + g.W * g.C, 0.0f);
      for (int64_t wi = 0; wi < g.W; ++wi) {
        float* out = dxrow + wi * g.C;
        for (int64_t gr = 0; gr < g.groups; ++gr) {
          for (int64_t kh = 0; kh < g.KH; ++kh) {
            const int64_t ph = h + g.pad_top - kh * g.dilation_h;
            if (ph < 0 || ph % g.stride_h != 0 || ph / g.stride_h >= g.P) continue;
            const int64_t p = ph / g.stride_h;
            for (int64_t kw = 0; kw < g.KW; ++kw) {
              const int64_t qw = wi + g.pad_left - kw * g.dilation_w;
              if (qw < 0 || qw % g.stride_w != 0 || qw / g.stride_w >= g.Q) continue;
              const int64_t q = qw / g.stride_w;
              const float* xs = dy + ((n * g.P + p) * g.Q + q) * g.K + gr * Kg;
              const float* wrows = wt.data() + ((kh * g.KW + kw) * g.groups + gr) * Kg * g.Cg;
              AccumulateRows(acc, out + gr * g.Cg, g.Cg, xs, Kg, wrows, g.Cg);
            }
          }
        }
      }
    }
  });
}

void Conv2DWgrad(const ConvGeometry& g, Accumulation acc, const float* x, const float* dy, float* dw,
                 const ParallelFor& parallel_for) {
  const int64_t Kg = g.K / g.groups;
  const int64_t units = g.KH * g.KW * g.Cg;  // one shard unit: one filter row dw[kh, kw, ci, :]
  const int64_t cost = std::max<int64_t>(1, 2 * g.N * g.P * g.Q * g.K);
  parallel_for(units, cost, [&](int64_t begin, int64_t end) {
    std::vector<float> xs(static_cast<size_t>(g.Q));
    for (int64_t u = begin; u < end; ++u) {
      const int64_t kh = u / (g.KW * g.Cg);
      const int64_t kw = (u / g.Cg) % g.KW;
      const int64_t ci = u % g.Cg;
      float* out = dw + u * g.K;
      std::fill(out, out + g.K, 0.0f);
      for (int64_t gr = 0; gr < g.groups; ++gr) {
        const int64_t c = gr * g.Cg + ci;
        for (int64_t n = 0; n < g.N; ++n) {
          for (int64_t p = 0; p < g.P; ++p) {
            const int64_t h = p * g.stride_h - g.pad_top + kh * g.dilation_h;
            const bool row_inside = h >= 0 && h < g.H;
            for (int64_t q = 0; q < g.Q; ++q) {
              const int64_t wi = q * g.stride_w - g.pad_left + kw * g.dilation_w;
              xs[q] = (row_inside && wi >= 0 && wi < g.W) ? x[((n * g.H + h) * g.W + wi) * g.C + c] : 0.0f;
            }
            const float* dyrows = dy + (n * g.P + p) * g.Q * g.K + gr * Kg;
            AccumulateRows(acc, out + gr * Kg, Kg, xs.data(), g.Q, dyrows, g.K);
          }
        }
      }
    }
  });
}

}  // namespace cpu
}  // namespace tf_fp16ops
