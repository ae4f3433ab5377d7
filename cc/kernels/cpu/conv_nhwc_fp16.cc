#include "cc/kernels/cpu/conv_nhwc_fp16.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "cc/kernels/cpu/fprop_fp16.h"
#include "cc/kernels/cpu/gemm_fp16.h"

namespace tf_fp16ops {
namespace cpu {

#if defined(__x86_64__)

bool Conv2DFpropFp16NhwcHalf(const ConvGeometry& g, const uint16_t* x, const uint16_t* w,
                             uint16_t* y, const ParallelFor& parallel_for) {
  const int64_t Kg = g.K / g.groups;
  if (!Fp16TileAvailable() || Kg < kNhwcMinLanes) return false;
  const int64_t taps = g.KH * g.KW;
  const Fp16TileGrid grid(g.groups, g.N * g.P * g.Q, Kg);  // rows: output positions
  // Padded taps read these zeros (0 * inf gives NaN, as zero padding defines it).
  const std::vector<uint16_t> zeros(static_cast<size_t>(std::max<int64_t>(g.Cg, 1)), 0);
  parallel_for(grid.units(), grid.CostPerUnit(taps * g.Cg), [&](int64_t begin, int64_t end) {
    // a[tap * rows + r]: where row r's run of Cg input channels for that tap starts.
    std::vector<const uint16_t*> a(static_cast<size_t>(taps * grid.tile_rows()));
    for (int64_t u = begin; u < end; ++u) {
      const Fp16TileGrid::Unit t = grid[u];
      const int64_t gr = t.group, k0 = gr * Kg + t.lane0, pos0 = t.row0;
      const int rows = t.rows;
      // Output position pos0 + r as (n, p, q): divisions for the first row only, then stepped.
      int64_t q = pos0 % g.Q, p = pos0 / g.Q % g.P, n = pos0 / g.Q / g.P;
      for (int r = 0; r < rows; ++r, (++q == g.Q ? (q = 0, ++p == g.P ? (p = 0, ++n) : 0) : 0)) {
        const int64_t hi0 = p * g.stride_h - g.pad_top, wi0 = q * g.stride_w - g.pad_left;
        for (int64_t kh = 0; kh < g.KH; ++kh) {
          const int64_t hi = hi0 + kh * g.dilation_h;
          for (int64_t kw = 0; kw < g.KW; ++kw) {
            const int64_t wi = wi0 + kw * g.dilation_w;
            const bool inside = hi >= 0 && hi < g.H && wi >= 0 && wi < g.W;
            a[(kh * g.KW + kw) * rows + r] =
                inside ? x + ((n * g.H + hi) * g.W + wi) * g.C + gr * g.Cg : zeros.data();
          }
        }
      }
      Fp16Tile(rows, t.blocks, a.data(), static_cast<int>(taps), g.Cg, 1, w + k0, g.K, t.lanes,
               y + pos0 * g.K + k0, g.K);
    }
  });
  return true;
}

bool Conv2DDgradFp16NhwcHalf(const ConvGeometry& g, const uint16_t* dy, const uint16_t* w,
                             uint16_t* dx, const ParallelFor& parallel_for) {
  const int64_t Kg = g.K / g.groups;
  if (!Fp16TileAvailable() || g.Cg < kNhwcMinLanes) return false;
  const int64_t taps = g.KH * g.KW;
  // The filter as [groups, KH, KW, Kg, Cg]: the b rows (kh, kw, ko) of a group, Cg lanes each.
  std::unique_ptr<uint16_t[]> wt(new uint16_t[static_cast<size_t>(g.FilterElements())]);
  for (int64_t gr = 0; gr < g.groups; ++gr)
    for (int64_t tap = 0; tap < taps; ++tap)
      Transpose16(w + tap * g.Cg * g.K + gr * Kg, g.Cg, Kg, g.K,
                  wt.get() + (gr * taps + tap) * Kg * g.Cg, g.Cg);
  const Fp16TileGrid grid(g.groups, g.N * g.H * g.W, g.Cg);  // rows: input positions
  parallel_for(grid.units(), grid.CostPerUnit(taps * Kg), [&](int64_t begin, int64_t end) {
    // a[tap * rows + r]: where row r's run of Kg output channels for that tap starts, or null.
    std::vector<const uint16_t*> a(static_cast<size_t>(taps * grid.tile_rows()));
    for (int64_t u = begin; u < end; ++u) {
      const Fp16TileGrid::Unit t = grid[u];
      const int64_t gr = t.group, c0 = t.lane0, pos0 = t.row0;  // lane 0: channel gr * Cg + c0
      const int rows = t.rows;
      // Input position pos0 + r as (n, h, w): divisions for the first row only, then stepped; with
      // unit strides the output position a tap reaches needs none either.
      const bool unit = g.stride_h == 1 && g.stride_w == 1;
      int64_t wc = pos0 % g.W, h = pos0 / g.W % g.H, n = pos0 / g.W / g.H;
      for (int r = 0; r < rows; ++r, (++wc == g.W ? (wc = 0, ++h == g.H ? (h = 0, ++n) : 0) : 0)) {
        for (int64_t kh = 0; kh < g.KH; ++kh) {
          // p * stride_h = h + pad_top - kh * dilation_h for an existing p.
          const int64_t ph = h + g.pad_top - kh * g.dilation_h;
          const int64_t p = unit ? ph : ph / g.stride_h;
          const bool row_ok = ph >= 0 && (unit || ph % g.stride_h == 0) && p < g.P;
          for (int64_t kw = 0; kw < g.KW; ++kw) {
            const int64_t qw = wc + g.pad_left - kw * g.dilation_w;
            const int64_t q = unit ? qw : qw / g.stride_w;
            const bool ok = row_ok && qw >= 0 && (unit || qw % g.stride_w == 0) && q < g.Q;
            a[(kh * g.KW + kw) * rows + r] =
                ok ? dy + ((n * g.P + p) * g.Q + q) * g.K + gr * Kg : nullptr;
          }
        }
      }
      Fp16Tile(rows, t.blocks, a.data(), static_cast<int>(taps), Kg, 1,
               wt.get() + gr * taps * Kg * g.Cg + c0, g.Cg, t.lanes,
               dx + pos0 * g.C + gr * g.Cg + c0, g.C);
    }
  });
  return true;
}

bool Conv2DWgradFp16NhwcHalf(const ConvGeometry& g, const uint16_t* x, const uint16_t* dy,
                             uint16_t* dw, const ParallelFor& parallel_for) {
  const int64_t Kg = g.K / g.groups;
  if (!Fp16TileAvailable() || Kg < kNhwcMinLanes) return false;
  // x with its left and right zero padding as [N, H, Wp, C] (x itself where it has none): the
  // Q terms of a segment are then sw * C apart. Rows outside x read zeros.
  const int64_t span = (g.Q - 1) * g.stride_w + (g.KW - 1) * g.dilation_w + 1;
  const int64_t Wp = std::max(g.W + g.pad_left, span);
  if (Wp > 2 * g.W + 64) return false;  // huge explicit padding goes the binary32 way
  std::unique_ptr<uint16_t[]> padded;
  const uint16_t* xp = x;
  if (Wp != g.W || g.pad_left != 0) {
    padded.reset(new uint16_t[static_cast<size_t>(g.N * g.H * Wp * g.C)]);
    parallel_for(g.N * g.H, Wp * g.C, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        uint16_t* dst = padded.get() + r * Wp * g.C;
        std::fill(dst, dst + g.pad_left * g.C, uint16_t{0});
        std::copy(x + r * g.W * g.C, x + (r + 1) * g.W * g.C, dst + g.pad_left * g.C);
        std::fill(dst + (g.pad_left + g.W) * g.C, dst + Wp * g.C, uint16_t{0});
      }
    });
    xp = padded.get();
  }
  const std::vector<uint16_t> zeros(static_cast<size_t>(Wp * g.C), 0);
  const int64_t taps = g.KH * g.KW;
  const int64_t filter_rows = taps * g.Cg;             // (kh, kw, ci) of one group
  const int64_t segments = g.N * g.P;                  // (n, p), Q terms each
  const Fp16TileGrid grid(g.groups, filter_rows, Kg);  // rows: filter rows
  // Segments per call: about kTermBatch terms. A thread runs each batch over all of its row tiles
  // before the next, so that the batch's dy rows stay in cache; later calls resume from the
  // binary16 accumulators that the earlier ones stored (the same bits as one call). The pointer
  // table stays small whatever N * P.
  constexpr int64_t kTermBatch = 256;
  const int64_t seg_batch = std::max<int64_t>(1, kTermBatch / std::max<int64_t>(g.Q, 1));
  parallel_for(grid.units(), grid.CostPerUnit(segments * g.Q), [&](int64_t begin, int64_t end) {
    std::vector<const uint16_t*> a(static_cast<size_t>(seg_batch * grid.tile_rows()));
    for (int64_t s0 = 0; s0 < segments; s0 += seg_batch) {
      const int64_t batch = std::min(seg_batch, segments - s0);
      for (int64_t u = begin; u < end; ++u) {
        const Fp16TileGrid::Unit t = grid[u];
        const int64_t gr = t.group, k0 = gr * Kg + t.lane0, row0 = t.row0;
        const int rows = t.rows;
        // Per filter row: its kh (the x row it reads, below) and its offset in a padded row.
        int64_t row_dh[kTileMaxRows], row_offset[kTileMaxRows];
        for (int r = 0; r < rows; ++r) {
          const int64_t fr = row0 + r, tap = fr / g.Cg, ci = fr % g.Cg;
          row_dh[r] = tap / g.KW * g.dilation_h;
          row_offset[r] = tap % g.KW * g.dilation_w * g.C + gr * g.Cg + ci;  // column q = 0
        }
        int64_t n = s0 / g.P, p = s0 % g.P;
        for (int64_t sb = 0; sb < batch; ++sb) {
          const int64_t top = p * g.stride_h - g.pad_top;
          for (int r = 0; r < rows; ++r) {
            const int64_t hi = top + row_dh[r];
            a[sb * rows + r] = hi >= 0 && hi < g.H ? xp + (n * g.H + hi) * Wp * g.C + row_offset[r]
                                                   : zeros.data() + row_offset[r];
          }
          if (++p == g.P) p = 0, ++n;
        }
        Fp16Tile(rows, t.blocks, a.data(), static_cast<int>(batch), g.Q, g.stride_w * g.C,
                 dy + s0 * g.Q * g.K + k0, g.K, t.lanes, dw + row0 * g.K + k0, g.K,
                 /*resume=*/s0 > 0);
      }
    }
  });
  return true;
}

#else  // !__x86_64__

bool Conv2DFpropFp16NhwcHalf(const ConvGeometry&, const uint16_t*, const uint16_t*, uint16_t*,
                             const ParallelFor&) {
  return false;
}
bool Conv2DDgradFp16NhwcHalf(const ConvGeometry&, const uint16_t*, const uint16_t*, uint16_t*,
                             const ParallelFor&) {
  return false;
}
bool Conv2DWgradFp16NhwcHalf(const ConvGeometry&, const uint16_t*, const uint16_t*, uint16_t*,
                             const ParallelFor&) {
  return false;
}

#endif

}  // namespace cpu
}  // namespace tf_fp16ops
