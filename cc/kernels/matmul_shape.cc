#include "cc/kernels/matmul_shape.h"

#include <algorithm>

namespace tf_fp16ops {
namespace {

using Wide = __int128;  // products of int64 sizes fit without overflow until checked
constexpr Wide kInt64Max = static_cast<Wide>(INT64_MAX);

std::string ShapeString(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    r += i ? ", " : "";
    r += s[i] < 0 ? std::string("?") : std::to_string(s[i]);
  }
  return r + "]";
}

}  // namespace

std::string MatMulOutputDims(const std::vector<int64_t>& x, const std::vector<int64_t>& y,
                             bool adj_x, bool adj_y, std::vector<int64_t>* out) {
  if (x.size() < 2) return "x must have rank >= 2, got shape " + ShapeString(x);
  if (y.size() < 2) return "y must have rank >= 2, got shape " + ShapeString(y);
  const size_t rx = x.size(), ry = y.size();
  const int64_t m = adj_x ? x[rx - 1] : x[rx - 2];
  const int64_t kx = adj_x ? x[rx - 2] : x[rx - 1];
  const int64_t ky = adj_y ? y[ry - 1] : y[ry - 2];
  const int64_t n = adj_y ? y[ry - 2] : y[ry - 1];
  if (kx >= 0 && ky >= 0 && kx != ky) {
    return "inner dimensions of x " + ShapeString(x) + (adj_x ? " (adj_x)" : "") + " and y " +
           ShapeString(y) + (adj_y ? " (adj_y)" : "") + " differ: " + std::to_string(kx) + " vs " +
           std::to_string(ky);
  }
  const size_t bx = rx - 2, by = ry - 2, rb = std::max(bx, by);
  std::vector<int64_t> dims(rb + 2);
  for (size_t i = 0; i < rb; ++i) {
    // Right-aligned: output batch dimension i meets x's (i - (rb - bx)) and y's likewise.
    const int64_t dx = i + bx >= rb ? x[i + bx - rb] : 1;
    const int64_t dy = i + by >= rb ? y[i + by - rb] : 1;
    int64_t d;
    if (dx == 1) {
      d = dy;
    } else if (dy == 1) {
      d = dx;
    } else if (dx < 0 || dy < 0) {
      d = dx < 0 ? dy : dx;  // an unknown size must be 1 or equal to the known one
    } else if (dx == dy) {
      d = dx;
    } else {
      return "batch dimensions of x " + ShapeString(x) + " and y " + ShapeString(y) +
             " do not broadcast: " + std::to_string(dx) + " vs " + std::to_string(dy) +
             " (each pair must be equal or contain a 1)";
    }
    dims[i] = d;
  }
  dims[rb] = m;
  dims[rb + 1] = n;
  bool known = true;
  Wide count = 1;
  for (int64_t d : dims) {
    if (d < 0) {
      known = false;
    } else if (d == 0) {
      count = 0;
    } else if (count > 0) {
      count *= d;
      if (count > kInt64Max) count = kInt64Max + 1;  // saturate: already too many
    }
  }
  if (known && count > kInt64Max) {
    return "the output " + ShapeString(dims) + " would have more than 2^63 - 1 elements";
  }
  *out = dims;
  return "";
}

std::string ComputeMatMulProblem(const std::vector<int64_t>& x, const std::vector<int64_t>& y,
                                 bool adj_x, bool adj_y, MatMulProblem* p) {
  std::vector<int64_t> out;
  std::string err = MatMulOutputDims(x, y, adj_x, adj_y, &out);
  if (!err.empty()) return err;
  const size_t rx = x.size(), ry = y.size(), rb = out.size() - 2;
  p->M = out[rb];
  p->N = out[rb + 1];
  p->K = adj_x ? x[rx - 2] : x[rx - 1];
  p->out_batch.assign(out.begin(), out.begin() + rb);
  p->batch = 1;
  for (int64_t d : p->out_batch) p->batch *= d;  // fits: the output count fits int64 or is 0
  // Strides in matrices of each operand's own batch dimensions (row-major), 0 where it
  // broadcasts. Operand element counts fit int64 (they are tensors), so these products do.
  p->x_batch_strides.assign(rb, 0);
  p->y_batch_strides.assign(rb, 0);
  const size_t bx = rx - 2, by = ry - 2;
  int64_t sx = 1, sy = 1;
  for (size_t i = rb; i-- > 0;) {
    if (i + bx >= rb) {
      const int64_t d = x[i + bx - rb];
      p->x_batch_strides[i] = d == 1 ? 0 : sx;
      sx *= d;
    }
    if (i + by >= rb) {
      const int64_t d = y[i + by - rb];
      p->y_batch_strides[i] = d == 1 ? 0 : sy;
      sy *= d;
    }
  }
  p->x_matrices = sx;
  p->y_matrices = sy;
  return "";
}

void MatMulBatchOffsets(const MatMulProblem& p, int64_t b, int64_t* x_matrix, int64_t* y_matrix) {
  int64_t xo = 0, yo = 0;
  for (size_t i = p.out_batch.size(); i-- > 0;) {
    const int64_t d = p.out_batch[i];
    const int64_t idx = b % d;
    b /= d;
    xo += idx * p.x_batch_strides[i];
    yo += idx * p.y_batch_strides[i];
  }
  *x_matrix = xo;
  *y_matrix = yo;
}

}  // namespace tf_fp16ops
