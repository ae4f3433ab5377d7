// GPU launchers for Fp16Conv2D and its gradients (fprop, dgrad, wgrad).
//
// No TensorFlow or CUDA headers here: the same sources build the op library's GPU kernels, the
// standalone C-ABI library libtf_fp16ops_gpu.so (c_api.cc, driven by tools/gpu_check on a GPU
// machine without TensorFlow) and, compiled by the host compiler, libtf_fp16ops_gpu_host.so
// (tests/gpu/test_gpu_host.py runs the direct kernels, layout transforms and dispatch on a CPU).
//
// Problem: tf_fp16ops::ConvProblem (cc/kernels/conv_problem.h), int64 sizes. Layouts
// (TensorFlow's): activations NHWC, or NCHW when `nchw`: x [N,H,W,C], y/dy [N,P,Q,K]; filter
// HWIO [KH, KW, Cg, K]. CUTLASS wants NHWC activations and KRSC filters; implementations that
// need them transpose into the caller's workspace.
//
// Numerics (README "Numerics"):
//   Tacc=float  accumulate in binary32 (FFMA, or HMMA/HGMMA with fp32 accumulators; never TF32)
//               and round once to T.
//   Tacc=half   tensor-core paths: MMA with fp16 accumulators, rounding in the hardware's order.
//               Direct path: one fp16 accumulator per output starting at +0,
//               acc = __hfma(x, w, acc) over (kh, kw, cin) for fprop, (kh, kw, k) for dgrad,
//               (n, p, q) for wgrad: the CPU contract (cc/kernels/cpu/conv2d_cpu.h), bit for bit.
// Supported (T, Tacc): (half, half), (half, float), (float, float).
//
// Compatibility (default build, clang + CUDA 12.5, the runtime TensorFlow's GPU wheel loads,
// libcudart.so.12): any CUDA 12 driver (R525 or newer) where SASS exists, i.e. sm_60 ... sm_90
// (compute capability 6.x-9.x); compute_90 PTX JIT-compiled on newer GPUs needs a CUDA 12.5
// driver (R555). sm_90a SASS for the Hopper (wgmma/TMA) kernels, used on compute capability 9.0
// only; sm_70 SASS for the Volta kernels. The nvcc 13 build links the CUDA 13.0 runtime
// statically (R580 or newer) and holds sm_75 ... sm_90.
// Every launch checks the device first (CheckDevice) and fails with kFailedPrecondition or
// kUnimplemented before any kernel runs when the build cannot serve it.
#ifndef TF_FP16OPS_CC_KERNELS_GPU_CONV2D_GPU_H_
#define TF_FP16OPS_CC_KERNELS_GPU_CONV2D_GPU_H_

#include <cstddef>
#include <cstdint>

#include "cc/kernels/conv_problem.h"

// cudaStream_t exactly as CUDA's driver_types.h declares it, so that code compiled without the
// CUDA headers (the TensorFlow OpKernel glue, the host build) can include this file; repeating an
// identical typedef is valid C++ when the CUDA headers are included too.
struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;

