// Op registration and shape function for Fp16DepthwiseConv2D.
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf_fp16ops {
namespace {

using tensorflow::shape_inference::InferenceContext;

REGISTER_OP("Fp16DepthwiseConv2D")
    .Input("input: T")
    .Input("filter: T")
    .Output("output: T")
    .Attr("T: {half, float}")
    .Attr("Tacc: {half, float}")
    .Attr("strides: list(int)")
    .Attr("padding: {'SAME', 'VALID'}")
    .Attr("data_format: {'NHWC'} = 'NHWC'")
    .Attr("dilations: list(int) = [1, 1, 1, 1]")
    // The shape rules of tf.nn.depthwise_conv2d (DepthwiseConv2dNative): input [N, H, W, C],
    // filter [KH, KW, C, M], output [N, P, Q, C*M].
    .SetShapeFn([](InferenceContext* c) {
      return tensorflow::shape_inference::DepthwiseConv2DNativeShape(c);
    })
    .Doc(R"doc(
Depthwise 2-D convolution (tf.nn.depthwise_conv2d's layouts) whose accumulation precision is Tacc.

Tacc=half (needs T=half): one binary16 accumulator per output starting at +0, each step
acc = round_binary16(x * w + acc), over (kh, kw) ascending; Tacc=float: binary32 FMAs, the
result rounded once to T. Padded positions are zeros that take part in the sum.
)doc");

}  // namespace
}  // namespace tf_fp16ops
