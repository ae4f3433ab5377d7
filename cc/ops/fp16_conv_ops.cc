// Op registrations and shape functions for Fp16Conv2D and its gradients.
#include <string>
#include <vector>

#include "cc/kernels/conv_params.h"
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf_fp16ops {
namespace {

using tensorflow::Status;
using tensorflow::shape_inference::DimensionHandle;
using tensorflow::shape_inference::InferenceContext;
using tensorflow::shape_inference::ShapeHandle;

// Fills dims[4] from a rank-4 shape; returns false when some dimension is unknown.
// Rank check naming the argument (WithRank's message names only the node).
Status WithRank4(InferenceContext* c, int index, const char* name, ShapeHandle* out) {
  ShapeHandle s = c->input(index);
  if (c->RankKnown(s) && c->Rank(s) != 4) {
    return tensorflow::errors::InvalidArgument(name, " must be 4-D, got shape ", c->DebugString(s));
  }
  return c->WithRank(s, 4, out);
}

bool KnownDims(InferenceContext* c, ShapeHandle s, int64_t dims[4]) {
  bool known = true;
  for (int i = 0; i < 4; ++i) {
    dims[i] = c->Value(c->Dim(s, i));
    known = known && dims[i] >= 0;
  }
  return known;
}

ShapeHandle MakeShape4(InferenceContext* c, const int64_t d[4]) {
  return c->MakeShape({d[0], d[1], d[2], d[3]});
}

Status Fp16Conv2DShape(InferenceContext* c) {
  ConvAttrs attrs;
  TF_RETURN_IF_ERROR(ReadConvAttrs(c, &attrs));
  ShapeHandle input, filter;
  TF_RETURN_IF_ERROR(WithRank4(c, 0, "input", &input));
  TF_RETURN_IF_ERROR(WithRank4(c, 1, "filter", &filter));
  int64_t in[4], f[4];
  const bool in_known = KnownDims(c, input, in);
  const bool f_known = KnownDims(c, filter, f);
  if (in_known && f_known) {
    cpu::ConvGeometry g;
    TF_RETURN_IF_ERROR(ComputeConvGeometry(attrs, in, f, &g));
    int64_t out[4];
    OutputDims(attrs, g, out);
    c->set_output(0, MakeShape4(c, out));
    return Status();
  }
  // Partially known (e.g. an unknown batch or channel count): every output dimension whose
  // inputs are known, with the checks of the known sizes (cc/kernels/conv_shape.h).
  const Dims4 d = ToNHWC(attrs, in);
  const int64_t in_nhwc[4] = {d.n, d.h, d.w, d.c};
  int64_t out[4];
  const std::string err = PartialOutputDims(in_nhwc, f, WindowOf(attrs), out);
  if (!err.empty()) return tensorflow::errors::InvalidArgument(err);
  std::vector<DimensionHandle> dims;
  for (int64_t v : out) dims.push_back(v >= 0 ? c->MakeDim(v) : c->UnknownDim());
  c->set_output(
      0, attrs.nchw ? c->MakeShape({dims[0], dims[3], dims[1], dims[2]}) : c->MakeShape(dims));
  return Status();
}

// Shared by both gradients: the output shape comes from a sizes tensor (input 1 or 0).
Status BackpropShape(InferenceContext* c, int sizes_input, int known_input, bool known_is_filter) {
  ConvAttrs attrs;
  TF_RETURN_IF_ERROR(ReadConvAttrs(c, &attrs));
  ShapeHandle out, sizes_shape, known, dy;
  DimensionHandle sizes_len;  // WithValue writes through its out-pointer: it must not be null
  TF_RETURN_IF_ERROR(c->WithRank(c->input(sizes_input), 1, &sizes_shape));
  TF_RETURN_IF_ERROR(c->WithValue(c->Dim(sizes_shape, 0), 4, &sizes_len));
  TF_RETURN_IF_ERROR(c->MakeShapeFromShapeTensor(sizes_input, &out));
  TF_RETURN_IF_ERROR(c->WithRank(out, 4, &out));
  TF_RETURN_IF_ERROR(WithRank4(c, known_input, known_is_filter ? "filter" : "input", &known));
  TF_RETURN_IF_ERROR(WithRank4(c, 2, "out_backprop", &dy));
  int64_t o[4], k[4], d[4];
  if (KnownDims(c, out, o) && KnownDims(c, known, k) && KnownDims(c, dy, d)) {
    cpu::ConvGeometry g;
    TF_RETURN_IF_ERROR(known_is_filter ? ComputeConvGeometry(attrs, o, k, &g)
                                       : ComputeConvGeometry(attrs, k, o, &g));
    int64_t expect[4];
    OutputDims(attrs, g, expect);
    for (int i = 0; i < 4; ++i) {
      if (expect[i] != d[i]) {
        return tensorflow::errors::InvalidArgument(
            "out_backprop has shape [", d[0], ", ", d[1], ", ", d[2], ", ", d[3],
            "] but the convolution's output has shape [", expect[0], ", ", expect[1], ", ",
            expect[2], ", ", expect[3], "]");
      }
    }
  }
  c->set_output(0, out);
  return Status();
}

}  // namespace
}  // namespace tf_fp16ops

