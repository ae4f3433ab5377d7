// CUTLASS 2.x implicit-GEMM convolutions (Ampere-style mma.sync 16x8x16 for half, SIMT FFMA for
// float). Template definitions, included only by the cutlass_sm80_*.cu.cc instantiation files.
#ifndef TF_FP16OPS_CC_KERNELS_GPU_CUTLASS_SM80_H_
#define TF_FP16OPS_CC_KERNELS_GPU_CUTLASS_SM80_H_

#include <algorithm>
#include <type_traits>

#include "cutlass/cutlass.h"

// Original order kept (not every CUTLASS header includes what it uses).
#include "cutlass/conv/conv2d_problem_size.h"
#include "cutlass/conv/convolution.h"
#include "cutlass/conv/device/implicit_gemm_convolution.h"
#include "cutlass/conv/kernel/default_conv2d_dgrad.h"
#include "cutlass/conv/kernel/default_conv2d_fprop.h"
#include "cutlass/conv/kernel/default_conv2d_wgrad.h"
#include "cutlass/epilogue/thread/linear_combination.h"

#include "cutlass/conv/threadblock/threadblock_swizzle.h"
#include "cutlass/gemm/threadblock/threadblock_swizzle.h"
#include "cutlass/layout/tensor.h"
#include "cutlass/numeric_types.h"

#include "cc/kernels/gpu/implicit_gemm.h"

