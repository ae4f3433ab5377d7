// Row accumulation primitive shared by the CPU fprop, dgrad and wgrad functors.
//
// clang-format off
//   for t in [0, terms):  for l in [0, len):  acc[l] = Step(acc[l], xs[t], rows[t * row_stride + l])
// clang-format on
//
// Every convolution on the CPU is a sequence of such calls: the scalar xs[t] is broadcast
// across a contiguous row of `len` output lanes (output channels for fprop and wgrad, input
// channels for dgrad), so the reduction order along t is exactly the caller's loop order.
//
// Step semantics (the numerics contract, README "Numerics"):
//   Accumulation::kFloat: acc = fl32(x * w + acc), one fused multiply-add in binary32.
//   Accumulation::kHalf:  acc = round_binary16(x * w + acc): x, w and acc are binary16 values
//     (held in float); the product is exact and the sum is rounded once, to nearest even, to
//     binary16 -- the semantics of CUDA's __hfma (CUDA Math API, "Half Precision Intrinsics").
//     Overflow gives +-inf; inf*0 and inf-inf give NaN (IEEE 754-2019, 7.2).
// No TensorFlow headers here: the functors build and test on their own.
#ifndef TF_FP16OPS_CC_KERNELS_CPU_ACCUMULATE_H_
#define TF_FP16OPS_CC_KERNELS_CPU_ACCUMULATE_H_

#include <cstdint>

namespace tf_fp16ops {
namespace cpu {

enum class Accumulation { kHalf, kFloat };

// One step of the kHalf accumulation on scalars (the reference the vector paths must equal).
float HalfFmaStep(float acc, float x, float w);

// See the file comment. `acc` holds `len` floats; with kHalf each must be a binary16 value.
void AccumulateRows(Accumulation accumulation, float* acc, int64_t len, const float* xs,
                    int64_t terms, const float* rows, int64_t row_stride);

// The same for `m` independent output rows that share `rows` (up to kMaxRows): for each r < m,
// acc[r][0:len] accumulates xs[r][t] * rows[t * row_stride + l]. Independent rows give the
// vector units independent dependency chains (the kHalf step is a long chain of operations).
// On AVX-512 the kHalf kernels hold kHalfRows rows x one vector in registers, the kFloat kernel
// up to 12 rows x 1 or 2, or 8 rows x 3 vectors of 16 lanes (at most 24 accumulators). On AVX2
// the kFloat kernel holds up to 12 accumulators (8 rows x 1 vector of 8 lanes, 6 x 2, 4 x 3;
// rows wider than 24 lanes in blocks of 2 vectors on 6 rows); kHalf runs whole 32-lane blocks
// one row at a time (4 vectors) and the other lanes in tiles of kHalfRows rows x one vector.
constexpr int kMaxRows = 16;
constexpr int kHalfRows = 8;
void AccumulateRowsMulti(Accumulation accumulation, int m, float* const* acc, int64_t len,
                         const float* const* xs, int64_t terms, const float* rows,
                         int64_t row_stride);

// `segments` calls of AccumulateRowsMulti in turn, call s reading xs[r] + s * x_stride (its
// `terms` terms) and the filter rows rows + s * terms * row_stride: the same steps in the same
// order, so the same bits. On the AVX2 and AVX-512 (not AVX512-FP16) kHalf paths the accumulators
// stay in registers across segments (consecutive filter rows, terms apart in x: the KH kernel
// rows of an fprop window).
void AccumulateRowsMultiSegments(Accumulation accumulation, int m, float* const* acc, int64_t len,
                                 const float* const* xs, int64_t terms, int64_t segments,
                                 int64_t x_stride, const float* rows, int64_t row_stride);

// The number of rows AccumulateRowsMulti holds in registers at once for rows of `len` lanes on the
// path in use (AVX-512: kFloat 12 rows of one or two vectors, 8 of three; AVX2: kFloat 8 rows of
// one vector, 6 of two, 4 of three; kHalf and other paths kHalfRows), so that callers cut their
// rows into balanced tiles of at most that many.
int RegisterTileRows(Accumulation accumulation, int64_t len);

// n values between IEEE binary16 bit patterns and binary32: widening is exact, narrowing rounds
// to nearest even (+-inf beyond 65520; NaN stays NaN). F16C (8 lanes) on the AVX2 and AVX-512
// paths, a scalar loop on the scalar path; independent of MXCSR.DAZ/FTZ (binary16 values are
// binary32 normals; binary32 subnormals round to +-0 in binary16 either way).
void HalfToFloat(const uint16_t* src, float* dst, int64_t n);
void FloatToHalf(const float* src, uint16_t* dst, int64_t n);

// The [rows, cols] matrix src (row-major, rows src_stride apart) transposed into dst:
// dst[c * dst_stride + r] = src[r * src_stride + c] for r < rows, c < cols (other dst elements
// untouched). AVX-512: 16 x 16 tiles in registers (masked at the edges); other paths: a scalar
// loop. Values are copied bit for bit.
void TransposeInto(const float* src, int64_t rows, int64_t cols, int64_t src_stride, float* dst,
                   int64_t dst_stride);

// Name of the instruction-set path chosen at run time ("avx512fp16", "avx512", "avx2", "scalar").
const char* AccumulateIsa();

}  // namespace cpu
}  // namespace tf_fp16ops

#endif  // TF_FP16OPS_CC_KERNELS_CPU_ACCUMULATE_H_
