#include "cc/kernels/cpu/conv2d_cpu.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "cc/kernels/conv_shape.h"
#include "cc/kernels/cpu/conv_nhwc_fp16.h"
#include "cc/kernels/cpu/fprop_fp16.h"
#include "cc/kernels/cpu/gemm_fp16.h"

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

// Largest zero-padded window copy (floats) a fprop thread makes for a border tile.
constexpr int64_t kMaxWindowFloats = int64_t{1} << 20;

// A 1x1 convolution with stride 1, no padding and one group is the product of the [N*H*W, C]
// input and the [C, K] filter (output positions are the input positions).
bool IsGemm(const ConvGeometry& g) {
  return g.KH == 1 && g.KW == 1 && g.stride_h == 1 && g.stride_w == 1 && g.pad_top == 0 &&
         g.pad_left == 0 && g.P == g.H && g.Q == g.W && g.groups == 1;
}

// A 1x1 convolution with stride 1 and no padding joins input position (n, h, w) to output
// position (n, h, w) alone, so its N*H*W positions may be laid out as any images of that many
// positions in all: every sum keeps its terms and their order (fprop and dgrad sum over the
// channels of one position; wgrad over the positions (n, p, q) ascending, which is their order
// flattened). Laid out here as one image (the images stacked: the spatial kernel's bands of
// about 768 positions then run across images, where an image of a few positions filled a few of
// their 32-lane blocks) whose rows are at least q positions wide, q the largest of kHalfRows (8),
// 4, 2, 1 dividing N*H*W: the kHalf row kernels take one output row at a time, up to kHalfRows
// positions per register tile (a Dense layer's rows as images of one position, [rows, 1, 1, C],
// become rows of 8). Other problems are returned as they are.
ConvGeometry FoldedPositions(const ConvGeometry& g) {
  if (g.KH != 1 || g.KW != 1 || g.stride_h != 1 || g.stride_w != 1 || g.pad_top != 0 ||
      g.pad_left != 0 || g.P != g.H || g.Q != g.W || !HasWork(g)) {
    return g;
  }
  const int64_t positions = g.N * g.H * g.W;  // the output's element count over K: no overflow
  int64_t q = kHalfRows;
  while (positions % q != 0) q /= 2;
  const int64_t width = std::max(g.W, q);  // W divides N*H*W, and so does q
  if (g.N == 1 && width == g.W) return g;
  ConvGeometry f = g;
  f.N = 1;
  f.W = f.Q = width;
  f.H = f.P = positions / width;
  return f;
}

// Start of tile i of `n` items cut into `tiles` tiles whose sizes differ by at most one
// (i * n / tiles without overflow: n < 2^62 and tiles <= n).
int64_t TileStart(int64_t i, int64_t n, int64_t tiles) {
  return static_cast<int64_t>(static_cast<__int128>(i) * n / tiles);
}

// out[r, 0:len] = sum over t ascending of a[r, t] * b[t, 0:len] for r < rows (a: [rows, terms],
// b: [terms, len], out: [rows, len], all dense), kMaxRows rows per call so that they share the
// loads of b: the 1x1 stride-1 fprop (x times w) and dgrad (dy times w transposed).
void RowsTimesMatrix(Accumulation acc, int64_t rows, const float* a, int64_t terms, const float* b,
                     int64_t len, float* out, const ParallelFor& parallel_for) {
  const int64_t blocks = (rows + kMaxRows - 1) / kMaxRows;
  parallel_for(blocks, CostOf({2 * kMaxRows, terms, len}), [&](int64_t begin, int64_t end) {
    float* accs[kMaxRows];
    const float* as[kMaxRows];
    for (int64_t blk = begin; blk < end; ++blk) {
      const int64_t r0 = blk * kMaxRows;
      const int m = static_cast<int>(std::min<int64_t>(kMaxRows, rows - r0));
      for (int i = 0; i < m; ++i) {
        accs[i] = out + (r0 + i) * len;
        as[i] = a + (r0 + i) * terms;
        std::fill(accs[i], accs[i] + len, 0.0f);
      }
      AccumulateRowsMulti(acc, m, accs, len, as, terms, b, len);
    }
  });
}