namespace tf_fp16ops {
namespace gpu {
namespace internal {
namespace sm80 {

template <DataType D>
using Elem = std::conditional_t<D == DataType::kHalf, cutlass::half_t, float>;

using cutlass::conv::IteratorAlgorithm;
using cutlass::conv::Operator;
using cutlass::conv::StrideSupport;
using Layout = cutlass::layout::TensorNHWC;
// Strided dgrad kernels iterate over filter phases and need their own swizzle.
template <Operator Op, StrideSupport Stride>
using SwizzleFor =
    std::conditional_t<Op == Operator::kDgrad && Stride == StrideSupport::kStrided,
                       cutlass::conv::threadblock::StridedDgradIdentityThreadblockSwizzle<1>,
                       cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>>;

// Kernel for operator `Op`: tensor cores (mma.sync 16x8x16) when the element is half, SIMT FFMA
// when float (true fp32, alignment 1, analytic iterators so any channel count runs).
template <Operator Op, typename Element, typename Acc, typename Out, StrideSupport Stride>
struct KernelFor;

template <Operator Op, typename Acc, typename Out, StrideSupport Stride>
struct KernelFor<Op, cutlass::half_t, Acc, Out, Stride> {
  using Swizzle = SwizzleFor<Op, Stride>;
  using E = cutlass::half_t;
  using Epilogue =
      cutlass::epilogue::thread::LinearCombination<Out, 128 / cutlass::sizeof_bits<Out>::value, Acc,
                                                   Acc>;
  using TB = cutlass::gemm::GemmShape<128, 128, 64>;
  using Warp = cutlass::gemm::GemmShape<64, 64, 64>;
  using Inst = cutlass::gemm::GemmShape<16, 8, 16>;
  static constexpr int kStages = 3;
  using Kernel = typename std::conditional_t<
      Op == Operator::kFprop,
      cutlass::conv::kernel::DefaultConv2dFprop<
          E, Layout, E, Layout, Out, Layout, Acc, cutlass::arch::OpClassTensorOp,
          cutlass::arch::Sm80, TB, Warp, Inst, Epilogue, Swizzle, kStages,
          cutlass::arch::OpMultiplyAdd, IteratorAlgorithm::kOptimized, Stride>,
      std::conditional_t<
          Op == Operator::kDgrad,
          cutlass::conv::kernel::DefaultConv2dDgrad<
              E, Layout, E, Layout, Out, Layout, Acc, cutlass::arch::OpClassTensorOp,
              cutlass::arch::Sm80, TB, Warp, Inst, Epilogue, Swizzle, kStages,
              cutlass::arch::OpMultiplyAdd, IteratorAlgorithm::kOptimized, Stride>,
          cutlass::conv::kernel::DefaultConv2dWgrad<
              E, Layout, E, Layout, Out, Layout, Acc, cutlass::arch::OpClassTensorOp,
              cutlass::arch::Sm80, TB, Warp, Inst, Epilogue, Swizzle, kStages,
              cutlass::arch::OpMultiplyAdd, IteratorAlgorithm::kOptimized, Stride>>>::Kernel;
};

template <Operator Op, typename Acc, typename Out, StrideSupport Stride>
struct KernelFor<Op, float, Acc, Out, Stride> {
  using Swizzle = SwizzleFor<Op, Stride>;
  using E = float;
  using Epilogue = cutlass::epilogue::thread::LinearCombination<Out, 1, Acc, Acc>;
  using TB = cutlass::gemm::GemmShape<128, 128, 8>;
  using Warp = cutlass::gemm::GemmShape<32, 64, 8>;
  using Inst = cutlass::gemm::GemmShape<1, 1, 1>;
  static constexpr int kStages = 4;
  using Kernel = typename std::conditional_t<
      Op == Operator::kFprop,
      cutlass::conv::kernel::DefaultConv2dFprop<
          E, Layout, E, Layout, Out, Layout, Acc, cutlass::arch::OpClassSimt, cutlass::arch::Sm80,
          TB, Warp, Inst, Epilogue, Swizzle, kStages, cutlass::arch::OpMultiplyAdd,
          IteratorAlgorithm::kAnalytic, Stride, 1, 1>,
      std::conditional_t<
          Op == Operator::kDgrad,
          cutlass::conv::kernel::DefaultConv2dDgrad<
              E, Layout, E, Layout, Out, Layout, Acc, cutlass::arch::OpClassSimt,
              cutlass::arch::Sm80, TB, Warp, Inst, Epilogue, Swizzle, kStages,
              cutlass::arch::OpMultiplyAdd, IteratorAlgorithm::kAnalytic, Stride, 1, 1>,
          cutlass::conv::kernel::DefaultConv2dWgrad<
              E, Layout, E, Layout, Out, Layout, Acc, cutlass::arch::OpClassSimt,
              cutlass::arch::Sm80, TB, Warp, Inst, Epilogue, Swizzle, kStages,
              cutlass::arch::OpMultiplyAdd, IteratorAlgorithm::kAnalytic, Stride, 1, 1>>>::Kernel;
};

// The caller (the implementation table, conv2d_gpu.cu.cc) has checked that every extent fits
// int32 and groups == 1.
inline cutlass::conv::Conv2dProblemSize ToCutlass(const ConvProblem& p, int split_k = 1) {
  return cutlass::conv::Conv2dProblemSize(
      int(p.N), int(p.H), int(p.W), int(p.C), int(p.K), int(p.KH), int(p.KW), int(p.P), int(p.Q),
      int(p.pad_top), int(p.pad_left), int(p.stride_h), int(p.stride_w), int(p.dilation_h),
      int(p.dilation_w), cutlass::conv::Mode::kCrossCorrelation, split_k, 1);
}

inline const char* CutlassStatusText(cutlass::Status s) { return cutlassGetStatusString(s); }

template <typename Kernel>
using Device = cutlass::conv::device::ImplicitGemmConvolution<Kernel>;

template <typename Kernel>
typename Device<Kernel>::Arguments MakeArguments(const cutlass::conv::Conv2dProblemSize& ps,
                                                 const void* a, const void* b, void* d,
                                                 cutlass::conv::SplitKMode mode) {
  using Dev = Device<Kernel>;
  using EA = typename Dev::ElementA;
  using EB = typename Dev::ElementB;
  using EC = typename Dev::ElementC;
  using Compute = typename Dev::EpilogueOutputOp::ElementCompute;
  constexpr Operator kOp = Dev::kConvolutionalOperator;
  cutlass::TensorRef<EA, Layout> ref_a(
      static_cast<EA*>(const_cast<void*>(a)),
      Layout::packed(cutlass::conv::implicit_gemm_tensor_a_extent(kOp, ps)));
  cutlass::TensorRef<EB, Layout> ref_b(
      static_cast<EB*>(const_cast<void*>(b)),
      Layout::packed(cutlass::conv::implicit_gemm_tensor_b_extent(kOp, ps)));
  cutlass::TensorRef<EC, Layout> ref_d(
      static_cast<EC*>(d), Layout::packed(cutlass::conv::implicit_gemm_tensor_c_extent(kOp, ps)));
  // beta = 0: the source tensor C is never read (LinearCombination::is_source_needed()).
  return typename Dev::Arguments(ps, ref_a, ref_b, ref_d, ref_d, {Compute(1), Compute(0)}, mode);
}

// CUTLASS's own check (host code: problem extents, alignment, iterator limits, grid size).
template <typename Kernel>
IgResult CanImplementKernel(const ConvProblem& p, int splits, cutlass::conv::SplitKMode mode) {
  const auto args = MakeArguments<Kernel>(ToCutlass(p, splits), nullptr, nullptr, nullptr, mode);
  const cutlass::Status st = Device<Kernel>::can_implement(args);
  if (st != cutlass::Status::kSuccess) return IgNotApplicable(CutlassStatusText(st));
  return IgOk();
}

// Runs one kernel on (a, b) -> d. `split_k_buffer` is CUTLASS's workspace (parallel split-K
// partials), `split_k_bytes` its size.
template <typename Kernel>
IgResult RunKernel(const ConvProblem& p, int splits, cutlass::conv::SplitKMode mode, const void* a,
                   const void* b, void* d, void* split_k_buffer, size_t split_k_bytes,
                   cudaStream_t s) {
  using Dev = Device<Kernel>;
  auto args = MakeArguments<Kernel>(ToCutlass(p, splits), a, b, d, mode);
  cutlass::Status st = Dev::can_implement(args);
  if (st != cutlass::Status::kSuccess) return IgError(CutlassStatusText(st));
  if (Dev::get_workspace_size(args) > split_k_bytes) {
    return IgError("CUTLASS wants a larger workspace than the implementation table sized");
  }
  Dev op;
  // initialize() zeroes the split-K buffer it is given.
  st = op.initialize(args, split_k_bytes > 0 ? split_k_buffer : nullptr, s);
  if (st != cutlass::Status::kSuccess) return IgError(CutlassStatusText(st));
  st = op.run(s);
  if (st != cutlass::Status::kSuccess) return IgError(CutlassStatusText(st));
  const cudaError_t e = cudaPeekAtLastError();
  if (e != cudaSuccess) return IgError(cudaGetErrorString(e));
  return IgOk();
}

template <DataType T, DataType Tacc, StrideSupport Stride>
using DgradKernel =
    typename KernelFor<Operator::kDgrad, Elem<T>, Elem<Tacc>, Elem<T>, Stride>::Kernel;
template <DataType T, DataType Tacc>
using FpropKernel = typename KernelFor<Operator::kFprop, Elem<T>, Elem<Tacc>, Elem<T>,
                                       StrideSupport::kUnity>::Kernel;  // any stride
template <DataType T, DataType Tacc>
using WgradKernel = typename KernelFor<Operator::kWgrad, Elem<T>, Elem<Tacc>, Elem<Tacc>,
                                       StrideSupport::kStrided>::Kernel;

// dgrad: the unit-stride kernel when it applies (T=half, unit strides; faster), else the strided
// one. Returns 1 (unity), 2 (strided) or 0 (neither; *why says CUTLASS's reason).
template <DataType T, DataType Tacc>
int DgradChoice(const ConvProblem& p, IgResult* why) {
  using cutlass::conv::SplitKMode;
  if (T == DataType::kHalf && p.stride_h == 1 && p.stride_w == 1) {
    *why =
        CanImplementKernel<DgradKernel<T, Tacc, StrideSupport::kUnity>>(p, 1, SplitKMode::kSerial);
    if (why->code == IgCode::kOk) return 1;
  }
  *why =
      CanImplementKernel<DgradKernel<T, Tacc, StrideSupport::kStrided>>(p, 1, SplitKMode::kSerial);
  return why->code == IgCode::kOk ? 2 : 0;
}

template <Pass P, DataType T, DataType Tacc>
IgResult CanImplement(const ConvProblem& p, int splits) {
  if constexpr (P == Pass::kFprop) {
    return CanImplementKernel<FpropKernel<T, Tacc>>(p, 1, cutlass::conv::SplitKMode::kSerial);
  } else if constexpr (P == Pass::kDgrad) {
    IgResult why = IgOk();
    DgradChoice<T, Tacc>(p, &why);
    return why;
  } else {
    return CanImplementKernel<WgradKernel<T, Tacc>>(p, splits,
                                                    cutlass::conv::SplitKMode::kParallel);
  }
}

// wgrad: d is the partial buffer (splits KRSC tensors of Tacc), also CUTLASS's workspace.
template <Pass P, DataType T, DataType Tacc>
IgResult Run(const ConvProblem& p, const void* a, const void* b, void* d, int splits,
             size_t d_bytes, cudaStream_t s) {
  using cutlass::conv::SplitKMode;
  if constexpr (P == Pass::kFprop) {
    return RunKernel<FpropKernel<T, Tacc>>(p, 1, SplitKMode::kSerial, a, b, d, nullptr, 0, s);
  } else if constexpr (P == Pass::kDgrad) {
    IgResult why = IgOk();
    const int choice = DgradChoice<T, Tacc>(p, &why);
    if (choice == 0) return IgError(why.what);
    if (choice == 1) {
      return RunKernel<DgradKernel<T, Tacc, StrideSupport::kUnity>>(p, 1, SplitKMode::kSerial, a, b,
                                                                    d, nullptr, 0, s);
    }
    return RunKernel<DgradKernel<T, Tacc, StrideSupport::kStrided>>(p, 1, SplitKMode::kSerial, a, b,
                                                                    d, nullptr, 0, s);
  } else {
    return RunKernel<WgradKernel<T, Tacc>>(p, splits, SplitKMode::kParallel, a, b, d, d, d_bytes,
                                           s);
  }
}

}  // namespace sm80
}  // namespace internal
}  // namespace gpu
}  // namespace tf_fp16ops

// Explicit specializations for the .cu.cc files: can_implement and run of one pass.
#define TF_FP16OPS_SM80(P, T, TACC)                                                         \
  template <>                                                                               \
  IgResult Sm80CanImplement<P, T, TACC>(const ConvProblem& p, int splits) {                 \
    return sm80::CanImplement<P, T, TACC>(p, splits);                                       \
  }                                                                                         \
  template <>                                                                               \
  IgResult Sm80Run<P, T, TACC>(const ConvProblem& p, const void* a, const void* b, void* d, \
                               int splits, size_t d_bytes, cudaStream_t s) {                \
    return sm80::Run<P, T, TACC>(p, a, b, d, splits, d_bytes, s);                           \
  }
// can_implement alone (the host build's table; no kernel is instantiated).
#define TF_FP16OPS_SM80_CAN_IMPLEMENT(P, T, TACC)                           \
  template <>                                                               \
  IgResult Sm80CanImplement<P, T, TACC>(const ConvProblem& p, int splits) { \
    return sm80::CanImplement<P, T, TACC>(p, splits);                       \
  }

#endif  // TF_FP16OPS_CC_KERNELS_GPU_CUTLASS_SM80_H_
