// GPU kernels of Fp16Conv2D, Fp16Conv2DBackpropInput and Fp16Conv2DBackpropFilter: the one
// OpKernel template of cc/kernels/conv_kernel.h with the GPU launch functor below; and of
// Fp16MatMul, whose products run as 1x1 fprops on the same implementation table
// (cc/kernels/gpu/matmul_gpu.h), with the sizes of cc/kernels/matmul_shape.h.
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
#include <vector>

#include "cc/kernels/conv_kernel.h"
#include "cc/kernels/gpu/conv2d_gpu.h"
#include "cc/kernels/gpu/matmul_gpu.h"
#include "cc/kernels/matmul_shape.h"
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

// Scratch memory as a temporary tensor; with `no_retry` an allocation failure returns null at
// once (the caller falls back to an implementation with less workspace), so the allocator must
// not retry or log it.
void* AllocateScratch(OpKernelContext* ctx, size_t bytes, bool no_retry, Tensor* holder,
                      Status* status) {
  tensorflow::AllocationAttributes attrs;
  attrs.retry_on_failure = !no_retry;
  *status = ctx->allocate_temp(tensorflow::DT_UINT8, TensorShape({static_cast<int64_t>(bytes)}),
                               holder, tensorflow::AllocatorAttributes(), attrs);
  return status->ok() ? holder->flat<uint8_t>().data() : nullptr;
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

std::vector<int64_t> DimsOf(const Tensor& t) {
  std::vector<int64_t> d(t.dims());
  for (int i = 0; i < t.dims(); ++i) d[i] = t.dim_size(i);
  return d;
}

// Fp16MatMul on the GPU: the sizes and broadcast offsets of cc/kernels/matmul_shape.h, one plan
// of the table for the whole call (matmul_gpu.h), its workspace a temporary tensor; when that
// cannot be allocated, a second plan limited to the adj_x / adj_y copies (the direct kernel).
template <typename T>
class Fp16MatMulGpuOp : public tensorflow::OpKernel {
 public:
  explicit Fp16MatMulGpuOp(tensorflow::OpKernelConstruction* ctx) : OpKernel(ctx) {
    tensorflow::DataType tacc;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("Tacc", &tacc));
    OP_REQUIRES(
        ctx,
        tacc == tensorflow::DT_FLOAT || tensorflow::DataTypeToEnum<T>::value == tensorflow::DT_HALF,
        errors::InvalidArgument(
            "Tacc=half requires T=half: a float input would be rounded to half before "
            "every product; cast the inputs to half, or use Tacc=float (got T=float, "
            "Tacc=half)"));
    tacc_ = ToGpuType(tacc);
    OP_REQUIRES_OK(ctx, ctx->GetAttr("adj_x", &adj_x_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("adj_y", &adj_y_));
  }

  void Compute(OpKernelContext* ctx) override {
    const char* name = "Fp16MatMul";
    const Tensor& x = ctx->input(0);
    const Tensor& y = ctx->input(1);
    MatMulProblem p;
    const std::string err = ComputeMatMulProblem(DimsOf(x), DimsOf(y), adj_x_, adj_y_, &p);
    OP_REQUIRES(ctx, err.empty(), errors::InvalidArgument(err));
    std::vector<int64_t> out_dims = p.out_batch;
    out_dims.push_back(p.M);
    out_dims.push_back(p.N);
    TensorShape out_shape;
    OP_REQUIRES_OK(ctx, TensorShape::BuildTensorShape(out_dims, &out_shape));
    Tensor* output = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, out_shape, &output));
    if (output->NumElements() == 0) return;
    std::vector<int64_t> x_offsets(p.batch), y_offsets(p.batch);
    for (int64_t b = 0; b < p.batch; ++b) MatMulBatchOffsets(p, b, &x_offsets[b], &y_offsets[b]);
    gpu::MatMulShape s;
    s.batch = p.batch;
    s.M = p.M;
    s.N = p.N;
    s.K = p.K;
    s.x_matrices = p.x_matrices;
    s.y_matrices = p.y_matrices;
    s.adj_x = adj_x_;
    s.adj_y = adj_y_;
    s.x_offsets = x_offsets.data();
    s.y_offsets = y_offsets.data();
    const gpu::DataType t = ToGpuType(tensorflow::DataTypeToEnum<T>::value);
    const cudaStream_t stream = StreamOf(ctx);
    gpu::DeviceInfo device;
    gpu::Status st = gpu::QueryStreamDevice(stream, &device);
    OP_REQUIRES_OK(ctx, FromGpuStatus(st, name));
    st = gpu::CheckDevice(device, gpu::ThisBuild());
    OP_REQUIRES_OK(ctx, FromGpuStatus(st, name));
    gpu::MatMulPlan plan;
    st = gpu::MatMulPlanOn(device, s, t, tacc_, gpu::ConvPath::kAuto, SIZE_MAX, &plan);
    OP_REQUIRES_OK(ctx, FromGpuStatus(st, name));
    Tensor scratch;
    Status alloc;
    void* workspace = nullptr;
    if (plan.workspace_bytes > 0) {
      workspace = AllocateScratch(ctx, plan.workspace_bytes, /*no_retry=*/true, &scratch, &alloc);
      if (workspace == nullptr) {
        st = gpu::MatMulPlanOn(device, s, t, tacc_, gpu::ConvPath::kAuto, plan.transpose_bytes,
                               &plan);
        OP_REQUIRES_OK(ctx, FromGpuStatus(st, name));
        if (plan.workspace_bytes > 0) {
          workspace =
              AllocateScratch(ctx, plan.workspace_bytes, /*no_retry=*/false, &scratch, &alloc);
          OP_REQUIRES_OK(ctx, alloc);
        }
      }
    }
    gpu::ConvPath used = gpu::ConvPath::kAuto;
    st = gpu::MatMulRunPlan(plan, stream, s, t, tacc_, x.data(), y.data(), output->data(),
                            workspace, plan.workspace_bytes, &used);
    if (st.ok()) VLOG(1) << name << " ran " << gpu::ConvPathName(used);
    OP_REQUIRES_OK(ctx, FromGpuStatus(st, name));
  }

 private:
  gpu::DataType tacc_ = gpu::DataType::kFloat;
  bool adj_x_ = false, adj_y_ = false;
};

REGISTER_KERNEL_BUILDER(
    Name("Fp16MatMul").Device(tensorflow::DEVICE_GPU).TypeConstraint<Eigen::half>("T"),
    Fp16MatMulGpuOp<Eigen::half>);
REGISTER_KERNEL_BUILDER(
    Name("Fp16MatMul").Device(tensorflow::DEVICE_GPU).TypeConstraint<float>("T"),
    Fp16MatMulGpuOp<float>);

}  // namespace
}  // namespace tf_fp16ops

#endif  // TF_FP16OPS_CUDA
