// CUTLASS 2.x implicit-GEMM convolutions for Volta (compute capability 7.0 and 7.2): tensor-op
// kernels on mma.sync.m8n8k4 (SASS HMMA.884), two-stage pipelined mainloop (ImplicitGemmPipelined;
// Volta has no cp.async), T=half only, Tacc=half (F16 accumulators, HMMA.884.F16.F16) or
// Tacc=float (F32 accumulators, HMMA.884.F32.F32). Tile sizes of CUTLASS's own sm70 conv tests
// (test/unit/conv/device/conv2d_*_tensor_op_*_sm70.cu): threadblock 128x128x32, warp 64x64x32.
// The argument, can_implement and run helpers are those of the sm80 kernels (cutlass_sm80.h).
// Template definitions, included only by the cutlass_sm70_*.cu.cc files and the host build's
// cutlass_can_implement.cu.cc.
#ifndef TF_FP16OPS_CC_KERNELS_GPU_CUTLASS_SM70_H_
#define TF_FP16OPS_CC_KERNELS_GPU_CUTLASS_SM70_H_

#include "cc/kernels/gpu/cutlass_sm80.h"

namespace tf_fp16ops {
namespace gpu {
namespace internal {
namespace sm70 {

using sm80::Elem;
using sm80::IteratorAlgorithm;
using sm80::Layout;
using sm80::Operator;
using sm80::StrideSupport;
using sm80::SwizzleFor;

// Kernel for operator `Op` with half operands, accumulator `Acc` and output `Out`.
template <Operator Op, typename Acc, typename Out, StrideSupport Stride>
struct KernelFor {
  using Swizzle = SwizzleFor<Op, Stride>;
  using E = cutlass::half_t;
  using Epilogue =
      cutlass::epilogue::thread::LinearCombination<Out, 128 / cutlass::sizeof_bits<Out>::value, Acc,
                                                   Acc>;
  using TB = cutlass::gemm::GemmShape<128, 128, 32>;
  using Warp = cutlass::gemm::GemmShape<64, 64, 32>;
  using Inst = cutlass::gemm::GemmShape<8, 8, 4>;
  static constexpr int kStages = 2;
  using Kernel = typename std::conditional_t<
      Op == Operator::kFprop,
      cutlass::conv::kernel::DefaultConv2dFprop<
          E, Layout, E, Layout, Out, Layout, Acc, cutlass::arch::OpClassTensorOp,
          cutlass::arch::Sm70, TB, Warp, Inst, Epilogue, Swizzle, kStages,
          cutlass::arch::OpMultiplyAdd, IteratorAlgorithm::kOptimized, Stride>,
      std::conditional_t<
          Op == Operator::kDgrad,
          cutlass::conv::kernel::DefaultConv2dDgrad<
              E, Layout, E, Layout, Out, Layout, Acc, cutlass::arch::OpClassTensorOp,
              cutlass::arch::Sm70, TB, Warp, Inst, Epilogue, Swizzle, kStages,
              cutlass::arch::OpMultiplyAdd, IteratorAlgorithm::kOptimized, Stride>,
          cutlass::conv::kernel::DefaultConv2dWgrad<
              E, Layout, E, Layout, Out, Layout, Acc, cutlass::arch::OpClassTensorOp,
              cutlass::arch::Sm70, TB, Warp, Inst, Epilogue, Swizzle, kStages,
              cutlass::arch::OpMultiplyAdd, IteratorAlgorithm::kOptimized, Stride>>>::Kernel;
};

template <DataType Tacc, StrideSupport Stride>
using DgradKernel =
    typename KernelFor<Operator::kDgrad, Elem<Tacc>, cutlass::half_t, Stride>::Kernel;
template <DataType Tacc>
using FpropKernel = typename KernelFor<Operator::kFprop, Elem<Tacc>, cutlass::half_t,
                                       StrideSupport::kUnity>::Kernel;
// wgrad writes split-K partials of Tacc (reduced and rounded to T by ReduceKrscToHwio).
template <DataType Tacc>
using WgradKernel =
    typename KernelFor<Operator::kWgrad, Elem<Tacc>, Elem<Tacc>, StrideSupport::kStrided>::Kernel;

// dgrad: the unit-stride kernel at unit strides, else the strided one. Returns 1 (unity),
// 2 (strided) or 0 (neither; *why says CUTLASS's reason).
template <DataType Tacc>
int DgradChoice(const ConvProblem& p, IgResult* why) {
  using cutlass::conv::SplitKMode;
  if (p.stride_h == 1 && p.stride_w == 1) {
    *why = sm80::CanImplementKernel<DgradKernel<Tacc, StrideSupport::kUnity>>(p, 1,
                                                                              SplitKMode::kSerial);
    if (why->code == IgCode::kOk) return 1;
  }
  *why = sm80::CanImplementKernel<DgradKernel<Tacc, StrideSupport::kStrided>>(p, 1,
                                                                              SplitKMode::kSerial);
  return why->code == IgCode::kOk ? 2 : 0;
}

template <Pass P, DataType Tacc>
IgResult CanImplement(const ConvProblem& p, int splits) {
  using cutlass::conv::SplitKMode;
  if constexpr (P == Pass::kFprop) {
    return sm80::CanImplementKernel<FpropKernel<Tacc>>(p, 1, SplitKMode::kSerial);
  } else if constexpr (P == Pass::kDgrad) {
    IgResult why = IgOk();
    DgradChoice<Tacc>(p, &why);
    return why;
  } else {
    return sm80::CanImplementKernel<WgradKernel<Tacc>>(p, splits, SplitKMode::kParallel);
  }
}

// Operands as Sm80Run's (implicit_gemm.h); wgrad: d is the partial buffer, also the workspace.
template <Pass P, DataType Tacc>
IgResult Run(const ConvProblem& p, const void* a, const void* b, void* d, int splits,
             size_t d_bytes, cudaStream_t s) {
  using cutlass::conv::SplitKMode;
  if constexpr (P == Pass::kFprop) {
    return sm80::RunKernel<FpropKernel<Tacc>>(p, 1, SplitKMode::kSerial, a, b, d, nullptr, 0, s);
  } else if constexpr (P == Pass::kDgrad) {
    IgResult why = IgOk();
    const int choice = DgradChoice<Tacc>(p, &why);
    if (choice == 0) return IgError(why.what);
    if (choice == 1) {
      return sm80::RunKernel<DgradKernel<Tacc, StrideSupport::kUnity>>(p, 1, SplitKMode::kSerial, a,
                                                                       b, d, nullptr, 0, s);
    }
    return sm80::RunKernel<DgradKernel<Tacc, StrideSupport::kStrided>>(p, 1, SplitKMode::kSerial, a,
                                                                       b, d, nullptr, 0, s);
  } else {
    return sm80::RunKernel<WgradKernel<Tacc>>(p, splits, SplitKMode::kParallel, a, b, d, d, d_bytes,
                                              s);
  }
}

}  // namespace sm70
}  // namespace internal
}  // namespace gpu
}  // namespace tf_fp16ops