#define FP16_CONV_ATTRS                               \
  Attr("T: {half, float}")                            \
      .Attr("Tacc: {half, float}")                    \
      .Attr("strides: list(int)")                     \
      .Attr("padding: {'SAME', 'VALID', 'EXPLICIT'}") \
      .Attr("explicit_paddings: list(int) = []")      \
      .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'") \
      .Attr("dilations: list(int) = [1, 1, 1, 1]")

REGISTER_OP("Fp16Conv2D")
    .Input("input: T")
    .Input("filter: T")
    .Output("output: T")
    .FP16_CONV_ATTRS.SetShapeFn(tf_fp16ops::Fp16Conv2DShape)
    .Doc(R"doc(
2-D convolution with a selectable accumulation type, like Conv2D plus the attr Tacc.

input: 4-D tensor in data_format order (NHWC or NCHW).
filter: HWIO [KH, KW, Cg, K]; the input's channel count must be a multiple of Cg (grouped
  convolution with C / Cg groups).
output: 4-D tensor in data_format order. Output sizes follow TensorFlow's Conv2D shape function
  with the effective filter size E = (KH - 1) * dilation + 1: VALID (H - E) / stride + 1 (an
  error when H < E), EXPLICIT the same on the padded size, SAME ceil(H / stride). Zero sizes
  give empty outputs or, for an empty sum, zeros, as tf.nn.conv2d. Sizes are int64 and
  checked before any arithmetic can overflow; there is no limit on KH x dilation other than
  padded extents and effective filter sizes up to 2^62 (cc/kernels/conv_shape.h).
T: storage type of input, filter and output.
Tacc: accumulation type. float: binary32 accumulation rounded once to T (on the CPU with
  TensorFlow's thread settings, FTZ/DAZ: binary32 subnormals are flushed to zero, as in
  TensorFlow's own float kernels). half (T=half only): one binary16 accumulator per output,
  acc = round_half(x*w + acc) per step (CUDA __hfma semantics) over (kh, kw, in_channel)
  ascending on the CPU, binary16 subnormals exact; tensor-core MMA order on the GPU
  (docs/numerics.md).
)doc");

REGISTER_OP("Fp16Conv2DBackpropInput")
    .Input("input_sizes: int32")
    .Input("filter: T")
    .Input("out_backprop: T")
    .Output("output: T")
    .FP16_CONV_ATTRS
    .SetShapeFn([](tensorflow::shape_inference::InferenceContext* c) {
      return tf_fp16ops::BackpropShape(c, 0, 1, /*known_is_filter=*/true);
    })
    .Doc(R"doc(
Gradient of Fp16Conv2D with respect to its input (dgrad); attrs as Fp16Conv2D.
CPU reduction order for Tacc=half: (kh, kw, out_channel) ascending.
)doc");

REGISTER_OP("Fp16Conv2DBackpropFilter")
    .Input("input: T")
    .Input("filter_sizes: int32")
    .Input("out_backprop: T")
    .Output("output: T")
    .FP16_CONV_ATTRS
    .SetShapeFn([](tensorflow::shape_inference::InferenceContext* c) {
      return tf_fp16ops::BackpropShape(c, 1, 0, /*known_is_filter=*/false);
    })
    .Doc(R"doc(
Gradient of Fp16Conv2D with respect to its filter (wgrad); attrs as Fp16Conv2D.
CPU reduction order for Tacc=half: (batch, out_row, out_col) ascending.
)doc");

REGISTER_OP("Fp16OpsCpuIsa")
    .Output("isa: string")
    .SetShapeFn(tensorflow::shape_inference::ScalarShape)
    .Doc(R"doc(
The instruction-set path the CPU kernels use in this process: "avx512fp16", "avx512", "avx2"
or "scalar" (chosen once from the CPU's features; TF_FP16OPS_CPU_ISA=avx512|avx2|scalar caps
it).
)doc");
