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
#include "tensorflow/core/framework/allocator.h"
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
    case gpu::StatusCode::kResourceExhausted:
      return errors::ResourceExhausted(op, ": ", s.message);
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
    const char* name = kPass == Pass::kFprop   ? "Fp16Conv2D"
                       : kPass == Pass::kDgrad ? "Fp16Conv2DBackpropInput"
                                               : "Fp16Conv2DBackpropFilter";
    const gpu::DataType t = ToGpuType(attrs.T), tacc = ToGpuType(attrs.Tacc);
    const cudaStream_t stream = StreamOf(ctx);
    gpu::DeviceInfo device;  // the stream's device, queried once per device
    gpu::Status st = gpu::QueryStreamDevice(stream, &device);
    if (!st.ok()) return FromGpuStatus(st, name);
    // The workspace is a temporary tensor; an allocation failure falls back to an
    // implementation without workspace (LaunchWithAllocator), as TensorFlow's
    // AllocateScratchOrFallback does, so the allocator must not retry or log it.
    struct Scratch {
      OpKernelContext* ctx;
      Tensor holder;
    } scratch{ctx, Tensor()};
    const gpu::WorkspaceAllocator allocator{
        [](void* context, size_t bytes) -> void* {
          auto* s = static_cast<Scratch*>(context);
          tensorflow::AllocationAttributes no_retry;
          no_retry.retry_on_failure = false;
          const Status got = s->ctx->allocate_temp(
              tensorflow::DT_UINT8, TensorShape({static_cast<int64_t>(bytes)}), &s->holder,
              tensorflow::AllocatorAttributes(), no_retry);
          return got.ok() ? s->holder.template flat<uint8_t>().data() : nullptr;
        },
        &scratch};
    gpu::ConvPath used = gpu::ConvPath::kAuto;
    st = gpu::LaunchWithAllocator(device, kPass, stream, g, t, tacc, a.data(), b.data(),
                                  output->data(), gpu::ConvPath::kAuto, allocator, &used, nullptr);
    if (st.ok()) VLOG(1) << name << " ran " << gpu::ConvPathName(used);
    return FromGpuStatus(st, name);
  }
};

namespace {

TF_FP16OPS_REGISTER_CONV_KERNELS(tensorflow::DEVICE_GPU, GpuDevice, Eigen::half);
TF_FP16OPS_REGISTER_CONV_KERNELS(tensorflow::DEVICE_GPU, GpuDevice, float);

}  // namespace
}  // namespace tf_fp16ops

#endif  // TF_FP16OPS_CUDA
