// The one OpKernel of Fp16Conv2D (fprop), Fp16Conv2DBackpropInput (dgrad) and
// Fp16Conv2DBackpropFilter (wgrad), for every device. It reads the attrs, validates the inputs
// into the one problem type (ConvProblem, through cc/kernels/conv_params.h: every check and
// message exists once, shared with the shape functions), allocates the output and hands the
// operands to the device's launch functor ConvLaunch<Device, T, kPass> (cc/kernels/
// fp16_conv2d_op.cc for the CPU, cc/kernels/fp16_conv2d_gpu_kernels.cc for the GPU).
//
// Inputs (TensorFlow's): fprop (input, filter); dgrad (input_sizes, filter, out_backprop); wgrad
// (input, filter_sizes, out_backprop). The functor gets them in the C-ABI order of
// cc/kernels/gpu/conv2d_gpu.h: fprop (x, w), dgrad (w, dy), wgrad (x, dy).
#ifndef TF_FP16OPS_CC_KERNELS_CONV_KERNEL_H_
#define TF_FP16OPS_CC_KERNELS_CONV_KERNEL_H_

#include "cc/kernels/conv_params.h"
#include "cc/kernels/conv_problem.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"

namespace tf_fp16ops {

// Device tags of the launch functors.
struct CpuDevice {};
struct GpuDevice {};

// Specialized per device: static tensorflow::Status Run(OpKernelContext*, const ConvAttrs&,
// const ConvProblem&, const Tensor& a, const Tensor& b, Tensor* output), called only with a
// non-empty output.
template <typename Device, typename T, Pass kPass>
struct ConvLaunch;

template <typename Device, typename T, Pass kPass>
class Fp16ConvOp : public tensorflow::OpKernel {
 public:
  explicit Fp16ConvOp(tensorflow::OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ReadConvAttrs(ctx, &attrs_));
  }

  void Compute(tensorflow::OpKernelContext* ctx) override {
    ConvProblem g;
    tensorflow::TensorShape out_shape;
    const tensorflow::Tensor* a = nullptr;
    const tensorflow::Tensor* b = nullptr;
    if constexpr (kPass == Pass::kFprop) {
      OP_REQUIRES_OK(ctx, FpropGeometry(attrs_, ctx->input(0), ctx->input(1), &g, &out_shape));
      a = &ctx->input(0);
      b = &ctx->input(1);
    } else if constexpr (kPass == Pass::kDgrad) {
      OP_REQUIRES_OK(
          ctx, DgradGeometry(attrs_, ctx->input(0), ctx->input(1), ctx->input(2), &g, &out_shape));
      a = &ctx->input(1);
      b = &ctx->input(2);
    } else {
      OP_REQUIRES_OK(
          ctx, WgradGeometry(attrs_, ctx->input(0), ctx->input(1), ctx->input(2), &g, &out_shape));
      a = &ctx->input(0);
      b = &ctx->input(2);
    }
    tensorflow::Tensor* output = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, out_shape, &output));
    if (output->NumElements() == 0) return;
    OP_REQUIRES_OK(ctx, (ConvLaunch<Device, T, kPass>::Run(ctx, attrs_, g, *a, *b, output)));
  }

 private:
  ConvAttrs attrs_;
};

// Registers the three kernels for one device and T: TF_FP16OPS_REGISTER_CONV_KERNELS(
// tensorflow::DEVICE_CPU, CpuDevice, float). The size inputs of the gradients stay in host memory.
#define TF_FP16OPS_REGISTER_CONV_KERNELS(DEVICE, DEVICE_TAG, T)                                   \
  REGISTER_KERNEL_BUILDER(Name("Fp16Conv2D").Device(DEVICE).TypeConstraint<T>("T"),               \
                          (::tf_fp16ops::Fp16ConvOp<DEVICE_TAG, T, ::tf_fp16ops::Pass::kFprop>)); \
  REGISTER_KERNEL_BUILDER(Name("Fp16Conv2DBackpropInput")                                         \
                              .Device(DEVICE)                                                     \
                              .TypeConstraint<T>("T")                                             \
                              .HostMemory("input_sizes"),                                         \
                          (::tf_fp16ops::Fp16ConvOp<DEVICE_TAG, T, ::tf_fp16ops::Pass::kDgrad>)); \
  REGISTER_KERNEL_BUILDER(Name("Fp16Conv2DBackpropFilter")                                        \
                              .Device(DEVICE)                                                     \
                              .TypeConstraint<T>("T")                                             \
                              .HostMemory("filter_sizes"),                                        \
                          (::tf_fp16ops::Fp16ConvOp<DEVICE_TAG, T, ::tf_fp16ops::Pass::kWgrad>))

}  // namespace tf_fp16ops

#endif  // TF_FP16OPS_CC_KERNELS_CONV_KERNEL_H_
