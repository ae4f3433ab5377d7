// GPU OpKernels for Fp16Conv2D, Fp16Conv2DBackpropInput and Fp16Conv2DBackpropFilter.
//
// Compiled by the host compiler with TensorFlow headers only (no CUDA headers): inputs are
// validated into a cpu::ConvGeometry exactly as the CPU kernels do (cc/kernels/conv_params.h), the
// work is enqueued by the launchers of cc/kernels/gpu/conv2d_gpu.h (nvcc-built, linked with
// libcudart_static) on the op's CUDA stream, and scratch memory comes from TensorFlow's allocator.
// Launcher errors become InvalidArgument (bad sizes) or Internal (CUDA/CUTLASS failures) with the
// launcher's message. Built only with --config=cuda (TF_FP16OPS_CUDA defined).
#if TF_FP16OPS_CUDA

#include <algorithm>
#include <string>

#include "cc/kernels/conv_params.h"
#include "cc/kernels/cpu/conv2d_cpu.h"
#include "cc/kernels/gpu/conv2d_gpu.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "xla/stream_executor/stream.h"

namespace tf_fp16ops {
namespace {

using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Status;
using tensorflow::Tensor;
using tensorflow::TensorShape;
namespace errors = tensorflow::errors;

gpu::Conv2DProblem ToProblem(const cpu::ConvGeometry& g, bool nchw) {
  gpu::Conv2DProblem p;
  p.N = g.N; p.H = g.H; p.W = g.W; p.C = g.C;
  p.KH = g.KH; p.KW = g.KW; p.K = g.K; p.groups = g.groups;
  p.P = g.P; p.Q = g.Q;
  p.stride_h = g.stride_h; p.stride_w = g.stride_w;
  p.dil_h = g.dilation_h; p.dil_w = g.dilation_w;
  p.pad_top = g.pad_top; p.pad_left = g.pad_left;
  p.nchw = nchw;
  return p;
}

gpu::DataType ToGpuType(tensorflow::DataType t) {
  return t == tensorflow::DT_HALF ? gpu::DataType::kHalf : gpu::DataType::kFloat;
}

Status FromGpuStatus(const gpu::Status& s, const char* op) {
  switch (s.code) {
    case gpu::StatusCode::kOk: return Status();
    case gpu::StatusCode::kInvalidArgument: return errors::InvalidArgument(op, ": ", s.message);
    default: return errors::Internal(op, " GPU launch failed: ", s.message);
  }
}

cudaStream_t StreamOf(OpKernelContext* ctx) {
  return reinterpret_cast<cudaStream_t>(
      ctx->op_device_context()->stream()->platform_specific_handle().stream);
}

// Allocates `bytes` of device scratch through TensorFlow's allocator (nullptr when 0).
Status Workspace(OpKernelContext* ctx, size_t bytes, Tensor* holder, void** ptr) {
  *ptr = nullptr;
  if (bytes == 0) return Status();
  TF_RETURN_IF_ERROR(ctx->allocate_temp(tensorflow::DT_UINT8,
                                        TensorShape({static_cast<int64_t>(bytes)}), holder));
  *ptr = holder->flat<uint8_t>().data();
  return Status();
}

enum class Pass { kFprop, kDgrad, kWgrad };

// One kernel class for the three passes: validate (conv_params.h, shared with the CPU kernels),
// allocate the output and the launcher's workspace, launch on the op's stream.
template <Pass kPass>
class Fp16ConvGpuOp : public OpKernel {
 public:
  explicit Fp16ConvGpuOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ReadConvAttrs(ctx, &attrs_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& a = ctx->input(0);
    const Tensor& b = ctx->input(1);
    cpu::ConvGeometry g;
    TensorShape out_shape;
    if (kPass == Pass::kFprop) {
      OP_REQUIRES_OK(ctx, FpropGeometry(attrs_, a, b, &g, &out_shape));
    } else if (kPass == Pass::kDgrad) {
      OP_REQUIRES_OK(ctx, DgradGeometry(attrs_, a, b, ctx->input(2), &g, &out_shape));
    } else {
      OP_REQUIRES_OK(ctx, WgradGeometry(attrs_, a, b, ctx->input(2), &g, &out_shape));
    }
    Tensor* output = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, out_shape, &output));
    if (output->NumElements() == 0) return;
    const gpu::Conv2DProblem p = ToProblem(g, attrs_.nchw);
    const gpu::DataType T = ToGpuType(attrs_.T), Tacc = ToGpuType(attrs_.Tacc);
    Tensor ws_holder;
    void* ws = nullptr;
    gpu::Status status;
    // Empty dy or filter in the gradients: the launchers write +0 everywhere (a sum over nothing).
    if (kPass == Pass::kFprop) {
      const size_t bytes = gpu::FpropWorkspaceBytes(p, T, Tacc);
      OP_REQUIRES_OK(ctx, Workspace(ctx, bytes, &ws_holder, &ws));
      status = gpu::LaunchFprop(StreamOf(ctx), p, T, Tacc, a.data(), b.data(), output->data(), ws, bytes);
    } else if (kPass == Pass::kDgrad) {
      const size_t bytes = gpu::DgradWorkspaceBytes(p, T, Tacc);
      OP_REQUIRES_OK(ctx, Workspace(ctx, bytes, &ws_holder, &ws));
      status = gpu::LaunchDgrad(StreamOf(ctx), p, T, Tacc, b.data(), ctx->input(2).data(), output->data(), ws,
                                bytes);
    } else {
      const size_t bytes = gpu::WgradWorkspaceBytes(p, T, Tacc);
      OP_REQUIRES_OK(ctx, Workspace(ctx, bytes, &ws_holder, &ws));
      status = gpu::LaunchWgrad(StreamOf(ctx), p, T, Tacc, a.data(), ctx->input(2).data(), output->data(), ws,
                                bytes);
    }
    OP_REQUIRES_OK(ctx, FromGpuStatus(status, type_string().c_str()));
  }

 private:
  ConvAttrs attrs_;
};

#define TF_FP16OPS_REGISTER_GPU(T)                                                              \
  REGISTER_KERNEL_BUILDER(                                                                      \
      Name("Fp16Conv2D").Device(tensorflow::DEVICE_GPU).TypeConstraint<T>("T"),                \
      Fp16ConvGpuOp<Pass::kFprop>);                                                             \
  REGISTER_KERNEL_BUILDER(Name("Fp16Conv2DBackpropInput")                                       \
                              .Device(tensorflow::DEVICE_GPU)                                   \
                              .TypeConstraint<T>("T")                                           \
                              .HostMemory("input_sizes"),                                       \
                          Fp16ConvGpuOp<Pass::kDgrad>);                                         \
  REGISTER_KERNEL_BUILDER(Name("Fp16Conv2DBackpropFilter")                                      \
                              .Device(tensorflow::DEVICE_GPU)                                   \
                              .TypeConstraint<T>("T")                                           \
                              .HostMemory("filter_sizes"),                                      \
                          Fp16ConvGpuOp<Pass::kWgrad>);

TF_FP16OPS_REGISTER_GPU(Eigen::half);
TF_FP16OPS_REGISTER_GPU(float);

#undef TF_FP16OPS_REGISTER_GPU

}  // namespace
}  // namespace tf_fp16ops

#endif  // TF_FP16OPS_CUDA
