// Dispatch: one table of implementations for the three passes (each entry dispatches on the
// pass), walked by one loop.
//
// Each implementation has the shape of a CUTLASS library Operation: why_not (can_implement: null
// when it can run the problem on the device, else the reason), and plan (carves its workspace in
// order and, when asked, runs). Sizing a workspace is the same plan call with a null base and
// no run, so the bytes asked for are the bytes carved. Table order (kAuto takes the first that
// can run): sm90 (CUTLASS 3.x, CC 9.0, T=half) -> sm80 (CUTLASS 2.x tensor cores, CC >= 8.0,
// T=half) -> sm70 (CUTLASS 2.x Volta tensor cores, CC 7.0/7.2, T=half) -> simt (CUTLASS 2.x
// FFMA, CC >= 8.0, T=float) -> fallback (direct kernel, any problem).
// Implicit-GEMM paths need groups == 1, int32 extents, non-empty tensors and, for T=half, C and K
// multiples of 8 (16-byte vector access); CUTLASS's can_implement has the final word.
#include "cc/kernels/gpu/conv2d_gpu.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <limits>
#include <mutex>

#include "cc/kernels/gpu/direct_conv.h"
#include "cc/kernels/gpu/implicit_gemm.h"
#include "cc/kernels/gpu/layout_transform.h"
#include "cc/kernels/gpu/make_status.h"
#include "cc/kernels/gpu/platform.h"

#if !defined(TF_FP16OPS_HOST_BUILD)
#include <cuda_runtime_api.h>
#endif

// SASS targets of the portable kernels and the PTX embedded with them: the Bazel build writes the
// list it compiles for (cc/kernels/gpu/BUILD, from TF_FP16OPS_CUDA_ARCHS); the default is the
// default list of third_party/cuda/cuda_configure.bzl's clang toolchain (CUDA 12.5).
#if defined(TF_FP16OPS_CUDA_ARCHS_INC)
#include "cc/kernels/gpu/cuda_archs.inc"
#endif
#ifndef TF_FP16OPS_SASS_ARCHS
#define TF_FP16OPS_SASS_ARCHS 60, 70, 75, 80, 86, 89, 90
#endif
#ifndef TF_FP16OPS_PTX_ARCH
#define TF_FP16OPS_PTX_ARCH 90
#endif

namespace tf_fp16ops {
namespace gpu {
namespace {

using internal::IgCode;
using internal::IgResult;
using internal::MakeStatus;

constexpr size_t kAlign = 256;        // workspace sub-buffer alignment (bytes)
constexpr int64_t kTile = 128;        // CUTLASS threadblock tile (M and N), split-K sizing
constexpr int64_t kTargetCtas = 264;  // ~2 waves on a 132-SM H100/H200
constexpr size_t kMaxSplitKBytes = size_t(256) << 20;
constexpr int kMaxDevices = 64;  // per-device caches

Status Ok() { return Status(); }

size_t ElemBytes(DataType t) { return t == DataType::kHalf ? 2 : 4; }

const char* TypeName(DataType t) {
  return t == DataType::kHalf ? "half" : (t == DataType::kFloat ? "float" : "unknown");
}

// Consecutive aligned sub-buffers of the workspace. With a null base every Take returns null and
// only used() grows: that is how the workspace is sized.
class Carver {
 public:
  explicit Carver(void* base) : base_(static_cast<char*>(base)) {}
  void* Take(size_t bytes) {
    void* p = base_ == nullptr ? nullptr : base_ + used_;
    used_ += (bytes + kAlign - 1) / kAlign * kAlign;
    return p;
  }
  size_t used() const { return used_; }

