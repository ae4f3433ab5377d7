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

Status CheckRank4(const char* name, const Tensor& t) {
  if (t.dims() != 4) {
    return errors::InvalidArgument(name, " must be 4-D, got shape ", t.shape().DebugString());
  }
  return Status();
}

void Dims(const Tensor& t, int64_t d[4]) {
  for (int i = 0; i < 4; ++i) d[i] = t.dim_size(i);
}

// input_sizes / filter_sizes live in host memory (HostMemory in the registrations below).
Status SizesFromTensor(const char* name, const Tensor& t, int64_t d[4]) {
  if (t.dims() != 1 || t.NumElements() != 4) {
    return errors::InvalidArgument(name, " must be a 1-D tensor of 4 int32 values, got shape ",
                                   t.shape().DebugString());
  }
  auto v = t.flat<int32_t>();
  for (int i = 0; i < 4; ++i) {
    if (v(i) < 0) {
      return errors::InvalidArgument(name, " must be non-negative, got [", v(0), ", ", v(1), ", ",
                                     v(2), ", ", v(3), "]");
    }
    d[i] = v(i);
  }
  return Status();
}

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

class Fp16Conv2DGpuOp : public OpKernel {
 public:
  explicit Fp16Conv2DGpuOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ReadConvAttrs(ctx, &attrs_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& input = ctx->input(0);
    const Tensor& filter = ctx->input(1);
    OP_REQUIRES_OK(ctx, CheckRank4("input", input));
    OP_REQUIRES_OK(ctx, CheckRank4("filter", filter));
    int64_t in[4], f[4], o[4];
    Dims(input, in);
    Dims(filter, f);
    cpu::ConvGeometry g;
    OP_REQUIRES_OK(ctx, ComputeConvGeometry(attrs_, in, f, &g));
    OutputDims(attrs_, g, o);
    Tensor* output = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({o[0], o[1], o[2], o[3]}), &output));
    if (output->NumElements() == 0) return;
    const gpu::Conv2DProblem p = ToProblem(g, attrs_.nchw);
    const gpu::DataType T = ToGpuType(attrs_.T), Tacc = ToGpuType(attrs_.Tacc);
    Tensor ws_holder;
    void* ws = nullptr;
    const size_t ws_bytes = gpu::FpropWorkspaceBytes(p, T, Tacc);
    OP_REQUIRES_OK(ctx, Workspace(ctx, ws_bytes, &ws_holder, &ws));
    OP_REQUIRES_OK(ctx, FromGpuStatus(gpu::LaunchFprop(StreamOf(ctx), p, T, Tacc,
                                                       input.data(), filter.data(), output->data(),
                                                       ws, ws_bytes),
                                      "Fp16Conv2D"));
  }

 private:
  ConvAttrs attrs_;
};

class Fp16Conv2DBackpropInputGpuOp : public OpKernel {
 public:
  explicit Fp16Conv2DBackpropInputGpuOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ReadConvAttrs(ctx, &attrs_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& sizes = ctx->input(0);
    const Tensor& filter = ctx->input(1);
    const Tensor& dy = ctx->input(2);
    int64_t in[4], f[4], d[4], o[4];
    OP_REQUIRES_OK(ctx, SizesFromTensor("input_sizes", sizes, in));
    OP_REQUIRES_OK(ctx, CheckRank4("filter", filter));
    OP_REQUIRES_OK(ctx, CheckRank4("out_backprop", dy));
    Dims(filter, f);
    Dims(dy, d);
    cpu::ConvGeometry g;
    OP_REQUIRES_OK(ctx, ComputeConvGeometry(attrs_, in, f, &g));
    OutputDims(attrs_, g, o);
    OP_REQUIRES(ctx, std::equal(o, o + 4, d),
                errors::InvalidArgument("out_backprop has shape ", dy.shape().DebugString(),
                                        " but the convolution of input_sizes [", in[0], ", ", in[1],
                                        ", ", in[2], ", ", in[3], "] with filter ",
                                        filter.shape().DebugString(), " has output shape [", o[0],
                                        ", ", o[1], ", ", o[2], ", ", o[3], "]"));
    Tensor* output = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({in[0], in[1], in[2], in[3]}), &output));
    if (output->NumElements() == 0) return;
    const gpu::Conv2DProblem p = ToProblem(g, attrs_.nchw);
    const gpu::DataType T = ToGpuType(attrs_.T), Tacc = ToGpuType(attrs_.Tacc);
    Tensor ws_holder;
    void* ws = nullptr;
    const size_t ws_bytes = gpu::DgradWorkspaceBytes(p, T, Tacc);
    OP_REQUIRES_OK(ctx, Workspace(ctx, ws_bytes, &ws_holder, &ws));
    // Empty dy or filter: the launchers write +0 everywhere (a sum over nothing).
    OP_REQUIRES_OK(ctx, FromGpuStatus(gpu::LaunchDgrad(StreamOf(ctx), p, T, Tacc, filter.data(),
                                                       dy.data(), output->data(), ws, ws_bytes),
                                      "Fp16Conv2DBackpropInput"));
  }

 private:
  ConvAttrs attrs_;
};

