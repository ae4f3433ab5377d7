// Fp16MatMul on the fprop table (matmul_gpu.h): validation, the 1x1 fprop problem, the adj_x /
// adj_y transposes and the batch loop. No kernel of its own: the transposes are the layout
// transform kernels and the products are the table's fprop implementations.
#include "cc/kernels/gpu/matmul_gpu.h"

#include <limits>

#include "cc/kernels/gpu/layout_transform.h"
#include "cc/kernels/gpu/make_status.h"
#include "cc/kernels/gpu/platform.h"

namespace tf_fp16ops {
namespace gpu {
namespace {

using internal::MakeStatus;

constexpr size_t kAlign = 256;  // sub-buffer alignment, as the fprop's workspace carver
constexpr int64_t kMaxExtent = std::numeric_limits<int32_t>::max();

size_t ElemBytes(DataType t) { return t == DataType::kHalf ? 2 : 4; }
size_t Aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// a * b * c with every factor in [0, 2^31): false when the byte size would overflow int64.
bool Product(int64_t a, int64_t b, int64_t c, int64_t* out) {
  const int64_t limit = std::numeric_limits<int64_t>::max() / 8;
  if (a != 0 && b > limit / a) return false;
  const int64_t ab = a * b;
  if (ab != 0 && c > limit / ab) return false;
  *out = ab * c;
  return true;
}

int64_t XIndex(const MatMulShape& s, int64_t b) { return s.x_offsets ? s.x_offsets[b] : b; }
int64_t YIndex(const MatMulShape& s, int64_t b) { return s.y_offsets ? s.y_offsets[b] : b; }

Status Validate(const MatMulShape& s) {
  const struct {
    const char* name;
    int64_t value;
  } fields[] = {
      {"batch", s.batch},          {"M", s.M}, {"N", s.N}, {"K", s.K}, {"x_matrices", s.x_matrices},
      {"y_matrices", s.y_matrices}};
  for (const auto& f : fields) {
    if (f.value < 0 || f.value > kMaxExtent) {
      return MakeStatus(StatusCode::kInvalidArgument, "%s = %lld is out of range [0, 2^31-1]",
                        f.name, static_cast<long long>(f.value));
    }
  }
  int64_t n = 0;
  if (!Product(s.x_matrices, s.M, s.K, &n) || !Product(s.y_matrices, s.K, s.N, &n) ||
      !Product(s.batch, s.M, s.N, &n)) {
    return MakeStatus(StatusCode::kInvalidArgument,
                      "matmul of batch = %lld, M = %lld, N = %lld, K = %lld is too large",
                      (long long)s.batch, (long long)s.M, (long long)s.N, (long long)s.K);
  }
  for (int64_t b = 0; b < s.batch; ++b) {
    const int64_t xi = XIndex(s, b), yi = YIndex(s, b);
    if (xi < 0 || xi >= s.x_matrices) {
      return MakeStatus(StatusCode::kInvalidArgument,
                        "x_offsets[%lld] = %lld is outside [0, x_matrices = %lld)", (long long)b,
                        (long long)xi, (long long)s.x_matrices);
    }
    if (yi < 0 || yi >= s.y_matrices) {
      return MakeStatus(StatusCode::kInvalidArgument,
                        "y_offsets[%lld] = %lld is outside [0, y_matrices = %lld)", (long long)b,
                        (long long)yi, (long long)s.y_matrices);
    }
  }
  return Status();
}

// One shared y matrix and x matrices in order: the batch is the image batch of one fprop.
bool Foldable(const MatMulShape& s) {
  for (int64_t b = 0; b < s.batch; ++b) {
    if (XIndex(s, b) != b || YIndex(s, b) != YIndex(s, 0)) return false;
  }
  return true;
}

// The 1x1 fprop of x [images, 1, M, K] (NHWC) with the HWIO filter [1, 1, K, N].
ConvProblem FpropOf(const MatMulShape& s, int64_t images) {
  ConvProblem p;
  p.N = images;
  p.H = 1;
  p.W = s.M;
  p.C = s.K;
  p.KH = 1;
  p.KW = 1;
  p.Cg = s.K;
  p.K = s.N;
  p.groups = 1;
  p.P = 1;
  p.Q = s.M;
  return p;
}

}  // namespace

Status MatMulPlanOn(const DeviceInfo& device, const MatMulShape& s, DataType T, DataType Tacc,
                    ConvPath requested, size_t max_workspace_bytes, MatMulPlan* plan) {
  *plan = MatMulPlan();
  Status st = Validate(s);
  if (!st.ok()) return st;
  plan->folded = s.batch > 1 && Foldable(s);
  plan->problem = FpropOf(s, plan->folded ? s.batch : 1);
  const size_t e = ElemBytes(T);
  size_t transposes = 0;
  if (s.adj_x) transposes += Aligned(size_t(s.x_matrices * s.M * s.K) * e);
  if (s.adj_y) transposes += Aligned(size_t(s.y_matrices * s.K * s.N) * e);
  if (transposes > max_workspace_bytes) {
    return MakeStatus(StatusCode::kResourceExhausted,
                      "the adj_x / adj_y copies need %zu bytes of workspace and at most %zu can "
                      "be allocated",
                      transposes, max_workspace_bytes);
  }
  st = PlanOn(device, Pass::kFprop, plan->problem, T, Tacc, requested,
              max_workspace_bytes - transposes, &plan->conv);
  if (!st.ok()) return st;
  plan->transpose_bytes = transposes;
  plan->workspace_bytes = transposes + plan->conv.workspace_bytes;
  return Status();
}

Status MatMulRunPlan(const MatMulPlan& plan, cudaStream_t stream, const MatMulShape& s, DataType T,
                     DataType Tacc, const void* x, const void* y, void* out, void* workspace,
                     size_t workspace_bytes, ConvPath* used) {
  if (used) *used = ConvPath::kAuto;
  if (workspace_bytes < plan.workspace_bytes) {
    return MakeStatus(StatusCode::kInvalidArgument,
                      "workspace_bytes = %zu is smaller than the %zu bytes the plan needs",
                      workspace_bytes, plan.workspace_bytes);
  }
  if (plan.workspace_bytes > 0 && workspace == nullptr) {
    return MakeStatus(StatusCode::kInvalidArgument, "workspace is null but %zu bytes are needed",
                      plan.workspace_bytes);
  }
  const size_t e = ElemBytes(T);
  const int64_t x_elems = s.x_matrices * s.M * s.K, y_elems = s.y_matrices * s.K * s.N;
  if ((x_elems > 0 && x == nullptr) || (y_elems > 0 && y == nullptr) ||
      (s.batch * s.M * s.N > 0 && out == nullptr)) {
    return MakeStatus(StatusCode::kInvalidArgument, "null device pointer for a non-empty tensor");
  }
  char* ws = static_cast<char*>(workspace);
  const char* xa = static_cast<const char*>(x);
  const char* ya = static_cast<const char*>(y);
  if (s.adj_x && x_elems > 0) {
    // stored [matrices, K, M] = NCHW [matrices, K, 1, M] -> NHWC [matrices, 1, M, K]
    const cudaError_t err = internal::NchwToNhwc(T, x, ws, s.x_matrices, s.K, 1, s.M, stream);
    if (err != cudaSuccess) {
      return MakeStatus(StatusCode::kInternal, "adj_x transpose: CUDA error %d (%s)", int(err),
                        cudaGetErrorString(err));
    }
    xa = ws;
  }
  if (s.adj_x) ws += Aligned(size_t(x_elems) * e);
  if (s.adj_y && y_elems > 0) {
    // stored [matrices, N, K] = NCHW [matrices, N, 1, K] -> NHWC [matrices, 1, K, N]
    const cudaError_t err = internal::NchwToNhwc(T, y, ws, s.y_matrices, s.N, 1, s.K, stream);
    if (err != cudaSuccess) {
      return MakeStatus(StatusCode::kInternal, "adj_y transpose: CUDA error %d (%s)", int(err),
                        cudaGetErrorString(err));
    }
    ya = ws;
  }
  if (s.adj_y) ws += Aligned(size_t(y_elems) * e);
  void* conv_ws = plan.conv.workspace_bytes > 0 ? ws : nullptr;
  const size_t x_step = size_t(s.M * s.K) * e, y_step = size_t(s.K * s.N) * e;
  const size_t o_step = size_t(s.M * s.N) * e;
  if (plan.folded) {
    return RunPlan(plan.conv, Pass::kFprop, stream, plan.problem, T, Tacc, xa,
                   ya + size_t(YIndex(s, 0)) * y_step, out, conv_ws, plan.conv.workspace_bytes,
                   used);
  }
  ConvPath ran = plan.conv.path;
  for (int64_t b = 0; b < s.batch; ++b) {
    const Status st = RunPlan(
        plan.conv, Pass::kFprop, stream, plan.problem, T, Tacc, xa + size_t(XIndex(s, b)) * x_step,
        ya + size_t(YIndex(s, b)) * y_step, static_cast<char*>(out) + size_t(b) * o_step, conv_ws,
        plan.conv.workspace_bytes, &ran);
    if (!st.ok()) return st;
  }
  if (used) *used = ran;
  return Status();
}

Status MatMulLaunchOn(const DeviceInfo& device, cudaStream_t stream, const MatMulShape& s,
                      DataType T, DataType Tacc, const void* x, const void* y, void* out,
                      void* workspace, size_t workspace_bytes, ConvPath requested, ConvPath* used) {
  if (used) *used = ConvPath::kAuto;
  MatMulPlan plan;
  const Status st = MatMulPlanOn(device, s, T, Tacc, requested, SIZE_MAX, &plan);
  if (!st.ok()) return st;
  return MatMulRunPlan(plan, stream, s, T, Tacc, x, y, out, workspace, workspace_bytes, used);
}

}  // namespace gpu
}  // namespace tf_fp16ops
