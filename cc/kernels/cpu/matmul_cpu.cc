#include "cc/kernels/cpu/matmul_cpu.h"

#include <algorithm>
#include <cstring>

namespace tf_fp16ops {
namespace cpu {

void MatMul(const MatMulProblem& p, Accumulation accumulation, const float* a, const float* bt,
            float* y, const MatMulParallelFor& parallel_for) {
  if (p.batch == 0 || p.M == 0 || p.N == 0) return;
  const int64_t blocks_per_matrix = (p.M + kMaxRows - 1) / kMaxRows;
  const int64_t units = p.batch * blocks_per_matrix;
  // Cost of one unit in TensorFlow's Shard units (about one per cycle); the binary16 step
  // emulation costs a few binary32 FMAs per lane.
  const int64_t per_step = accumulation == Accumulation::kHalf ? 4 : 1;
  const double cost = static_cast<double>(kMaxRows) * static_cast<double>(p.N) *
                      static_cast<double>(std::max<int64_t>(p.K, 1)) * per_step / 16.0;
  const int64_t cost_per_unit =
      cost > 1e12 ? int64_t{1000000000000} : static_cast<int64_t>(cost) + 1;
  parallel_for(units, cost_per_unit, [&](int64_t begin, int64_t end) {
    float* acc[kMaxRows];
    const float* xs[kMaxRows];
    for (int64_t u = begin; u < end; ++u) {
      const int64_t b = u / blocks_per_matrix;
      const int64_t m0 = (u % blocks_per_matrix) * kMaxRows;
      const int rows = static_cast<int>(std::min<int64_t>(kMaxRows, p.M - m0));
      int64_t xm, ym;
      MatMulBatchOffsets(p, b, &xm, &ym);
      for (int r = 0; r < rows; ++r) {
        acc[r] = y + (b * p.M + m0 + r) * p.N;
        std::memset(acc[r], 0, sizeof(float) * p.N);
        xs[r] = a + (xm * p.M + m0 + r) * p.K;
      }
      AccumulateRowsMulti(accumulation, rows, acc, p.N, xs, p.K, bt + ym * p.K * p.N, p.N);
    }
  });
}

}  // namespace cpu
}  // namespace tf_fp16ops
