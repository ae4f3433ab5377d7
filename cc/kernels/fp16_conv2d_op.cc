// CPU kernels of Fp16Conv2D, Fp16Conv2DBackpropInput and Fp16Conv2DBackpropFilter: the one
// OpKernel template of cc/kernels/conv_kernel.h with the CPU launch functors below. They bring the
// operands into float NHWC buffers (binary16 -> binary32 is exact), run the functor of
// cc/kernels/cpu/conv2d_cpu.h on TensorFlow's CPU worker threads, and store the result in T
// (binary32 -> binary16 rounds to nearest even; with Tacc=half the values are already binary16).
#include <cstring>
#include <type_traits>

#include "cc/kernels/conv_kernel.h"
#include "cc/kernels/conv_params.h"
#include "cc/kernels/cpu/conv2d_cpu.h"
#include "cc/kernels/cpu/depthwise_cpu.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/util/work_sharder.h"

namespace tf_fp16ops {
namespace {

using tensorflow::DT_FLOAT;
using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Status;
using tensorflow::Tensor;
using tensorflow::TensorShape;
namespace errors = tensorflow::errors;

cpu::ParallelFor MakeParallelFor(OpKernelContext* ctx) {
  auto* workers = ctx->device()->tensorflow_cpu_worker_threads();
  return [workers](int64_t total, int64_t cost, const std::function<void(int64_t, int64_t)>& fn) {
    tensorflow::Shard(workers->num_threads, workers->workers, total, cost, fn);
  };
}

cpu::Accumulation AccOf(const ConvAttrs& a) {
  return a.Tacc == tensorflow::DT_HALF ? cpu::Accumulation::kHalf : cpu::Accumulation::kFloat;
}

// Float copy of a tensor of type T; `nchw_to_nhwc` transposes a 4-D activation.
template <typename T>
Status ToFloat(OpKernelContext* ctx, const Tensor& t, bool nchw_to_nhwc, Tensor* out,
               const float** data) {
  const int64_t n = t.NumElements();
  if (std::is_same<T, float>::value && !nchw_to_nhwc) {
    *data = reinterpret_cast<const float*>(t.flat<T>().data());
    return Status();
  }
  TensorShape shape = t.shape();
  TF_RETURN_IF_ERROR(ctx->allocate_temp(DT_FLOAT, shape, out));
  const T* src = t.flat<T>().data();
  float* dst = out->flat<float>().data();
  if (!nchw_to_nhwc) {
    if constexpr (std::is_same<T, Eigen::half>::value) {
      cpu::HalfToFloat(reinterpret_cast<const uint16_t*>(src), dst, n);  // vectorized, exact
    } else {
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]);
    }
  } else {
    const int64_t N = t.dim_size(0), C = t.dim_size(1), H = t.dim_size(2), W = t.dim_size(3);
    for (int64_t b = 0; b < N; ++b)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t hw = 0; hw < H * W; ++hw)
          dst[(b * H * W + hw) * C + c] = static_cast<float>(src[(b * C + c) * H * W + hw]);
  }
  *data = dst;
  return Status();
}

// Stores a float NHWC buffer [N, H, W, C] into `out` (type T, data_format order).
template <typename T>
void FromFloat(const float* src, int64_t N, int64_t H, int64_t W, int64_t C, bool nhwc_to_nchw,
               Tensor* out) {
  T* dst = out->flat<T>().data();
  if (!nhwc_to_nchw) {
    const int64_t n = N * H * W * C;
    if constexpr (std::is_same<T, Eigen::half>::value) {
      cpu::FloatToHalf(src, reinterpret_cast<uint16_t*>(dst), n);  // vectorized, to nearest even
    } else {
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(src[i]);
    }
  } else {
    for (int64_t b = 0; b < N; ++b)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t hw = 0; hw < H * W; ++hw)
          dst[(b * C + c) * H * W + hw] = static_cast<T>(src[(b * H * W + hw) * C + c]);
  }
}

// A float NHWC result buffer: the output itself when T=float and NHWC, else a temporary.
template <typename T>
Status ResultBuffer(OpKernelContext* ctx, Tensor* out, bool nchw, int64_t elems, Tensor* tmp,
                    float** data) {
  if (std::is_same<T, float>::value && !nchw) {
    *data = reinterpret_cast<float*>(out->flat<T>().data());
    return Status();
  }
  TF_RETURN_IF_ERROR(ctx->allocate_temp(DT_FLOAT, TensorShape({elems}), tmp));
  *data = tmp->flat<float>().data();
  return Status();
}

