// CUTLASS 3.x implicit-GEMM convolutions for Hopper: TMA im2col loads, wgmma with fp16 or fp32
// accumulators, warp-specialized producer/consumer mainloop. Template definitions, included only by
// the cutlass_sm90_*.cu.cc files, which are compiled for sm_90a alone.
#ifndef TF_FP16OPS_CC_KERNELS_GPU_CUTLASS_SM90_H_
#define TF_FP16OPS_CC_KERNELS_GPU_CUTLASS_SM90_H_

#include <string_view>
#include <type_traits>

// First: reroutes CUTLASS's TMA descriptor encodes before any CUTE header uses them.
#include "cc/kernels/gpu/tma_encode_check.h"

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/kernel_hardware_info.hpp"

// After the two above: the conv collectives use cutlass::KernelHardwareInfo without including it.
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
// TF32, which the numerics contract excludes). Accumulator type = Acc. Schedules: the warp-
// specialized TMA mainloop with the TMA store epilogue (the pair CUTLASS's own library generator
// instantiates for sm90 convolutions, cutlass_library/generator.py); the Auto epilogue would
// store from registers (NoSmemWarpSpecialized).
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
      cutlass::epilogue::collective::EpilogueTileAuto, Acc, float, void, LayoutOut,
      kAlign,  // no source tensor: D = alpha * acc
      E, LayoutOut, kAlign, cutlass::epilogue::TmaWarpSpecialized>::CollectiveOp;
  using Mainloop = typename cutlass::conv::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Op, E, Layout, kAlign, E, Layout, kAlign,
      Acc, TileShape, ClusterShape,
      cutlass::conv::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epilogue::SharedStorage))>,
      cutlass::conv::KernelImplicitTmaWarpSpecializedSm90>::CollectiveOp;
  using ProblemShape =
      cutlass::conv::ConvProblemShape<Op, Mainloop::DispatchPolicy::NumSpatialDimensions>;
  using Kernel = cutlass::conv::kernel::ConvUniversal<ProblemShape, Mainloop, Epilogue>;
  using Device = cutlass::conv::device::ConvUniversalAdapter<Kernel>;
};

// Our restrictions, then CUTLASS's ConvUniversalAdapter::can_implement (host code).
template <typename Conv>
IgResult CanImplementConv(const ConvProblem& p, typename Conv::Device::Arguments* out_args,
                          const void* a, const void* b, void* d) {
  using Device = typename Conv::Device;
  using Kernel = typename Conv::Kernel;
  using ProblemShape = typename Conv::ProblemShape;
  const int pad_bottom =
      int((p.P - 1) * p.stride_h + (p.KH - 1) * p.dilation_h + 1 - p.H - p.pad_top);
  const int pad_right =
      int((p.Q - 1) * p.stride_w + (p.KW - 1) * p.dilation_w + 1 - p.W - p.pad_left);
  if (pad_bottom < 0 || pad_right < 0) {
    return IgNotApplicable("TMA im2col needs non-negative implied bottom/right padding");
  }
  ProblemShape shape(cutlass::conv::Mode::kCrossCorrelation,
                     {int(p.N), int(p.H), int(p.W), int(p.C)},
                     {int(p.K), int(p.KH), int(p.KW), int(p.C)}, {int(p.pad_top), int(p.pad_left)},
                     {pad_bottom, pad_right}, {int(p.stride_h), int(p.stride_w)},
                     {int(p.dilation_h), int(p.dilation_w)}, 1);
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
  if (out_args != nullptr) *out_args = args;
  return IgOk();
}

// The kernel body exists only in an sm_90a image; false when the library has none for this
// device (cudaFuncGetAttributes fails), so that the table never picks it.
template <typename Conv>
bool CodePresent() {
  cudaFuncAttributes attr;
  if (cudaFuncGetAttributes(&attr, cutlass::device_kernel<typename Conv::Kernel>) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return true;
}

template <typename Conv>
IgResult Run(const ConvProblem& p, const void* a, const void* b, void* d, cudaStream_t s) {
  using Device = typename Conv::Device;
  typename Device::Arguments args;
  const IgResult can = CanImplementConv<Conv>(p, &args, a, b, d);
  if (can.code != IgCode::kOk) return IgError(can.what);
  Device op;
  tma_check::Clear();
  cutlass::Status st = op.initialize(args, nullptr, s);
  if (tma_check::LastFailure().result != 0) {
    return IgError(
        tma_check::LastFailure().function == nullptr
            ? "TMA descriptor encode failed"
            : (std::string_view(tma_check::LastFailure().function) == "cuTensorMapEncodeIm2col"
                   ? "TMA descriptor encode failed (cuTensorMapEncodeIm2col)"
                   : "TMA descriptor encode failed (cuTensorMapEncodeTiled)"));
  }
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
using FpropConv = Sm90Conv<cutlass::conv::Operator::kFprop, Elem<Tacc>,
                           Shape<_128, _128, Shape<_64>>, Shape<_1, _1, _1>>;
template <DataType Tacc>
using DgradConv = Sm90Conv<cutlass::conv::Operator::kDgrad, Elem<Tacc>,
                           Shape<_128, _128, Shape<_64>>, Shape<_1, _1, _1>>;
template <DataType Tacc>
using WgradConv = Sm90Conv<cutlass::conv::Operator::kWgrad, Elem<Tacc>,
                           Shape<_128, Shape<_128>, Shape<_64>>, Shape<_1, _1, _1>>;

}  // namespace sm90
}  // namespace internal
}  // namespace gpu
}  // namespace tf_fp16ops

// Explicit specializations for the cutlass_sm90_*.cu.cc files (Tacc = half or float).
#define TF_FP16OPS_SM90_CAN_IMPLEMENT(P, TACC, CONV)                            \
  template <>                                                                   \
  IgResult Sm90CanImplement<P, TACC>(const ConvProblem& p) {                    \
    return sm90::CanImplementConv<CONV>(p, nullptr, nullptr, nullptr, nullptr); \
  }
#define TF_FP16OPS_SM90(P, TACC, CONV)                                                   \
  TF_FP16OPS_SM90_CAN_IMPLEMENT(P, TACC, CONV)                                           \
  template <>                                                                            \
  bool Sm90CodePresent<P, TACC>() {                                                      \
    return sm90::CodePresent<CONV>();                                                    \
  }                                                                                      \
  template <>                                                                            \
  IgResult Sm90Run<P, TACC>(const ConvProblem& p, const void* a, const void* b, void* d, \
                            cudaStream_t s) {                                            \
    return sm90::Run<CONV>(p, a, b, d, s);                                               \
  }

#endif  // TF_FP16OPS_CC_KERNELS_GPU_CUTLASS_SM90_H_
