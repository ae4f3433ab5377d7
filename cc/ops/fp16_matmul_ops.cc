// Op registration and shape function for Fp16MatMul.
#include <string>
#include <vector>

#include "cc/kernels/matmul_shape.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf_fp16ops {
namespace {

using tensorflow::Status;
using tensorflow::shape_inference::DimensionHandle;
using tensorflow::shape_inference::InferenceContext;
using tensorflow::shape_inference::ShapeHandle;
namespace errors = tensorflow::errors;

// The size rules of cc/kernels/matmul_shape.h, those the kernel applies. An operand of unknown
// rank gives an output of unknown rank (after the T/Tacc check).
Status Fp16MatMulShape(InferenceContext* c) {
  tensorflow::DataType t, tacc;
  TF_RETURN_IF_ERROR(c->GetAttr("T", &t));
  TF_RETURN_IF_ERROR(c->GetAttr("Tacc", &tacc));
  if (t == tensorflow::DT_FLOAT && tacc == tensorflow::DT_HALF) {
    return errors::InvalidArgument(
        "Tacc=half requires T=half: a float input would be rounded to half before every product; "
        "cast the inputs to half, or use Tacc=float (got T=float, Tacc=half)");
  }
  bool adj_x, adj_y;
  TF_RETURN_IF_ERROR(c->GetAttr("adj_x", &adj_x));
  TF_RETURN_IF_ERROR(c->GetAttr("adj_y", &adj_y));
  std::vector<int64_t> dims[2];
  const char* names[2] = {"x", "y"};
  bool ranks_known = true;
  for (int k = 0; k < 2; ++k) {
    ShapeHandle s = c->input(k);
    if (!c->RankKnown(s)) {
      ranks_known = false;
      continue;
    }
    if (c->Rank(s) < 2) {
      return errors::InvalidArgument(names[k], " must have rank >= 2, got shape ",
                                     c->DebugString(s));
    }
    for (int i = 0; i < c->Rank(s); ++i) dims[k].push_back(c->Value(c->Dim(s, i)));
  }
  if (!ranks_known) {
    c->set_output(0, c->UnknownShape());
    return Status();
  }
  std::vector<int64_t> out;
  const std::string err = MatMulOutputDims(dims[0], dims[1], adj_x, adj_y, &out);
  if (!err.empty()) return errors::InvalidArgument(err);
  std::vector<DimensionHandle> d;
  for (int64_t v : out) d.push_back(v >= 0 ? c->MakeDim(v) : c->UnknownDim());
  c->set_output(0, c->MakeShape(d));
  return Status();
}

REGISTER_OP("Fp16MatMul")
    .Input("x: T")
    .Input("y: T")
    .Output("output: T")
    .Attr("T: {half, float}")
    .Attr("Tacc: {half, float}")
    .Attr("adj_x: bool = false")
    .Attr("adj_y: bool = false")
    // x [..., M, K] (adj_x: [..., K, M]), y [..., K, N] (adj_y: [..., N, K]), output
    // [broadcast batch..., M, N]: BatchMatMulV2's shapes.
    .SetShapeFn(Fp16MatMulShape)
    .Doc(R"doc(
Batched matrix product (BatchMatMulV2's shapes and batch broadcasting) whose accumulation
precision is Tacc.

Tacc=half (needs T=half): one binary16 accumulator per output starting at +0, each step
acc = round_binary16(x[m, k] * y[k, n] + acc) with one rounding, k ascending; Tacc=float:
binary32 FMAs over k ascending, the result rounded once to T.
)doc");

}  // namespace
}  // namespace tf_fp16ops