// A grouped convolution with one input channel per group (a depthwise convolution, as the
// gradients of Fp16DepthwiseConv2D run it) takes the channel-vectorized functors of
// cc/kernels/cpu/depthwise_cpu.h, which give the bits of Conv2DDgrad / Conv2DWgrad.
bool OneChannelPerGroup(const ConvProblem& g) { return g.Cg == 1 && g.groups == g.C; }

void Dgrad(const ConvProblem& g, cpu::Accumulation acc, const float* dy, const float* w, float* dx,
           const cpu::ParallelFor& parallel_for) {
  if (OneChannelPerGroup(g)) return cpu::DepthwiseDgrad(g, acc, dy, w, dx, parallel_for);
  cpu::Conv2DDgrad(g, acc, dy, w, dx, parallel_for);
}

void Wgrad(const ConvProblem& g, cpu::Accumulation acc, const float* x, const float* dy, float* dw,
           const cpu::ParallelFor& parallel_for) {
  if (OneChannelPerGroup(g)) return cpu::DepthwiseWgrad(g, acc, x, dy, dw, parallel_for);
  cpu::Conv2DWgrad(g, acc, x, dy, dw, parallel_for);
}

}  // namespace

// The CPU launch functors: float NHWC copies of the operands, the functor of
// cc/kernels/cpu/conv2d_cpu.h on TensorFlow's CPU worker threads, the result stored in T. With
// T=half, Tacc=half and NHWC the binary16 buffers go straight to a binary16 kernel where one
// applies (Conv2DFpropHalfBuffers, Conv2DDgradHalfBuffers, Conv2DWgradHalfBuffers; the depthwise
// dgrad and wgrad of depthwise_cpu.h).
template <typename T>
struct ConvLaunch<CpuDevice, T, Pass::kFprop> {
  static Status Run(OpKernelContext* ctx, const ConvAttrs& attrs, const ConvProblem& g,
                    const Tensor& input, const Tensor& filter, Tensor* output) {
    if constexpr (std::is_same<T, Eigen::half>::value) {
      // Binary16 operands straight to a binary16 kernel where one applies (no float copies).
      if (AccOf(attrs) == cpu::Accumulation::kHalf && !attrs.nchw &&
          cpu::Conv2DFpropHalfBuffers(g, reinterpret_cast<const uint16_t*>(input.flat<T>().data()),
                                      reinterpret_cast<const uint16_t*>(filter.flat<T>().data()),
                                      reinterpret_cast<uint16_t*>(output->flat<T>().data()),
                                      MakeParallelFor(ctx))) {
        return Status();
      }
    }
    Tensor xt, wt, yt;
    const float *x, *w;
    float* y;
    TF_RETURN_IF_ERROR(ToFloat<T>(ctx, input, attrs.nchw, &xt, &x));
    TF_RETURN_IF_ERROR(ToFloat<T>(ctx, filter, false, &wt, &w));
    TF_RETURN_IF_ERROR(ResultBuffer<T>(ctx, output, attrs.nchw, output->NumElements(), &yt, &y));
    cpu::Conv2DFprop(g, AccOf(attrs), x, w, y, MakeParallelFor(ctx));
    if (y != reinterpret_cast<float*>(output->flat<T>().data())) {
      FromFloat<T>(y, g.N, g.P, g.Q, g.K, attrs.nchw, output);
    }
    return Status();
  }
};