 private:
  char* base_;
  size_t used_ = 0;
};

struct Args {
  Pass pass;
  const ConvProblem& p;
  DataType T, Tacc;
  const void* a;  // C-ABI operand order (conv2d_gpu.h)
  const void* b;
  void* out;
  cudaStream_t stream;
};

Status CudaStatus(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Ok();
  return MakeStatus(StatusCode::kInternal, "%s: CUDA error %d (%s)", what, int(e),
                    cudaGetErrorString(e));
}

Status IgStatus(const IgResult& r, const char* kernel) {
  if (r.code == IgCode::kOk) return Ok();
  return MakeStatus(StatusCode::kInternal, "%s kernel failed: %s", kernel, r.what);
}

bool FitsInt32(int64_t v) { return v >= 0 && v <= std::numeric_limits<int32_t>::max(); }

// Common preconditions of the implicit-GEMM (CUTLASS) implementations; `volta`: the sm70 kernels,
// which check the compute capability themselves.
const char* IgWhyNot(const ConvProblem& p, DataType T, const DeviceInfo& d, bool volta = false) {
  if (p.groups != 1) return "grouped convolution (groups > 1)";
  if (p.N == 0 || p.H == 0 || p.W == 0 || p.C == 0 || p.K == 0 || p.P == 0 || p.Q == 0) {
    return "an empty tensor";
  }
  const int64_t dims[] = {p.N,        p.H,        p.W,        p.C,          p.K,
                          p.KH,       p.KW,       p.P,        p.Q,          p.pad_top,
                          p.pad_left, p.stride_h, p.stride_w, p.dilation_h, p.dilation_w};
  for (int64_t v : dims) {
    if (!FitsInt32(v)) return "an extent beyond int32";
  }
  const int64_t counts[] = {p.InputElements(), p.OutputElements(), p.FilterElements()};
  for (int64_t v : counts) {
    if (!FitsInt32(v)) return "a tensor with 2^31 or more elements";
  }
  if (T == DataType::kHalf && (p.C % 8 != 0 || p.K % 8 != 0)) {
    return "C or K not a multiple of 8 (16-byte vector access)";
  }
  if (!volta && d.compute_capability < 80) {
    return "implicit-GEMM kernels need compute capability >= 8.0";
  }
  return nullptr;
}

// Split-K slices of the sm80/simt wgrad: enough CTAs to fill the GPU, each slice at least 1024
// GEMM-K steps, at most 64 slices and 256 MiB of partials.
int WgradSplits(const ConvProblem& p, DataType Tacc) {
  const int64_t tiles = ((p.K + kTile - 1) / kTile) * ((p.KH * p.KW * p.C + kTile - 1) / kTile);
  const int64_t gemm_k = p.GemmK(Pass::kWgrad);
  int64_t splits = (kTargetCtas + tiles - 1) / tiles;
  splits = std::min<int64_t>(splits, std::max<int64_t>(1, gemm_k / 1024));
  splits = std::min<int64_t>(splits, 64);
  const int64_t one = p.K * p.KH * p.KW * p.C * int64_t(ElemBytes(Tacc));
  while (splits > 1 && splits * one > int64_t(kMaxSplitKBytes)) --splits;
  return int(std::max<int64_t>(1, splits));
}

// The Hopper wgrad (no split-K) is picked by kAuto only when its output tiles fill the GPU.
bool WgradFillsGpu(const ConvProblem& p) {
  return ((p.K + kTile - 1) / kTile) * ((p.KH * p.KW * p.C + kTile - 1) / kTile) >= 100;
}

// Calls F<T, Tacc>::fn(args...) for the supported pair.
#define TFO_BY_TYPES(T, Tacc, CALL)                                        \
  ((T) == DataType::kHalf && (Tacc) == DataType::kHalf                     \
       ? CALL(DataType::kHalf, DataType::kHalf)                            \
       : ((T) == DataType::kHalf ? CALL(DataType::kHalf, DataType::kFloat) \
                                 : CALL(DataType::kFloat, DataType::kFloat)))

// ---------------------------------------------------------------------------------------------
// Implementations

// Layout staging shared by the CUTLASS implementations: NHWC copies of NCHW activations and the
// KRSC filter. Carves the buffers; when `run`, fills the inputs. Returns a CUDA status.
struct Staged {
  const void* x = nullptr;   // fprop/wgrad input, NHWC
  const void* dy = nullptr;  // dgrad/wgrad output gradient, NHWC
  const void* w = nullptr;   // fprop/dgrad filter, KRSC
  void* out = nullptr;       // fprop y / dgrad dx in NHWC (the caller's buffer when NHWC)
  void* out_nhwc_tmp = nullptr;
};

Status Stage(const Args& g, Carver* c, bool run, Staged* s) {
  const ConvProblem& p = g.p;
  const size_t e = ElemBytes(g.T);
  const size_t x_bytes = size_t(p.InputElements()) * e;
  const size_t y_bytes = size_t(p.OutputElements()) * e;
  const cudaStream_t st = g.stream;
  if (g.pass != Pass::kWgrad) {
    void* w_krsc = c->Take(size_t(p.K * p.KH * p.KW * p.C) * e);
    s->w = w_krsc;
    if (run) {
      Status r = CudaStatus(internal::HwioToKrsc(g.T, g.pass == Pass::kFprop ? g.b : g.a, w_krsc,
                                                 p.KH, p.KW, p.C, p.K, st),
                            "filter transpose");
      if (!r.ok()) return r;
    }
  }
  const void* x_in = g.pass == Pass::kDgrad ? nullptr : g.a;
  const void* dy_in = g.pass == Pass::kFprop ? nullptr : g.b;
  s->x = x_in;
  s->dy = dy_in;
  s->out = g.pass == Pass::kWgrad ? nullptr : g.out;
  if (!p.nchw) return Ok();
  if (g.pass != Pass::kDgrad) {
    void* x_nhwc = c->Take(x_bytes);
    s->x = x_nhwc;
    if (run) {
      Status r = CudaStatus(internal::NchwToNhwc(g.T, x_in, x_nhwc, p.N, p.C, p.H, p.W, st),
                            "x transpose");
      if (!r.ok()) return r;
    }
  }
  if (g.pass != Pass::kFprop) {
    void* dy_nhwc = c->Take(y_bytes);
    s->dy = dy_nhwc;
    if (run) {
      Status r = CudaStatus(internal::NchwToNhwc(g.T, dy_in, dy_nhwc, p.N, p.K, p.P, p.Q, st),
                            "dy transpose");
      if (!r.ok()) return r;
    }
  }
  if (g.pass != Pass::kWgrad) {
    s->out_nhwc_tmp = c->Take(g.pass == Pass::kFprop ? y_bytes : x_bytes);
    s->out = s->out_nhwc_tmp;
  }
  return Ok();
}

// After the kernel: NHWC -> NCHW of fprop's y / dgrad's dx.
Status Unstage(const Args& g, const Staged& s) {
  if (!g.p.nchw || g.pass == Pass::kWgrad) return Ok();
  const ConvProblem& p = g.p;
  if (g.pass == Pass::kFprop) {
    return CudaStatus(internal::NhwcToNchw(g.T, s.out, g.out, p.N, p.K, p.P, p.Q, g.stream),
                      "y transpose");
  }
  return CudaStatus(internal::NhwcToNchw(g.T, s.out, g.out, p.N, p.C, p.H, p.W, g.stream),
                    "dx transpose");
}

// --- sm80 (T=half) and simt (T=float): CUTLASS 2.x

template <Pass P>
IgResult Sm80Can(const ConvProblem& p, DataType T, DataType Tacc, int splits) {
#define TFO_CALL(A, B) internal::Sm80CanImplement<P, A, B>(p, splits)
  return TFO_BY_TYPES(T, Tacc, TFO_CALL);
#undef TFO_CALL
}

template <Pass P>
IgResult Sm80Go(const ConvProblem& p, DataType T, DataType Tacc, const void* a, const void* b,
                void* d, int splits, size_t d_bytes, cudaStream_t s) {
#define TFO_CALL(A, B) internal::Sm80Run<P, A, B>(p, a, b, d, splits, d_bytes, s)
  return TFO_BY_TYPES(T, Tacc, TFO_CALL);
#undef TFO_CALL
}

IgResult Sm80CanAny(Pass pass, const ConvProblem& p, DataType T, DataType Tacc) {
  switch (pass) {
    case Pass::kFprop:
      return Sm80Can<Pass::kFprop>(p, T, Tacc, 1);
    case Pass::kDgrad:
      return Sm80Can<Pass::kDgrad>(p, T, Tacc, 1);
    default:
      return Sm80Can<Pass::kWgrad>(p, T, Tacc, WgradSplits(p, Tacc));
  }
}

const char* CutlassWhyNot(ConvPath path, Pass pass, const ConvProblem& p, DataType T, DataType Tacc,
                          const DeviceInfo& d) {
  if (path == ConvPath::kSm80 && T != DataType::kHalf) return "the sm80 kernels are for T=half";
  if (path == ConvPath::kSimt && T != DataType::kFloat) return "the simt kernels are for T=float";
  if (const char* why = IgWhyNot(p, T, d)) return why;
  const IgResult r = Sm80CanAny(pass, p, T, Tacc);
  return r.code == IgCode::kOk ? nullptr : r.what;
}

const char* Sm80WhyNot(Pass pass, const ConvProblem& p, DataType T, DataType Tacc,
                       const DeviceInfo& d, bool) {
  return CutlassWhyNot(ConvPath::kSm80, pass, p, T, Tacc, d);
}
const char* SimtWhyNot(Pass pass, const ConvProblem& p, DataType T, DataType Tacc,
                       const DeviceInfo& d, bool) {
  return CutlassWhyNot(ConvPath::kSimt, pass, p, T, Tacc, d);
}

// --- sm70: CUTLASS 2.x Volta tensor ops, T=half

template <Pass P>
IgResult Sm70Can(const ConvProblem& p, DataType Tacc, int splits) {
  return Tacc == DataType::kHalf ? internal::Sm70CanImplement<P, DataType::kHalf>(p, splits)
                                 : internal::Sm70CanImplement<P, DataType::kFloat>(p, splits);
}

template <Pass P>
IgResult Sm70Go(const ConvProblem& p, DataType Tacc, const void* a, const void* b, void* d,
                int splits, size_t d_bytes, cudaStream_t s) {
  return Tacc == DataType::kHalf
             ? internal::Sm70Run<P, DataType::kHalf>(p, a, b, d, splits, d_bytes, s)
             : internal::Sm70Run<P, DataType::kFloat>(p, a, b, d, splits, d_bytes, s);
}

const char* Sm70WhyNot(Pass pass, const ConvProblem& p, DataType T, DataType Tacc,
                       const DeviceInfo& d, bool) {
  if (T != DataType::kHalf) return "the sm70 kernels are for T=half";
  if (const char* why = IgWhyNot(p, T, d, /*volta=*/true)) return why;
  if (d.compute_capability != 70 && d.compute_capability != 72) {
    return "the Volta kernels (mma.sync 8x8x4) are used on compute capability 7.0 and 7.2 only";
  }
  if (!internal::Sm70CodeBuilt<Pass::kFprop, DataType::kHalf>()) {
    return "no sm_70 code for the Volta kernels in this library";
  }
  IgResult r = internal::IgOk();
  switch (pass) {
    case Pass::kFprop:
      r = Sm70Can<Pass::kFprop>(p, Tacc, 1);
      break;
    case Pass::kDgrad:
      r = Sm70Can<Pass::kDgrad>(p, Tacc, 1);
      break;
    default:
      r = Sm70Can<Pass::kWgrad>(p, Tacc, WgradSplits(p, Tacc));
  }
  return r.code == IgCode::kOk ? nullptr : r.what;
}

// The CUTLASS 2.x plans: staging, the kernel (Volta's when `volta`), split-K reduction, unstaging.
Status CutlassPlan(const Args& g, Carver* c, bool run, const char* kernel, bool volta = false) {
  const ConvProblem& p = g.p;
  Staged s;
  Status st = Stage(g, c, run, &s);
  if (!st.ok()) return st;
  if (g.pass == Pass::kWgrad) {
    const int splits = WgradSplits(p, g.Tacc);
    const size_t bytes = size_t(splits) * size_t(p.K * p.KH * p.KW * p.C) * ElemBytes(g.Tacc);
    void* partial = c->Take(bytes);
    if (!run) return Ok();
    const IgResult r =
        volta ? Sm70Go<Pass::kWgrad>(p, g.Tacc, s.dy, s.x, partial, splits, bytes, g.stream)
              : Sm80Go<Pass::kWgrad>(p, g.T, g.Tacc, s.dy, s.x, partial, splits, bytes, g.stream);
    st = IgStatus(r, kernel);
    if (!st.ok()) return st;
    return CudaStatus(internal::ReduceKrscToHwio(g.T, g.Tacc, partial, splits, g.out, p.K, p.KH,
                                                 p.KW, p.C, g.stream),
                      "split-K reduction");
  }
  if (!run) return Ok();
  IgResult r = internal::IgOk();
  if (volta) {
    r = g.pass == Pass::kFprop ? Sm70Go<Pass::kFprop>(p, g.Tacc, s.x, s.w, s.out, 1, 0, g.stream)
                               : Sm70Go<Pass::kDgrad>(p, g.Tacc, s.dy, s.w, s.out, 1, 0, g.stream);
  } else {
    r = g.pass == Pass::kFprop
            ? Sm80Go<Pass::kFprop>(p, g.T, g.Tacc, s.x, s.w, s.out, 1, 0, g.stream)
            : Sm80Go<Pass::kDgrad>(p, g.T, g.Tacc, s.dy, s.w, s.out, 1, 0, g.stream);
  }
  st = IgStatus(r, kernel);
  if (!st.ok()) return st;
  return Unstage(g, s);
}

Status Sm80Plan(const Args& g, Carver* c, bool run) {
  return CutlassPlan(g, c, run, "sm80 (CUTLASS 2.x mma.sync)");
}
Status Sm70Plan(const Args& g, Carver* c, bool run) {
  return CutlassPlan(g, c, run, "sm70 (CUTLASS 2.x Volta mma.sync)", /*volta=*/true);
}
Status SimtPlan(const Args& g, Carver* c, bool run) {
  return CutlassPlan(g, c, run, "simt (CUTLASS 2.x FFMA)");
}

// --- sm90: CUTLASS 3.x, T=half

IgResult Sm90Can(Pass pass, const ConvProblem& p, DataType Tacc) {
  const bool f = Tacc == DataType::kFloat;
  switch (pass) {
    case Pass::kFprop:
      return f ? internal::Sm90CanImplement<Pass::kFprop, DataType::kFloat>(p)
               : internal::Sm90CanImplement<Pass::kFprop, DataType::kHalf>(p);
    case Pass::kDgrad:
      return f ? internal::Sm90CanImplement<Pass::kDgrad, DataType::kFloat>(p)
               : internal::Sm90CanImplement<Pass::kDgrad, DataType::kHalf>(p);
    default:
      return f ? internal::Sm90CanImplement<Pass::kWgrad, DataType::kFloat>(p)
               : internal::Sm90CanImplement<Pass::kWgrad, DataType::kHalf>(p);
  }
}

IgResult Sm90Go(Pass pass, const ConvProblem& p, DataType Tacc, const void* a, const void* b,
                void* d, cudaStream_t s) {
  const bool f = Tacc == DataType::kFloat;
  switch (pass) {
    case Pass::kFprop:
      return f ? internal::Sm90Run<Pass::kFprop, DataType::kFloat>(p, a, b, d, s)
               : internal::Sm90Run<Pass::kFprop, DataType::kHalf>(p, a, b, d, s);
    case Pass::kDgrad:
      return f ? internal::Sm90Run<Pass::kDgrad, DataType::kFloat>(p, a, b, d, s)
               : internal::Sm90Run<Pass::kDgrad, DataType::kHalf>(p, a, b, d, s);
    default:
      return f ? internal::Sm90Run<Pass::kWgrad, DataType::kFloat>(p, a, b, d, s)
               : internal::Sm90Run<Pass::kWgrad, DataType::kHalf>(p, a, b, d, s);
  }
}

const char* Sm90WhyNot(Pass pass, const ConvProblem& p, DataType T, DataType Tacc,
                       const DeviceInfo& d, bool forced) {
  if (T != DataType::kHalf) return "the sm90 kernels are for T=half (T=float would run as TF32)";
  if (const char* why = IgWhyNot(p, T, d)) return why;
  if (d.compute_capability != 90) return "the sm_90a kernels need compute capability 9.0";
  if (!d.sm90a_code) return "no sm_90a code for the Hopper kernels in this library";
  if (pass != Pass::kFprop &&
      (p.stride_h != 1 || p.stride_w != 1 || p.dilation_h != 1 || p.dilation_w != 1)) {
    return "the Hopper dgrad/wgrad kernels are used for unit strides and dilations only";
  }
  if (pass == Pass::kWgrad && !forced && !WgradFillsGpu(p)) {
    return "fewer than 100 output tiles: the split-K sm80 wgrad fills the GPU better";
  }
  const IgResult r = Sm90Can(pass, p, Tacc);
  return r.code == IgCode::kOk ? nullptr : r.what;
}

Status Sm90Plan(const Args& g, Carver* c, bool run) {
  const ConvProblem& p = g.p;
  const char* kernel = "sm90 (CUTLASS 3.x wgmma/TMA)";
  Staged s;
  Status st = Stage(g, c, run, &s);
  if (!st.ok()) return st;
  if (g.pass == Pass::kWgrad) {
    void* dw_krsc = c->Take(size_t(p.K * p.KH * p.KW * p.C) * ElemBytes(g.T));
    if (!run) return Ok();
    st = IgStatus(Sm90Go(Pass::kWgrad, p, g.Tacc, s.dy, s.x, dw_krsc, g.stream), kernel);
    if (!st.ok()) return st;
    return CudaStatus(
        internal::ReduceKrscToHwio(g.T, g.T, dw_krsc, 1, g.out, p.K, p.KH, p.KW, p.C, g.stream),
        "filter transpose");
  }
  if (!run) return Ok();
  const IgResult r = g.pass == Pass::kFprop
                         ? Sm90Go(Pass::kFprop, p, g.Tacc, s.x, s.w, s.out, g.stream)
                         : Sm90Go(Pass::kDgrad, p, g.Tacc, s.dy, s.w, s.out, g.stream);
  st = IgStatus(r, kernel);
  if (!st.ok()) return st;
  return Unstage(g, s);
}

// --- fallback: the direct kernels

const char* DirectWhyNot(Pass, const ConvProblem&, DataType, DataType, const DeviceInfo&, bool) {
  return nullptr;
}

Status DirectPlan(const Args& g, Carver* c, bool run) {
  const ConvProblem& p = g.p;
  void* ws =
      g.pass == Pass::kWgrad ? c->Take(internal::DirectWgradWorkspaceBytes(p, g.Tacc)) : nullptr;
  if (!run) return Ok();
  cudaError_t e;
  switch (g.pass) {
    case Pass::kFprop:
#define TFO_CALL(A, B) internal::DirectFprop<A, B>(p, g.a, g.b, g.out, g.stream)
      e = TFO_BY_TYPES(g.T, g.Tacc, TFO_CALL);
#undef TFO_CALL
      break;
    case Pass::kDgrad:
#define TFO_CALL(A, B) internal::DirectDgrad<A, B>(p, g.a, g.b, g.out, g.stream)
      e = TFO_BY_TYPES(g.T, g.Tacc, TFO_CALL);
#undef TFO_CALL
      break;
    default:
#define TFO_CALL(A, B) internal::DirectWgrad<A, B>(p, g.a, g.b, g.out, ws, g.stream)
      e = TFO_BY_TYPES(g.T, g.Tacc, TFO_CALL);
#undef TFO_CALL
  }
  return CudaStatus(e, "direct kernel launch");
}

struct Impl {
  ConvPath path;
  const char* (*why_not)(Pass, const ConvProblem&, DataType, DataType, const DeviceInfo&,
                         bool forced);
  Status (*plan)(const Args&, Carver*, bool run);
};

// The same table for the three passes (each entry dispatches on the pass).
constexpr Impl kTable[] = {
    {ConvPath::kSm90, Sm90WhyNot, Sm90Plan},         {ConvPath::kSm80, Sm80WhyNot, Sm80Plan},
    {ConvPath::kSm70, Sm70WhyNot, Sm70Plan},         {ConvPath::kSimt, SimtWhyNot, SimtPlan},
    {ConvPath::kFallback, DirectWhyNot, DirectPlan},
};

Status SelectImpl(Pass pass, const ConvProblem& p, DataType T, DataType Tacc, ConvPath requested,
                  const DeviceInfo& device, const Impl** impl, size_t* bytes,
                  size_t max_bytes = SIZE_MAX) {
  Status st = ValidateProblem(p, T, Tacc);
  if (!st.ok()) return st;
  if (int(pass) < 0 || int(pass) > int(Pass::kWgrad)) {
    return MakeStatus(StatusCode::kInvalidArgument, "unknown pass %d", int(pass));
  }
  if (int(requested) < 0 || int(requested) >= kNumPaths) {
    return MakeStatus(StatusCode::kInvalidArgument, "unknown path %d", int(requested));
  }
  const char* why = "no implementation";
  for (const Impl& candidate : kTable) {
    if (requested != ConvPath::kAuto && candidate.path != requested) continue;
    why = candidate.why_not(pass, p, T, Tacc, device, requested != ConvPath::kAuto);
    if (why != nullptr) continue;
    Carver sizing(nullptr);
    const Args args{pass, p, T, Tacc, nullptr, nullptr, nullptr, nullptr};
    st = candidate.plan(args, &sizing, /*run=*/false);
    if (!st.ok()) return st;
    if (sizing.used() > max_bytes) {
      why = "it needs a workspace and none can be allocated";
      continue;
    }
    *impl = &candidate;
    *bytes = sizing.used();
    return Ok();
  }
  return MakeStatus(StatusCode::kInvalidArgument, "path %s cannot run this %s problem: %s",
                    ConvPathName(requested), PassName(pass), why);
}

bool AnyNull(int64_t elements, const void* ptr) { return elements > 0 && ptr == nullptr; }

}  // namespace

const char* ConvPathName(ConvPath path) {
  switch (path) {
    case ConvPath::kAuto:
      return "auto";
    case ConvPath::kSm90:
      return "sm90";
    case ConvPath::kSm80:
      return "sm80";
    case ConvPath::kSm70:
      return "sm70";
    case ConvPath::kSimt:
      return "simt";
    case ConvPath::kFallback:
      return "fallback";
  }
  return "unknown";
}

const char* PassName(Pass pass) {
  switch (pass) {
    case Pass::kFprop:
      return "fprop";
    case Pass::kDgrad:
      return "dgrad";
    case Pass::kWgrad:
      return "wgrad";
  }
  return "unknown";
}

BuildInfo ThisBuild() {
  static const int kSass[] = {TF_FP16OPS_SASS_ARCHS};
  BuildInfo b;
#if defined(TF_FP16OPS_HOST_BUILD)
  b.runtime_version = 12050;  // the default device build's toolkit (clang + CUDA 12.5)
#else
  b.runtime_version = CUDART_VERSION;
#endif
  b.sass_archs = kSass;
  b.num_sass_archs = int(sizeof(kSass) / sizeof(kSass[0]));
  b.ptx_arch = TF_FP16OPS_PTX_ARCH;
  return b;
}

namespace {

// The oldest Linux driver branch of a CUDA release (NVIDIA, CUDA Toolkit Release Notes, table
// "CUDA Toolkit and Corresponding Driver Versions"), for the messages.
const char* DriverBranch(int cuda_version) {
  static const struct {
    int version;
    const char* branch;
  } kBranches[] = {{13000, "R580"}, {12080, "R570"}, {12060, "R560"},
                   {12050, "R555"}, {12040, "R550"}, {12030, "R545"},
                   {12020, "R535"}, {12010, "R530"}, {12000, "R525"}};
  for (const auto& e : kBranches) {
    if (cuda_version >= e.version) return e.branch;
  }
  return "an older branch";
}

}  // namespace

// CUDA's minor version compatibility (NVIDIA, CUDA Compatibility guide): code built with a CUDA
// X.y runtime runs on any driver of CUDA X.0 or newer, given SASS for the GPU; JIT-compiling PTX
// needs a driver at least as new as the toolkit that wrote the PTX.
Status CheckDevice(const DeviceInfo& d, const BuildInfo& b) {
  const char* pin = "Pinning the op to the CPU works (e.g. under tf.device('/CPU:0')).";
  const int rt_major = b.runtime_version / 1000, rt_minor = b.runtime_version % 1000 / 10;
  if (d.driver_version <= 0) {
    return MakeStatus(StatusCode::kFailedPrecondition,
                      "no CUDA driver found (cudaDriverGetVersion() = %d); the tf_fp16ops GPU "
                      "kernels need a driver for CUDA %d.0 or newer (%s or later). %s",
                      d.driver_version, rt_major, DriverBranch(rt_major * 1000), pin);
  }
  const int drv_major = d.driver_version / 1000, drv_minor = d.driver_version % 1000 / 10;
  if (d.driver_version < rt_major * 1000) {
    return MakeStatus(StatusCode::kFailedPrecondition,
                      "the GPU driver supports CUDA %d.%d (cudaDriverGetVersion() = %d), but the "
                      "tf_fp16ops GPU kernels are built with the CUDA %d.%d runtime, which needs "
                      "a driver for CUDA %d.0 or newer (%s or later). Update the driver; or: %s",
                      drv_major, drv_minor, d.driver_version, rt_major, rt_minor, rt_major,
                      DriverBranch(rt_major * 1000), pin);
  }
  const int cc = d.compute_capability;
  bool sass = false;
  for (int i = 0; i < b.num_sass_archs; ++i) {
    const int a = b.sass_archs[i];
    sass |= a / 10 == cc / 10 && a <= cc;  // SASS runs on the same major, same or newer minor
  }
  if (sass) return Ok();
  const bool ptx = b.ptx_arch > 0 && cc >= b.ptx_arch;  // PTX is JIT-compiled on newer GPUs
  if (ptx && d.driver_version < b.runtime_version) {
    return MakeStatus(StatusCode::kFailedPrecondition,
                      "the GPU has compute capability %d.%d, for which the tf_fp16ops GPU kernels "
                      "hold only compute_%d PTX, written by CUDA %d.%d: JIT-compiling it needs a "
                      "driver for CUDA %d.%d or newer (%s or later), and the driver supports CUDA "
                      "%d.%d (cudaDriverGetVersion() = %d). Update the driver; or: %s",
                      cc / 10, cc % 10, b.ptx_arch, rt_major, rt_minor, rt_major, rt_minor,
                      DriverBranch(b.runtime_version), drv_major, drv_minor, d.driver_version, pin);
  }
  if (!ptx) {
    char built[160] = {0};
    int len = 0;
    for (int i = 0; i < b.num_sass_archs && len < int(sizeof(built)) - 16; ++i) {
      len += std::snprintf(built + len, sizeof(built) - len, "%ssm_%d", i ? ", " : "",
                           b.sass_archs[i]);
    }
    return MakeStatus(StatusCode::kUnimplemented,
                      "the GPU has compute capability %d.%d, which the tf_fp16ops GPU kernels "
                      "are not built for: they hold SASS for %s and PTX for compute_%d (runs on "
                      "compute capability %d.%d and newer). %s",
                      cc / 10, cc % 10, built, b.ptx_arch, b.ptx_arch / 10, b.ptx_arch % 10, pin);
  }
  return Ok();
}

#if !defined(TF_FP16OPS_HOST_BUILD)
namespace {
// The description of device `dev` (-1: the current device).
Status DescribeDevice(int dev, DeviceInfo* info) {
  *info = DeviceInfo();
  int driver = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
  info->driver_version = driver;
  // With a driver of an older CUDA major version than the runtime's, every other runtime call
  // fails: CheckDevice reports it. (A newer minor version of the runtime works: CheckDevice.)
  if (driver < CUDART_VERSION / 1000 * 1000) return Ok();
  int major = 0, minor = 0;
  cudaError_t e = dev < 0 ? cudaGetDevice(&dev) : cudaSuccess;
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return MakeStatus(StatusCode::kInternal, "querying CUDA device %d: CUDA error %d (%s)", dev,
                      int(e), cudaGetErrorString(e));
  }
  info->compute_capability = 10 * major + minor;
  // Whether the sm_90a image loads is fixed per device: probed once (cudaFuncGetAttributes).
  static std::atomic<int> sm90a[kMaxDevices];  // 0 unknown, 1 absent, 2 present
  if (info->compute_capability == 90) {
    int known = dev < kMaxDevices ? sm90a[dev].load() : 0;
    if (known == 0) {
      known = internal::Sm90CodePresent<Pass::kFprop, DataType::kHalf>() ? 2 : 1;
      if (dev < kMaxDevices) sm90a[dev].store(known);
    }
    info->sm90a_code = known == 2;
  }
  return Ok();
}
}  // namespace
#endif

Status QueryDevice(DeviceInfo* info) {
  *info = DeviceInfo();
#if defined(TF_FP16OPS_HOST_BUILD)
  // No device: a made-up sm_75 with a current driver, so that the host build's Launch takes the
  // direct kernels. The host tests pass their own DeviceInfo to LaunchOn / Select.
  info->driver_version = 13000;
  info->compute_capability = 75;
  return Ok();
#else
  return DescribeDevice(-1, info);
#endif
}

Status QueryStreamDevice(cudaStream_t stream, DeviceInfo* info) {
#if defined(TF_FP16OPS_HOST_BUILD)
  (void)stream;
  return QueryDevice(info);
#else
  *info = DeviceInfo();
  int driver = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
  // A driver of an older CUDA major version than the runtime's fails every other runtime call:
  // CheckDevice reports it (a newer minor version of the runtime works).
  if (driver < CUDART_VERSION / 1000 * 1000) {
    info->driver_version = driver;
    return Ok();
  }
  int dev = 0;
#if CUDART_VERSION >= 12080
  const cudaError_t e = cudaStreamGetDevice(stream, &dev);
#else
  // cudaStreamGetDevice is CUDA 12.8's: before it, the current device, which TensorFlow makes
  // the op's device while it runs a GPU kernel (its own kernels rely on the same).
  (void)stream;
  const cudaError_t e = cudaGetDevice(&dev);
#endif
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return MakeStatus(StatusCode::kInternal,
                      "querying the device of the stream: CUDA error %d (%s)", int(e),
                      cudaGetErrorString(e));
  }
  static std::mutex mu;
  static DeviceInfo cache[kMaxDevices];
  static bool known[kMaxDevices] = {};
  if (dev >= 0 && dev < kMaxDevices) {
    std::lock_guard<std::mutex> lock(mu);
    if (known[dev]) {
      *info = cache[dev];
      return Ok();
    }
  }
  const Status st = DescribeDevice(dev, info);
  if (st.ok() && dev >= 0 && dev < kMaxDevices) {
    std::lock_guard<std::mutex> lock(mu);
    cache[dev] = *info;
    known[dev] = true;
  }
  return st;
#endif
}

