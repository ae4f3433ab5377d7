// Host test of the TensorFlow-free size rules of cc/kernels/conv_shape.h (bazel run
// //:conv_shape_test, run by `make test`). Expected values are hand calculations from
// TensorFlow's rules (common_shape_fns.cc GetWindowedOutputSizeFromDimsV2 and
// DepthwiseConv2DNativeShapeImpl), written out in each case.
#include <cstdint>
#include <cstdio>
#include <string>

#include "cc/kernels/conv_shape.h"

namespace tf_fp16ops {
namespace {

int failures = 0;

void Expect(bool ok, const char* what, int line) {
  if (!ok) {
    std::fprintf(stderr, "conv_shape_test.cc:%d: %s\n", line, what);
    ++failures;
  }
}
#define EXPECT(cond) Expect((cond), #cond, __LINE__)

bool Has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

void WindowedSizes() {
  int64_t out = -7, top = -7;
  // VALID: P = (H - E) / stride + 1 with E = (K - 1) * dilation + 1.
  EXPECT(WindowedOutputSize("height", 5, 3, 1, 1, PaddingKind::kValid, 0, 0, &out, &top).empty());
  EXPECT(out == 3 && top == 0);  // (5 - 3) / 1 + 1
  EXPECT(WindowedOutputSize("height", 7, 3, 1, 3, PaddingKind::kValid, 0, 0, &out, &top).empty());
  EXPECT(out == 1);  // E = 7
  EXPECT(WindowedOutputSize("width", 10, 3, 4, 1, PaddingKind::kValid, 0, 0, &out, &top).empty());
  EXPECT(out == 2);  // (10 - 3) / 4 + 1 = 2
  // SAME: P = ceil(H / stride); padding needed (P - 1) * stride + E - H, the smaller half on top.
  EXPECT(WindowedOutputSize("height", 5, 3, 2, 1, PaddingKind::kSame, 0, 0, &out, &top).empty());
  EXPECT(out == 3 && top == 1);  // ceil(5 / 2) = 3; needed 2 * 2 + 3 - 5 = 2
  EXPECT(WindowedOutputSize("height", 6, 4, 1, 1, PaddingKind::kSame, 0, 0, &out, &top).empty());
  EXPECT(out == 6 && top == 1);  // needed 5 + 4 - 6 = 3: 1 on top, 2 below
  EXPECT(WindowedOutputSize("height", 0, 3, 1, 1, PaddingKind::kSame, 0, 0, &out, &top).empty());
  EXPECT(out == 0);  // H = 0: an empty output, as tf.nn.conv2d
  // EXPLICIT: VALID over H + pad_top + pad_bottom.
  EXPECT(WindowedOutputSize("width", 4, 3, 1, 1, PaddingKind::kExplicit, 1, 2, &out, &top).empty());
  EXPECT(out == 5 && top == 1);  // (4 + 3 - 3) / 1 + 1
  // Errors name the dimension and the sizes.
  const std::string small =
      WindowedOutputSize("height", 2, 3, 1, 1, PaddingKind::kValid, 0, 0, &out, &top);
  EXPECT(Has(small, "height") && Has(small, "below 1"));
  const std::string huge =
      WindowedOutputSize("width", 8, int64_t{1} << 61, 1, 4, PaddingKind::kValid, 0, 0, &out, &top);
  EXPECT(Has(huge, "width") && Has(huge, "2^62"));  // E = (2^61 - 1) * 4 + 1 > 2^62
}

void Channels() {
  int64_t groups = 0;
  EXPECT(CheckChannels(6, 3, 4, &groups).empty() && groups == 2);
  EXPECT(CheckChannels(16, 16, 5, &groups).empty() && groups == 1);
  EXPECT(!CheckChannels(6, 4, 8, &groups).empty());  // 6 is not a multiple of 4
  EXPECT(!CheckChannels(6, 3, 5, &groups).empty());  // K = 5 not a multiple of 2 groups
  EXPECT(!CheckChannels(6, 0, 4, &groups).empty());  // Cg >= 1
  EXPECT(CheckChannels(-1, 3, 4, &groups).empty() && groups == -1);  // unknown C
}

void Problems() {
  ConvWindow same;
  same.padding = PaddingKind::kSame;
  same.stride_h = same.stride_w = 2;
  const int64_t in[4] = {2, 5, 6, 4}, filter[4] = {3, 3, 2, 8};
  ConvProblem p;
  EXPECT(ComputeConvProblem(in, filter, same, false, true, &p).empty());
  // P = ceil(5 / 2) = 3, Q = ceil(6 / 2) = 3; pads: height 2 * 2 + 3 - 5 = 2 (top 1), width
  // 2 * 2 + 3 - 6 = 1 (left 0); groups 4 / 2 = 2.
  EXPECT(p.N == 2 && p.P == 3 && p.Q == 3 && p.K == 8 && p.groups == 2 && p.Cg == 2);
  EXPECT(p.pad_top == 1 && p.pad_left == 0 && HasWork(p));
  const int64_t empty[4] = {0, 5, 6, 4};
  EXPECT(ComputeConvProblem(empty, filter, same, false, true, &p).empty() && !HasWork(p));
  // 2^40 * 2^20 * 2^4 * 1 = 2^64 elements: the input's count overflows int64.
  const int64_t big[4] = {int64_t{1} << 40, int64_t{1} << 20, 16, 1};
  const int64_t f1[4] = {1, 1, 1, 1};
  ConvWindow valid;
  EXPECT(Has(ComputeConvProblem(big, f1, valid, false, true, &p), "overflows int64"));

  int64_t out[4];
  const int64_t partial_in[4] = {-1, 5, -1, 4};
  EXPECT(PartialOutputDims(partial_in, filter, same, out).empty());
  EXPECT(out[0] == -1 && out[1] == 3 && out[2] == -1 && out[3] == 8);
}

void Depthwise() {
  ConvWindow valid;
  const int64_t in[4] = {1, 5, 5, 3}, filter[4] = {3, 3, 3, 2};
  int64_t out[4], top = -1, left = -1;
  EXPECT(DepthwiseOutputDims(in, filter, valid, true, out, &top, &left).empty());
  EXPECT(out[0] == 1 && out[1] == 3 && out[2] == 3 && out[3] == 6);  // C * M = 3 * 2
  const int64_t wrong[4] = {3, 3, 4, 2};                             // dimension 2 must be C = 3
  EXPECT(!DepthwiseOutputDims(in, wrong, valid, true, out, &top, &left).empty());
  const int64_t no_m[4] = {3, 3, 3, 0};
  EXPECT(DepthwiseOutputDims(in, no_m, valid, true, out, &top, &left).empty() && out[3] == 0);

  // As a grouped problem: groups = C, one input channel per group, K = C * M; SAME with a
  // stride of 2 on 5 rows and columns: P = Q = 3, padding (3 - 1) * 2 + 3 - 5 = 2 split 1 / 1.
  ConvWindow same;
  same.padding = PaddingKind::kSame;
  same.stride_h = same.stride_w = 2;
  ConvProblem p;
  EXPECT(DepthwiseConvProblem(in, filter, same, true, &p).empty());
  EXPECT(p.groups == 3 && p.Cg == 1 && p.K == 6 && p.P == 3 && p.Q == 3);
  EXPECT(p.pad_top == 1 && p.pad_left == 1 && p.GemmN(Pass::kFprop) == 2);
  EXPECT(!DepthwiseConvProblem(in, wrong, same, true, &p).empty());
  const int64_t no_c[4] = {1, 5, 5, 0}, filter_no_c[4] = {3, 3, 0, 2};
  EXPECT(DepthwiseConvProblem(no_c, filter_no_c, same, true, &p).empty());
  EXPECT(p.K == 0 && p.groups == 1 && !HasWork(p));
}

}  // namespace
}  // namespace tf_fp16ops

int main() {
  tf_fp16ops::WindowedSizes();
  tf_fp16ops::Channels();
  tf_fp16ops::Problems();
  tf_fp16ops::Depthwise();
  if (tf_fp16ops::failures == 0) std::printf("conv_shape_test: all checks passed\n");
  return tf_fp16ops::failures == 0 ? 0 : 1;
}
