// Launchers: validate, lay out operands for CUTLASS in the workspace, pick a kernel, run it.
//
// Path order for kAuto:  T=half:  sm90 (CC 9.0) -> sm80 (CC >= 8.0) -> direct kernel
//                        T=float: CUTLASS SIMT fp32 (CC >= 8.0) -> direct kernel
// Implicit-GEMM paths need groups == 1, 32-bit-indexable tensors and, for T=half, C and K multiples
// of 8 (16-byte vector access); CUTLASS's can_implement has the final word and a rejected problem
// falls through to the next path.
#include "cc/kernels/gpu/conv2d_gpu.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <limits>

#include "cc/kernels/gpu/direct_conv.h"
#include "cc/kernels/gpu/implicit_gemm.h"
#include "cc/kernels/gpu/layout_transform.h"

namespace tf_fp16ops {
namespace gpu {
namespace {

using internal::IgCode;
using internal::IgProblem;
using internal::IgResult;

constexpr size_t kAlign = 256;  // workspace sub-buffer alignment (bytes)
constexpr int kTile = 128;      // CUTLASS threadblock tile (M and N) used for split-K sizing
constexpr int kTargetCtas = 264;  // ~2 waves on a 132-SM H100/H200
constexpr size_t kMaxSplitKBytes = size_t(256) << 20;

Status MakeStatus(StatusCode code, const char* fmt, ...) {
  Status s;
  s.code = code;
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(s.message, sizeof(s.message), fmt, ap);
  va_end(ap);
  return s;
}

Status Ok() { return Status(); }

size_t AlignUp(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

size_t ElemBytes(DataType t) { return t == DataType::kHalf ? 2 : 4; }

const char* TypeName(DataType t) {
  return t == DataType::kHalf ? "half" : (t == DataType::kFloat ? "float" : "unknown");
}

// Carves consecutive aligned sub-buffers out of the workspace.
class Carver {
 public:
  explicit Carver(void* base) : base_(static_cast<char*>(base)) {}
  void* Take(size_t bytes) {
    void* p = base_ == nullptr ? nullptr : base_ + used_;
    used_ += AlignUp(bytes);
    return p;
  }
  size_t used() const { return used_; }

 private:
  char* base_;
  size_t used_ = 0;
};

bool FitsInt32(int64_t v) { return v >= 0 && v <= std::numeric_limits<int32_t>::max(); }

// True when the problem can be expressed for CUTLASS (groups == 1, all extents and tensor sizes in
// int32). Fills *ig.
bool ToIg(const Conv2DProblem& p, IgProblem* ig) {
  if (p.groups != 1) return false;
  const int64_t dims[] = {p.N, p.H, p.W, p.C, p.K, p.KH, p.KW, p.P, p.Q, p.pad_top, p.pad_left,
                          p.stride_h, p.stride_w, p.dil_h, p.dil_w,
                          p.N * p.H * p.W * p.C, p.N * p.P * p.Q * p.K, p.K * p.KH * p.KW * p.C};
  for (int64_t d : dims) {
    if (!FitsInt32(d)) return false;
  }
  if (p.N == 0 || p.H == 0 || p.W == 0 || p.C == 0 || p.K == 0 || p.P == 0 || p.Q == 0) {
    return false;
  }
  *ig = IgProblem{int(p.N), int(p.H), int(p.W), int(p.C), int(p.K), int(p.KH), int(p.KW),
                  int(p.P), int(p.Q), int(p.pad_top), int(p.pad_left), int(p.stride_h),
                  int(p.stride_w), int(p.dil_h), int(p.dil_w)};
  return true;
}

// Compute capability of the current device as 10*major + minor (0 on error).
int ComputeCapability() {
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return 10 * major + minor;
}

// Implicit-GEMM paths to try, in order, for this problem (independent of the device, so the
// workspace size does not depend on it).
struct Plan {
  bool implicit_gemm = false;  // some CUTLASS path may run; workspace holds CUTLASS layouts
  IgProblem ig{};
};

Plan MakePlan(const Conv2DProblem& p, DataType T) {
  Plan plan;
  if (!ToIg(p, &plan.ig)) return plan;
  if (T == DataType::kHalf && (p.C % 8 != 0 || p.K % 8 != 0)) return plan;
  plan.implicit_gemm = true;
  return plan;
}

bool PathAllowed(ConvPath requested, ConvPath candidate) {
  return requested == ConvPath::kAuto || requested == candidate;
}

// Split-K slices for wgrad: enough CTAs to fill the GPU, each slice at least 1024 GEMM-K steps.
int WgradSplits(const IgProblem& ig, DataType Tacc) {
  const int64_t tiles = ((ig.K + kTile - 1) / kTile) * ((int64_t(ig.R) * ig.S * ig.C + kTile - 1) / kTile);
  const int64_t gemm_k = int64_t(ig.N) * ig.P * ig.Q;
  int64_t splits = (kTargetCtas + tiles - 1) / tiles;
  splits = std::min<int64_t>(splits, std::max<int64_t>(1, gemm_k / 1024));
  splits = std::min<int64_t>(splits, 64);
  const int64_t one = int64_t(ig.K) * ig.R * ig.S * ig.C * int64_t(ElemBytes(Tacc));
  while (splits > 1 && splits * one > int64_t(kMaxSplitKBytes)) --splits;
  return int(std::max<int64_t>(1, splits));
}

// Wgrad prefers the Hopper kernel (no split-K there) only when its output tiles fill the GPU.
bool WgradPrefersSm90(const IgProblem& ig) {
  const int64_t tiles = ((ig.K + kTile - 1) / kTile) * ((int64_t(ig.R) * ig.S * ig.C + kTile - 1) / kTile);
  return tiles >= 100;
}

template <DataType T, DataType Tacc>
size_t WgradPartialBytes(const IgProblem& ig) {
  return internal::Sm80WgradPartialBytes<T, Tacc>(ig, WgradSplits(ig, Tacc));
}

size_t WgradPartialBytesFor(const IgProblem& ig, DataType T, DataType Tacc) {
  if (T == DataType::kFloat) return WgradPartialBytes<DataType::kFloat, DataType::kFloat>(ig);
  if (Tacc == DataType::kFloat) return WgradPartialBytes<DataType::kHalf, DataType::kFloat>(ig);
  return WgradPartialBytes<DataType::kHalf, DataType::kHalf>(ig);
}

Status CheckCommon(const Conv2DProblem& p, DataType T, DataType Tacc, size_t need,
                   size_t have, void* workspace, ConvPath requested) {
  Status st = ValidateProblem(p, T, Tacc);
  if (!st.ok()) return st;
  if (have < need) {
    return MakeStatus(StatusCode::kInvalidArgument,
                      "workspace_bytes = %zu is smaller than the %zu bytes this problem needs",
                      have, need);
  }
  if (need > 0 && workspace == nullptr) {
    return MakeStatus(StatusCode::kInvalidArgument, "workspace is null but %zu bytes are needed",
                      need);
  }
  if (int(requested) < 0 || int(requested) > int(ConvPath::kFallback)) {
    return MakeStatus(StatusCode::kInvalidArgument, "unknown path %d", int(requested));
  }
  return Ok();
}

Status CudaStatus(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Ok();
  return MakeStatus(e == cudaErrorInvalidValue ? StatusCode::kInvalidArgument
                                               : StatusCode::kInternal,
                    "%s: CUDA error %d (%s)", what, int(e), cudaGetErrorString(e));
}

Status IgStatus(const IgResult& r, ConvPath path) {
  return MakeStatus(StatusCode::kInternal, "%s kernel failed: %s", ConvPathName(path), r.what);
}

Status NotAvailable(ConvPath requested, const char* why) {
  return MakeStatus(StatusCode::kInvalidArgument, "path %s cannot run this problem: %s",
                    ConvPathName(requested), why);
}

// ---------------------------------------------------------------------------------------------
// fprop

size_t FpropBytes(const Conv2DProblem& p, DataType T, const Plan& plan) {
  if (!plan.implicit_gemm) return 0;
  Carver c(nullptr);
  const size_t e = ElemBytes(T);
  c.Take(size_t(p.K) * p.KH * p.KW * p.C * e);  // filter KRSC
  if (p.nchw) {
    c.Take(size_t(p.N) * p.H * p.W * p.C * e);  // x NHWC
    c.Take(size_t(p.N) * p.P * p.Q * p.K * e);  // y NHWC
  }
  return c.used();
}

template <DataType T, DataType Tacc>
Status Fprop(cudaStream_t s, const Conv2DProblem& p, const void* x, const void* w, void* y,
             void* workspace, ConvPath requested, ConvPath* used) {
  const Plan plan = MakePlan(p, T);
  const int cc = ComputeCapability();
  const char* why = "problem not expressible as an implicit GEMM (groups, alignment or size)";
  if (plan.implicit_gemm && cc >= 80 && requested != ConvPath::kFallback) {
    Carver c(workspace);
    void* w_krsc = c.Take(size_t(p.K) * p.KH * p.KW * p.C * ElemBytes(T));
    void* x_nhwc = p.nchw ? c.Take(size_t(p.N) * p.H * p.W * p.C * ElemBytes(T)) : nullptr;
    void* y_nhwc = p.nchw ? c.Take(size_t(p.N) * p.P * p.Q * p.K * ElemBytes(T)) : y;
    Status st = CudaStatus(internal::HwioToKrsc(T, w, w_krsc, p.KH, p.KW, p.C, p.K, s), "filter transpose");
    if (!st.ok()) return st;
    if (p.nchw) {
      st = CudaStatus(internal::NchwToNhwc(T, x, x_nhwc, p.N, p.C, p.H, p.W, s), "input transpose");
      if (!st.ok()) return st;
    }
    const void* xa = p.nchw ? x_nhwc : x;
    IgResult r = internal::IgNotApplicable("no implicit-GEMM path for this type");
    ConvPath ran = ConvPath::kAuto;
    if constexpr (T == DataType::kHalf) {
      if (cc == 90 && PathAllowed(requested, ConvPath::kSm90)) {
        r = internal::Sm90Fprop<T, Tacc>(plan.ig, xa, w_krsc, y_nhwc, s);
        ran = ConvPath::kSm90;
      }
      if (r.code == IgCode::kNotApplicable && PathAllowed(requested, ConvPath::kSm80)) {
        r = internal::Sm80Fprop<T, Tacc>(plan.ig, xa, w_krsc, y_nhwc, s);
        ran = ConvPath::kSm80;
      }
    } else {
      if (PathAllowed(requested, ConvPath::kSimt)) {
        r = internal::Sm80Fprop<T, Tacc>(plan.ig, xa, w_krsc, y_nhwc, s);
        ran = ConvPath::kSimt;
      }
    }
    if (r.code == IgCode::kError) return IgStatus(r, ran);
    if (r.code == IgCode::kOk) {
      if (p.nchw) {
        st = CudaStatus(internal::NhwcToNchw(T, y_nhwc, y, p.N, p.K, p.P, p.Q, s), "output transpose");
        if (!st.ok()) return st;
      }
      if (used) *used = ran;
      return Ok();
    }
    why = r.what;
  } else if (plan.implicit_gemm && cc < 80) {
    why = "implicit-GEMM kernels need compute capability >= 8.0";
  }
  if (!PathAllowed(requested, ConvPath::kFallback)) return NotAvailable(requested, why);
  Status st = CudaStatus(internal::DirectFprop<T, Tacc>(p, x, w, y, s), "direct fprop launch");
  if (st.ok() && used) *used = ConvPath::kFallback;
  return st;
}

// ---------------------------------------------------------------------------------------------
// dgrad

size_t DgradBytes(const Conv2DProblem& p, DataType T, const Plan& plan) {
  if (!plan.implicit_gemm) return 0;
  Carver c(nullptr);
  const size_t e = ElemBytes(T);
  c.Take(size_t(p.K) * p.KH * p.KW * p.C * e);
  if (p.nchw) {
    c.Take(size_t(p.N) * p.P * p.Q * p.K * e);  // dy NHWC
    c.Take(size_t(p.N) * p.H * p.W * p.C * e);  // dx NHWC
  }
  return c.used();
}

template <DataType T, DataType Tacc>
Status Dgrad(cudaStream_t s, const Conv2DProblem& p, const void* w, const void* dy, void* dx,
             void* workspace, ConvPath requested, ConvPath* used) {
  const Plan plan = MakePlan(p, T);
  const int cc = ComputeCapability();
  const char* why = "problem not expressible as an implicit GEMM (groups, alignment or size)";
  if (plan.implicit_gemm && cc >= 80 && requested != ConvPath::kFallback) {
    Carver c(workspace);
    void* w_krsc = c.Take(size_t(p.K) * p.KH * p.KW * p.C * ElemBytes(T));
    void* dy_nhwc = p.nchw ? c.Take(size_t(p.N) * p.P * p.Q * p.K * ElemBytes(T)) : nullptr;
    void* dx_nhwc = p.nchw ? c.Take(size_t(p.N) * p.H * p.W * p.C * ElemBytes(T)) : dx;
    Status st = CudaStatus(internal::HwioToKrsc(T, w, w_krsc, p.KH, p.KW, p.C, p.K, s), "filter transpose");
    if (!st.ok()) return st;
    if (p.nchw) {
      st = CudaStatus(internal::NchwToNhwc(T, dy, dy_nhwc, p.N, p.K, p.P, p.Q, s), "dy transpose");
      if (!st.ok()) return st;
    }
    const void* dya = p.nchw ? dy_nhwc : dy;
    IgResult r = internal::IgNotApplicable("no implicit-GEMM path for this type");
    ConvPath ran = ConvPath::kAuto;
    if constexpr (T == DataType::kHalf) {
      if (cc == 90 && PathAllowed(requested, ConvPath::kSm90)) {
        r = internal::Sm90Dgrad<T, Tacc>(plan.ig, dya, w_krsc, dx_nhwc, s);
        ran = ConvPath::kSm90;
      }
      if (r.code == IgCode::kNotApplicable && PathAllowed(requested, ConvPath::kSm80)) {
        r = internal::Sm80Dgrad<T, Tacc>(plan.ig, dya, w_krsc, dx_nhwc, s);
        ran = ConvPath::kSm80;
      }
    } else {
      if (PathAllowed(requested, ConvPath::kSimt)) {
        r = internal::Sm80Dgrad<T, Tacc>(plan.ig, dya, w_krsc, dx_nhwc, s);
        ran = ConvPath::kSimt;
      }
    }
    if (r.code == IgCode::kError) return IgStatus(r, ran);
    if (r.code == IgCode::kOk) {
      if (p.nchw) {
        st = CudaStatus(internal::NhwcToNchw(T, dx_nhwc, dx, p.N, p.C, p.H, p.W, s), "dx transpose");
        if (!st.ok()) return st;
      }
      if (used) *used = ran;
      return Ok();
    }
    why = r.what;
  } else if (plan.implicit_gemm && cc < 80) {
    why = "implicit-GEMM kernels need compute capability >= 8.0";
  }
  if (!PathAllowed(requested, ConvPath::kFallback)) return NotAvailable(requested, why);
  Status st = CudaStatus(internal::DirectDgrad<T, Tacc>(p, w, dy, dx, s), "direct dgrad launch");
  if (st.ok() && used) *used = ConvPath::kFallback;
  return st;
}

// ---------------------------------------------------------------------------------------------
// wgrad

size_t WgradBytes(const Conv2DProblem& p, DataType T, DataType Tacc, const Plan& plan) {
  if (!plan.implicit_gemm) return 0;
  Carver c(nullptr);
  const size_t e = ElemBytes(T);
  if (p.nchw) {
    c.Take(size_t(p.N) * p.H * p.W * p.C * e);  // x NHWC
    c.Take(size_t(p.N) * p.P * p.Q * p.K * e);  // dy NHWC
  }
  // Either the split-K partials (sm80/SIMT) or one KRSC tensor of T (sm90).
  c.Take(std::max(WgradPartialBytesFor(plan.ig, T, Tacc), size_t(p.K) * p.KH * p.KW * p.C * e));
  return c.used();
}

template <DataType T, DataType Tacc>
Status Wgrad(cudaStream_t s, const Conv2DProblem& p, const void* x, const void* dy, void* dw,
             void* workspace, size_t workspace_bytes, ConvPath requested, ConvPath* used) {
  const Plan plan = MakePlan(p, T);
  const int cc = ComputeCapability();
  const char* why = "problem not expressible as an implicit GEMM (groups, alignment or size)";
  if (plan.implicit_gemm && cc >= 80 && requested != ConvPath::kFallback) {
    Carver c(workspace);
    void* x_nhwc = p.nchw ? c.Take(size_t(p.N) * p.H * p.W * p.C * ElemBytes(T)) : nullptr;
    void* dy_nhwc = p.nchw ? c.Take(size_t(p.N) * p.P * p.Q * p.K * ElemBytes(T)) : nullptr;
    const size_t rest = workspace_bytes - c.used();
    void* out = c.Take(0);
    if (p.nchw) {
      Status st = CudaStatus(internal::NchwToNhwc(T, x, x_nhwc, p.N, p.C, p.H, p.W, s), "x transpose");
      if (!st.ok()) return st;
      st = CudaStatus(internal::NchwToNhwc(T, dy, dy_nhwc, p.N, p.K, p.P, p.Q, s), "dy transpose");
      if (!st.ok()) return st;
    }
    const void* xa = p.nchw ? x_nhwc : x;
    const void* dya = p.nchw ? dy_nhwc : dy;
    IgResult r = internal::IgNotApplicable("no implicit-GEMM path for this type");
    ConvPath ran = ConvPath::kAuto;
    int splits = 1;
    DataType partial_type = Tacc;
    if constexpr (T == DataType::kHalf) {
      const bool sm90_first = requested == ConvPath::kSm90 || WgradPrefersSm90(plan.ig);
      if (cc == 90 && sm90_first && PathAllowed(requested, ConvPath::kSm90)) {
        r = internal::Sm90Wgrad<T, Tacc>(plan.ig, dya, xa, out, s);
        ran = ConvPath::kSm90;
        partial_type = T;
      }
      if (r.code == IgCode::kNotApplicable && PathAllowed(requested, ConvPath::kSm80)) {
        r = internal::Sm80Wgrad<T, Tacc>(plan.ig, dya, xa, out, rest, WgradSplits(plan.ig, Tacc),
                                         &splits, s);
        ran = ConvPath::kSm80;
        partial_type = Tacc;
      }
    } else {
      if (PathAllowed(requested, ConvPath::kSimt)) {
        r = internal::Sm80Wgrad<T, Tacc>(plan.ig, dya, xa, out, rest, WgradSplits(plan.ig, Tacc),
                                         &splits, s);
        ran = ConvPath::kSimt;
      }
    }
    if (r.code == IgCode::kError) return IgStatus(r, ran);
    if (r.code == IgCode::kOk) {
      Status st = CudaStatus(internal::ReduceKrscToHwio(T, partial_type, out, splits, dw, p.K, p.KH,
                                                        p.KW, p.C, s),
                             "split-K reduction");
      if (st.ok() && used) *used = ran;
      return st;
    }
    why = r.what;
  } else if (plan.implicit_gemm && cc < 80) {
    why = "implicit-GEMM kernels need compute capability >= 8.0";
  }
  if (!PathAllowed(requested, ConvPath::kFallback)) return NotAvailable(requested, why);
  Status st = CudaStatus(internal::DirectWgrad<T, Tacc>(p, x, dy, dw, s), "direct wgrad launch");
  if (st.ok() && used) *used = ConvPath::kFallback;
  return st;
}

}  // namespace

const char* ConvPathName(ConvPath path) {
  switch (path) {
    case ConvPath::kAuto: return "auto";
    case ConvPath::kSm90: return "sm90";
    case ConvPath::kSm80: return "sm80";
    case ConvPath::kSimt: return "simt";
    case ConvPath::kFallback: return "fallback";
  }
  return "unknown";
}

Status ValidateProblem(const Conv2DProblem& p, DataType T, DataType Tacc) {
  const bool pair_ok = (T == DataType::kHalf && (Tacc == DataType::kHalf || Tacc == DataType::kFloat)) ||
                       (T == DataType::kFloat && Tacc == DataType::kFloat);
  if (!pair_ok) {
    return MakeStatus(StatusCode::kInvalidArgument,
                      "unsupported (T, Tacc) = (%s, %s); supported: (half, half), (half, float), "
                      "(float, float)",
                      TypeName(T), TypeName(Tacc));
  }
  struct Named { const char* name; int64_t value; int64_t min; };
  const Named fields[] = {{"N", p.N, 0},           {"H", p.H, 0},           {"W", p.W, 0},
                          {"C", p.C, 0},           {"K", p.K, 0},           {"KH", p.KH, 1},
                          {"KW", p.KW, 1},         {"groups", p.groups, 1}, {"P", p.P, 0},
                          {"Q", p.Q, 0},           {"stride_h", p.stride_h, 1},
                          {"stride_w", p.stride_w, 1}, {"dil_h", p.dil_h, 1},
                          {"dil_w", p.dil_w, 1},   {"pad_top", p.pad_top, 0},
                          {"pad_left", p.pad_left, 0}};
  for (const Named& f : fields) {
    if (f.value < f.min || f.value > std::numeric_limits<int32_t>::max()) {
      return MakeStatus(StatusCode::kInvalidArgument, "%s = %lld is out of range [%lld, 2^31-1]",
                        f.name, static_cast<long long>(f.value), static_cast<long long>(f.min));
    }
  }
  if (p.C % p.groups != 0 || p.K % p.groups != 0) {
    return MakeStatus(StatusCode::kInvalidArgument,
                      "groups = %lld must divide C = %lld and K = %lld", (long long)p.groups,
                      (long long)p.C, (long long)p.K);
  }
  // Element counts must fit in int64 (each factor < 2^31, so check products stepwise).
  const int64_t counts[][4] = {{p.N, p.H, p.W, p.C}, {p.N, p.P, p.Q, p.K},
                               {p.KH, p.KW, p.C / p.groups, p.K}};
  for (const auto& c4 : counts) {
    int64_t prod = 1;
    for (int64_t v : c4) {
      if (v != 0 && prod > std::numeric_limits<int64_t>::max() / 8 / v) {
        return MakeStatus(StatusCode::kInvalidArgument, "tensor with %lld x %lld x %lld x %lld "
                          "elements is too large", (long long)c4[0], (long long)c4[1],
                          (long long)c4[2], (long long)c4[3]);
      }
      prod *= v;
    }
  }
  // P/Q must be reachable: output position P-1 starts inside the (top-)padded input or its
  // implied bottom padding, i.e. the window of the last output overlaps rows [-pad_top, H+...).
  const int64_t eff_h = (p.KH - 1) * p.dil_h + 1, eff_w = (p.KW - 1) * p.dil_w + 1;
  if (p.P > 0 && (p.P - 1) * p.stride_h - p.pad_top >= p.H + eff_h) {
    return MakeStatus(StatusCode::kInvalidArgument,
                      "P = %lld does not match H = %lld, KH = %lld, stride_h = %lld, pad_top = %lld",
                      (long long)p.P, (long long)p.H, (long long)p.KH, (long long)p.stride_h,
                      (long long)p.pad_top);
  }
  if (p.Q > 0 && (p.Q - 1) * p.stride_w - p.pad_left >= p.W + eff_w) {
    return MakeStatus(StatusCode::kInvalidArgument,
                      "Q = %lld does not match W = %lld, KW = %lld, stride_w = %lld, pad_left = %lld",
                      (long long)p.Q, (long long)p.W, (long long)p.KW, (long long)p.stride_w,
                      (long long)p.pad_left);
  }
  return Ok();
}

size_t FpropWorkspaceBytes(const Conv2DProblem& p, DataType T, DataType Tacc) {
  if (!ValidateProblem(p, T, Tacc).ok()) return 0;
  return FpropBytes(p, T, MakePlan(p, T));
}

size_t DgradWorkspaceBytes(const Conv2DProblem& p, DataType T, DataType Tacc) {
  if (!ValidateProblem(p, T, Tacc).ok()) return 0;
  return DgradBytes(p, T, MakePlan(p, T));
}

size_t WgradWorkspaceBytes(const Conv2DProblem& p, DataType T, DataType Tacc) {
  if (!ValidateProblem(p, T, Tacc).ok()) return 0;
  return WgradBytes(p, T, Tacc, MakePlan(p, T));
}

#define TF_FP16OPS_DISPATCH(FN, ...)                                               \
  if (T == DataType::kHalf && Tacc == DataType::kHalf)                             \
    return FN<DataType::kHalf, DataType::kHalf>(__VA_ARGS__);                      \
  if (T == DataType::kHalf) return FN<DataType::kHalf, DataType::kFloat>(__VA_ARGS__); \
  return FN<DataType::kFloat, DataType::kFloat>(__VA_ARGS__);

static bool AnyNull(int64_t elements, const void* ptr) { return elements > 0 && ptr == nullptr; }

Status LaunchFprop(cudaStream_t stream, const Conv2DProblem& p, DataType T, DataType Tacc,
                   const void* x, const void* w, void* y, void* workspace, size_t workspace_bytes,
                   ConvPath requested, ConvPath* used) {
  Status st = CheckCommon(p, T, Tacc, FpropWorkspaceBytes(p, T, Tacc), workspace_bytes,
                          workspace, requested);
  if (!st.ok()) return st;
  if (AnyNull(p.N * p.H * p.W * p.C, x) || AnyNull(p.KH * p.KW * p.C * p.K, w) ||
      AnyNull(p.N * p.P * p.Q * p.K, y)) {
    return MakeStatus(StatusCode::kInvalidArgument, "null device pointer for a non-empty tensor");
  }
  TF_FP16OPS_DISPATCH(Fprop, stream, p, x, w, y, workspace, requested, used)
}

Status LaunchDgrad(cudaStream_t stream, const Conv2DProblem& p, DataType T, DataType Tacc,
                   const void* w, const void* dy, void* dx, void* workspace,
                   size_t workspace_bytes, ConvPath requested, ConvPath* used) {
  Status st = CheckCommon(p, T, Tacc, DgradWorkspaceBytes(p, T, Tacc), workspace_bytes,
                          workspace, requested);
  if (!st.ok()) return st;
  if (AnyNull(p.N * p.H * p.W * p.C, dx) || AnyNull(p.KH * p.KW * p.C * p.K, w) ||
      AnyNull(p.N * p.P * p.Q * p.K, dy)) {
    return MakeStatus(StatusCode::kInvalidArgument, "null device pointer for a non-empty tensor");
  }
  TF_FP16OPS_DISPATCH(Dgrad, stream, p, w, dy, dx, workspace, requested, used)
}

Status LaunchWgrad(cudaStream_t stream, const Conv2DProblem& p, DataType T, DataType Tacc,
                   const void* x, const void* dy, void* dw, void* workspace,
                   size_t workspace_bytes, ConvPath requested, ConvPath* used) {
  Status st = CheckCommon(p, T, Tacc, WgradWorkspaceBytes(p, T, Tacc), workspace_bytes,
                          workspace, requested);
  if (!st.ok()) return st;
  if (AnyNull(p.N * p.H * p.W * p.C, x) || AnyNull(p.KH * p.KW * p.C * p.K, dw) ||
      AnyNull(p.N * p.P * p.Q * p.K, dy)) {
    return MakeStatus(StatusCode::kInvalidArgument, "null device pointer for a non-empty tensor");
  }
  TF_FP16OPS_DISPATCH(Wgrad, stream, p, x, dy, dw, workspace, workspace_bytes, requested, used)
}

#undef TF_FP16OPS_DISPATCH

}  // namespace gpu
}  // namespace tf_fp16ops
