// Op registration and shape function for Fp16DepthwiseConv2D.
#include <string>
#include <vector>

#include "cc/kernels/conv_params.h"
#include "cc/kernels/conv_shape.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf_fp16ops {
namespace {

using tensorflow::Status;
using tensorflow::shape_inference::DimensionHandle;
using tensorflow::shape_inference::InferenceContext;
using tensorflow::shape_inference::ShapeHandle;
namespace errors = tensorflow::errors;

// The attrs are read and checked by ReadConvAttrs (cc/kernels/conv_params.h: Fp16Conv2D's checks
// and messages, Tacc=half needing T=half among them), the sizes by the rules of
// cc/kernels/conv_shape.h (DepthwiseOutputDims), those the kernel applies: unknown sizes stay
// unknown, zero sizes give empty outputs, nothing divides by an unknown size.
Status DepthwiseShape(InferenceContext* c) {
  ConvAttrs attrs;
  TF_RETURN_IF_ERROR(ReadConvAttrs(c, &attrs, /*half_acc_of_float=*/true));
  int num_bias = 0;
  TF_RETURN_IF_ERROR(c->GetAttr("num_bias", &num_bias));
  if (num_bias > 1) return errors::InvalidArgument("num_bias must be 0 or 1, got ", num_bias);
  const ConvWindow win = WindowOf(attrs);
  int64_t dims[2][4];
  const char* names[2] = {"input", "filter"};
  for (int k = 0; k < 2; ++k) {
    ShapeHandle s = c->input(k);
    if (c->RankKnown(s) && c->Rank(s) != 4) {
      return errors::InvalidArgument(names[k], " must be 4-D, got shape ", c->DebugString(s));
    }
    TF_RETURN_IF_ERROR(c->WithRank(s, 4, &s));
    for (int i = 0; i < 4; ++i) dims[k][i] = c->Value(c->Dim(s, i));
  }
  int64_t out[4];
  const std::string err = DepthwiseOutputDims(dims[0], dims[1], win, true, out, nullptr, nullptr);
  if (!err.empty()) return errors::InvalidArgument(err);
  if (num_bias == 1) {
    ShapeHandle b = c->input(2);
    if (c->RankKnown(b) && c->Rank(b) != 1) {
      return errors::InvalidArgument("bias must be 1-D, got shape ", c->DebugString(b));
    }
    const int64_t n = c->RankKnown(b) ? c->Value(c->Dim(b, 0)) : -1;
    if (n >= 0 && out[3] >= 0 && n != out[3]) {
      return errors::InvalidArgument("bias must be 1-D with C*M = ", out[3],
                                     " elements (the output channels), got shape ",
                                     c->DebugString(b));
    }
  }
  std::vector<DimensionHandle> d;
  for (int64_t v : out) d.push_back(v >= 0 ? c->MakeDim(v) : c->UnknownDim());
  c->set_output(0, c->MakeShape(d));
  return Status();
}

REGISTER_OP("Fp16DepthwiseConv2D")
    .Input("input: T")
    .Input("filter: T")
    .Input("bias: num_bias * T")
    .Output("output: T")
    .Attr("T: {half, float}")
    .Attr("Tacc: {half, float}")
    .Attr("num_bias: int >= 0 = 0")
    .Attr("strides: list(int)")
    .Attr("padding: {'SAME', 'VALID'}")
    .Attr("data_format: {'NHWC'} = 'NHWC'")
    .Attr("dilations: list(int) = [1, 1, 1, 1]")
    // input [N, H, W, C], filter [KH, KW, C, M], bias (num_bias = 1) [C*M],
    // output [N, P, Q, C*M].
    .SetShapeFn(DepthwiseShape)
    .Doc(R"doc(
Depthwise 2-D convolution (tf.nn.depthwise_conv2d's layouts) whose accumulation precision is Tacc.

Tacc=half: one binary16 accumulator per output starting at +0, each step
acc = round_binary16(x * w + acc), over (kh, kw) ascending; with T=float the input and filter
are first rounded to binary16 (to nearest even, as Cast) and the result is the binary16 sum
(exact in float). Tacc=float: binary32 FMAs, the result rounded once to T. Padded positions are
zeros that take part in the sum. With num_bias = 1 the bias [C*M] is then added as BiasAdd
does (in binary32, the sum rounded to T).
)doc");

}  // namespace
}  // namespace tf_fp16ops
