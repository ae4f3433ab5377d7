// C ABI over the GPU launchers (conv2d_gpu.h), loaded with ctypes where TensorFlow is absent:
// libtf_fp16ops_gpu.so (device build; tools/gpu_check/check.py on a GPU machine) and
// libtf_fp16ops_gpu_host.so (host build; tests/gpu/test_gpu_host.py on a CPU).
//
// dims: 16 int64 values in this order:
//   N, H, W, C, KH, KW, K, groups, P, Q, stride_h, stride_w, dilation_h, dilation_w, pad_top,
//   pad_left            (Cg = C / groups; bottom/right padding implied by P and Q)
// op: 0 fprop (a = x, b = w HWIO, out = y), 1 dgrad (a = w HWIO, b = dy, out = dx),
//     2 wgrad (a = x, b = dy, out = dw HWIO)
// dtype codes: 0 half, 1 float. path codes: 0 auto, 1 sm90, 2 sm80, 3 simt, 4 fallback, 5 sm70.
// device (where taken): 3 ints {driver_version, compute_capability, sm90a_code}, or null for
// the current device (QueryDevice).
// matmul (matmul_gpu.h): mdims: 6 int64 values batch, M, N, K, x_matrices, y_matrices;
// x_offsets / y_offsets: `batch` int64 matrix indices each, or null (matrix b for output b).
// Return value: the StatusCode (0 ok, 1 invalid argument, 2 internal, 3 failed precondition,
// 4 unimplemented); `msg` (msg_len bytes, may be null) receives the status text.
#include <cstdint>
#include <cstring>

#include "cc/kernels/gpu/conv2d_gpu.h"
#include "cc/kernels/gpu/direct_conv.h"
#include "cc/kernels/gpu/matmul_gpu.h"

namespace {

using tf_fp16ops::ConvProblem;
using tf_fp16ops::Pass;
using tf_fp16ops::gpu::BuildInfo;
using tf_fp16ops::gpu::ConvPath;
using tf_fp16ops::gpu::DataType;
using tf_fp16ops::gpu::DeviceInfo;
using tf_fp16ops::gpu::Status;
using tf_fp16ops::gpu::StatusCode;

ConvProblem FromDims(const int64_t* d, int nchw) {
  ConvProblem p;
  p.N = d[0];
  p.H = d[1];
  p.W = d[2];
  p.C = d[3];
  p.KH = d[4];
  p.KW = d[5];
  p.K = d[6];
  p.groups = d[7];
  p.P = d[8];
  p.Q = d[9];
  p.stride_h = d[10];
  p.stride_w = d[11];
  p.dilation_h = d[12];
  p.dilation_w = d[13];
  p.pad_top = d[14];
  p.pad_left = d[15];
  p.Cg = p.groups > 0 ? p.C / p.groups : 0;
  p.nchw = nchw != 0;
  return p;
}

int Finish(const Status& st, char* msg, int msg_len) {
  if (msg != nullptr && msg_len > 0) {
    std::strncpy(msg, st.message, static_cast<size_t>(msg_len) - 1);
    msg[msg_len - 1] = '\0';
  }
  return static_cast<int>(st.code);
}

Status Error(const char* text) {
  Status st;
  st.code = StatusCode::kInvalidArgument;
  std::strncpy(st.message, text, sizeof(st.message) - 1);
  return st;
}

bool GetDevice(const int* device, DeviceInfo* info, Status* st) {
  if (device == nullptr) {
    *st = tf_fp16ops::gpu::QueryDevice(info);
    return st->ok();
  }
  info->driver_version = device[0];
  info->compute_capability = device[1];
  info->sm90a_code = device[2] != 0;
  return true;
}

tf_fp16ops::gpu::MatMulShape MatMulShapeOf(const int64_t* d, int adj_x, int adj_y,
                                           const int64_t* x_offsets, const int64_t* y_offsets) {
  tf_fp16ops::gpu::MatMulShape s;
  s.batch = d[0];
  s.M = d[1];
  s.N = d[2];
  s.K = d[3];
  s.x_matrices = d[4];
  s.y_matrices = d[5];
  s.adj_x = adj_x != 0;
  s.adj_y = adj_y != 0;
  s.x_offsets = x_offsets;
  s.y_offsets = y_offsets;
  return s;
}

bool ValidOp(int op) { return op >= 0 && op <= 2; }

}  // namespace