Status ValidateProblem(const ConvProblem& p, DataType T, DataType Tacc) {
  const bool pair_ok =
      (T == DataType::kHalf && (Tacc == DataType::kHalf || Tacc == DataType::kFloat)) ||
      (T == DataType::kFloat && Tacc == DataType::kFloat);
  if (!pair_ok) {
    return MakeStatus(StatusCode::kInvalidArgument,
                      "unsupported (T, Tacc) = (%s, %s); supported: (half, half), (half, float), "
                      "(float, float)",
                      TypeName(T), TypeName(Tacc));
  }
  struct Named {
    const char* name;
    int64_t value;
    int64_t min;
  };
  const Named fields[] = {{"N", p.N, 0},
                          {"H", p.H, 0},
                          {"W", p.W, 0},
                          {"C", p.C, 0},
                          {"K", p.K, 0},
                          {"KH", p.KH, 1},
                          {"KW", p.KW, 1},
                          {"Cg", p.Cg, 0},
                          {"groups", p.groups, 1},
                          {"P", p.P, 0},
                          {"Q", p.Q, 0},
                          {"stride_h", p.stride_h, 1},
                          {"stride_w", p.stride_w, 1},
                          {"dilation_h", p.dilation_h, 1},
                          {"dilation_w", p.dilation_w, 1},
                          {"pad_top", p.pad_top, 0},
                          {"pad_left", p.pad_left, 0}};
  for (const Named& f : fields) {
    if (f.value < f.min || f.value > std::numeric_limits<int32_t>::max()) {
      return MakeStatus(StatusCode::kInvalidArgument, "%s = %lld is out of range [%lld, 2^31-1]",
                        f.name, static_cast<long long>(f.value), static_cast<long long>(f.min));
    }
  }
  if (p.C % p.groups != 0 || p.K % p.groups != 0 || p.Cg * p.groups != p.C) {
    return MakeStatus(StatusCode::kInvalidArgument,
                      "groups = %lld must divide C = %lld and K = %lld with Cg = C / groups "
                      "(Cg = %lld)",
                      (long long)p.groups, (long long)p.C, (long long)p.K, (long long)p.Cg);
  }
  // Element counts must fit in int64 with room for byte sizes (each factor < 2^31).
  const int64_t counts[][4] = {{p.N, p.H, p.W, p.C}, {p.N, p.P, p.Q, p.K}, {p.KH, p.KW, p.Cg, p.K}};
  for (const auto& c4 : counts) {
    int64_t prod = 1;
    for (int64_t v : c4) {
      if (v != 0 && prod > std::numeric_limits<int64_t>::max() / 1024 / v) {
        return MakeStatus(StatusCode::kInvalidArgument,
                          "tensor with %lld x %lld x %lld x %lld elements is too large",
                          (long long)c4[0], (long long)c4[1], (long long)c4[2], (long long)c4[3]);
      }
      prod *= v;
    }
  }
  // The window of the last output row/column must overlap the padded input.
  const int64_t eff_h = (p.KH - 1) * p.dilation_h + 1, eff_w = (p.KW - 1) * p.dilation_w + 1;
  if (p.P > 0 && (p.P - 1) * p.stride_h - p.pad_top >= p.H + eff_h) {
    return MakeStatus(StatusCode::kInvalidArgument,
                      "P = %lld does not match H = %lld, KH = %lld, stride_h = %lld, "
                      "pad_top = %lld",
                      (long long)p.P, (long long)p.H, (long long)p.KH, (long long)p.stride_h,
                      (long long)p.pad_top);
  }
  if (p.Q > 0 && (p.Q - 1) * p.stride_w - p.pad_left >= p.W + eff_w) {
    return MakeStatus(StatusCode::kInvalidArgument,
                      "Q = %lld does not match W = %lld, KW = %lld, stride_w = %lld, "
                      "pad_left = %lld",
                      (long long)p.Q, (long long)p.W, (long long)p.KW, (long long)p.stride_w,
                      (long long)p.pad_left);
  }
  return Ok();
}

