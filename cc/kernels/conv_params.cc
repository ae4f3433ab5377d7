#include "cc/kernels/conv_params.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf_fp16ops {

using tensorflow::DataType;
using tensorflow::Status;
namespace errors = tensorflow::errors;

std::string TypeName(DataType t) {
  switch (t) {
    case tensorflow::DT_HALF:
      return "half";
    case tensorflow::DT_FLOAT:
      return "float";
    default:
      return tensorflow::DataTypeString(t);
  }
}

namespace {

int SpatialIndex(bool nchw, int i) { return nchw ? 2 + i : 1 + i; }  // i = 0 (H) or 1 (W)
int BatchIndex(bool) { return 0; }
int ChannelIndex(bool nchw) { return nchw ? 1 : 3; }

template <typename V>
std::string ListStr(const std::vector<V>& v) {
  return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
}

Status CheckWindowAttr(const char* name, const std::vector<int32_t>& v, bool nchw) {
  if (v.size() != 4) {
    return errors::InvalidArgument(name,
                                   " must have 4 entries (one per dimension of the input), got ",
                                   v.size(), ": ", ListStr(v));
  }
  if (v[BatchIndex(nchw)] != 1 || v[ChannelIndex(nchw)] != 1) {
    return errors::InvalidArgument(name, " must be 1 in the batch and channel dimensions, got ",
                                   ListStr(v), " with data_format ", nchw ? "NCHW" : "NHWC");
  }
  for (int i = 0; i < 2; ++i) {
    if (v[SpatialIndex(nchw, i)] < 1) {
      return errors::InvalidArgument(name, " must be positive in the spatial dimensions, got ",
                                     ListStr(v));
    }
  }
  return Status();
}

}  // namespace

Status ValidateConvAttrs(const ConvAttrs& a, bool half_acc_of_float) {
  if (a.T != tensorflow::DT_HALF && a.T != tensorflow::DT_FLOAT) {
    return errors::InvalidArgument("T must be half or float, got ", TypeName(a.T));
  }
  if (a.Tacc != tensorflow::DT_HALF && a.Tacc != tensorflow::DT_FLOAT) {
    return errors::InvalidArgument("Tacc must be half or float, got ", TypeName(a.Tacc));
  }
  if (a.T == tensorflow::DT_FLOAT && a.Tacc == tensorflow::DT_HALF && !half_acc_of_float) {
    return errors::InvalidArgument(
        "Tacc=half requires T=half: a float input would be rounded to half before every product; "
        "cast the inputs to half, or use Tacc=float (got T=float, Tacc=half)");
  }
  TF_RETURN_IF_ERROR(CheckWindowAttr("strides", a.strides, a.nchw));
  TF_RETURN_IF_ERROR(CheckWindowAttr("dilations", a.dilations, a.nchw));
  if (a.padding == PaddingKind::kExplicit) {
    if (a.explicit_paddings.size() != 8) {
      return errors::InvalidArgument(
          "explicit_paddings must have 8 entries (before/after per dimension) "
          "when padding is EXPLICIT, got ",
          a.explicit_paddings.size(), ": ", ListStr(a.explicit_paddings));
    }
    for (int64_t v : a.explicit_paddings) {
      if (v < 0) {
        return errors::InvalidArgument("explicit_paddings must be non-negative, got ",
                                       ListStr(a.explicit_paddings));
      }
      if (v > std::numeric_limits<int32_t>::max()) {
        return errors::InvalidArgument("explicit_paddings entry ", v, " is too large");
      }
    }
    const int b = BatchIndex(a.nchw), c = ChannelIndex(a.nchw);
    if (a.explicit_paddings[2 * b] || a.explicit_paddings[2 * b + 1] ||
        a.explicit_paddings[2 * c] || a.explicit_paddings[2 * c + 1]) {
      return errors::InvalidArgument(
          "explicit_paddings must be 0 in the batch and channel dimensions, got ",
          ListStr(a.explicit_paddings));
    }
  } else if (!a.explicit_paddings.empty()) {
    return errors::InvalidArgument(
        "explicit_paddings must be empty unless padding is EXPLICIT, got ",
        ListStr(a.explicit_paddings));
  }
  return Status();
}

namespace {

// Whether the node has the attr (Fp16DepthwiseConv2D has no explicit_paddings).
bool HasAttr(tensorflow::OpKernelConstruction* ctx, const char* name) { return ctx->HasAttr(name); }
bool HasAttr(tensorflow::shape_inference::InferenceContext* ctx, const char* name) {
  return ctx->GetAttr(name) != nullptr;
}

}  // namespace