// can_implement of one (pass, Tacc): CUTLASS's check, host code, no kernel instantiated.
#define TF_FP16OPS_SM70_CAN_IMPLEMENT(P, TACC)                           \
  template <>                                                            \
  IgResult Sm70CanImplement<P, TACC>(const ConvProblem& p, int splits) { \
    return sm70::CanImplement<P, TACC>(p, splits);                       \
  }
// can_implement and run of one (pass, Tacc). Without sm_70 among the build's targets
// (TF_FP16OPS_SM70_KERNELS undefined: e.g. nvcc 13, which has no sm_70) run reports that the
// kernels are not in this library, and the table never picks them (Sm70WhyNot).
#if defined(TF_FP16OPS_SM70_KERNELS)
#define TF_FP16OPS_SM70(P, TACC)                                                         \
  TF_FP16OPS_SM70_CAN_IMPLEMENT(P, TACC)                                                 \
  template <>                                                                            \
  IgResult Sm70Run<P, TACC>(const ConvProblem& p, const void* a, const void* b, void* d, \
                            int splits, size_t d_bytes, cudaStream_t s) {                \
    return sm70::Run<P, TACC>(p, a, b, d, splits, d_bytes, s);                           \
  }                                                                                      \
  template <>                                                                            \
  bool Sm70CodeBuilt<P, TACC>() {                                                        \
    return true;                                                                         \
  }
#else
#define TF_FP16OPS_SM70(P, TACC)                                                              \
  TF_FP16OPS_SM70_CAN_IMPLEMENT(P, TACC)                                                      \
  template <>                                                                                 \
  IgResult Sm70Run<P, TACC>(const ConvProblem&, const void*, const void*, void*, int, size_t, \
                            cudaStream_t) {                                                   \
    return IgError("this library was built without sm_70 code for the Volta kernels");        \
  }                                                                                           \
  template <>                                                                                 \
  bool Sm70CodeBuilt<P, TACC>() {                                                             \
    return false;                                                                             \
  }
#endif

#endif  // TF_FP16OPS_CC_KERNELS_GPU_CUTLASS_SM70_H_
