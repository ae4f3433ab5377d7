// CUTLASS 2.x implicit-GEMM convolutions (Ampere-style mma.sync 16x8x16 for half, SIMT FFMA for
// float). Template definitions, included only by the cutlass_sm80_*.cu.cc instantiation files.
#ifndef TF_FP16OPS_CC_KERNELS_GPU_CUTLASS_SM80_H_
#define TF_FP16OPS_CC_KERNELS_GPU_CUTLASS_SM80_H_

#include <algorithm>
#include <type_traits>

#include "cutlass/cutlass.h"
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
using SwizzleFor = std::conditional_t<
    Op == Operator::kDgrad && Stride == StrideSupport::kStrided,
    cutlass::conv::threadblock::StridedDgradIdentityThreadblockSwizzle<1>,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>>;

// Kernel for operator `Op`: tensor cores (mma.sync 16x8x16) when the element is half, SIMT FFMA when
// float (true fp32, alignment 1, analytic iterators so any channel count runs).
template <Operator Op, typename Element, typename Acc, typename Out, StrideSupport Stride>
struct KernelFor;

template <Operator Op, typename Acc, typename Out, StrideSupport Stride>
struct KernelFor<Op, cutlass::half_t, Acc, Out, Stride> {
  using Swizzle = SwizzleFor<Op, Stride>;
  using E = cutlass::half_t;
  using Epilogue = cutlass::epilogue::thread::LinearCombination<
      Out, 128 / cutlass::sizeof_bits<Out>::value, Acc, Acc>;
  using TB = cutlass::gemm::GemmShape<128, 128, 64>;
  using Warp = cutlass::gemm::GemmShape<64, 64, 64>;
  using Inst = cutlass::gemm::GemmShape<16, 8, 16>;
  static constexpr int kStages = 3;
  using Kernel = typename std::conditional_t<
      Op == Operator::kFprop,
      cutlass::conv::kernel::DefaultConv2dFprop<E, Layout, E, Layout, Out, Layout, Acc,
          cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80, TB, Warp, Inst, Epilogue, Swizzle,
          kStages, cutlass::arch::OpMultiplyAdd, IteratorAlgorithm::kOptimized, Stride>,
      std::conditional_t<
          Op == Operator::kDgrad,
          cutlass::conv::kernel::DefaultConv2dDgrad<E, Layout, E, Layout, Out, Layout, Acc,
              cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80, TB, Warp, Inst, Epilogue,
              Swizzle, kStages, cutlass::arch::OpMultiplyAdd, IteratorAlgorithm::kOptimized,
              Stride>,
          cutlass::conv::kernel::DefaultConv2dWgrad<E, Layout, E, Layout, Out, Layout, Acc,
              cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80, TB, Warp, Inst, Epilogue,
              Swizzle, kStages, cutlass::arch::OpMultiplyAdd, IteratorAlgorithm::kOptimized,
              Stride>>>::Kernel;
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
      cutlass::conv::kernel::DefaultConv2dFprop<E, Layout, E, Layout, Out, Layout, Acc,
          cutlass::arch::OpClassSimt, cutlass::arch::Sm80, TB, Warp, Inst, Epilogue, Swizzle,
          kStages, cutlass::arch::OpMultiplyAdd, IteratorAlgorithm::kAnalytic, Stride, 1, 1>,
      std::conditional_t<
          Op == Operator::kDgrad,
          cutlass::conv::kernel::DefaultConv2dDgrad<E, Layout, E, Layout, Out, Layout, Acc,
              cutlass::arch::OpClassSimt, cutlass::arch::Sm80, TB, Warp, Inst, Epilogue, Swizzle,
              kStages, cutlass::arch::OpMultiplyAdd, IteratorAlgorithm::kAnalytic, Stride, 1, 1>,
          cutlass::conv::kernel::DefaultConv2dWgrad<E, Layout, E, Layout, Out, Layout, Acc,
              cutlass::arch::OpClassSimt, cutlass::arch::Sm80, TB, Warp, Inst, Epilogue, Swizzle,
              kStages, cutlass::arch::OpMultiplyAdd, IteratorAlgorithm::kAnalytic, Stride, 1,
              1>>>::Kernel;
};

inline cutlass::conv::Conv2dProblemSize ToCutlass(const IgProblem& p, int split_k = 1) {
  return cutlass::conv::Conv2dProblemSize(p.N, p.H, p.W, p.C, p.K, p.R, p.S, p.P, p.Q, p.pad_h,
                                          p.pad_w, p.stride_h, p.stride_w, p.dil_h, p.dil_w,
                                          cutlass::conv::Mode::kCrossCorrelation, split_k, 1);
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
  return typename Dev::Arguments(ps, ref_a, ref_b, ref_d, ref_d,
                                 {Compute(1), Compute(0)}, mode);
}

// Runs one kernel on (a, b) -> d with no split-K.
template <typename Kernel>
IgResult RunSimple(const IgProblem& p, const void* a, const void* b, void* d, cudaStream_t s) {
  using Dev = Device<Kernel>;
  const auto ps = ToCutlass(p);
  auto args = MakeArguments<Kernel>(ps, a, b, d, cutlass::conv::SplitKMode::kSerial);
  if (Dev::can_implement(args) != cutlass::Status::kSuccess) {
    return IgNotApplicable("CUTLASS 2.x can_implement rejected the problem");
  }
  if (Dev::get_workspace_size(args) != 0) return IgNotApplicable("kernel wants a workspace");
  Dev op;
  cutlass::Status st = op.initialize(args, nullptr, s);
  if (st != cutlass::Status::kSuccess) return IgError(CutlassStatusText(st));
  st = op.run(s);
  if (st != cutlass::Status::kSuccess) return IgError(CutlassStatusText(st));
  const cudaError_t e = cudaPeekAtLastError();
  if (e != cudaSuccess) return IgError(cudaGetErrorString(e));
  return IgOk();
}