template <typename Ctx>
Status ReadConvAttrs(Ctx* ctx, ConvAttrs* a, bool half_acc_of_float) {
  TF_RETURN_IF_ERROR(ctx->GetAttr("T", &a->T));
  TF_RETURN_IF_ERROR(ctx->GetAttr("Tacc", &a->Tacc));
  TF_RETURN_IF_ERROR(ctx->GetAttr("strides", &a->strides));
  TF_RETURN_IF_ERROR(ctx->GetAttr("dilations", &a->dilations));
  std::string padding, data_format;
  TF_RETURN_IF_ERROR(ctx->GetAttr("padding", &padding));
  a->explicit_paddings.clear();
  if (HasAttr(ctx, "explicit_paddings")) {
    TF_RETURN_IF_ERROR(ctx->GetAttr("explicit_paddings", &a->explicit_paddings));
  }
  TF_RETURN_IF_ERROR(ctx->GetAttr("data_format", &data_format));
  if (padding == "SAME") {
    a->padding = PaddingKind::kSame;
  } else if (padding == "VALID") {
    a->padding = PaddingKind::kValid;
  } else if (padding == "EXPLICIT") {
    a->padding = PaddingKind::kExplicit;
  } else {
    return errors::InvalidArgument("padding must be SAME, VALID or EXPLICIT, got '", padding, "'");
  }
  if (data_format != "NHWC" && data_format != "NCHW") {
    return errors::InvalidArgument("data_format must be NHWC or NCHW, got '", data_format, "'");
  }
  a->nchw = data_format == "NCHW";
  return ValidateConvAttrs(*a, half_acc_of_float);
}

template Status ReadConvAttrs(tensorflow::OpKernelConstruction*, ConvAttrs*, bool);
template Status ReadConvAttrs(tensorflow::shape_inference::InferenceContext*, ConvAttrs*, bool);

Dims4 ToNHWC(const ConvAttrs& a, const int64_t d[4]) {
  return a.nchw ? Dims4{d[0], d[2], d[3], d[1]} : Dims4{d[0], d[1], d[2], d[3]};
}

ConvWindow WindowOf(const ConvAttrs& a) {
  const int hi = SpatialIndex(a.nchw, 0), wi = SpatialIndex(a.nchw, 1);
  ConvWindow w;
  w.stride_h = a.strides[hi];
  w.stride_w = a.strides[wi];
  w.dilation_h = a.dilations[hi];
  w.dilation_w = a.dilations[wi];
  w.padding = a.padding;
  if (a.padding == PaddingKind::kExplicit) {
    w.pad_top = a.explicit_paddings[2 * hi];
    w.pad_bottom = a.explicit_paddings[2 * hi + 1];
    w.pad_left = a.explicit_paddings[2 * wi];
    w.pad_right = a.explicit_paddings[2 * wi + 1];
  }
  return w;
}

Status ComputeConvGeometry(const ConvAttrs& a, const int64_t input_dims[4],
                           const int64_t filter_dims[4], cpu::ConvGeometry* g, bool check_counts) {
  const Dims4 d = ToNHWC(a, input_dims);
  const int64_t in[4] = {d.n, d.h, d.w, d.c};
  const std::string err = ComputeConvProblem(in, filter_dims, WindowOf(a), a.nchw, check_counts, g);
  if (!err.empty()) return errors::InvalidArgument(err);
  return Status();
}

void OutputDims(const ConvAttrs& a, const cpu::ConvGeometry& g, int64_t out[4]) {
  if (a.nchw) {
    out[0] = g.N, out[1] = g.K, out[2] = g.P, out[3] = g.Q;
  } else {
    out[0] = g.N, out[1] = g.P, out[2] = g.Q, out[3] = g.K;
  }
}