class Fp16Conv2DBackpropFilterGpuOp : public OpKernel {
 public:
  explicit Fp16Conv2DBackpropFilterGpuOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ReadConvAttrs(ctx, &attrs_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& input = ctx->input(0);
    const Tensor& sizes = ctx->input(1);
    const Tensor& dy = ctx->input(2);
    int64_t in[4], f[4], d[4], o[4];
    OP_REQUIRES_OK(ctx, CheckRank4("input", input));
    OP_REQUIRES_OK(ctx, SizesFromTensor("filter_sizes", sizes, f));
    OP_REQUIRES_OK(ctx, CheckRank4("out_backprop", dy));
    Dims(input, in);
    Dims(dy, d);
    cpu::ConvGeometry g;
    OP_REQUIRES_OK(ctx, ComputeConvGeometry(attrs_, in, f, &g));
    OutputDims(attrs_, g, o);
    OP_REQUIRES(ctx, std::equal(o, o + 4, d),
                errors::InvalidArgument("out_backprop has shape ", dy.shape().DebugString(),
                                        " but the convolution of input ", input.shape().DebugString(),
                                        " with filter_sizes [", f[0], ", ", f[1], ", ", f[2], ", ",
                                        f[3], "] has output shape [", o[0], ", ", o[1], ", ", o[2],
                                        ", ", o[3], "]"));
    Tensor* output = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({f[0], f[1], f[2], f[3]}), &output));
    if (output->NumElements() == 0) return;
    const gpu::Conv2DProblem p = ToProblem(g, attrs_.nchw);
    const gpu::DataType T = ToGpuType(attrs_.T), Tacc = ToGpuType(attrs_.Tacc);
    Tensor ws_holder;
    void* ws = nullptr;
    const size_t ws_bytes = gpu::WgradWorkspaceBytes(p, T, Tacc);
    OP_REQUIRES_OK(ctx, Workspace(ctx, ws_bytes, &ws_holder, &ws));
    OP_REQUIRES_OK(ctx, FromGpuStatus(gpu::LaunchWgrad(StreamOf(ctx), p, T, Tacc, input.data(),
                                                       dy.data(), output->data(), ws, ws_bytes),
                                      "Fp16Conv2DBackpropFilter"));
  }

 private:
  ConvAttrs attrs_;
};

#define TF_FP16OPS_REGISTER_GPU(T)                                                              \
  REGISTER_KERNEL_BUILDER(                                                                      \
      Name("Fp16Conv2D").Device(tensorflow::DEVICE_GPU).TypeConstraint<T>("T"),                \
      Fp16Conv2DGpuOp);                                                                         \
  REGISTER_KERNEL_BUILDER(Name("Fp16Conv2DBackpropInput")                                       \
                              .Device(tensorflow::DEVICE_GPU)                                   \
                              .TypeConstraint<T>("T")                                           \
                              .HostMemory("input_sizes"),                                       \
                          Fp16Conv2DBackpropInputGpuOp);                                        \
  REGISTER_KERNEL_BUILDER(Name("Fp16Conv2DBackpropFilter")                                      \
                              .Device(tensorflow::DEVICE_GPU)                                   \
                              .TypeConstraint<T>("T")                                           \
                              .HostMemory("filter_sizes"),                                      \
                          Fp16Conv2DBackpropFilterGpuOp);

TF_FP16OPS_REGISTER_GPU(Eigen::half);
TF_FP16OPS_REGISTER_GPU(float);

#undef TF_FP16OPS_REGISTER_GPU

}  // namespace
}  // namespace tf_fp16ops

#endif  // TF_FP16OPS_CUDA
