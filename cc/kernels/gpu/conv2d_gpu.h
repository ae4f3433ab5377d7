// GPU launchers for Fp16Conv2D and its gradients (fprop, dgrad, wgrad).
//
// No TensorFlow headers here: the same sources build the TensorFlow op library and a standalone C-ABI
// library (tools/gpu_check) that is checked against PyTorch/cuDNN on a GPU machine without TensorFlow.
//
// Layouts (TensorFlow's):
//   activations  NHWC, or NCHW when Conv2DProblem::nchw        x [N,H,W,C], y/dy [N,P,Q,K]
//   filter       HWIO [KH, KW, C/groups, K]
// CUTLASS wants NHWC activations and KRSC filters; launchers transpose into the caller's workspace.
//
// Numerics (see DESIGN.md "Numerics contract"):
//   Tacc=float  accumulate in fp32 (true fp32: FFMA or HMMA with fp32 accumulators, never TF32) and
//               round once to T.
//   Tacc=half   tensor-core paths: MMA with fp16 accumulators, rounding in hardware order per MMA step.
//               Fallback path: one fp16 accumulator per output starting at +0, `acc = __hfma(x, w, acc)`
//               over (kh, kw, cin) for fprop, (kh, kw, k) for dgrad, (n, p, q) for wgrad: the CPU contract.
// Supported element/accumulator pairs: (half, half), (half, float), (float, float).
#ifndef TF_FP16OPS_CC_KERNELS_GPU_CONV2D_GPU_H_
#define TF_FP16OPS_CC_KERNELS_GPU_CONV2D_GPU_H_

#include <cstddef>
#include <cstdint>

// cudaStream_t exactly as CUDA's driver_types.h declares it, so that host code compiled without the
// CUDA headers (the TensorFlow OpKernel glue) can include this file; repeating an identical typedef
// is valid C++ when the CUDA headers are included too.
struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;

namespace tf_fp16ops {
namespace gpu {

// Sizes of one 2-D convolution, all in elements. P, Q are the output spatial sizes; the bottom/right
// padding is implied: pad_bottom = (P-1)*stride_h + (KH-1)*dil_h + 1 - H - pad_top (may be negative
// for VALID windows that leave input rows unused).
struct Conv2DProblem {
  int64_t N = 0, H = 0, W = 0, C = 0;  // input batch, height, width, channels (all groups)
  int64_t KH = 0, KW = 0;              // filter height, width
  int64_t K = 0;                       // output channels (all groups)
  int64_t groups = 1;                  // C % groups == 0 and K % groups == 0
  int64_t P = 0, Q = 0;                // output height, width
  int64_t stride_h = 1, stride_w = 1;
  int64_t dil_h = 1, dil_w = 1;
  int64_t pad_top = 0, pad_left = 0;
  bool nchw = false;                   // activations NCHW instead of NHWC
};

enum class DataType : int { kHalf = 0, kFloat = 1 };

enum class StatusCode : int { kOk = 0, kInvalidArgument = 1, kInternal = 2 };

// Plain-old-data status (no std::string, so it crosses compiler/ABI boundaries unchanged).
struct Status {
  StatusCode code = StatusCode::kOk;
  char message[384] = {0};
  bool ok() const { return code == StatusCode::kOk; }
};

// Which implementation ran (or is requested). kAuto picks the fastest applicable one.
enum class ConvPath : int {
  kAuto = 0,
  kSm90 = 1,       // CUTLASS 3.x implicit GEMM, wgmma + TMA (sm_90a)
  kSm80 = 2,       // CUTLASS 2.x implicit GEMM, mma.sync 16x8x16 (sm_80 and newer)
  kSimt = 3,       // CUTLASS 2.x SIMT implicit GEMM, fp32 FFMA (T=float)
  kFallback = 4,   // direct convolution, one thread per output, sequential accumulation
};

const char* ConvPathName(ConvPath path);

// Returns an error status when the sizes are inconsistent (non-positive sizes, groups not dividing C
// and K, P/Q not matching the padding, unsupported type pair). Launchers call it first.
Status ValidateProblem(const Conv2DProblem& p, DataType T, DataType Tacc);

// Workspace needed by the Launch* call with the same arguments (bytes, possibly 0). The launchers
// fail with kInvalidArgument if given less.
size_t FpropWorkspaceBytes(const Conv2DProblem& p, DataType T, DataType Tacc);
size_t DgradWorkspaceBytes(const Conv2DProblem& p, DataType T, DataType Tacc);
size_t WgradWorkspaceBytes(const Conv2DProblem& p, DataType T, DataType Tacc);

// y = conv(x, w). x: input, w: HWIO filter, y: output. Enqueued on `stream`; device pointers.
// `requested` forces a path (kInvalidArgument if it cannot run this problem); `used` receives the
// path that ran (may be null).
Status LaunchFprop(cudaStream_t stream, const Conv2DProblem& p, DataType T, DataType Tacc,
                   const void* x, const void* w, void* y, void* workspace, size_t workspace_bytes,
                   ConvPath requested = ConvPath::kAuto, ConvPath* used = nullptr);

// dx = conv_backprop_input(w, dy). w: HWIO filter, dy: output gradient, dx: input gradient.
Status LaunchDgrad(cudaStream_t stream, const Conv2DProblem& p, DataType T, DataType Tacc,
                   const void* w, const void* dy, void* dx, void* workspace, size_t workspace_bytes,
                   ConvPath requested = ConvPath::kAuto, ConvPath* used = nullptr);

// dw = conv_backprop_filter(x, dy). x: input, dy: output gradient, dw: HWIO filter gradient.
Status LaunchWgrad(cudaStream_t stream, const Conv2DProblem& p, DataType T, DataType Tacc,
                   const void* x, const void* dy, void* dw, void* workspace, size_t workspace_bytes,
                   ConvPath requested = ConvPath::kAuto, ConvPath* used = nullptr);

}  // namespace gpu
}  // namespace tf_fp16ops

#endif  // TF_FP16OPS_CC_KERNELS_GPU_CONV2D_GPU_H_