Status Select(Pass pass, const ConvProblem& p, DataType T, DataType Tacc, ConvPath requested,
              const DeviceInfo& device, ConvPath* path, size_t* workspace_bytes) {
  const Impl* impl = nullptr;
  size_t bytes = 0;
  Status st = SelectImpl(pass, p, T, Tacc, requested, device, &impl, &bytes);
  if (!st.ok()) return st;
  if (path) *path = impl->path;
  if (workspace_bytes) *workspace_bytes = bytes;
  return Ok();
}

namespace {

// Runs `impl` (selected for the problem, needing `need` workspace bytes).
Status RunImpl(const Impl& impl, size_t need, Pass pass, cudaStream_t stream, const ConvProblem& p,
               DataType T, DataType Tacc, const void* a, const void* b, void* out, void* workspace,
               size_t workspace_bytes, ConvPath* used) {
  if (workspace_bytes < need) {
    return MakeStatus(StatusCode::kInvalidArgument,
                      "workspace_bytes = %zu is smaller than the %zu bytes %s needs",
                      workspace_bytes, need, ConvPathName(impl.path));
  }
  if (need > 0 && workspace == nullptr) {
    return MakeStatus(StatusCode::kInvalidArgument, "workspace is null but %zu bytes are needed",
                      need);
  }
  const int64_t x_elems = p.InputElements(), y_elems = p.OutputElements();
  const int64_t w_elems = p.FilterElements();
  const int64_t a_elems = pass == Pass::kDgrad ? w_elems : x_elems;
  const int64_t b_elems = pass == Pass::kFprop ? w_elems : y_elems;
  const int64_t o_elems =
      pass == Pass::kFprop ? y_elems : (pass == Pass::kDgrad ? x_elems : w_elems);
  if (AnyNull(a_elems, a) || AnyNull(b_elems, b) || AnyNull(o_elems, out)) {
    return MakeStatus(StatusCode::kInvalidArgument, "null device pointer for a non-empty tensor");
  }
  Carver carve(workspace);
  const Args args{pass, p, T, Tacc, a, b, out, stream};
  const Status st = impl.plan(args, &carve, /*run=*/true);
  if (st.ok() && used) *used = impl.path;
  return st;
}

}  // namespace

