#include "cc/kernels/cpu/matmul_fp16.h"

#include <algorithm>
#include <memory>

#include "cc/kernels/cpu/fprop_fp16.h"
#include "cc/kernels/cpu/gemm_fp16.h"

namespace tf_fp16ops {
namespace cpu {

bool MatMulHalfNative(const MatMulProblem& p, const uint16_t* x, bool adj_x, const uint16_t* y,
                      bool adj_y, uint16_t* out, const MatMulParallelFor& parallel_for) {
  if (!Fp16TileAvailable() || p.K <= 0) return false;
  if (p.batch == 0 || p.M == 0 || p.N == 0) return true;
  // bt: y as [K, N] matrices, in place or transposed once.
  std::unique_ptr<uint16_t[]> yt;  // every element written below: not zeroed
  const uint16_t* bt = y;
  if (adj_y) {
    yt.reset(new uint16_t[static_cast<size_t>(p.y_matrices * p.K * p.N)]);
    constexpr int64_t kBand = 64;  // rows of a stored [N, K] matrix per unit
    const int64_t bands = (p.N + kBand - 1) / kBand;
    parallel_for(p.y_matrices * bands, kBand * p.K, [&](int64_t begin, int64_t end) {
      for (int64_t u = begin; u < end; ++u) {
        const int64_t i = u / bands, r0 = (u % bands) * kBand;
        Transpose16(y + (i * p.N + r0) * p.K, std::min(kBand, p.N - r0), p.K, p.K,
                    yt.get() + i * p.K * p.N + r0, p.N);
      }
    });
    bt = yt.get();
  }
  // a[m, k] at x + m * a_row + k * a_k.
  const int64_t a_row = adj_x ? 1 : p.K, a_k = adj_x ? p.M : 1;
  const Fp16TileGrid grid(p.batch, p.M, p.N);
  parallel_for(grid.units(), grid.CostPerUnit(p.K), [&](int64_t begin, int64_t end) {
    const uint16_t* rows[kTileMaxRows];
    for (int64_t u = begin; u < end; ++u) {
      const Fp16TileGrid::Unit t = grid[u];  // t.group: the output matrix
      int64_t xm = 0, ym = 0;
      MatMulBatchOffsets(p, t.group, &xm, &ym);
      for (int r = 0; r < t.rows; ++r) rows[r] = x + xm * p.M * p.K + (t.row0 + r) * a_row;
      Fp16Tile(t.rows, t.blocks, rows, 1, p.K, a_k, bt + ym * p.K * p.N + t.lane0, p.N, t.lanes,
               out + (t.group * p.M + t.row0) * p.N + t.lane0, p.N);
    }
  });
  return true;
}

}  // namespace cpu
}  // namespace tf_fp16ops
