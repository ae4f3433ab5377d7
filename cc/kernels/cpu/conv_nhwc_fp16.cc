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
  const int64_t positions = g.N * g.P * g.Q;
  const int64_t col_blocks = (Kg + 31) / 32;
  const int64_t chunks = Fp16TileChunks(Kg);
  const int tile_rows = Fp16TileRows(static_cast<int>((col_blocks + chunks - 1) / chunks));
  const int64_t row_tiles = (positions + tile_rows - 1) / tile_rows;
  // Padded taps read these zeros (0 * inf gives NaN, as zero padding defines it).
  const std::vector<uint16_t> zeros(static_cast<size_t>(std::max<int64_t>(g.Cg, 1)), 0);
  const int64_t units = g.groups * chunks * row_tiles;
  const int64_t cost = tile_rows * 32 * kTileMaxBlocks * taps * g.Cg / 64 + 1;
  parallel_for(units, cost, [&](int64_t begin, int64_t end) {
    // a[tap * rows + r]: where row r's run of Cg input channels for that tap starts.
    std::vector<const uint16_t*> a(static_cast<size_t>(taps * tile_rows));
    for (int64_t u = begin; u < end; ++u) {
      // Row tiles innermost: consecutive units of a thread share the filter panel.
      const int64_t rt = u % row_tiles;
      const int64_t c = (u / row_tiles) % chunks;
      const int64_t gr = u / row_tiles / chunks;
      const int64_t block0 = c * col_blocks / chunks, block1 = (c + 1) * col_blocks / chunks;
      const int64_t k0 = gr * Kg + block0 * 32;
      const int lanes = static_cast<int>(std::min(block1 * 32, Kg) - block0 * 32);
      const int64_t pos0 = rt * tile_rows;
      const int rows = static_cast<int>(std::min<int64_t>(tile_rows, positions - pos0));
      for (int r = 0; r < rows; ++r) {
        const int64_t pos = pos0 + r;
        const int64_t n = pos / (g.P * g.Q), p = pos / g.Q % g.P, q = pos % g.Q;
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
      Fp16Tile(rows, static_cast<int>(block1 - block0), a.data(), static_cast<int>(taps), g.Cg, 1,
               w + k0, g.K, lanes, y + pos0 * g.K + k0, g.K);
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
  const int64_t positions = g.N * g.H * g.W;
  const int64_t col_blocks = (g.Cg + 31) / 32;
  const int64_t chunks = Fp16TileChunks(g.Cg);
  const int tile_rows = Fp16TileRows(static_cast<int>((col_blocks + chunks - 1) / chunks));
  const int64_t row_tiles = (positions + tile_rows - 1) / tile_rows;
  const int64_t units = g.groups * chunks * row_tiles;
  const int64_t cost = tile_rows * 32 * kTileMaxBlocks * taps * Kg / 64 + 1;
  parallel_for(units, cost, [&](int64_t begin, int64_t end) {
    // a[tap * rows + r]: where row r's run of Kg output channels for that tap starts, or null.
    std::vector<const uint16_t*> a(static_cast<size_t>(taps * tile_rows));
    for (int64_t u = begin; u < end; ++u) {
      const int64_t rt = u % row_tiles;
      const int64_t c = (u / row_tiles) % chunks;
      const int64_t gr = u / row_tiles / chunks;
      const int64_t block0 = c * col_blocks / chunks, block1 = (c + 1) * col_blocks / chunks;
      const int64_t c0 = block0 * 32;  // first lane: input channel gr * Cg + c0
      const int lanes = static_cast<int>(std::min(block1 * 32, g.Cg) - c0);
      const int64_t pos0 = rt * tile_rows;
      const int rows = static_cast<int>(std::min<int64_t>(tile_rows, positions - pos0));
      for (int r = 0; r < rows; ++r) {
        const int64_t pos = pos0 + r;
        const int64_t n = pos / (g.H * g.W), h = pos / g.W % g.H, wc = pos % g.W;
        for (int64_t kh = 0; kh < g.KH; ++kh) {
          // p * stride_h = h + pad_top - kh * dilation_h for an existing p.
          const int64_t ph = h + g.pad_top - kh * g.dilation_h;
          const bool row_ok = ph >= 0 && ph % g.stride_h == 0 && ph / g.stride_h < g.P;
          for (int64_t kw = 0; kw < g.KW; ++kw) {
            const int64_t qw = wc + g.pad_left - kw * g.dilation_w;
            const bool ok = row_ok && qw >= 0 && qw % g.stride_w == 0 && qw / g.stride_w < g.Q;
            a[(kh * g.KW + kw) * rows + r] =
                ok ? dy + ((n * g.P + ph / g.stride_h) * g.Q + qw / g.stride_w) * g.K + gr * Kg
                   : nullptr;
          }
        }
      }
      Fp16Tile(rows, static_cast<int>(block1 - block0), a.data(), static_cast<int>(taps), Kg, 1,
               wt.get() + gr * taps * Kg * g.Cg + c0, g.Cg, lanes, dx + pos0 * g.C + gr * g.Cg + c0,
               g.C);
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

#endif

}  // namespace cpu
}  // namespace tf_fp16ops
