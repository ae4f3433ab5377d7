// C ABI over the GPU launchers (cc/kernels/gpu/conv2d_gpu.h) for the standalone check library
// libtf_fp16ops_gpu.so, loaded with ctypes on machines without TensorFlow.
//
// dims: 16 int64 values in this order:
//   N, H, W, C, KH, KW, K, groups, P, Q, stride_h, stride_w, dil_h, dil_w, pad_top, pad_left
// op: 0 fprop (a = x, b = w HWIO, out = y), 1 dgrad (a = w HWIO, b = dy, out = dx),
//     2 wgrad (a = x, b = dy, out = dw HWIO)
// dtype codes: 0 half, 1 float. path codes: 0 auto, 1 sm90, 2 sm80, 3 simt, 4 fallback.
// Return value: 0 ok, 1 invalid argument, 2 internal error; `msg` receives the status text.
#include <cstdint>
#include <cstring>

#include "cc/kernels/gpu/conv2d_gpu.h"

namespace {

using tf_fp16ops::gpu::Conv2DProblem;
using tf_fp16ops::gpu::ConvPath;
using tf_fp16ops::gpu::DataType;
using tf_fp16ops::gpu::Status;

Conv2DProblem FromDims(const int64_t* d, int nchw) {
  Conv2DProblem p;
  p.N = d[0]; p.H = d[1]; p.W = d[2]; p.C = d[3]; p.KH = d[4]; p.KW = d[5]; p.K = d[6];
  p.groups = d[7]; p.P = d[8]; p.Q = d[9]; p.stride_h = d[10]; p.stride_w = d[11];
  p.dil_h = d[12]; p.dil_w = d[13]; p.pad_top = d[14]; p.pad_left = d[15];
  p.nchw = nchw != 0;
  return p;
}

void CopyMessage(const Status& st, char* msg, int msg_len) {
  if (msg == nullptr || msg_len <= 0) return;
  std::strncpy(msg, st.message, static_cast<size_t>(msg_len) - 1);
  msg[msg_len - 1] = '\0';
}

}  // namespace

#define TFO_EXPORT __attribute__((visibility("default")))

extern "C" {

TFO_EXPORT int tfo_workspace_bytes(int op, const int64_t* dims, int nchw, int t, int tacc, uint64_t* bytes) {
  const Conv2DProblem p = FromDims(dims, nchw);
  const DataType T = static_cast<DataType>(t), Tacc = static_cast<DataType>(tacc);
  const Status st = tf_fp16ops::gpu::ValidateProblem(p, T, Tacc);
  if (!st.ok()) return static_cast<int>(st.code);
  switch (op) {
    case 0: *bytes = tf_fp16ops::gpu::FpropWorkspaceBytes(p, T, Tacc); return 0;
    case 1: *bytes = tf_fp16ops::gpu::DgradWorkspaceBytes(p, T, Tacc); return 0;
    case 2: *bytes = tf_fp16ops::gpu::WgradWorkspaceBytes(p, T, Tacc); return 0;
    default: return 1;
  }
}

TFO_EXPORT int tfo_launch(int op, const int64_t* dims, int nchw, int t, int tacc, const void* a,
               const void* b, void* out, void* workspace, uint64_t workspace_bytes, void* stream,
               int path, int* used_path, char* msg, int msg_len) {
  const Conv2DProblem p = FromDims(dims, nchw);
  const DataType T = static_cast<DataType>(t), Tacc = static_cast<DataType>(tacc);
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  ConvPath used = ConvPath::kAuto;
  Status st;
  switch (op) {
    case 0:
      st = tf_fp16ops::gpu::LaunchFprop(s, p, T, Tacc, a, b, out, workspace, workspace_bytes,
                                        static_cast<ConvPath>(path), &used);
      break;
    case 1:
      st = tf_fp16ops::gpu::LaunchDgrad(s, p, T, Tacc, a, b, out, workspace, workspace_bytes,
                                        static_cast<ConvPath>(path), &used);
      break;
    case 2:
      st = tf_fp16ops::gpu::LaunchWgrad(s, p, T, Tacc, a, b, out, workspace, workspace_bytes,
                                        static_cast<ConvPath>(path), &used);
      break;
    default:
      std::strncpy(st.message, "op must be 0 (fprop), 1 (dgrad) or 2 (wgrad)", sizeof(st.message) - 1);
      st.code = tf_fp16ops::gpu::StatusCode::kInvalidArgument;
  }
  if (used_path != nullptr) *used_path = static_cast<int>(used);
  CopyMessage(st, msg, msg_len);
  return static_cast<int>(st.code);
}

}  // extern "C"
