// Direct convolution launches (see direct_conv.h for the accumulation order contract).
#include "cc/kernels/gpu/direct_conv.h"

#include "cc/kernels/gpu/launch.h"

namespace tf_fp16ops {
namespace gpu {
namespace internal {

int64_t DirectWgradSplits(const ConvProblem& p, DataType Tacc) {
  if (Tacc != DataType::kFloat) return 1;
  const int64_t outputs = p.KH * p.KW * p.Cg * p.K;
  const int64_t terms = p.N * p.P * p.Q;
  if (outputs <= 0 || terms <= 0) return 1;
  constexpr int64_t kThreadsWanted = int64_t(1) << 17, kMinSlice = 64, kMaxSplits = 256;
  int64_t splits = (kThreadsWanted + outputs - 1) / outputs;
  splits = std::min(splits, std::min(kMaxSplits, std::max<int64_t>(1, terms / kMinSlice)));
  return std::max<int64_t>(1, splits);
}

size_t DirectWgradWorkspaceBytes(const ConvProblem& p, DataType Tacc) {
  const int64_t splits = DirectWgradSplits(p, Tacc);
  if (splits <= 1) return 0;
  return sizeof(float) * static_cast<size_t>(splits) *
         static_cast<size_t>(p.KH * p.KW * p.Cg * p.K);
}

template <DataType T, DataType Tacc>
cudaError_t DirectFprop(const ConvProblem& p, const void* x, const void* w, void* y,
                        cudaStream_t s) {
  using E = DevElem<T>;
  FpropBody<E, DevElem<Tacc>> body{p, static_cast<const E*>(x), static_cast<const E*>(w),
                                   static_cast<E*>(y)};
  return Launch(body, p.N * p.P * p.Q * p.K, s);
}

template <DataType T, DataType Tacc>
cudaError_t DirectDgrad(const ConvProblem& p, const void* w, const void* dy, void* dx,
                        cudaStream_t s) {
  using E = DevElem<T>;
  DgradBody<E, DevElem<Tacc>> body{p, static_cast<const E*>(w), static_cast<const E*>(dy),
                                   static_cast<E*>(dx)};
  return Launch(body, p.N * p.H * p.W * p.C, s);
}

template <DataType T, DataType Tacc>
cudaError_t DirectWgrad(const ConvProblem& p, const void* x, const void* dy, void* dw,
                        void* workspace, cudaStream_t s) {
  using E = DevElem<T>;
  const int64_t outputs = p.KH * p.KW * p.Cg * p.K;
  const int64_t splits = DirectWgradSplits(p, Tacc);
  if (splits <= 1) {
    WgradBody<E, DevElem<Tacc>> body{p, static_cast<const E*>(x), static_cast<const E*>(dy),
                                     static_cast<E*>(dw)};
    return Launch(body, outputs, s);
  }
  const int64_t terms = p.N * p.P * p.Q;
  float* partial = static_cast<float*>(workspace);
  WgradSliceBody<E> slices{
      p,       static_cast<const E*>(x),     static_cast<const E*>(dy), partial,
      outputs, (terms + splits - 1) / splits};
  const cudaError_t e = Launch(slices, splits * outputs, s);
  if (e != cudaSuccess) return e;
  SliceSumBody<E> sum{partial, static_cast<E*>(dw), outputs, splits};
  return Launch(sum, outputs, s);
}

#define TF_FP16OPS_DIRECT(T, TACC)                                                               \
  template cudaError_t DirectFprop<T, TACC>(const ConvProblem&, const void*, const void*, void*, \
                                            cudaStream_t);                                       \
  template cudaError_t DirectDgrad<T, TACC>(const ConvProblem&, const void*, const void*, void*, \
                                            cudaStream_t);                                       \
  template cudaError_t DirectWgrad<T, TACC>(const ConvProblem&, const void*, const void*, void*, \
                                            void*, cudaStream_t);
TF_FP16OPS_DIRECT(DataType::kHalf, DataType::kHalf)
TF_FP16OPS_DIRECT(DataType::kHalf, DataType::kFloat)
TF_FP16OPS_DIRECT(DataType::kFloat, DataType::kFloat)
#undef TF_FP16OPS_DIRECT

}  // namespace internal
}  // namespace gpu
}  // namespace tf_fp16ops
