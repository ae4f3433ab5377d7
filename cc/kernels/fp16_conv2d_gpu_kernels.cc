// GPU kernels of Fp16Conv2D, Fp16Conv2DBackpropInput and Fp16Conv2DBackpropFilter: the one
// OpKernel template of cc/kernels/conv_kernel.h with the GPU launch functor below.
//
// Compiled by the host compiler with TensorFlow headers only (no CUDA headers): the work is
// enqueued by cc/kernels/gpu/conv2d_gpu.h's Launch (built by clang against CUDA 12.5 and linked
// with TensorFlow's libcudart.so.12, or by nvcc 13 with the static runtime) on the op's CUDA
// stream, with scratch memory from TensorFlow's allocator sized by WorkspaceBytes (the workspace
// of the implementation the table selects). Launch first checks that this build can serve the
// device: a driver of an older CUDA major version than the runtime (or, for a GPU served only by
// PTX, older than the runtime) gives FailedPrecondition, a compute capability without SASS or
// PTX in the build gives Unimplemented, both naming what was found, what is needed and that
// pinning the op to the CPU works. Bad sizes give
// InvalidArgument, CUDA/CUTLASS failures Internal, with the launcher's message. Built only with
// --config=cuda (TF_FP16OPS_CUDA defined).
#if TF_FP16OPS_CUDA

#include <string>

#include "cc/kernels/conv_kernel.h"
#include "cc/kernels/gpu/conv2d_gpu.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "xla/stream_executor/stream.h"

namespace tf_fp16ops {
namespace {

using tensorflow::OpKernelContext;
using tensorflow::Status;
using tensorflow::Tensor;
using tensorflow::TensorShape;
namespace errors = tensorflow::errors;

gpu::DataType ToGpuType(tensorflow::DataType t) {
  return t == tensorflow::DT_HALF ? gpu::DataType::kHalf : gpu::DataType::kFloat;
}

Status FromGpuStatus(const gpu::Status& s, const std::string& op) {
  switch (s.code) {
    case gpu::StatusCode::kOk:
      return Status();
    case gpu::StatusCode::kInvalidArgument:
      return errors::InvalidArgument(op, ": ", s.message);
    case gpu::StatusCode::kFailedPrecondition:
      return errors::FailedPrecondition(op, ": ", s.message);
    case gpu::StatusCode::kUnimplemented:
      return errors::Unimplemented(op, ": ", s.message);
    default:
      return errors::Internal(op, " GPU launch failed: ", s.message);
  }
}

cudaStream_t StreamOf(OpKernelContext* ctx) {
  return reinterpret_cast<cudaStream_t>(
      ctx->op_device_context()->stream()->platform_specific_handle().stream);
}

}  // namespace

template <typename T, Pass kPass>
struct ConvLaunch<GpuDevice, T, kPass> {
  static Status Run(OpKernelContext* ctx, const ConvAttrs& attrs, const ConvProblem& g,
                    const Tensor& a, const Tensor& b, Tensor* output) {
    const gpu::DataType t = ToGpuType(attrs.T), tacc = ToGpuType(attrs.Tacc);
    const size_t bytes = gpu::WorkspaceBytes(kPass, g, t, tacc);
    Tensor holder;
    void* ws = nullptr;
    if (bytes > 0) {
      TF_RETURN_IF_ERROR(ctx->allocate_temp(tensorflow::DT_UINT8,
                                            TensorShape({static_cast<int64_t>(bytes)}), &holder));
      ws = holder.flat<uint8_t>().data();
    }
    const gpu::Status st = gpu::Launch(kPass, StreamOf(ctx), g, t, tacc, a.data(), b.data(),
                                       output->data(), ws, bytes);
    return FromGpuStatus(st, kPass == Pass::kFprop   ? "Fp16Conv2D"
                             : kPass == Pass::kDgrad ? "Fp16Conv2DBackpropInput"
                                                     : "Fp16Conv2DBackpropFilter");
  }
};

namespace {

#define TF_FP16OPS_REGISTER_GPU(T)                                              \
  REGISTER_KERNEL_BUILDER(                                                      \
      Name("Fp16Conv2D").Device(tensorflow::DEVICE_GPU).TypeConstraint<T>("T"), \
      (Fp16ConvOp<GpuDevice, T, Pass::kFprop>));                                \
  REGISTER_KERNEL_BUILDER(Name("Fp16Conv2DBackpropInput")                       \
                              .Device(tensorflow::DEVICE_GPU)                   \
                              .TypeConstraint<T>("T")                           \
                              .HostMemory("input_sizes"),                       \
                          (Fp16ConvOp<GpuDevice, T, Pass::kDgrad>));            \
  REGISTER_KERNEL_BUILDER(Name("Fp16Conv2DBackpropFilter")                      \
                              .Device(tensorflow::DEVICE_GPU)                   \
                              .TypeConstraint<T>("T")                           \
                              .HostMemory("filter_sizes"),                      \
                          (Fp16ConvOp<GpuDevice, T, Pass::kWgrad>));

TF_FP16OPS_REGISTER_GPU(Eigen::half);
TF_FP16OPS_REGISTER_GPU(float);

#undef TF_FP16OPS_REGISTER_GPU

}  // namespace
}  // namespace tf_fp16ops

#endif  // TF_FP16OPS_CUDA
