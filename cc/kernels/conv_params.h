// Attribute parsing and geometry for Fp16Conv2D and its gradients: the one place where the
// attrs and shapes are checked, called by the shape functions (graph build) and the kernels
// (eager mode, or shapes only known at run time).
#ifndef TF_FP16OPS_CC_KERNELS_CONV_PARAMS_H_
#define TF_FP16OPS_CC_KERNELS_CONV_PARAMS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "cc/kernels/conv_shape.h"
#include "cc/kernels/cpu/conv2d_cpu.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/framework/types.h"
#include "tensorflow/core/platform/status.h"

namespace tf_fp16ops {

struct ConvAttrs {
  tensorflow::DataType T = tensorflow::DT_INVALID;
  tensorflow::DataType Tacc = tensorflow::DT_INVALID;
  std::vector<int32_t> strides;    // 4 entries, in data_format order
  std::vector<int32_t> dilations;  // 4 entries, in data_format order
  PaddingKind padding = PaddingKind::kValid;
  std::vector<int64_t> explicit_paddings;  // 8 entries when EXPLICIT, in data_format order
  bool nchw = false;
};

// Reads and validates the attrs; Ctx is OpKernelConstruction or shape_inference::InferenceContext.
// half_acc_of_float: T=float with Tacc=half is accepted (Fp16DepthwiseConv2D, whose contract
// rounds float operands to binary16 first); the Fp16Conv2D family rejects it.
template <typename Ctx>
tensorflow::Status ReadConvAttrs(Ctx* ctx, ConvAttrs* attrs, bool half_acc_of_float = false);

// Checks the attrs that do not depend on shapes (also used by ReadConvAttrs).
tensorflow::Status ValidateConvAttrs(const ConvAttrs& attrs, bool half_acc_of_float = false);

// Logical dims of a 4-D activation tensor in data_format order.
struct Dims4 {
  int64_t n, h, w, c;
};
Dims4 ToNHWC(const ConvAttrs& attrs, const int64_t dims[4]);

// Validates input/filter sizes against the attrs and computes the output geometry (the rules of
// cc/kernels/conv_shape.h). input_dims in data_format order, filter_dims HWIO. Returns
// InvalidArgument naming the bad argument and value; sizes whose element counts overflow int64
// are rejected. check_counts=false skips the element-count checks.
tensorflow::Status ComputeConvGeometry(const ConvAttrs& attrs, const int64_t input_dims[4],
                                       const int64_t filter_dims[4], cpu::ConvGeometry* geometry,
                                       bool check_counts = true);

// The window attrs in H/W terms.
ConvWindow WindowOf(const ConvAttrs& attrs);

// Output dims in data_format order.
void OutputDims(const ConvAttrs& attrs, const cpu::ConvGeometry& g, int64_t out[4]);

// Validated geometry of each op from its input tensors, and the shape of its output; shared by
// the CPU and GPU kernels so that every check and message exists once.
tensorflow::Status FpropGeometry(const ConvAttrs& attrs, const tensorflow::Tensor& input,
                                 const tensorflow::Tensor& filter, cpu::ConvGeometry* g,
                                 tensorflow::TensorShape* output_shape);
tensorflow::Status DgradGeometry(const ConvAttrs& attrs, const tensorflow::Tensor& input_sizes,
                                 const tensorflow::Tensor& filter,
                                 const tensorflow::Tensor& out_backprop, cpu::ConvGeometry* g,
                                 tensorflow::TensorShape* output_shape);
tensorflow::Status WgradGeometry(const ConvAttrs& attrs, const tensorflow::Tensor& input,
                                 const tensorflow::Tensor& filter_sizes,
                                 const tensorflow::Tensor& out_backprop, cpu::ConvGeometry* g,
                                 tensorflow::TensorShape* output_shape);

// Fp16DepthwiseConv2D: input [N, H, W, C], filter [KH, KW, C, M] into the grouped problem of
// DepthwiseConvProblem (cc/kernels/conv_shape.h: groups = C, K = C * M), output [N, P, Q, C * M].
tensorflow::Status DepthwiseGeometry(const ConvAttrs& attrs, const tensorflow::Tensor& input,
                                     const tensorflow::Tensor& filter, ConvProblem* g,
                                     tensorflow::TensorShape* output_shape);

// 'half' / 'float' for messages.
std::string TypeName(tensorflow::DataType t);

}  // namespace tf_fp16ops

#endif  // TF_FP16OPS_CC_KERNELS_CONV_PARAMS_H_