Status LaunchOn(const DeviceInfo& device, Pass pass, cudaStream_t stream, const ConvProblem& p,
                DataType T, DataType Tacc, const void* a, const void* b, void* out, void* workspace,
                size_t workspace_bytes, ConvPath requested, ConvPath* used) {
  if (used) *used = ConvPath::kAuto;
  Status st = CheckDevice(device, ThisBuild());
  if (!st.ok()) return st;
  const Impl* impl = nullptr;
  size_t need = 0;
  st = SelectImpl(pass, p, T, Tacc, requested, device, &impl, &need);
  if (!st.ok()) return st;
  return RunImpl(*impl, need, pass, stream, p, T, Tacc, a, b, out, workspace, workspace_bytes,
                 used);
}

Status PlanOn(const DeviceInfo& device, Pass pass, const ConvProblem& p, DataType T, DataType Tacc,
              ConvPath requested, size_t max_workspace_bytes, LaunchPlan* plan) {
  *plan = LaunchPlan();
  Status st = CheckDevice(device, ThisBuild());
  if (!st.ok()) return st;
  const Impl* impl = nullptr;
  size_t need = 0;
  st = SelectImpl(pass, p, T, Tacc, requested, device, &impl, &need, max_workspace_bytes);
  if (!st.ok()) return st;
  plan->device = device;
  plan->path = impl->path;
  plan->workspace_bytes = need;
  return Ok();
}