#define TFO_EXPORT __attribute__((visibility("default")))

extern "C" {

// The implementation the table picks and its workspace bytes.
TFO_EXPORT int tfo_select(int op, const int64_t* dims, int nchw, int t, int tacc, int path,
                          const int* device, int* chosen, uint64_t* bytes, char* msg, int msg_len) {
  if (!ValidOp(op))
    return Finish(Error("op must be 0 (fprop), 1 (dgrad) or 2 (wgrad)"), msg, msg_len);
  DeviceInfo info;
  Status st;
  if (!GetDevice(device, &info, &st)) return Finish(st, msg, msg_len);
  ConvPath used = ConvPath::kAuto;
  size_t need = 0;
  st = tf_fp16ops::gpu::Select(static_cast<Pass>(op), FromDims(dims, nchw),
                               static_cast<DataType>(t), static_cast<DataType>(tacc),
                               static_cast<ConvPath>(path), info, &used, &need);
  if (chosen != nullptr) *chosen = static_cast<int>(used);
  if (bytes != nullptr) *bytes = need;
  return Finish(st, msg, msg_len);
}

// Launches on `stream`; *used_path receives the implementation that ran (0 when none did).
TFO_EXPORT int tfo_launch(int op, const int64_t* dims, int nchw, int t, int tacc, const void* a,
                          const void* b, void* out, void* workspace, uint64_t workspace_bytes,
                          void* stream, int path, const int* device, int* used_path, char* msg,
                          int msg_len) {
  if (!ValidOp(op))
    return Finish(Error("op must be 0 (fprop), 1 (dgrad) or 2 (wgrad)"), msg, msg_len);
  DeviceInfo info;
  Status st;
  if (!GetDevice(device, &info, &st)) return Finish(st, msg, msg_len);
  ConvPath used = ConvPath::kAuto;
  st = tf_fp16ops::gpu::LaunchOn(info, static_cast<Pass>(op), static_cast<cudaStream_t>(stream),
                                 FromDims(dims, nchw), static_cast<DataType>(t),
                                 static_cast<DataType>(tacc), a, b, out, workspace, workspace_bytes,
                                 static_cast<ConvPath>(path), &used);
  if (used_path != nullptr) *used_path = static_cast<int>(used);
  return Finish(st, msg, msg_len);
}

// LaunchWithAllocator with an allocator that hands out the caller's `workspace` when the plan
// needs at most `workspace_bytes`, and fails otherwise (a fake for TensorFlow's allocator).
// *used_path receives the implementation that ran, *selections the table selections made.
TFO_EXPORT int tfo_launch_with_allocator(int op, const int64_t* dims, int nchw, int t, int tacc,
                                         const void* a, const void* b, void* out, void* workspace,
                                         uint64_t workspace_bytes, void* stream, int path,
                                         const int* device, int* used_path, int* selections,
                                         char* msg, int msg_len) {
  if (!ValidOp(op))
    return Finish(Error("op must be 0 (fprop), 1 (dgrad) or 2 (wgrad)"), msg, msg_len);
  DeviceInfo info;
  Status st;
  if (!GetDevice(device, &info, &st)) return Finish(st, msg, msg_len);
  struct Pool {
    void* base;
    uint64_t bytes;
  } pool{workspace, workspace_bytes};
  const tf_fp16ops::gpu::WorkspaceAllocator allocator{
      [](void* context, size_t bytes) -> void* {
        const Pool* p = static_cast<const Pool*>(context);
        return bytes <= p->bytes ? p->base : nullptr;
      },
      &pool};
  ConvPath used = ConvPath::kAuto;
  int n = 0;
  st = tf_fp16ops::gpu::LaunchWithAllocator(
      info, static_cast<Pass>(op), static_cast<cudaStream_t>(stream), FromDims(dims, nchw),
      static_cast<DataType>(t), static_cast<DataType>(tacc), a, b, out, static_cast<ConvPath>(path),
      allocator, &used, &n);
  if (used_path != nullptr) *used_path = static_cast<int>(used);
  if (selections != nullptr) *selections = n;
  return Finish(st, msg, msg_len);
}

// The matmul's plan on `device` within `max_bytes` of workspace: the implementation and bytes.
TFO_EXPORT int tfo_matmul_select(const int64_t* mdims, int adj_x, int adj_y,
                                 const int64_t* x_offsets, const int64_t* y_offsets, int t,
                                 int tacc, int path, uint64_t max_bytes, const int* device,
                                 int* chosen, uint64_t* bytes, char* msg, int msg_len) {
  DeviceInfo info;
  Status st;
  if (!GetDevice(device, &info, &st)) return Finish(st, msg, msg_len);
  tf_fp16ops::gpu::MatMulPlan plan;
  st = tf_fp16ops::gpu::MatMulPlanOn(info, MatMulShapeOf(mdims, adj_x, adj_y, x_offsets, y_offsets),
                                     static_cast<DataType>(t), static_cast<DataType>(tacc),
                                     static_cast<ConvPath>(path), max_bytes, &plan);
  if (chosen != nullptr) *chosen = static_cast<int>(plan.conv.path);
  if (bytes != nullptr) *bytes = plan.workspace_bytes;
  return Finish(st, msg, msg_len);
}

// Plans and runs the matmul on `stream`; *used_path receives the implementation that ran.
TFO_EXPORT int tfo_matmul_launch(const int64_t* mdims, int adj_x, int adj_y,
                                 const int64_t* x_offsets, const int64_t* y_offsets, int t,
                                 int tacc, const void* x, const void* y, void* out, void* workspace,
                                 uint64_t workspace_bytes, void* stream, int path,
                                 const int* device, int* used_path, char* msg, int msg_len) {
  DeviceInfo info;
  Status st;
  if (!GetDevice(device, &info, &st)) return Finish(st, msg, msg_len);
  ConvPath used = ConvPath::kAuto;
  st = tf_fp16ops::gpu::MatMulLaunchOn(info, static_cast<cudaStream_t>(stream),
                                       MatMulShapeOf(mdims, adj_x, adj_y, x_offsets, y_offsets),
                                       static_cast<DataType>(t), static_cast<DataType>(tacc), x, y,
                                       out, workspace, workspace_bytes, static_cast<ConvPath>(path),
                                       &used);
  if (used_path != nullptr) *used_path = static_cast<int>(used);
  return Finish(st, msg, msg_len);
}

// The device as the launchers see it: {driver_version, compute_capability, sm90a_code}.
TFO_EXPORT int tfo_query_device(int* device, char* msg, int msg_len) {
  DeviceInfo info;
  const Status st = tf_fp16ops::gpu::QueryDevice(&info);
  device[0] = info.driver_version;
  device[1] = info.compute_capability;
  device[2] = info.sm90a_code ? 1 : 0;
  return Finish(st, msg, msg_len);
}

// What the library was built with: runtime version, PTX arch, and up to `max_archs` SASS archs
// (returns their number in *num_archs).
TFO_EXPORT int tfo_build_info(int* runtime_version, int* ptx_arch, int* archs, int max_archs,
                              int* num_archs) {
  const BuildInfo b = tf_fp16ops::gpu::ThisBuild();
  *runtime_version = b.runtime_version;
  *ptx_arch = b.ptx_arch;
  *num_archs = b.num_sass_archs;
  for (int i = 0; i < b.num_sass_archs && i < max_archs; ++i) archs[i] = b.sass_archs[i];
  return 0;
}

// CheckDevice on given values (build: runtime_version, ptx_arch and num_archs SASS archs).
TFO_EXPORT int tfo_check_device(const int* device, int runtime_version, int ptx_arch,
                                const int* archs, int num_archs, char* msg, int msg_len) {
  DeviceInfo info;
  info.driver_version = device[0];
  info.compute_capability = device[1];
  info.sm90a_code = device[2] != 0;
  BuildInfo b;
  b.runtime_version = runtime_version;
  b.ptx_arch = ptx_arch;
  b.sass_archs = archs;
  b.num_sass_archs = num_archs;
  return Finish(tf_fp16ops::gpu::CheckDevice(info, b), msg, msg_len);
}

// Slices of the direct wgrad's reduction (1: sequential).
TFO_EXPORT int64_t tfo_direct_wgrad_splits(const int64_t* dims, int tacc) {
  return tf_fp16ops::gpu::internal::DirectWgradSplits(FromDims(dims, 0),
                                                      static_cast<DataType>(tacc));
}

}  // extern "C"