namespace {

Status CheckRank4(const char* name, const tensorflow::Tensor& t) {
  if (t.dims() != 4) {
    return errors::InvalidArgument(name, " must be 4-D, got shape ", t.shape().DebugString());
  }
  return Status();
}

void DimsOf(const tensorflow::Tensor& t, int64_t d[4]) {
  for (int i = 0; i < 4; ++i) d[i] = t.dim_size(i);
}

// input_sizes / filter_sizes: host-memory int32 [4] (HostMemory in the kernel registrations).
Status SizesOf(const char* name, const tensorflow::Tensor& t, int64_t d[4]) {
  if (t.dtype() != tensorflow::DT_INT32 || t.dims() != 1 || t.NumElements() != 4) {
    return errors::InvalidArgument(name, " must be a 1-D tensor of 4 int32 values, got ",
                                   tensorflow::DataTypeString(t.dtype()), " of shape ",
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

std::string Dims4Str(const int64_t d[4]) {
  return absl::StrCat("[", absl::StrJoin(d, d + 4, ", "), "]");
}

Status CheckOutBackprop(const ConvAttrs& a, const cpu::ConvGeometry& g,
                        const tensorflow::Tensor& dy, const std::string& what) {
  int64_t o[4], d[4];
  OutputDims(a, g, o);
  DimsOf(dy, d);
  if (!std::equal(o, o + 4, d)) {
    return errors::InvalidArgument("out_backprop has shape ", dy.shape().DebugString(),
                                   " but the convolution of ", what, " has output shape ",
                                   Dims4Str(o));
  }
  return Status();
}

}  // namespace

Status FpropGeometry(const ConvAttrs& a, const tensorflow::Tensor& input,
                     const tensorflow::Tensor& filter, cpu::ConvGeometry* g,
                     tensorflow::TensorShape* output_shape) {
  TF_RETURN_IF_ERROR(CheckRank4("input", input));
  TF_RETURN_IF_ERROR(CheckRank4("filter", filter));
  int64_t in[4], f[4], o[4];
  DimsOf(input, in);
  DimsOf(filter, f);
  TF_RETURN_IF_ERROR(ComputeConvGeometry(a, in, f, g));
  OutputDims(a, *g, o);
  return tensorflow::TensorShape::BuildTensorShape({o[0], o[1], o[2], o[3]}, output_shape);
}

Status DepthwiseGeometry(const ConvAttrs& a, const tensorflow::Tensor& input,
                         const tensorflow::Tensor& filter, ConvProblem* g,
                         tensorflow::TensorShape* output_shape) {
  TF_RETURN_IF_ERROR(CheckRank4("input", input));
  TF_RETURN_IF_ERROR(CheckRank4("filter", filter));
  int64_t in[4], f[4];
  DimsOf(input, in);
  DimsOf(filter, f);
  const std::string err = DepthwiseConvProblem(in, f, WindowOf(a), true, g);
  if (!err.empty()) return errors::InvalidArgument(err);
  return tensorflow::TensorShape::BuildTensorShape({g->N, g->P, g->Q, g->K}, output_shape);
}

Status DgradGeometry(const ConvAttrs& a, const tensorflow::Tensor& input_sizes,
                     const tensorflow::Tensor& filter, const tensorflow::Tensor& out_backprop,
                     cpu::ConvGeometry* g, tensorflow::TensorShape* output_shape) {
  int64_t in[4], f[4];
  TF_RETURN_IF_ERROR(SizesOf("input_sizes", input_sizes, in));
  TF_RETURN_IF_ERROR(CheckRank4("filter", filter));
  TF_RETURN_IF_ERROR(CheckRank4("out_backprop", out_backprop));
  DimsOf(filter, f);
  TF_RETURN_IF_ERROR(ComputeConvGeometry(a, in, f, g));
  TF_RETURN_IF_ERROR(CheckOutBackprop(
      a, *g, out_backprop,
      absl::StrCat("input_sizes ", Dims4Str(in), " with filter ", filter.shape().DebugString())));
  return tensorflow::TensorShape::BuildTensorShape({in[0], in[1], in[2], in[3]}, output_shape);
}

Status WgradGeometry(const ConvAttrs& a, const tensorflow::Tensor& input,
                     const tensorflow::Tensor& filter_sizes, const tensorflow::Tensor& out_backprop,
                     cpu::ConvGeometry* g, tensorflow::TensorShape* output_shape) {
  int64_t in[4], f[4];
  TF_RETURN_IF_ERROR(CheckRank4("input", input));
  TF_RETURN_IF_ERROR(SizesOf("filter_sizes", filter_sizes, f));
  TF_RETURN_IF_ERROR(CheckRank4("out_backprop", out_backprop));
  DimsOf(input, in);
  TF_RETURN_IF_ERROR(ComputeConvGeometry(a, in, f, g));
  TF_RETURN_IF_ERROR(CheckOutBackprop(
      a, *g, out_backprop,
      absl::StrCat("input ", input.shape().DebugString(), " with filter_sizes ", Dims4Str(f))));
  return tensorflow::TensorShape::BuildTensorShape({f[0], f[1], f[2], f[3]}, output_shape);
}

}  // namespace tf_fp16ops