template <typename T>
struct ConvLaunch<CpuDevice, T, Pass::kDgrad> {
  static Status Run(OpKernelContext* ctx, const ConvAttrs& attrs, const ConvProblem& g,
                    const Tensor& filter, const Tensor& dy, Tensor* output) {
    if constexpr (std::is_same<T, Eigen::half>::value) {
      // A dgrad on binary16 buffers where a binary16 kernel applies (no float copies).
      if (AccOf(attrs) == cpu::Accumulation::kHalf && !attrs.nchw) {
        const auto* dyh = reinterpret_cast<const uint16_t*>(dy.flat<T>().data());
        const auto* wh = reinterpret_cast<const uint16_t*>(filter.flat<T>().data());
        auto* dxh = reinterpret_cast<uint16_t*>(output->flat<T>().data());
        if (OneChannelPerGroup(g)
                ? cpu::DepthwiseDgradHalfBuffers(g, dyh, wh, dxh, MakeParallelFor(ctx))
                : cpu::Conv2DDgradHalfBuffers(g, dyh, wh, dxh, MakeParallelFor(ctx))) {
          return Status();
        }
      }
    }
    Tensor dyt, wt, dxt;
    const float *dyf, *w;
    float* dx;
    TF_RETURN_IF_ERROR(ToFloat<T>(ctx, dy, attrs.nchw, &dyt, &dyf));
    TF_RETURN_IF_ERROR(ToFloat<T>(ctx, filter, false, &wt, &w));
    TF_RETURN_IF_ERROR(ResultBuffer<T>(ctx, output, attrs.nchw, output->NumElements(), &dxt, &dx));
    if (dy.NumElements() == 0 || filter.NumElements() == 0) {
      std::memset(dx, 0, sizeof(float) * output->NumElements());
    } else {
      Dgrad(g, AccOf(attrs), dyf, w, dx, MakeParallelFor(ctx));
    }
    if (dx != reinterpret_cast<float*>(output->flat<T>().data())) {
      FromFloat<T>(dx, g.N, g.H, g.W, g.C, attrs.nchw, output);
    }
    return Status();
  }
};

template <typename T>
struct ConvLaunch<CpuDevice, T, Pass::kWgrad> {
  static Status Run(OpKernelContext* ctx, const ConvAttrs& attrs, const ConvProblem& g,
                    const Tensor& input, const Tensor& dy, Tensor* output) {
    if constexpr (std::is_same<T, Eigen::half>::value) {
      // A wgrad on binary16 buffers where a binary16 kernel applies (no float copies).
      if (AccOf(attrs) == cpu::Accumulation::kHalf && !attrs.nchw) {
        const auto* xh = reinterpret_cast<const uint16_t*>(input.flat<T>().data());
        const auto* dyh = reinterpret_cast<const uint16_t*>(dy.flat<T>().data());
        auto* dwh = reinterpret_cast<uint16_t*>(output->flat<T>().data());
        if (OneChannelPerGroup(g)
                ? cpu::DepthwiseWgradHalfBuffers(g, xh, dyh, dwh, MakeParallelFor(ctx))
                : cpu::Conv2DWgradHalfBuffers(g, xh, dyh, dwh, MakeParallelFor(ctx))) {
          return Status();
        }
      }
    }
    Tensor xt, dyt, dwt;
    const float *x, *dyf;
    float* dw;
    TF_RETURN_IF_ERROR(ToFloat<T>(ctx, input, attrs.nchw, &xt, &x));
    TF_RETURN_IF_ERROR(ToFloat<T>(ctx, dy, attrs.nchw, &dyt, &dyf));
    TF_RETURN_IF_ERROR(ResultBuffer<T>(ctx, output, false, output->NumElements(), &dwt, &dw));
    Wgrad(g, AccOf(attrs), x, dyf, dw, MakeParallelFor(ctx));
    if (dw != reinterpret_cast<float*>(output->flat<T>().data())) {
      FromFloat<T>(dw, g.KH, g.KW, g.Cg, g.K, false, output);
    }
    return Status();
  }
};

namespace {

TF_FP16OPS_REGISTER_CONV_KERNELS(tensorflow::DEVICE_CPU, CpuDevice, Eigen::half);
TF_FP16OPS_REGISTER_CONV_KERNELS(tensorflow::DEVICE_CPU, CpuDevice, float);

}  // namespace
}  // namespace tf_fp16ops

namespace tf_fp16ops {
namespace {

class Fp16OpsCpuIsaOp : public tensorflow::OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(tensorflow::OpKernelContext* ctx) override {
    tensorflow::Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, tensorflow::TensorShape({}), &out));
    out->scalar<tensorflow::tstring>()() = cpu::AccumulateIsa();
  }
};

REGISTER_KERNEL_BUILDER(Name("Fp16OpsCpuIsa").Device(tensorflow::DEVICE_CPU), Fp16OpsCpuIsaOp);

}  // namespace
}  // namespace tf_fp16ops

// For tools/benchmark_cpu.py (through ctypes on this library, so that the ceiling is the code the
// op runs): cpu::FpropHalfCeilingProbe, one call per micro-kernel `variant` of the path.
extern "C" __attribute__((visibility("default"))) int64_t TfFp16opsFpropHalfCeilingProbe(
    int64_t reps, float* sink, int variant) {
  return tf_fp16ops::cpu::FpropHalfCeilingProbe(reps, sink, variant);
}
