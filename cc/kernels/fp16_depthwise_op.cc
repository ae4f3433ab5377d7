// CPU OpKernel for Fp16DepthwiseConv2D: the attrs are read and checked by ReadConvAttrs and the
// shapes by DepthwiseGeometry (cc/kernels/conv_params.h, the checks and messages of Fp16Conv2D
// and of the shape function), into the grouped ConvProblem (groups = C, K = C * M). The operands
// are brought into float buffers (binary16 -> binary32 is exact, vectorized), the functor of
// cc/kernels/cpu/depthwise_cpu.h runs on TensorFlow's CPU worker threads, and the result is
// stored in T (binary32 -> binary16 rounds to nearest even; with Tacc=half the values are
// already binary16). T=half with Tacc=half runs on the binary16 buffers themselves where the
// functor has such a kernel (DepthwiseFpropHalfBuffers).
#include <type_traits>

#include "cc/kernels/conv_params.h"
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
using tensorflow::Tensor;
using tensorflow::TensorShape;

template <typename T>
class Fp16DepthwiseConv2DOp : public OpKernel {
 public:
  explicit Fp16DepthwiseConv2DOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ReadConvAttrs(ctx, &attrs_, /*half_acc_of_float=*/true));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("num_bias", &num_bias_));
    OP_REQUIRES(ctx, num_bias_ == 0 || num_bias_ == 1,
                tensorflow::errors::InvalidArgument("num_bias must be 0 or 1, got ", num_bias_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& input = ctx->input(0);
    const Tensor& filter = ctx->input(1);
    ConvProblem g;
    TensorShape out_shape;
    OP_REQUIRES_OK(ctx, DepthwiseGeometry(attrs_, input, filter, &g, &out_shape));
    const Tensor* bias = nullptr;
    if (num_bias_ == 1) {
      bias = &ctx->input(2);
      OP_REQUIRES(ctx, bias->dims() == 1 && bias->dim_size(0) == g.K,
                  tensorflow::errors::InvalidArgument("bias must be 1-D with C*M = ", g.K,
                                                      " elements (the output channels), got shape ",
                                                      bias->shape().DebugString()));
    }
    Tensor* output = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, out_shape, &output));
    if (output->NumElements() == 0) return;
    auto* workers = ctx->device()->tensorflow_cpu_worker_threads();
    const cpu::ParallelFor parallel_for =
        [workers](int64_t total, int64_t cost, const std::function<void(int64_t, int64_t)>& fn) {
          tensorflow::Shard(workers->num_threads, workers->workers, total, cost, fn);
        };
    constexpr bool kFloat = std::is_same<T, float>::value;
    const bool half = attrs_.Tacc == tensorflow::DT_HALF;
    const float* b = nullptr;
    Tensor bt;
    if (bias != nullptr) OP_REQUIRES_OK(ctx, ToFloat(ctx, *bias, &bt, &b));
    if (half) {
      // The binary16 kernels with the epilogue (bias, T=float result) on each output row; with
      // T=float the input rounded to binary16 as the kernel reads it, or a binary16 copy.
      const uint16_t* w16;
      Tensor w16t;
      OP_REQUIRES_OK(ctx, ToHalfBits(ctx, filter, &w16t, &w16));
      cpu::HalfFpropIo io;
      io.bias = b;
      if constexpr (kFloat) {
        io.x32 = input.flat<float>().data();
        io.y32 = output->flat<float>().data();
      } else {
        io.x16 = reinterpret_cast<const uint16_t*>(input.flat<T>().data());
        io.y16 = reinterpret_cast<uint16_t*>(output->flat<T>().data());
      }
      if (cpu::DepthwiseFpropHalf(g, w16, io, parallel_for)) return;
    }
    // The binary32 route: binary32 buffers of the operands' values (with T=float and Tacc=half
    // the binary16 values TensorFlow's Cast would give), the functor, then the epilogue.
    const float *x, *w;
    Tensor xt, wt, yt;
    OP_REQUIRES_OK(ctx, ToFloat(ctx, input, &xt, &x, kFloat && half));
    OP_REQUIRES_OK(ctx, ToFloat(ctx, filter, &wt, &w, kFloat && half));
    float* y;
    if constexpr (kFloat) {
      y = output->flat<float>().data();
    } else {
      OP_REQUIRES_OK(ctx, ctx->allocate_temp(DT_FLOAT, TensorShape({output->NumElements()}), &yt));
      y = yt.flat<float>().data();
    }
    cpu::DepthwiseFprop(g, half ? cpu::Accumulation::kHalf : cpu::Accumulation::kFloat, x, w, y,
                        parallel_for);
    if (kFloat && b == nullptr) return;
    uint16_t* y16 = nullptr;
    if constexpr (!kFloat) y16 = reinterpret_cast<uint16_t*>(output->flat<T>().data());
    const int64_t L = g.K;
    parallel_for(output->NumElements() / L, 4 * L, [&](int64_t begin, int64_t end) {
      cpu::FpropEpilogue(y + begin * L, end - begin, L, b,
                         y16 != nullptr ? y16 + begin * L : nullptr,
                         y16 != nullptr ? nullptr : y + begin * L);
    });
  }

 private:
  // A binary32 buffer of t's values: t itself (T=float; with `round` a copy rounded to binary16
  // values) or its binary16 values widened.
  static tensorflow::Status ToFloat(OpKernelContext* ctx, const Tensor& t, Tensor* tmp,
                                    const float** data, bool round = false) {
    if constexpr (std::is_same<T, float>::value) {
      if (!round) {
        *data = t.flat<float>().data();
        return tensorflow::Status();
      }
      TF_RETURN_IF_ERROR(ctx->allocate_temp(DT_FLOAT, t.shape(), tmp));
      cpu::RoundToHalfValues(t.flat<float>().data(), tmp->flat<float>().data(), t.NumElements());
    } else {
      TF_RETURN_IF_ERROR(ctx->allocate_temp(DT_FLOAT, t.shape(), tmp));
      cpu::HalfToFloat(reinterpret_cast<const uint16_t*>(t.flat<T>().data()),
                       tmp->flat<float>().data(), t.NumElements());
    }
    *data = tmp->flat<float>().data();
    return tensorflow::Status();
  }

  // t as binary16 bit patterns: t itself (T=half) or a copy rounded to nearest even (T=float).
  static tensorflow::Status ToHalfBits(OpKernelContext* ctx, const Tensor& t, Tensor* tmp,
                                       const uint16_t** data) {
    if constexpr (std::is_same<T, float>::value) {
      TF_RETURN_IF_ERROR(ctx->allocate_temp(tensorflow::DT_HALF, t.shape(), tmp));
      uint16_t* bits = reinterpret_cast<uint16_t*>(tmp->flat<Eigen::half>().data());
      cpu::FloatToHalf(t.flat<float>().data(), bits, t.NumElements());
      *data = bits;
    } else {
      *data = reinterpret_cast<const uint16_t*>(t.flat<T>().data());
    }
    return tensorflow::Status();
  }

  int num_bias_ = 0;
  ConvAttrs attrs_;
};

REGISTER_KERNEL_BUILDER(
    Name("Fp16DepthwiseConv2D").Device(tensorflow::DEVICE_CPU).TypeConstraint<Eigen::half>("T"),
    Fp16DepthwiseConv2DOp<Eigen::half>);
REGISTER_KERNEL_BUILDER(
    Name("Fp16DepthwiseConv2D").Device(tensorflow::DEVICE_CPU).TypeConstraint<float>("T"),
    Fp16DepthwiseConv2DOp<float>);

}  // namespace
}  // namespace tf_fp16ops
