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
    OP_REQUIRES_OK(ctx, ReadConvAttrs(ctx, &attrs_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& input = ctx->input(0);
    const Tensor& filter = ctx->input(1);
    ConvProblem g;
    TensorShape out_shape;
    OP_REQUIRES_OK(ctx, DepthwiseGeometry(attrs_, input, filter, &g, &out_shape));
    Tensor* output = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, out_shape, &output));
    if (output->NumElements() == 0) return;
    auto* workers = ctx->device()->tensorflow_cpu_worker_threads();
    const cpu::ParallelFor parallel_for =
        [workers](int64_t total, int64_t cost, const std::function<void(int64_t, int64_t)>& fn) {
          tensorflow::Shard(workers->num_threads, workers->workers, total, cost, fn);
        };
    const bool half = attrs_.Tacc == tensorflow::DT_HALF;
    if constexpr (!std::is_same<T, float>::value) {
      // Binary16 operands straight to a binary16 kernel where one applies (no float copies).
      if (half && cpu::DepthwiseFpropHalfBuffers(
                      g, reinterpret_cast<const uint16_t*>(input.flat<T>().data()),
                      reinterpret_cast<const uint16_t*>(filter.flat<T>().data()),
                      reinterpret_cast<uint16_t*>(output->flat<T>().data()), parallel_for)) {
        return;
      }
    }
    const float *x, *w;
    Tensor xt, wt, yt;
    OP_REQUIRES_OK(ctx, ToFloat(ctx, input, &xt, &x));
    OP_REQUIRES_OK(ctx, ToFloat(ctx, filter, &wt, &w));
    float* y;
    if constexpr (std::is_same<T, float>::value) {
      y = output->flat<float>().data();
    } else {
      OP_REQUIRES_OK(ctx, ctx->allocate_temp(DT_FLOAT, TensorShape({output->NumElements()}), &yt));
      y = yt.flat<float>().data();
    }
    cpu::DepthwiseFprop(g, half ? cpu::Accumulation::kHalf : cpu::Accumulation::kFloat, x, w, y,
                        parallel_for);
    if constexpr (!std::is_same<T, float>::value) {
      cpu::FloatToHalf(y, reinterpret_cast<uint16_t*>(output->flat<T>().data()),
                       output->NumElements());
    }
  }

 private:
  static tensorflow::Status ToFloat(OpKernelContext* ctx, const Tensor& t, Tensor* tmp,
                                    const float** data) {
    if constexpr (std::is_same<T, float>::value) {
      *data = t.flat<float>().data();
      return tensorflow::Status();
    } else {
      TF_RETURN_IF_ERROR(ctx->allocate_temp(DT_FLOAT, t.shape(), tmp));
      cpu::HalfToFloat(reinterpret_cast<const uint16_t*>(t.flat<T>().data()),
                       tmp->flat<float>().data(), t.NumElements());
      *data = tmp->flat<float>().data();
      return tensorflow::Status();
    }
  }

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
