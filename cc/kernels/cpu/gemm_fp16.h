// The register tile of the binary16 kernels on AVX512-FP16 whose lanes are a contiguous run of
// result columns: Fp16MatMul's N columns (cc/kernels/cpu/matmul_fp16.h), and the output channels
// of an NHWC fprop and wgrad or the input channels of a dgrad (cc/kernels/cpu/conv_nhwc_fp16.h).
//
// For rows r < rows (<= kTileMaxRows) and lanes l < lanes (<= 32 * blocks, blocks <=
// kTileMaxBlocks), one accumulator acc[r][l] from +0 takes, for segment s = 0, 1, ..., and
// within it t = 0, 1, ..., seg_len - 1 (row i = s * seg_len + t of b):
//   acc = RN16(a_s,r[t * a_k] * b[i * ldb + l] + acc)
// one VFMADD231PH per step (Intel SDM, "VFMADD231PH": one rounding, to nearest even by
// MXCSR.RC, which neither C++ nor TensorFlow changes; binary16 subnormals kept whatever
// MXCSR.DAZ/FTZ say), where a_s,r = a[s * rows + r]. A null a[s * rows + r] skips segment s for
// row r (its steps are not taken: dgrad visits only the terms that exist); a segment that must
// count as zeros (padding: 0 * inf gives NaN) points at zeros instead. The a value is taken by
// broadcast from memory, b is read 32 lanes at a time (a masked load only in a block with fewer
// lanes in use, or a segment some rows skip: it costs an extra uop), and the tile stays in
// registers over the whole reduction: out[r * ldo + l] receives acc[r][l] for l < lanes (other
// out elements untouched). All buffers hold IEEE binary16 bit patterns.
#ifndef TF_FP16OPS_CC_KERNELS_CPU_GEMM_FP16_H_
#define TF_FP16OPS_CC_KERNELS_CPU_GEMM_FP16_H_

#include <algorithm>
#include <cstdint>

namespace tf_fp16ops {
namespace cpu {

constexpr int kTileMaxRows = 8;
constexpr int kTileMaxBlocks = 4;

// Rows of the tile for `blocks` 32-lane blocks: at most 24 accumulators, and 8 rows at most.
constexpr int Fp16TileRows(int blocks) { return blocks >= 4 ? 6 : 8; }

// Whether the AVX512-FP16 path is in use (AccumulateIsa() is "avx512fp16").
bool Fp16TileAvailable();

// See the file comment. With `resume` the accumulators start from out (binary16 values, which
// the kHalf accumulators are: a reduction cut into calls gives the bits of one call) instead of
// +0. Only to be called when Fp16TileAvailable().
void Fp16Tile(int rows, int blocks, const uint16_t* const* a, int segments, int64_t seg_len,
              int64_t a_k, const uint16_t* b, int64_t ldb, int lanes, uint16_t* out, int64_t ldo,
              bool resume = false);

// Benchmark ceiling of the tile: `reps` calls on its full 6 rows x 128 lanes over 128 terms,
// operands in L1 (a 1.5 KiB, b 32 KiB). Returns the steps done (0 without AVX512-FP16); `sink`
// receives one result so that the work is not optimized away.
int64_t Fp16TileProbe(int64_t reps, float* sink);

// A result of `groups` blocks of [rows, lanes] cut into register tiles and numbered as shard
// units. Lanes go in chunks of whole 32-lane blocks, at most kTileMaxBlocks per chunk, as even as
// possible (a chunk of one block leaves the FMA units waiting on few dependency chains); rows go
// in tiles of tile_rows, those of the widest chunk's tile (each chunk's tile holds at least as
// many). Units run group, chunk, row tile, row tiles innermost, so that consecutive units of a
// thread share the chunk's b panel.
class Fp16TileGrid {
 public:
  struct Unit {
    int64_t group, row0, lane0;  // the tile's group, first row and first lane
    int rows, blocks, lanes;     // Fp16Tile's rows, blocks and lanes
  };
  Fp16TileGrid(int64_t groups, int64_t rows, int64_t lanes)
      : groups_(groups),
        rows_(rows),
        lanes_(lanes),
        blocks_((lanes + 31) / 32),
        chunks_((blocks_ + kTileMaxBlocks - 1) / kTileMaxBlocks),
        tile_rows_(Fp16TileRows(static_cast<int>((blocks_ + chunks_ - 1) / chunks_))),
        row_tiles_((rows + tile_rows_ - 1) / tile_rows_) {}
  int tile_rows() const { return tile_rows_; }
  int64_t units() const { return groups_ * chunks_ * row_tiles_; }
  // Shard cost of a unit whose accumulators take `terms` steps each: about one unit per cycle,
  // 64 binary16 steps per cycle on two FMA ports.
  int64_t CostPerUnit(int64_t terms) const {
    return tile_rows_ * 32 * kTileMaxBlocks * terms / 64 + 1;
  }
  Unit operator[](int64_t u) const {
    const int64_t rt = u % row_tiles_, c = u / row_tiles_ % chunks_;
    const int64_t block0 = c * blocks_ / chunks_, block1 = (c + 1) * blocks_ / chunks_;
    Unit t;
    t.group = u / row_tiles_ / chunks_;
    t.row0 = rt * tile_rows_;
    t.lane0 = block0 * 32;
    t.rows = static_cast<int>(std::min<int64_t>(tile_rows_, rows_ - t.row0));
    t.blocks = static_cast<int>(block1 - block0);
    t.lanes = static_cast<int>(std::min(block1 * 32, lanes_) - t.lane0);
    return t;
  }

 private:
  int64_t groups_, rows_, lanes_, blocks_, chunks_;
  int tile_rows_;
  int64_t row_tiles_;
};

}  // namespace cpu
}  // namespace tf_fp16ops

#endif  // TF_FP16OPS_CC_KERNELS_CPU_GEMM_FP16_H_
