// CPU OpKernel for Fp16DepthwiseConv2D: validates the attrs and shapes, brings the operands into
// float buffers (binary16 -> binary32 is exact), runs cc/kernels/cpu/depthwise_cpu.h on
// TensorFlow's CPU worker threads and stores the result in T (binary32 -> binary16 rounds to
// nearest even; with Tacc=half the values are already binary16).
#include <string>
#include <vector>

#include "cc/kernels/conv_shape.h"
#include "cc/kernels/cpu/depthwise_cpu.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/util/padding.h"
#include "tensorflow/core/util/work_sharder.h"

namespace tf_fp16ops {
namespace {

using tensorflow::DT_FLOAT;
using tensorflow::DT_HALF;
using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;
using tensorflow::TensorShape;
namespace errors = tensorflow::errors;

std::string Join(const std::vector<int32_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

template <typename T>
class Fp16DepthwiseConv2DOp : public OpKernel {
 public:
  explicit Fp16DepthwiseConv2DOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    tensorflow::DataType tacc;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("Tacc", &tacc));
    OP_REQUIRES(ctx, tacc == DT_FLOAT || tensorflow::DataTypeToEnum<T>::value == DT_HALF,
                errors::InvalidArgument("Tacc=half (float16 accumulation) needs T=half inputs, got "
                                        "T=float"));
    half_ = tacc == DT_HALF;
    std::string padding;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("padding", &padding));
    OP_REQUIRES_OK(ctx, tensorflow::GetPaddingFromString(padding, &padding_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("strides", &strides_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("dilations", &dilations_));
    for (const auto* v : {&strides_, &dilations_}) {
      const char* name = v == &strides_ ? "strides" : "dilations";
      OP_REQUIRES(ctx, v->size() == 4,
                  errors::InvalidArgument(name, " must have 4 entries (NHWC), got ", Join(*v)));
      OP_REQUIRES(ctx, (*v)[0] == 1 && (*v)[3] == 1,
                  errors::InvalidArgument(
                      name, " must be 1 in the batch and channel dimensions, got ", Join(*v)));
      OP_REQUIRES(ctx, (*v)[1] > 0 && (*v)[2] > 0,
                  errors::InvalidArgument(name, " must be positive, got ", Join(*v)));
    }
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& input = ctx->input(0);
    const Tensor& filter = ctx->input(1);
    OP_REQUIRES(ctx, input.dims() == 4,
                errors::InvalidArgument("input must be 4-D [N, H, W, C], got shape ",
                                        input.shape().DebugString()));
    OP_REQUIRES(ctx, filter.dims() == 4,
                errors::InvalidArgument("filter must be 4-D [KH, KW, C, M], got shape ",
                                        filter.shape().DebugString()));
    cpu::DepthwiseGeometry g{};
    g.N = input.dim_size(0);
    g.H = input.dim_size(1);
    g.W = input.dim_size(2);
    g.C = input.dim_size(3);
    g.KH = filter.dim_size(0);
    g.KW = filter.dim_size(1);
    g.M = filter.dim_size(3);
    g.stride_h = strides_[1];
    g.stride_w = strides_[2];
    g.dilation_h = dilations_[1];
    g.dilation_w = dilations_[2];
    // The size rules of cc/kernels/conv_shape.h (those of the shape function): empty outputs
    // for zero N, H, W, C or M, 128-bit size arithmetic.
    ConvWindow win;
    win.stride_h = g.stride_h, win.stride_w = g.stride_w;
    win.dilation_h = g.dilation_h, win.dilation_w = g.dilation_w;
    win.padding = padding_ == tensorflow::SAME ? PaddingKind::kSame : PaddingKind::kValid;
    const int64_t in[4] = {g.N, g.H, g.W, g.C};
    const int64_t f[4] = {g.KH, g.KW, filter.dim_size(2), g.M};
    int64_t out[4];
    const std::string err = DepthwiseOutputDims(in, f, win, true, out, &g.pad_top, &g.pad_left);
    OP_REQUIRES(ctx, err.empty(), errors::InvalidArgument(err));
    g.P = out[1];
    g.Q = out[2];
    TensorShape out_shape;
    OP_REQUIRES_OK(ctx,
                   TensorShape::BuildTensorShape({out[0], out[1], out[2], out[3]}, &out_shape));
    Tensor* output = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, out_shape, &output));
    if (output->NumElements() == 0) return;
    const float *x, *w;
    Tensor xt, wt, yt;
    OP_REQUIRES_OK(ctx, ToFloat(ctx, input, &xt, &x));
    OP_REQUIRES_OK(ctx, ToFloat(ctx, filter, &wt, &w));
    float* y;
    if (std::is_same<T, float>::value) {
      y = reinterpret_cast<float*>(output->flat<T>().data());
    } else {
      OP_REQUIRES_OK(ctx, ctx->allocate_temp(DT_FLOAT, TensorShape({output->NumElements()}), &yt));
      y = yt.flat<float>().data();
    }
    auto* workers = ctx->device()->tensorflow_cpu_worker_threads();
    cpu::DepthwiseParallelFor parallel_for =
        [workers](int64_t total, int64_t cost, const std::function<void(int64_t, int64_t)>& fn) {
          tensorflow::Shard(workers->num_threads, workers->workers, total, cost, fn);
        };
    cpu::DepthwiseFprop(g, half_ ? cpu::Accumulation::kHalf : cpu::Accumulation::kFloat, x, w, y,
                        parallel_for);
    if (!std::is_same<T, float>::value) {
      T* dst = output->flat<T>().data();
      for (int64_t i = 0; i < output->NumElements(); ++i) dst[i] = static_cast<T>(y[i]);
    }
  }

 private:
  static tensorflow::Status ToFloat(OpKernelContext* ctx, const Tensor& t, Tensor* tmp,
                                    const float** data) {
    if (std::is_same<T, float>::value) {
      *data = reinterpret_cast<const float*>(t.flat<T>().data());
      return tensorflow::Status();
    }
    TF_RETURN_IF_ERROR(ctx->allocate_temp(DT_FLOAT, t.shape(), tmp));
    const T* src = t.flat<T>().data();
    float* dst = tmp->flat<float>().data();
    for (int64_t i = 0; i < t.NumElements(); ++i) dst[i] = static_cast<float>(src[i]);
    *data = dst;
    return tensorflow::Status();
  }

  bool half_ = false;
  tensorflow::Padding padding_;
  std::vector<int32_t> strides_, dilations_;
};

REGISTER_KERNEL_BUILDER(
    Name("Fp16DepthwiseConv2D").Device(tensorflow::DEVICE_CPU).TypeConstraint<Eigen::half>("T"),
    Fp16DepthwiseConv2DOp<Eigen::half>);
REGISTER_KERNEL_BUILDER(
    Name("Fp16DepthwiseConv2D").Device(tensorflow::DEVICE_CPU).TypeConstraint<float>("T"),
    Fp16DepthwiseConv2DOp<float>);

}  // namespace
}  // namespace tf_fp16ops
