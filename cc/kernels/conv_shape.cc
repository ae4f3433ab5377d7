#include "cc/kernels/conv_shape.h"

#include <sstream>

namespace tf_fp16ops {
namespace {

using Wide = __int128;  // products and sums of int64 sizes fit without overflow

template <typename... Args>
std::string Cat(const Args&... args) {
  std::ostringstream s;
  (s << ... << args);
  return s.str();
}

std::string Dims(const int64_t d[4]) {
  return Cat("[", d[0], ", ", d[1], ", ", d[2], ", ", d[3], "]");
}

std::string CheckElements(const char* what, const int64_t d[4]) {
  int64_t total = 1;
  for (int i = 0; i < 4; ++i) {
    if (__builtin_mul_overflow(total, d[i], &total)) {
      return Cat(what, " has too many elements (", Dims(d),
                 "): the product of its sizes overflows int64");
    }
  }
  return "";
}

}  // namespace

std::string WindowedOutputSize(const char* dim, int64_t in, int64_t k, int64_t stride,
                               int64_t dilation, PaddingKind padding, int64_t pad_before,
                               int64_t pad_after, int64_t* out, int64_t* pad_top) {
  const Wide eff = (Wide(k) - 1) * dilation + 1;
  if (eff > kMaxExtent) {
    return Cat("filter ", dim, " ", k, " with dilation ", dilation,
               " has an effective size above 2^62");
  }
  Wide o = 0, before = 0, padded = in;
  switch (padding) {
    case PaddingKind::kSame: {
      o = (Wide(in) + stride - 1) / stride;
      const Wide needed = (o - 1) * stride + eff - in;
      before = needed > 0 ? needed / 2 : 0;
      padded = needed > 0 ? in + needed : in;
      break;
    }
    case PaddingKind::kValid:
    case PaddingKind::kExplicit: {
      if (padding == PaddingKind::kExplicit) {
        before = pad_before;
        padded = Wide(in) + pad_before + pad_after;
      }
      if (padded < eff) {
        const std::string size =
            padding == PaddingKind::kExplicit
                ? Cat(in, " plus explicit padding (", static_cast<int64_t>(padded), ")")
                : Cat(in);
        return Cat("output ", dim, " would be below 1: input ", dim, " ", size,
                   " is smaller than the effective filter ", dim, " ", static_cast<int64_t>(eff),
                   " (filter ", k, ", dilation ", dilation, ")");
      }
      o = (padded - eff) / stride + 1;
      break;
    }
  }
  if (padded > kMaxExtent) {
    return Cat("padded input ", dim, " (input ", in, " plus padding) is above 2^62");
  }
  *out = static_cast<int64_t>(o);
  *pad_top = static_cast<int64_t>(before);
  return "";
}

std::string CheckChannels(int64_t C, int64_t Cg, int64_t K, int64_t* groups) {
  *groups = -1;
  if (Cg == 0) return "filter in_channels (dimension 2) must be positive, got 0";
  if (C >= 0 && Cg > 0) {
    if (C % Cg != 0) {
      return Cat("input channels (", C, ") must be a multiple of the filter's in_channels (", Cg,
                 ")");
    }
    if (C == 0) return Cat("input has 0 channels; the filter expects ", Cg);
    *groups = C / Cg;
    if (K >= 0 && K % *groups != 0) {
      return Cat("filter out_channels (", K, ") must be a multiple of the number of groups (",
                 *groups, " = input channels ", C, " / filter in_channels ", Cg, ")");
    }
  }
  return "";
}

std::string ComputeConvProblem(const int64_t in[4], const int64_t f[4], const ConvWindow& win,
                               bool nchw, bool check_counts, ConvProblem* p) {
  for (int i = 0; i < 4; ++i) {
    if (in[i] < 0 || f[i] < 0) {
      return Cat("sizes must be non-negative, got input ", Dims(in), " (N, H, W, C) and filter ",
                 Dims(f));
    }
  }
  if (f[0] < 1 || f[1] < 1 || f[2] < 1) {
    return Cat(
        "filter sizes [KH, KW, in_channels, out_channels] must be positive in the first "
        "three dimensions, got ",
        Dims(f));
  }
  int64_t groups = 0;
  std::string err = CheckChannels(in[3], f[2], f[3], &groups);
  if (!err.empty()) return Cat(err, ": filter shape ", Dims(f), ", input channels ", in[3]);
  if (check_counts) {
    if (!(err = CheckElements("input", in)).empty()) return err;
    if (!(err = CheckElements("filter", f)).empty()) return err;
  }
  ConvProblem g;
  g.N = in[0], g.H = in[1], g.W = in[2], g.C = in[3];
  g.KH = f[0], g.KW = f[1], g.Cg = f[2], g.K = f[3];
  g.groups = groups;
  g.stride_h = win.stride_h, g.stride_w = win.stride_w;
  g.dilation_h = win.dilation_h, g.dilation_w = win.dilation_w;
  g.nchw = nchw;
  err = WindowedOutputSize("height", g.H, g.KH, g.stride_h, g.dilation_h, win.padding, win.pad_top,
                           win.pad_bottom, &g.P, &g.pad_top);
  if (!err.empty()) return err;
  err = WindowedOutputSize("width", g.W, g.KW, g.stride_w, g.dilation_w, win.padding, win.pad_left,
                           win.pad_right, &g.Q, &g.pad_left);
  if (!err.empty()) return err;
  if (check_counts) {
    const int64_t o[4] = {g.N, g.P, g.Q, g.K};
    if (!(err = CheckElements("output", o)).empty()) return err;
  }
  *p = g;
  return "";
}

std::string PartialOutputDims(const int64_t in[4], const int64_t f[4], const ConvWindow& win,
                              int64_t out[4]) {
  if (f[0] == 0 || f[1] == 0) {
    return Cat(
        "filter sizes [KH, KW, in_channels, out_channels] must be positive in the first "
        "three dimensions, got ",
        Dims(f));
  }
  int64_t groups = 0;
  std::string err = CheckChannels(in[3], f[2], f[3], &groups);
  if (!err.empty()) return Cat(err, ": filter shape ", Dims(f), ", input channels ", in[3]);
  out[0] = in[0];
  out[3] = f[3];
  out[1] = out[2] = -1;
  int64_t pad = 0;
  if (in[1] >= 0 && f[0] >= 1) {
    err = WindowedOutputSize("height", in[1], f[0], win.stride_h, win.dilation_h, win.padding,
                             win.pad_top, win.pad_bottom, &out[1], &pad);
    if (!err.empty()) return err;
  }
  if (in[2] >= 0 && f[1] >= 1) {
    err = WindowedOutputSize("width", in[2], f[1], win.stride_w, win.dilation_w, win.padding,
                             win.pad_left, win.pad_right, &out[2], &pad);
    if (!err.empty()) return err;
  }
  return "";
}

std::string DepthwiseOutputDims(const int64_t in[4], const int64_t f[4], const ConvWindow& win,
                                bool check_counts, int64_t out[4], int64_t* pad_top,
                                int64_t* pad_left) {
  if (f[0] == 0 || f[1] == 0) {
    return Cat(
        "filter sizes [KH, KW, in_channels, channel_multiplier] must be positive in the "
        "first two dimensions, got ",
        Dims(f));
  }
  if (in[3] >= 0 && f[2] >= 0 && in[3] != f[2]) {
    return Cat("filter in_channels (dimension 2, ", f[2], ") must equal the input channels (",
               in[3], "): filter shape ", Dims(f));
  }
  const int64_t C = in[3] >= 0 ? in[3] : f[2], M = f[3];
  out[0] = in[0];
  out[1] = out[2] = out[3] = -1;
  if (C == 0 || M == 0) {
    out[3] = 0;
  } else if (C > 0 && M > 0 && __builtin_mul_overflow(C, M, &out[3])) {
    return Cat("output channels C * M (", C, " * ", M, ") overflow int64");
  }
  int64_t pad = 0;
  if (in[1] >= 0 && f[0] >= 1) {
    std::string err = WindowedOutputSize("height", in[1], f[0], win.stride_h, win.dilation_h,
                                         win.padding, 0, 0, &out[1], &pad);
    if (!err.empty()) return err;
    if (pad_top != nullptr) *pad_top = pad;
  }
  if (in[2] >= 0 && f[1] >= 1) {
    std::string err = WindowedOutputSize("width", in[2], f[1], win.stride_w, win.dilation_w,
                                         win.padding, 0, 0, &out[2], &pad);
    if (!err.empty()) return err;
    if (pad_left != nullptr) *pad_left = pad;
  }
  if (check_counts) {
    const int64_t* shapes[3] = {in, f, out};
    const char* names[3] = {"input", "filter", "output"};
    for (int s = 0; s < 3; ++s) {
      int64_t known[4];
      for (int i = 0; i < 4; ++i) known[i] = shapes[s][i] >= 0 ? shapes[s][i] : 1;
      std::string err = CheckElements(names[s], known);
      if (!err.empty()) return err;
    }
  }
  return "";
}

std::string DepthwiseConvProblem(const int64_t in[4], const int64_t f[4], const ConvWindow& win,
                                 bool check_counts, ConvProblem* p) {
  for (int i = 0; i < 4; ++i) {
    if (in[i] < 0 || f[i] < 0) {
      return Cat("sizes must be non-negative, got input ", Dims(in), " (N, H, W, C) and filter ",
                 Dims(f));
    }
  }
  int64_t out[4], pad_top = 0, pad_left = 0;
  const std::string err = DepthwiseOutputDims(in, f, win, check_counts, out, &pad_top, &pad_left);
  if (!err.empty()) return err;
  ConvProblem g;
  g.N = in[0], g.H = in[1], g.W = in[2], g.C = in[3];
  g.KH = f[0], g.KW = f[1], g.Cg = 1, g.K = out[3];
  g.groups = g.C > 0 ? g.C : 1;  // C = 0 has K = 0 and no work; K / groups stays defined
  g.P = out[1], g.Q = out[2];
  g.stride_h = win.stride_h, g.stride_w = win.stride_w;
  g.dilation_h = win.dilation_h, g.dilation_w = win.dilation_w;
  g.pad_top = pad_top, g.pad_left = pad_left;
  *p = g;
  return "";
}

bool HasWork(const ConvProblem& p) {
  return p.N > 0 && p.P > 0 && p.Q > 0 && p.K > 0 && p.KH > 0 && p.KW > 0 && p.Cg > 0 &&
         p.groups > 0;
}

}  // namespace tf_fp16ops