namespace tf_fp16ops {
namespace gpu {

enum class DataType : int { kHalf = 0, kFloat = 1 };

// Codes as TensorFlow's error namespace spells them (the OpKernel maps them one to one).
enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,
  kInternal = 2,
  kFailedPrecondition = 3,
  kUnimplemented = 4,
  kResourceExhausted = 5,  // a workspace the allocator could not give, and no fallback
};

// Plain-old-data status (no std::string, so it crosses compiler/ABI boundaries unchanged).
struct Status {
  StatusCode code = StatusCode::kOk;
  char message[512] = {0};
  bool ok() const { return code == StatusCode::kOk; }
};

// The implementations (kAuto: the first of the table, conv2d_gpu.cu.cc, that can run; codes are
// the C ABI's, so a new one takes the next number).
enum class ConvPath : int {
  kAuto = 0,
  kSm90 = 1,      // CUTLASS 3.x implicit GEMM, wgmma + TMA im2col (sm_90a; T=half)
  kSm80 = 2,      // CUTLASS 2.x implicit GEMM, mma.sync 16x8x16 (CC >= 8.0; T=half)
  kSimt = 3,      // CUTLASS 2.x SIMT implicit GEMM, fp32 FFMA (CC >= 8.0; T=float)
  kFallback = 4,  // direct convolution (any problem; see direct_conv.h)
  kSm70 = 5,      // CUTLASS 2.x implicit GEMM, Volta mma.sync 8x8x4 (CC 7.0/7.2; T=half)
};
constexpr int kNumPaths = 6;

const char* ConvPathName(ConvPath path);
const char* PassName(Pass pass);

// What the launchers ask of the device, and what this build provides. Queried from the CUDA
// runtime by QueryDevice() (device builds); the host tests pass made-up values.
struct DeviceInfo {
  int driver_version = 0;      // cudaDriverGetVersion(): 1000 * major + 10 * minor (0: no driver)
  int compute_capability = 0;  // 10 * major + minor of the current device
  bool sm90a_code = false;     // the sm_90a kernel images are present and loadable
};
struct BuildInfo {
  int runtime_version = 0;          // CUDART_VERSION the library was built with (13000 for 13.0)
  const int* sass_archs = nullptr;  // SASS targets of the portable kernels (e.g. 75, 80, 86, ...)
  int num_sass_archs = 0;
  int ptx_arch = 0;  // compute_XY PTX embedded for JIT on newer GPUs (0: none)
};
BuildInfo ThisBuild();
// Queries the current device (device builds; the host build reports a stand-in sm_75 device
// with a current driver, so that its Launch takes the direct kernels).
Status QueryDevice(DeviceInfo* info);
// The device `stream` belongs to (cudaStreamGetDevice in CUDA 12.8+ builds: on a multi-GPU host
// the current device need not be the op's; the CUDA 12.5 build takes the current device, which
// TensorFlow makes the op's while the kernel runs), its description queried once per device and
// cached. Host build: the stand-in of QueryDevice.
Status QueryStreamDevice(cudaStream_t stream, DeviceInfo* info);
// kFailedPrecondition when the driver is older than the runtime (or absent); kUnimplemented when
// no SASS or PTX of the build runs on the device's compute capability. The message names what
// was found, what is needed and that pinning the op to the CPU works.
Status CheckDevice(const DeviceInfo& device, const BuildInfo& build);

// kInvalidArgument when the sizes are inconsistent (negative sizes, groups not dividing C and K,
// P/Q not reachable from the padding, unsupported type pair). The launchers call it first.
Status ValidateProblem(const ConvProblem& p, DataType T, DataType Tacc);

// The implementation that Launch would run for (pass, p, T, Tacc, requested) on `device`, and the
// workspace it needs (bytes; computed by the code that carves it). kInvalidArgument when
// `requested` cannot run the problem (the message says why), or the problem is invalid.
Status Select(Pass pass, const ConvProblem& p, DataType T, DataType Tacc, ConvPath requested,
              const DeviceInfo& device, ConvPath* path, size_t* workspace_bytes);

// Runs one pass. Operands (device pointers) in C-ABI order:
//   fprop: a = x, b = w (HWIO), out = y        dgrad: a = w (HWIO), b = dy, out = dx
//   wgrad: a = x, b = dy, out = dw (HWIO)
// Enqueued on `stream`. Checks the device (CheckDevice), validates, selects as Select does, and
// fails with kInvalidArgument if workspace_bytes is smaller than Select's. `used` (may be null)
// receives the implementation that ran.
Status Launch(Pass pass, cudaStream_t stream, const ConvProblem& p, DataType T, DataType Tacc,
              const void* a, const void* b, void* out, void* workspace, size_t workspace_bytes,
              ConvPath requested = ConvPath::kAuto, ConvPath* used = nullptr);
// The same on a given device description (the host tests fake it; Launch passes QueryDevice's).
Status LaunchOn(const DeviceInfo& device, Pass pass, cudaStream_t stream, const ConvProblem& p,
                DataType T, DataType Tacc, const void* a, const void* b, void* out, void* workspace,
                size_t workspace_bytes, ConvPath requested, ConvPath* used);

// One selection for one call, the shape of CUTLASS's Operation (can_implement and workspace once,
// then run): the implementation chosen on `device` and the workspace it needs.
struct LaunchPlan {
  DeviceInfo device;
  ConvPath path = ConvPath::kAuto;
  size_t workspace_bytes = 0;
};
// Checks the device (CheckDevice), validates and selects as Select does, taking only
// implementations that need at most `max_workspace_bytes` (SIZE_MAX: any; 0: none).
Status PlanOn(const DeviceInfo& device, Pass pass, const ConvProblem& p, DataType T, DataType Tacc,
              ConvPath requested, size_t max_workspace_bytes, LaunchPlan* plan);
// Runs the implementation of `plan` without selecting again (workspace as in Launch).
Status RunPlan(const LaunchPlan& plan, Pass pass, cudaStream_t stream, const ConvProblem& p,
               DataType T, DataType Tacc, const void* a, const void* b, void* out, void* workspace,
               size_t workspace_bytes, ConvPath* used);
// Allocates `bytes` of device memory for the workspace of one call and returns it, or null when
// the allocator cannot (the memory stays the caller's: TensorFlow's temporary tensor).
struct WorkspaceAllocator {
  void* (*allocate)(void* context, size_t bytes);
  void* context;
};
// Plans once, asks `allocator` for the plan's workspace and, when it cannot give it, falls back
// as TensorFlow's AllocateScratchOrFallback does: to the first implementation that needs no
// workspace (the error is the allocator's kResourceExhausted when there is none). Then runs
// that plan. `used` receives the implementation that ran; `selections` (may be null) the number
// of table selections made (1, or 2 after a fallback).
Status LaunchWithAllocator(const DeviceInfo& device, Pass pass, cudaStream_t stream,
                           const ConvProblem& p, DataType T, DataType Tacc, const void* a,
                           const void* b, void* out, ConvPath requested,
                           const WorkspaceAllocator& allocator, ConvPath* used, int* selections);

// Workspace of Launch on the current device (0 on any error; Launch then reports the error).
size_t WorkspaceBytes(Pass pass, const ConvProblem& p, DataType T, DataType Tacc,
                      ConvPath requested = ConvPath::kAuto);

}  // namespace gpu
}  // namespace tf_fp16ops

#endif  // TF_FP16OPS_CC_KERNELS_GPU_CONV2D_GPU_H_
