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
  const int64_t col_blocks = (p.N + 31) / 32;
  const int64_t chunks = Fp16TileChunks(p.N);
  // The rows of a tile: those of the widest chunk's tile (each chunk's tile has at least as many).
  const int tile_rows = Fp16TileRows(static_cast<int>((col_blocks + chunks - 1) / chunks));
  const int64_t row_tiles = (p.M + tile_rows - 1) / tile_rows;
  const int64_t units = p.batch * chunks * row_tiles;
  // About one Shard cost unit per cycle: 64 binary16 steps per cycle on two FMA ports.
  const int64_t cost = tile_rows * 32 * kTileMaxBlocks * p.K / 64 + 1;
  parallel_for(units, cost, [&](int64_t begin, int64_t end) {
    const uint16_t* rows[kTileMaxRows];
    for (int64_t u = begin; u < end; ++u) {
      // Row tiles innermost: consecutive units of a thread share the [K, <= 128] panel of bt.
      const int64_t rt = u % row_tiles;
      const int64_t c = (u / row_tiles) % chunks;
      const int64_t b = u / row_tiles / chunks;
      int64_t xm = 0, ym = 0;
      MatMulBatchOffsets(p, b, &xm, &ym);
      const int64_t block0 = c * col_blocks / chunks, block1 = (c + 1) * col_blocks / chunks;
      const int64_t n0 = block0 * 32;
      const int lanes = static_cast<int>(std::min(block1 * 32, p.N) - n0);
      const int64_t m0 = rt * tile_rows;
      const int m = static_cast<int>(std::min<int64_t>(tile_rows, p.M - m0));
      for (int r = 0; r < m; ++r) rows[r] = x + xm * p.M * p.K + (m0 + r) * a_row;
      Fp16Tile(m, static_cast<int>(block1 - block0), rows, 1, p.K, a_k, bt + ym * p.K * p.N + n0,
               p.N, lanes, out + (b * p.M + m0) * p.N + n0, p.N);
    }
  });
  return true;
}

}  // namespace cpu
}  // namespace tf_fp16ops
