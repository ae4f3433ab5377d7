// CPU OpKernel of Fp16MatMul: validates the shapes with the rules of cc/kernels/matmul_shape.h
// (those of the shape function). With T=half and Tacc=half on AVX512-FP16 the binary16 operands
// go straight to cc/kernels/cpu/matmul_fp16.h; otherwise it brings the operands into float buffers
// in the functor's layouts (x as [matrices, M, K], y as [matrices, K, N]; binary16 -> binary32 is
// exact, adj_x / adj_y transpose here), runs cc/kernels/cpu/matmul_cpu.h on TensorFlow's CPU worker
// threads and stores the result in T (binary32 -> binary16 rounds to nearest even; with Tacc=half
// the values are already binary16).
#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "cc/kernels/cpu/matmul_cpu.h"
#include "cc/kernels/cpu/matmul_fp16.h"
#include "cc/kernels/matmul_shape.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/util/work_sharder.h"

namespace tf_fp16ops {
namespace {

using tensorflow::DT_FLOAT;
using tensorflow::DT_HALF;
using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Status;
using tensorflow::Tensor;
using tensorflow::TensorShape;
namespace errors = tensorflow::errors;

std::vector<int64_t> DimsOf(const Tensor& t) {
  std::vector<int64_t> d(t.dims());
  for (int i = 0; i < t.dims(); ++i) d[i] = t.dim_size(i);
  return d;
}

// Float copy of `t` as `matrices` row-major [rows, cols] matrices; `transpose` reads each stored
// [cols, rows] matrix transposed. T=float without transpose uses the tensor's own buffer.
template <typename T>
Status ToFloatMatrices(OpKernelContext* ctx, const Tensor& t, int64_t matrices, int64_t rows,
                       int64_t cols, bool transpose, Tensor* tmp, const float** data) {
  if (std::is_same<T, float>::value && !transpose) {
    *data = reinterpret_cast<const float*>(t.flat<T>().data());
    return Status();
  }
  TF_RETURN_IF_ERROR(ctx->allocate_temp(DT_FLOAT, TensorShape({t.NumElements()}), tmp));
  const T* src = t.flat<T>().data();
  float* dst = tmp->flat<float>().data();
  if (!transpose) {
    for (int64_t i = 0; i < t.NumElements(); ++i) dst[i] = static_cast<float>(src[i]);
  } else {
    for (int64_t b = 0; b < matrices; ++b) {
      const T* s = src + b * rows * cols;
      float* d = dst + b * rows * cols;
      for (int64_t c = 0; c < cols; ++c)
        for (int64_t r = 0; r < rows; ++r) d[r * cols + c] = static_cast<float>(s[c * rows + r]);
    }
  }
  *data = dst;
  return Status();
}

template <typename T>
class Fp16MatMulOp : public OpKernel {
 public:
  explicit Fp16MatMulOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    tensorflow::DataType tacc;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("Tacc", &tacc));
    OP_REQUIRES(ctx, tacc == DT_FLOAT || tensorflow::DataTypeToEnum<T>::value == DT_HALF,
                errors::InvalidArgument(
                    "Tacc=half requires T=half: a float input would be rounded to half before "
                    "every product; cast the inputs to half, or use Tacc=float (got T=float, "
                    "Tacc=half)"));
    half_ = tacc == DT_HALF;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("adj_x", &adj_x_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("adj_y", &adj_y_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& y = ctx->input(1);
    MatMulProblem p;
    const std::string err = ComputeMatMulProblem(DimsOf(x), DimsOf(y), adj_x_, adj_y_, &p);
    OP_REQUIRES(ctx, err.empty(), errors::InvalidArgument(err));
    TensorShape out_shape;
    std::vector<int64_t> out_dims = p.out_batch;
    out_dims.push_back(p.M);
    out_dims.push_back(p.N);
    OP_REQUIRES_OK(ctx, TensorShape::BuildTensorShape(out_dims, &out_shape));
    Tensor* output = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, out_shape, &output));
    if (output->NumElements() == 0) return;
    if (p.K == 0) {  // empty sums: +0, written in T without a binary32 scratch
      std::fill_n(output->flat<T>().data(), output->NumElements(), static_cast<T>(0.0f));
      return;
    }
    auto* workers = ctx->device()->tensorflow_cpu_worker_threads();
    cpu::MatMulParallelFor parallel_for =
        [workers](int64_t total, int64_t cost, const std::function<void(int64_t, int64_t)>& fn) {
          tensorflow::Shard(workers->num_threads, workers->workers, total, cost, fn);
        };
    if (std::is_same<T, Eigen::half>::value && half_ &&
        cpu::MatMulHalfNative(p, reinterpret_cast<const uint16_t*>(x.flat<T>().data()), adj_x_,
                              reinterpret_cast<const uint16_t*>(y.flat<T>().data()), adj_y_,
                              reinterpret_cast<uint16_t*>(output->flat<T>().data()),
                              parallel_for)) {
      return;
    }
    Tensor at, bt, yt;
    const float *a = nullptr, *b = nullptr;
    float* out = nullptr;
    OP_REQUIRES_OK(ctx, ToFloatMatrices<T>(ctx, x, p.x_matrices, p.M, p.K, adj_x_, &at, &a));
    OP_REQUIRES_OK(ctx, ToFloatMatrices<T>(ctx, y, p.y_matrices, p.K, p.N, adj_y_, &bt, &b));
    if (std::is_same<T, float>::value) {
      out = reinterpret_cast<float*>(output->flat<T>().data());
    } else {
      OP_REQUIRES_OK(ctx, ctx->allocate_temp(DT_FLOAT, TensorShape({output->NumElements()}), &yt));
      out = yt.flat<float>().data();
    }
    cpu::MatMul(p, half_ ? cpu::Accumulation::kHalf : cpu::Accumulation::kFloat, a, b, out,
                parallel_for);
    if (!std::is_same<T, float>::value) {
      T* dst = output->flat<T>().data();
      for (int64_t i = 0; i < output->NumElements(); ++i) dst[i] = static_cast<T>(out[i]);
    }
  }

 private:
  bool half_ = false, adj_x_ = false, adj_y_ = false;
};

REGISTER_KERNEL_BUILDER(
    Name("Fp16MatMul").Device(tensorflow::DEVICE_CPU).TypeConstraint<Eigen::half>("T"),
    Fp16MatMulOp<Eigen::half>);
REGISTER_KERNEL_BUILDER(
    Name("Fp16MatMul").Device(tensorflow::DEVICE_CPU).TypeConstraint<float>("T"),
    Fp16MatMulOp<float>);

}  // namespace
}  // namespace tf_fp16ops
