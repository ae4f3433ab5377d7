// CUTLASS 3.x implicit-GEMM convolutions for Hopper: TMA im2col loads, wgmma with fp16 or fp32
// accumulators, warp-specialized producer/consumer mainloop. Template definitions, included only by
// the cutlass_sm90_*.cu.cc files, which are compiled for sm_90a alone.
#ifndef TF_FP16OPS_CC_KERNELS_GPU_CUTLASS_SM90_H_
#define TF_FP16OPS_CC_KERNELS_GPU_CUTLASS_SM90_H_

#include <type_traits>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/kernel_hardware_info.hpp"
#include "cutlass/conv/collective/collective_builder.hpp"
#include "cutlass/conv/convnd_problem_shape.hpp"
#include "cutlass/conv/convolution.h"
#include "cutlass/conv/device/conv_universal_adapter.hpp"
#include "cutlass/conv/dispatch_policy.hpp"
#include "cutlass/conv/kernel/conv_universal.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/numeric_types.h"
#include "cutlass/util/packed_stride.hpp"

#include "cc/kernels/gpu/implicit_gemm.h"

namespace tf_fp16ops {
namespace gpu {
namespace internal {
namespace sm90 {

template <DataType D>
using Elem = std::conditional_t<D == DataType::kHalf, cutlass::half_t, float>;

// One Hopper conv kernel. Element is half (the wgmma path is for T=half only; T=float would run as
// TF32, which the numerics contract excludes). Accumulator type = Acc.
template <cutlass::conv::Operator Op, typename Acc, typename TileShape, typename ClusterShape>
struct Sm90Conv {
  // Output layout tag: activations NHWC; the wgrad output is the KRSC filter (TensorKCSR tag:
  // C contiguous, then S, R, K).
  using LayoutOut = std::conditional_t<Op == cutlass::conv::Operator::kWgrad,
                                       cutlass::layout::TensorKCSR, cutlass::layout::TensorNHWC>;
  static constexpr cutlass::conv::Operator kOp = Op;
  using E = cutlass::half_t;
  using Layout = cutlass::layout::TensorNHWC;
  static constexpr int kAlign = 128 / cutlass::sizeof_bits<E>::value;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, Acc, float,
      void, LayoutOut, kAlign,  // no source tensor: D = alpha * acc
      E, LayoutOut, kAlign, cutlass::epilogue::collective::EpilogueScheduleAuto>::CollectiveOp;
  using Mainloop = typename cutlass::conv::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Op, E, Layout, kAlign, E, Layout, kAlign,
      Acc, TileShape, ClusterShape,
      cutlass::conv::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epilogue::SharedStorage))>,
      cutlass::conv::collective::KernelScheduleAuto>::CollectiveOp;
  using ProblemShape =
      cutlass::conv::ConvProblemShape<Op, Mainloop::DispatchPolicy::NumSpatialDimensions>;
  using Kernel = cutlass::conv::kernel::ConvUniversal<ProblemShape, Mainloop, Epilogue>;
  using Device = cutlass::conv::device::ConvUniversalAdapter<Kernel>;
};

template <typename Conv>
IgResult Run(const IgProblem& p, const void* a, const void* b, void* d, cudaStream_t s) {
  using Device = typename Conv::Device;
  using Kernel = typename Conv::Kernel;
  using ProblemShape = typename Conv::ProblemShape;
  // The kernel body exists only in an sm_90a image; without one, report "not applicable".
  cudaFuncAttributes attr;
  if (cudaFuncGetAttributes(&attr, cutlass::device_kernel<Kernel>) != cudaSuccess) {
    (void)cudaGetLastError();
    return IgNotApplicable("no sm_90a code for this kernel in the library");
  }
  const int pad_bottom = (p.P - 1) * p.stride_h + (p.R - 1) * p.dil_h + 1 - p.H - p.pad_h;
  const int pad_right = (p.Q - 1) * p.stride_w + (p.S - 1) * p.dil_w + 1 - p.W - p.pad_w;
  if (pad_bottom < 0 || pad_right < 0) {
    return IgNotApplicable("TMA im2col needs non-negative implied bottom/right padding");
  }
  ProblemShape shape(cutlass::conv::Mode::kCrossCorrelation, {p.N, p.H, p.W, p.C},
                     {p.K, p.R, p.S, p.C}, {p.pad_h, p.pad_w}, {pad_bottom, pad_right},
                     {p.stride_h, p.stride_w}, {p.dil_h, p.dil_w}, 1);
  typename Kernel::StrideD stride_d{};
  if constexpr (Conv::kOp == cutlass::conv::Operator::kWgrad) {
    stride_d = cutlass::make_cute_packed_stride(typename Kernel::StrideD{}, shape.shape_C,
                                                shape.stride_C, Conv::kOp);
  } else {
    // Output modes ((Q, P, N), K): strides taken from the packed NPQK / NHWC output tensor.
    cute::for_each(cute::make_seq<cute::rank<0>(typename Kernel::StrideD{})>{}, [&](auto i) {
      cute::get<0, i>(stride_d) = shape.stride_C[ProblemShape::RankT - 2 - i];
    });
  }
  using EA = typename Device::ElementA;
  using EB = typename Device::ElementB;
  using ED = typename Device::ElementD;
  typename Device::Arguments args{
      shape,
      {static_cast<const EA*>(a), static_cast<const EB*>(b)},
      {{1.0f, 0.0f}, nullptr, typename Kernel::StrideC{}, static_cast<ED*>(d), stride_d}};
  if (Device::can_implement(args) != cutlass::Status::kSuccess) {
    return IgNotApplicable("CUTLASS 3.x can_implement rejected the problem");
  }
  if (Device::get_workspace_size(args) != 0) return IgNotApplicable("kernel wants a workspace");
  Device op;
  cutlass::Status st = op.initialize(args, nullptr, s);
  if (st != cutlass::Status::kSuccess) return IgError(cutlassGetStatusString(st));
  st = op.run(s);
  if (st != cutlass::Status::kSuccess) return IgError(cutlassGetStatusString(st));
  const cudaError_t e = cudaPeekAtLastError();
  if (e != cudaSuccess) return IgError(cudaGetErrorString(e));
  return IgOk();
}

using cute::_1;
using cute::_128;
using cute::_64;
using cute::Shape;

template <DataType Tacc>
using FpropConv = Sm90Conv<cutlass::conv::Operator::kFprop, Elem<Tacc>, Shape<_128, _128, Shape<_64>>,
                           Shape<_1, _1, _1>>;
template <DataType Tacc>
using DgradConv = Sm90Conv<cutlass::conv::Operator::kDgrad, Elem<Tacc>, Shape<_128, _128, Shape<_64>>,
                           Shape<_1, _1, _1>>;
template <DataType Tacc>
using WgradConv = Sm90Conv<cutlass::conv::Operator::kWgrad, Elem<Tacc>,
                           Shape<_128, Shape<_128>, Shape<_64>>,
                           Shape<_1, _1, _1>>;

}  // namespace sm90
}  // namespace internal
}  // namespace gpu
}  // namespace tf_fp16ops

#endif  // TF_FP16OPS_CC_KERNELS_GPU_CUTLASS_SM90_H_