template <DataType T, DataType Tacc>
IgResult Fprop(const IgProblem& p, const void* x, const void* w, void* y, cudaStream_t s) {
  using K = typename KernelFor<Operator::kFprop, Elem<T>, Elem<Tacc>, Elem<T>,
                               StrideSupport::kUnity>::Kernel;  // fprop iterators take any stride
  return RunSimple<K>(p, x, w, y, s);
}

template <DataType T, DataType Tacc>
IgResult Dgrad(const IgProblem& p, const void* dy, const void* w, void* dx, cudaStream_t s) {
  if constexpr (T == DataType::kHalf) {
    if (p.stride_h == 1 && p.stride_w == 1) {
      using K = typename KernelFor<Operator::kDgrad, Elem<T>, Elem<Tacc>, Elem<T>,
                                   StrideSupport::kUnity>::Kernel;
      const IgResult r = RunSimple<K>(p, dy, w, dx, s);
      if (r.code != IgCode::kNotApplicable) return r;
    }
  }
  using K = typename KernelFor<Operator::kDgrad, Elem<T>, Elem<Tacc>, Elem<T>,
                               StrideSupport::kStrided>::Kernel;
  return RunSimple<K>(p, dy, w, dx, s);
}

template <DataType T, DataType Tacc>
using WgradKernel = typename KernelFor<Operator::kWgrad, Elem<T>, Elem<Tacc>, Elem<Tacc>,
                                       StrideSupport::kStrided>::Kernel;

template <DataType T, DataType Tacc>
size_t WgradPartialBytes(const IgProblem& p, int requested_splits) {
  using Dev = Device<WgradKernel<T, Tacc>>;
  const auto ps = ToCutlass(p, std::max(1, requested_splits));
  auto args = MakeArguments<WgradKernel<T, Tacc>>(ps, nullptr, nullptr, nullptr,
                                                 cutlass::conv::SplitKMode::kParallel);
  // Parallel split-K: one KRSC tensor of Tacc per slice.
  return std::max(Dev::get_workspace_size(args),
                  sizeof(Elem<Tacc>) * static_cast<size_t>(p.K) * p.R * p.S * p.C);
}

template <DataType T, DataType Tacc>
IgResult Wgrad(const IgProblem& p, const void* dy, const void* x, void* partial,
               size_t partial_bytes, int requested_splits, int* splits, cudaStream_t s) {
  using Kernel = WgradKernel<T, Tacc>;
  using Dev = Device<Kernel>;
  const auto ps = ToCutlass(p, std::max(1, requested_splits));
  auto args = MakeArguments<Kernel>(ps, dy, x, partial, cutlass::conv::SplitKMode::kParallel);
  if (Dev::can_implement(args) != cutlass::Status::kSuccess) {
    return IgNotApplicable("CUTLASS 2.x can_implement rejected the problem");
  }
  const size_t one = sizeof(Elem<Tacc>) * static_cast<size_t>(p.K) * p.R * p.S * p.C;
  const size_t need = std::max(Dev::get_workspace_size(args), one);
  if (partial_bytes < need) return IgError("wgrad partial buffer too small");
  *splits = static_cast<int>(need / one);
  Dev op;
  // initialize() zeroes the split-K buffer it is given; hand it the partial tensor itself.
  cutlass::Status st = op.initialize(args, partial, s);
  if (st != cutlass::Status::kSuccess) return IgError(CutlassStatusText(st));
  st = op.run(s);
  if (st != cutlass::Status::kSuccess) return IgError(CutlassStatusText(st));
  const cudaError_t e = cudaPeekAtLastError();
  if (e != cudaSuccess) return IgError(cudaGetErrorString(e));
  return IgOk();
}

}  // namespace sm80
}  // namespace internal
}  // namespace gpu
}  // namespace tf_fp16ops

// Explicit instantiation helpers for the .cu.cc files.
#define TF_FP16OPS_SM80_FPROP(T, TACC)                                                       \
  template <>                                                                                \
  IgResult Sm80Fprop<T, TACC>(const IgProblem& p, const void* x, const void* w, void* y,     \
                              cudaStream_t s) {                                              \
    return sm80::Fprop<T, TACC>(p, x, w, y, s);                                              \
  }
#define TF_FP16OPS_SM80_DGRAD(T, TACC)                                                       \
  template <>                                                                                \
  IgResult Sm80Dgrad<T, TACC>(const IgProblem& p, const void* dy, const void* w, void* dx,   \
                              cudaStream_t s) {                                              \
    return sm80::Dgrad<T, TACC>(p, dy, w, dx, s);                                            \
  }
#define TF_FP16OPS_SM80_WGRAD(T, TACC)                                                       \
  template <>                                                                                \
  size_t Sm80WgradPartialBytes<T, TACC>(const IgProblem& p, int requested_splits) {          \
    return sm80::WgradPartialBytes<T, TACC>(p, requested_splits);                            \
  }                                                                                          \
  template <>                                                                                \
  IgResult Sm80Wgrad<T, TACC>(const IgProblem& p, const void* dy, const void* x,             \
                              void* partial, size_t partial_bytes, int requested_splits,     \
                              int* splits, cudaStream_t s) {                                 \
    return sm80::Wgrad<T, TACC>(p, dy, x, partial, partial_bytes, requested_splits, splits,  \
                                s);                                                          \
  }

#endif  // TF_FP16OPS_CC_KERNELS_GPU_CUTLASS_SM80_H_