// Columns first..last of one NHWC input row (`xrow`: W columns of C floats; nullptr for a row
// outside the input) copied to `dst`, zeros in place of the columns outside the input.
const float* PaddedWindow(const float* xrow, int64_t W, int64_t C, int64_t first, int64_t last,
                          float* dst) {
  for (int64_t c = first; c <= last; ++c) {
    float* out = dst + (c - first) * C;
    if (xrow != nullptr && c >= 0 && c < W) {
      std::copy(xrow + c * C, xrow + (c + 1) * C, out);
    } else {
      std::fill(out, out + C, 0.0f);
    }
  }
  return dst;
}

}  // namespace

void Conv2DFprop(const ConvGeometry& problem, Accumulation acc, const float* x, const float* w,
                 float* y, const ParallelFor& parallel_for) {
  const ConvGeometry g = acc == Accumulation::kHalf ? FoldedPositions(problem) : problem;
  if (!HasWork(g)) {  // an empty sum per output (or no output): +0
    std::fill(y, y + g.OutputElements(), 0.0f);
    return;
  }
  if (acc == Accumulation::kHalf && Conv2DFpropFp16Spatial(g, x, w, y, parallel_for)) return;
  const int64_t Kg = g.K / g.groups;
  // kFloat: y[N*P*Q, K] = x[N*H*W, C] w[C, K], kMaxRows positions per call across output rows
  // (kHalf keeps the row tiles below: no gain from this mode was measurable for it).
  if (IsGemm(g) && acc == Accumulation::kFloat) {
    RowsTimesMatrix(acc, g.N * g.P * g.Q, x, g.C, w, g.K, y, parallel_for);
    return;
  }
  const int64_t rows = g.N * g.P;  // one shard unit: one output row (n, p)
  const int64_t cost = CostOf({2, g.Q, g.KH, g.KW, g.Cg, g.K});
  // With one group and no horizontal dilation, the (kw, ci) terms of a window row are
  // contiguous in x and in the filter, so one call covers a whole kernel row.
  const bool contiguous_row = g.groups == 1 && g.dilation_w == 1;
  // Positions are cut into balanced tiles of at most the kernel's register tile (a tile of one
  // border column would run one accumulator chain, or a few, at a time); with contiguous rows a
  // tile whose window lies inside x takes one call for all its kernel rows (on the AVX2 kHalf path
  // the seed shape 16x32x32x16 * 3x3x16 went from 0.83-0.85 to 0.87 of the ceiling, Zen 1, A/B in
  // alternating processes), the other such tiles one call per kernel row (from a zero-padded copy
  // of its window where the window leaves the input), the others one call per tap.
  const int64_t tile_rows = std::min<int64_t>(kMaxRows, RegisterTileRows(acc, Kg));
  const int64_t tiles = (g.Q + tile_rows - 1) / tile_rows;  // tile i: [i*Q/tiles, (i+1)*Q/tiles)
  // A contiguous-row tile whose window leaves the input (padding, or a row outside) reads its
  // window row from a copy with zeros in place of the outside columns, so that it still takes one
  // call per kernel row: the same terms as one call per tap, where outside taps read zeros, in
  // the same (kw, ci) order. Only while the window (at most (tile_rows - 1) * stride_w + KW
  // columns of C) stays small; otherwise one call per tap.
  const int64_t window_span = CostOf({tile_rows - 1, g.stride_w});  // saturates, at least 1
  const bool windowed = contiguous_row && window_span <= kMaxWindowFloats &&
                        g.KW <= kMaxWindowFloats &&
                        CostOf({window_span + g.KW, g.C}) <= kMaxWindowFloats;
  const int64_t window_cols = windowed ? window_span + g.KW : 0;
  parallel_for(rows, cost, [&](int64_t begin, int64_t end) {
    const std::vector<float> zeros(static_cast<size_t>(g.Cg), 0.0f);
    std::vector<float> window(windowed ? static_cast<size_t>(window_cols * g.C) : 0);
    float* accs[kMaxRows];
    const float* xs[kMaxRows];
    for (int64_t r = begin; r < end; ++r) {
      const int64_t n = r / g.P;
      const int64_t p = r % g.P;
      float* yrow = y + r * g.Q * g.K;
      std::fill(yrow, yrow + g.Q * g.K, 0.0f);
      for (int64_t tile = 0; tile < tiles; ++tile) {
        const int64_t q0 = TileStart(tile, g.Q, tiles);
        const int m = static_cast<int>(TileStart(tile + 1, g.Q, tiles) - q0);
        const int64_t w_first = q0 * g.stride_w - g.pad_left;
        const int64_t w_last = (q0 + m - 1) * g.stride_w - g.pad_left + (g.KW - 1) * g.dilation_w;
        const bool row_fits = contiguous_row && w_first >= 0 && w_last < g.W;
        // Every kernel row of the tile inside x: one call over all KH rows, their terms
        // dilation_h rows of x apart (the same calls in turn, the accumulators kept in registers).
        const int64_t h_first = p * g.stride_h - g.pad_top;
        if (row_fits && h_first >= 0 && h_first + (g.KH - 1) * g.dilation_h < g.H) {
          for (int i = 0; i < m; ++i) {
            accs[i] = yrow + (q0 + i) * g.K;
            xs[i] = x + ((n * g.H + h_first) * g.W + w_first + i * g.stride_w) * g.C;
          }
          // (KH - 1) * dilation_h < H, so the stride is below H * W * C (a single row's may not
          // be: its dilation can be anything).
          const int64_t x_stride = g.KH > 1 ? g.dilation_h * g.W * g.C : 0;
          AccumulateRowsMultiSegments(acc, m, accs, g.K, xs, g.KW * g.C, g.KH, x_stride, w, g.K);
          continue;
        }
        for (int64_t gr = 0; gr < g.groups; ++gr) {
          for (int i = 0; i < m; ++i) accs[i] = yrow + (q0 + i) * g.K + gr * Kg;
          for (int64_t kh = 0; kh < g.KH; ++kh) {
            const int64_t h = p * g.stride_h - g.pad_top + kh * g.dilation_h;
            const bool h_inside = h >= 0 && h < g.H;
            // One call per kernel row: the window row straight from x, or its zero-padded copy.
            if ((row_fits && h_inside) || windowed) {
              const float* xrow = h_inside ? x + (n * g.H + h) * g.W * g.C : nullptr;
              const float* row = row_fits && h_inside
                                     ? xrow + w_first * g.C
                                     : PaddedWindow(xrow, g.W, g.C, w_first, w_last, window.data());
              for (int i = 0; i < m; ++i) xs[i] = row + i * g.stride_w * g.C;
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

bool Conv2DDgradHalfBuffers(const ConvGeometry& problem, const uint16_t* dy, const uint16_t* w,
                            uint16_t* dx, const ParallelFor& parallel_for) {
  const ConvGeometry g = FoldedPositions(problem);
  return HasWork(g) && Conv2DDgradFp16NhwcHalf(g, dy, w, dx, parallel_for);
}

bool Conv2DWgradHalfBuffers(const ConvGeometry& problem, const uint16_t* x, const uint16_t* dy,
                            uint16_t* dw, const ParallelFor& parallel_for) {
  const ConvGeometry g = FoldedPositions(problem);
  return HasWork(g) && Conv2DWgradFp16NhwcHalf(g, x, dy, dw, parallel_for);
}

bool Conv2DFpropHalfBuffers(const ConvGeometry& problem, const uint16_t* x, const uint16_t* w,
                            uint16_t* y, const ParallelFor& parallel_for) {
  const ConvGeometry g = FoldedPositions(problem);
  return HasWork(g) && (Conv2DFpropFp16NhwcHalf(g, x, w, y, parallel_for) ||
                        Conv2DFpropFp16SpatialHalf(g, x, w, y, parallel_for));
}

void Conv2DDgrad(const ConvGeometry& problem, Accumulation acc, const float* dy, const float* w,
                 float* dx, const ParallelFor& parallel_for) {
  const ConvGeometry g = acc == Accumulation::kHalf ? FoldedPositions(problem) : problem;
  if (!HasWork(g)) {  // no (p, q) or no term reaches any input element
    std::fill(dx, dx + g.InputElements(), 0.0f);
    return;
  }
  const int64_t Kg = g.K / g.groups;
  const int64_t taps = g.KH * g.KW;
  // Filter transposed to [groups, KH, KW, Kg, Cg]: rows run over input channels, and the
  // (kh, kw, ko) terms of one group are consecutive rows.
  std::vector<float> wt(static_cast<size_t>(g.FilterElements()));
  for (int64_t khw = 0; khw < taps; ++khw) {
    for (int64_t ci = 0; ci < g.Cg; ++ci) {
      for (int64_t k = 0; k < g.K; ++k) {
        const int64_t gr = k / Kg, ko = k % Kg;
        wt[((gr * taps + khw) * Kg + ko) * g.Cg + ci] = w[(khw * g.Cg + ci) * g.K + k];
      }
    }
  }
  // 1x1, stride 1, no padding, one group: dx[N*H*W, C] = dy[N*P*Q, K] wt[K, C], ko ascending.
  if (IsGemm(g) && acc == Accumulation::kFloat) {
    RowsTimesMatrix(acc, g.N * g.H * g.W, dy, g.K, wt.data(), g.C, dx, parallel_for);
    return;
  }
  // An input element that every tap (kh, kw) reaches from an output position (the interior,
  // stride 1) takes one call over all KH*KW*Kg terms, its dy values gathered in (kh, kw, ko)
  // order into a scratch row; the others take one call per tap. Either way its sum runs over
  // (kh, kw, ko) ascending, so the bits are the same.
  // With one group and stride and dilation 1 in width no gathering is needed: dy is copied once
  // with its columns reversed, dyr[n, p, Q-1-q, :] = dy[n, p, q, :], so that for each filter row
  // kh the (kw, ko) terms of an element are consecutive in dyr (kw ascending is q descending), and
  // an element that every kw reaches takes one call per kh over KW*K terms.
  const bool reversed = g.groups == 1 && g.stride_w == 1 && g.dilation_w == 1;
  std::vector<float> dyr;
  if (reversed) {
    dyr.resize(static_cast<size_t>(g.OutputElements()));
    parallel_for(g.N * g.P, CostOf({2, g.Q, g.K}), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        for (int64_t q = 0; q < g.Q; ++q) {
          const float* src = dy + (r * g.Q + q) * g.K;
          float* dst = dyr.data() + (r * g.Q + g.Q - 1 - q) * g.K;
          for (int64_t k = 0; k < g.K; ++k) dst[k] = src[k];
        }
      }
    });
  }
  constexpr int64_t kMaxGather = 4096;
  const int64_t gather_terms = taps * Kg;
  const bool gather = !reversed && gather_terms <= kMaxGather;
  const int64_t tile_rows = std::min<int64_t>(kMaxRows, RegisterTileRows(acc, g.Cg));
  // The output index an input row/column meets through a tap, if any (no division for stride 1).
  auto out_index = [](int64_t o, int64_t stride, int64_t size, int64_t* idx) {
    if (o < 0) return false;
    if (stride == 1) {
      *idx = o;
      return o < size;
    }
    if (o % stride != 0) return false;
    *idx = o / stride;
    return *idx < size;
  };
  // With `reversed` (stride_w 1), every kw reaches the columns wi in [w_lo, w_hi):
  // 0 <= wi + pad_left - kw * dw and wi + pad_left < Q for all kw.
  const int64_t w_lo = std::min(g.W, std::max<int64_t>(0, (g.KW - 1) * g.dilation_w - g.pad_left));
  const int64_t w_hi = std::max(w_lo, std::min(g.W, g.Q - g.pad_left));
  const int64_t rows = g.N * g.H;
  const int64_t cost = CostOf({2, g.W, g.KH, g.KW, g.Cg, g.K});
  parallel_for(rows, cost, [&](int64_t begin, int64_t end) {
    float* accs[kMaxRows];
    const float* xs[kMaxRows];
    std::vector<float> scratch(gather ? static_cast<size_t>(tile_rows * gather_terms) : 0);
    std::vector<char> whole(static_cast<size_t>(g.W));  // every tap reaches column wi
    std::vector<int64_t> p_of(static_cast<size_t>(g.KH)), q_of(static_cast<size_t>(g.KW));
    for (int64_t r = begin; r < end; ++r) {
      const int64_t n = r / g.H;
      const int64_t h = r % g.H;
      float* dxrow = dx + r * g.W * g.C;
      std::fill(dxrow, dxrow + g.W * g.C, 0.0f);
      bool all_kh = gather || reversed;
      for (int64_t kh = 0; kh < g.KH && gather && all_kh; ++kh) {
        all_kh = out_index(h + g.pad_top - kh * g.dilation_h, g.stride_h, g.P, &p_of[kh]);
      }
      for (int64_t wi = 0; wi < g.W && gather; ++wi) {
        bool all = all_kh;
        for (int64_t kw = 0; kw < g.KW && all; ++kw) {
          int64_t q;
          all = out_index(wi + g.pad_left - kw * g.dilation_w, g.stride_w, g.Q, &q);
        }
        whole[wi] = all;
      }
      for (int64_t gr = 0; gr < g.groups; ++gr) {
        const float* wgroup = wt.data() + gr * taps * Kg * g.Cg;
        if (reversed) {  // every kw reaches the element: one call per reaching kh
          for (int64_t kh = 0; kh < g.KH; ++kh) {
            int64_t p;
            if (!out_index(h + g.pad_top - kh * g.dilation_h, g.stride_h, g.P, &p)) continue;
            const float* wrows = wgroup + kh * g.KW * Kg * g.Cg;
            int m = 0;
            for (int64_t wi = w_lo; wi < w_hi; ++wi) {
              const int64_t rq = g.Q - 1 - (wi + g.pad_left);  // kw = 0 reads q = wi + pad_left
              accs[m] = dxrow + wi * g.C;
              xs[m] = dyr.data() + ((n * g.P + p) * g.Q + rq) * g.K;
              if (++m == tile_rows) {
                AccumulateRowsMulti(acc, m, accs, g.Cg, xs, g.KW * Kg, wrows, g.Cg);
                m = 0;
              }
            }
            AccumulateRowsMulti(acc, m, accs, g.Cg, xs, g.KW * Kg, wrows, g.Cg);
          }
        } else if (all_kh) {
          int m = 0;
          for (int64_t wi = 0; wi < g.W; ++wi) {
            if (!whole[wi]) continue;
            float* row = scratch.data() + m * gather_terms;
            for (int64_t kw = 0; kw < g.KW; ++kw) {
              q_of[kw] = (wi + g.pad_left - kw * g.dilation_w) / g.stride_w;
            }
            for (int64_t kh = 0; kh < g.KH; ++kh) {
              for (int64_t kw = 0; kw < g.KW; ++kw) {
                const float* src = dy + ((n * g.P + p_of[kh]) * g.Q + q_of[kw]) * g.K + gr * Kg;
                float* dst = row + (kh * g.KW + kw) * Kg;
                for (int64_t k = 0; k < Kg; ++k) dst[k] = src[k];
              }
            }
            accs[m] = dxrow + wi * g.C + gr * g.Cg;
            xs[m] = row;
            if (++m == tile_rows) {
              AccumulateRowsMulti(acc, m, accs, g.Cg, xs, gather_terms, wgroup, g.Cg);
              m = 0;
            }
          }
          AccumulateRowsMulti(acc, m, accs, g.Cg, xs, gather_terms, wgroup, g.Cg);
        }
        for (int64_t kh = 0; kh < g.KH; ++kh) {
          int64_t p;
          if (!out_index(h + g.pad_top - kh * g.dilation_h, g.stride_h, g.P, &p)) continue;
          for (int64_t kw = 0; kw < g.KW; ++kw) {
            const float* wrows = wgroup + (kh * g.KW + kw) * Kg * g.Cg;
            int m = 0;
            for (int64_t wi = 0; wi < g.W; ++wi) {
              if (reversed && wi == w_lo) wi = std::max(w_lo, w_hi);  // summed above
              if (wi >= g.W) break;
              if (gather && all_kh && whole[wi]) continue;  // summed by the calls above
              int64_t q;
              if (out_index(wi + g.pad_left - kw * g.dilation_w, g.stride_w, g.Q, &q)) {
                accs[m] = dxrow + wi * g.C + gr * g.Cg;
                xs[m] = dy + ((n * g.P + p) * g.Q + q) * g.K + gr * Kg;
                if (++m == tile_rows) {
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

void Conv2DWgrad(const ConvGeometry& problem, Accumulation acc, const float* x, const float* dy,
                 float* dw, const ParallelFor& parallel_for) {
  const ConvGeometry g = acc == Accumulation::kHalf ? FoldedPositions(problem) : problem;
  // Checked first: an empty batch or output leaves every sum empty, and its sizes (the
  // output width can be anything when N = 0) must not size any buffer.
  if (!HasWork(g)) {
    std::fill(dw, dw + g.FilterElements(), 0.0f);
    return;
  }
  const int64_t Kg = g.K / g.groups;
  if (IsGemm(g)) {
    // dw[C, K] = x[N*H*W, C]^T dy[N*H*W, K]: each filter row sums over all (n, p, q) in their
    // order. Positions in blocks (ascending; the accumulators are stored exactly between blocks),
    // so that the dy rows of a block stay in cache while every lane tile and row chunk of the call
    // reads them; the x columns of a block's channels are transposed into a scratch of the shard
    // just before its call (in cache: no pass over all of x and no buffer of its size).
    const int64_t positions = g.N * g.H * g.W;
    constexpr int64_t kTermBlock = 256;
    const int64_t blocks = (g.C + kMaxRows - 1) / kMaxRows;
    parallel_for(blocks, CostOf({2 * kMaxRows, positions, g.K}), [&](int64_t begin, int64_t end) {
      std::vector<float> xl(static_cast<size_t>(kMaxRows * kTermBlock));
      float* accs[kMaxRows];
      const float* xs[kMaxRows];
      for (int i = 0; i < kMaxRows; ++i) xs[i] = xl.data() + i * kTermBlock;
      for (int64_t b = begin; b < end; ++b) {
        const int64_t c0 = b * kMaxRows;
        const int m = static_cast<int>(std::min<int64_t>(kMaxRows, g.C - c0));
        for (int i = 0; i < m; ++i) {
          accs[i] = dw + (c0 + i) * g.K;
          std::fill(accs[i], accs[i] + g.K, 0.0f);
        }
        for (int64_t e0 = 0; e0 < positions; e0 += kTermBlock) {
          const int64_t nt = std::min(kTermBlock, positions - e0);
          TransposeInto(x + e0 * g.C + c0, nt, m, g.C, xl.data(), kTermBlock);
          AccumulateRowsMulti(acc, m, accs, g.K, xs, nt, dy + e0 * g.K, g.K);
        }
      }
    });
    return;
  }
  const int64_t ci_blocks = (g.Cg + kMaxRows - 1) / kMaxRows;
  // Terms are gathered kQChunk output columns at a time (q stays ascending across chunks), so
  // the scratch of a shard is at most kMaxRows * kQChunk floats, whatever Q is.
  constexpr int64_t kQChunk = 256;
  const int64_t q_chunk = std::min<int64_t>(g.Q, kQChunk);
  // With stride_w 1 the x terms of one (ci, n, h) are consecutive columns: x is transposed once
  // to channel rows [N, H, C, Wp] (zero columns for the padding, Wp = Q + (KW - 1) * dw), so that
  // every call reads its terms in place instead of gathering them per tap. Not for padding so
  // large that the rows would be much wider than the input.
  const int64_t Wp = g.Q + (g.KW - 1) * g.dilation_w;
  const bool planar = g.stride_w == 1 && g.pad_left >= 0 && Wp - g.pad_left >= g.W &&
                      Wp <= 2 * g.W + 8 &&
                      g.N * g.H * g.C * Wp <= 3 * g.InputElements() + (int64_t{1} << 20);
  // One shard unit: up to kMaxRows filter rows dw[kh, kw, ci, :] for each of `taps_per_unit`
  // consecutive kw, which all read the same dy rows: with several taps per unit (planar, and
  // enough units left for the threads) the dy rows of one (n, p) are read from memory once for
  // all of them and stay in cache between their calls.
  const int64_t taps_per_unit = planar && g.KH * ci_blocks >= 8 ? g.KW : 1;
  const int64_t kw_blocks = g.KW / taps_per_unit;
  const int64_t units = g.KH * kw_blocks * ci_blocks;
  const int64_t cost = CostOf({2 * kMaxRows, taps_per_unit, g.N, g.P, g.Q, g.K});
  std::unique_ptr<float[]> xt;  // every element written below
  std::vector<float> zero_row;
  if (planar) {
    xt.reset(new float[static_cast<size_t>(g.N * g.H * g.C * Wp)]);
    zero_row.assign(static_cast<size_t>(Wp), 0.0f);
    parallel_for(g.N * g.H, CostOf({4, g.W, g.C}), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        float* dst = xt.get() + r * g.C * Wp;
        TransposeInto(x + r * g.W * g.C, g.W, g.C, g.C, dst + g.pad_left, Wp);
        for (int64_t c = 0; c < g.C; ++c) {  // the padding columns
          std::fill(dst + c * Wp, dst + c * Wp + g.pad_left, 0.0f);
          std::fill(dst + c * Wp + g.pad_left + g.W, dst + (c + 1) * Wp, 0.0f);
        }
      }
    });
  }
  parallel_for(units, cost, [&](int64_t begin, int64_t end) {
    std::vector<float> gathered(planar ? 0 : static_cast<size_t>(kMaxRows * q_chunk));
    // accs[j * kMaxRows + i]: row i of tap kw0 + j.
    std::vector<float*> accs(static_cast<size_t>(taps_per_unit * kMaxRows));
    const float* xs[kMaxRows];
    for (int64_t u = begin; u < end; ++u) {
      const int64_t kh = u / (kw_blocks * ci_blocks);
      const int64_t kw0 = (u / ci_blocks) % kw_blocks * taps_per_unit;
      const int64_t ci0 = (u % ci_blocks) * kMaxRows;
      const int m = static_cast<int>(std::min<int64_t>(kMaxRows, g.Cg - ci0));
      for (int64_t j = 0; j < taps_per_unit; ++j) {
        float* out = dw + ((kh * g.KW + kw0 + j) * g.Cg + ci0) * g.K;
        std::fill(out, out + m * g.K, 0.0f);
      }
      for (int64_t gr = 0; gr < g.groups; ++gr) {
        for (int64_t j = 0; j < taps_per_unit; ++j) {
          for (int i = 0; i < m; ++i)
            accs[j * kMaxRows + i] = dw + ((kh * g.KW + kw0 + j) * g.Cg + ci0 + i) * g.K + gr * Kg;
        }
        if (!planar) {
          for (int i = 0; i < m; ++i) xs[i] = gathered.data() + i * q_chunk;
        }
        for (int64_t n = 0; n < g.N; ++n) {
          for (int64_t p = 0; p < g.P; ++p) {
            const int64_t h = p * g.stride_h - g.pad_top + kh * g.dilation_h;
            const bool row_inside = h >= 0 && h < g.H;
            if (planar) {  // terms q = 0 .. Q-1 read x[n, h, q - pad_left + kw * dw, ci] in place
              const float* dyrows = dy + (n * g.P + p) * g.Q * g.K + gr * Kg;
              for (int64_t j = 0; j < taps_per_unit; ++j) {
                for (int i = 0; i < m; ++i) {
                  const float* base =
                      row_inside ? xt.get() + ((n * g.H + h) * g.C + gr * g.Cg + ci0 + i) * Wp
                                 : zero_row.data();
                  xs[i] = base + (kw0 + j) * g.dilation_w;
                }
                AccumulateRowsMulti(acc, m, accs.data() + j * kMaxRows, Kg, xs, g.Q, dyrows, g.K);
              }
              continue;
            }
            for (int64_t q0 = 0; q0 < g.Q; q0 += q_chunk) {
              const int64_t nq = std::min<int64_t>(q_chunk, g.Q - q0);
              for (int64_t j = 0; j < nq; ++j) {
                const int64_t wi = (q0 + j) * g.stride_w - g.pad_left + kw0 * g.dilation_w;
                const bool inside = row_inside && wi >= 0 && wi < g.W;
                const float* src =
                    inside ? x + ((n * g.H + h) * g.W + wi) * g.C + gr * g.Cg + ci0 : nullptr;
                for (int i = 0; i < m; ++i) gathered[i * q_chunk + j] = inside ? src[i] : 0.0f;
              }
              const float* dyrows = dy + ((n * g.P + p) * g.Q + q0) * g.K + gr * Kg;
              AccumulateRowsMulti(acc, m, accs.data(), Kg, xs, nq, dyrows, g.K);
            }
          }
        }
      }
    }
  });
}

int64_t FpropHalfCeilingProbe(int64_t reps, float* sink, int variant) {
  if (reps <= 0 || variant < 0 || variant > 1) return 0;
  if (std::strcmp(AccumulateIsa(), "avx512fp16") == 0) {
    return variant == 0 ? Fp16MicroKernelProbe(reps * 256, sink) : Fp16TileProbe(2 * reps, sink);
  }
  const int64_t lanes = variant == 0 ? 16 : 32;
  const int64_t terms = variant == 0 ? 256 : 128;
  constexpr int kRows = 8;  // the rows the AVX-512 and AVX2 kHalf row tiles hold in registers
  // x 8 x terms, w terms x lanes: 24 KiB (variant 0) or 20 KiB (variant 1), in L1 with the
  // accumulators.
  std::vector<float> acc(static_cast<size_t>(kRows * lanes), 1024.0f);
  const std::vector<float> x(static_cast<size_t>(kRows * terms), 1.0f);
  const std::vector<float> w(static_cast<size_t>(terms * lanes), 0.25f);
  float* accs[kRows];
  const float* xs[kRows];
  for (int r = 0; r < kRows; ++r) {
    accs[r] = acc.data() + r * lanes;
    xs[r] = x.data() + r * terms;
  }
  for (int64_t i = 0; i < reps; ++i) {
    AccumulateRowsMulti(Accumulation::kHalf, kRows, accs, lanes, xs, terms, w.data(), lanes);
  }
  *sink = acc[0];
  return reps * kRows * lanes * terms;
}

}  // namespace cpu
}  // namespace tf_fp16ops