Status RunPlan(const LaunchPlan& plan, Pass pass, cudaStream_t stream, const ConvProblem& p,
               DataType T, DataType Tacc, const void* a, const void* b, void* out, void* workspace,
               size_t workspace_bytes, ConvPath* used) {
  if (used) *used = ConvPath::kAuto;
  for (const Impl& impl : kTable) {
    if (impl.path == plan.path) {
      return RunImpl(impl, plan.workspace_bytes, pass, stream, p, T, Tacc, a, b, out, workspace,
                     workspace_bytes, used);
    }
  }
  return MakeStatus(StatusCode::kInvalidArgument, "the plan names no implementation (%s)",
                    ConvPathName(plan.path));
}

Status LaunchWithAllocator(const DeviceInfo& device, Pass pass, cudaStream_t stream,
                           const ConvProblem& p, DataType T, DataType Tacc, const void* a,
                           const void* b, void* out, ConvPath requested,
                           const WorkspaceAllocator& allocator, ConvPath* used, int* selections) {
  if (used) *used = ConvPath::kAuto;
  if (selections) *selections = 1;
  LaunchPlan plan;
  Status st = PlanOn(device, pass, p, T, Tacc, requested, SIZE_MAX, &plan);
  if (!st.ok()) return st;
  void* workspace = nullptr;
  if (plan.workspace_bytes > 0) {
    workspace = allocator.allocate(allocator.context, plan.workspace_bytes);
    if (workspace == nullptr) {
      const size_t wanted = plan.workspace_bytes;
      const ConvPath first = plan.path;
      if (selections) *selections = 2;
      if (!PlanOn(device, pass, p, T, Tacc, requested, 0, &plan).ok()) {
        return MakeStatus(StatusCode::kResourceExhausted,
                          "cannot allocate the %zu-byte workspace of %s, and no implementation "
                          "runs this %s problem without one",
                          wanted, ConvPathName(first), PassName(pass));
      }
    }
  }
  return RunPlan(plan, pass, stream, p, T, Tacc, a, b, out, workspace, plan.workspace_bytes, used);
}

Status Launch(Pass pass, cudaStream_t stream, const ConvProblem& p, DataType T, DataType Tacc,
              const void* a, const void* b, void* out, void* workspace, size_t workspace_bytes,
              ConvPath requested, ConvPath* used) {
  DeviceInfo device;
  Status st = QueryDevice(&device);
  if (!st.ok()) return st;
  return LaunchOn(device, pass, stream, p, T, Tacc, a, b, out, workspace, workspace_bytes,
                  requested, used);
}

size_t WorkspaceBytes(Pass pass, const ConvProblem& p, DataType T, DataType Tacc,
                      ConvPath requested) {
  DeviceInfo device;
  if (!QueryDevice(&device).ok() || !CheckDevice(device, ThisBuild()).ok()) return 0;
  size_t bytes = 0;
  if (!Select(pass, p, T, Tacc, requested, device, nullptr, &bytes).ok()) return 0;
  return bytes;
}

#undef TFO_BY_TYPES

}  // namespace gpu
}  // namespace tf_fp16ops
