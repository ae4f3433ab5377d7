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

// Column chunks for a row of `lanes` output lanes: whole 32-lane blocks, at most
// kTileMaxBlocks per chunk, as even as possible (a chunk of one block leaves the FMA units
// waiting on few dependency chains). Chunk c covers blocks [c * blocks / chunks,
// (c + 1) * blocks / chunks) of blocks = ceil(lanes / 32).
int64_t Fp16TileChunks(int64_t lanes);

}  // namespace cpu
}  // namespace tf_fp16ops

#endif  // TF_FP16OPS_CC_KERNELS_CPU_GEMM_FP16_H_
