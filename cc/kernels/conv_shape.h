// Size arithmetic of a 2-D convolution, TensorFlow-free: the one place for the output-size,
// padding, zero-size and stand-in-size rules, used by the shape functions (cc/ops), the kernels
// (through cc/kernels/conv_params.h), the CPU functors and the host test
// cc/kernels/conv_shape_test.cc (`bazel run //:conv_shape_test`, part of `make test`). Every
// function returns an empty string on success and otherwise the error message (the caller wraps
// it in InvalidArgument).
//
// Output size (TensorFlow's shape function, tensorflow/core/framework/common_shape_fns.cc,
// GetWindowedOutputSizeFromDimsV2), with the effective filter size E = (KH - 1) * dilation + 1:
//   VALID:    P = (H - E) / stride + 1, an error when H < E
//   EXPLICIT: the same with H + pad_top + pad_bottom in place of H
//   SAME:     P = ceil(H / stride), so H = 0 gives an empty output (as tf.nn.conv2d)
// All of it is computed in 128-bit integers, so no int64 overflow is possible; a result that
// does not fit (padded extent or effective filter size above 2^62) is an error. There is no
// other limit on filter size x dilation.
#ifndef TF_FP16OPS_CC_KERNELS_CONV_SHAPE_H_
#define TF_FP16OPS_CC_KERNELS_CONV_SHAPE_H_

#include <cstdint>
#include <string>

#include "cc/kernels/conv_problem.h"

namespace tf_fp16ops {

enum class PaddingKind { kSame, kValid, kExplicit };

// Largest padded extent and effective filter size accepted: every index the kernels form
// (p * stride - pad_top + kh * dilation) then stays within int64.
constexpr int64_t kMaxExtent = int64_t{1} << 62;

// The window attrs of one convolution in H/W terms (strides and dilations already checked
// positive). pad_* are used with kExplicit only.
struct ConvWindow {
  int64_t stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  PaddingKind padding = PaddingKind::kValid;
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
};

// Output size and leading padding of one spatial dimension (`dim` is "height" or "width").
// in >= 0, k >= 1, stride >= 1, dilation >= 1, explicit pads >= 0.
std::string WindowedOutputSize(const char* dim, int64_t in, int64_t k, int64_t stride,
                               int64_t dilation, PaddingKind padding, int64_t pad_before,
                               int64_t pad_after, int64_t* out, int64_t* pad_top);

// Channel rules: filter in_channels Cg >= 1, C a multiple of Cg with C / Cg >= 1 groups, K a
// multiple of the groups. Any argument may be -1 (unknown, shape inference): only the rules
// whose sizes are known are checked. *groups is C / Cg, or -1 when unknown.
std::string CheckChannels(int64_t C, int64_t Cg, int64_t K, int64_t* groups);

// Validates every size and fills *p. in_nhwc = [N, H, W, C] (logical order), filter HWIO
// [KH, KW, Cg, K]. check_counts: element counts of input, filter and output must fit int64.
std::string ComputeConvProblem(const int64_t in_nhwc[4], const int64_t filter[4],
                               const ConvWindow& window, bool nchw, bool check_counts,
                               ConvProblem* p);

// Shape inference with unknown sizes (-1): out_nhwc = [N, P, Q, K] with -1 where a size
// depends on an unknown one. Every check whose sizes are known is the one ComputeConvProblem
// makes, with the same message; nothing divides by a size that may be 0 or unknown.
std::string PartialOutputDims(const int64_t in_nhwc[4], const int64_t filter[4],
                              const ConvWindow& window, int64_t out_nhwc[4]);

// Depthwise convolution (tf.nn.depthwise_conv2d): input [N, H, W, C], filter [KH, KW, C, M],
// out = [N, P, Q, C * M]. Any size may be -1 (unknown, shape inference): out has -1 where a size
// depends on an unknown one, and only the checks whose sizes are known are made. Rules (TF's
// shape function, common_shape_fns.cc DepthwiseConv2DNativeShapeImpl): KH, KW >= 1, filter
// dimension 2 equal to C; zero N, H (SAME), W (SAME), C or M give an empty output. With
// check_counts, the element counts of input, filter and output must fit int64. pad_top and
// pad_left (may be null) receive the leading padding when H, W and the filter sizes are known.
std::string DepthwiseOutputDims(const int64_t in_nhwc[4], const int64_t filter[4],
                                const ConvWindow& window, bool check_counts, int64_t out_nhwc[4],
                                int64_t* pad_top, int64_t* pad_left);

// The depthwise convolution as the grouped problem it is: groups = C, Cg = 1, K = C * M (the
// filter [KH, KW, C, M] read as HWIO [KH, KW, 1, C * M]; output channel c * M + m belongs to
// group c), with the rules and messages of DepthwiseOutputDims on known sizes (in and filter
// non-negative). With C = 0, groups is 1 and K is 0 (no work).
std::string DepthwiseConvProblem(const int64_t in_nhwc[4], const int64_t filter[4],
                                 const ConvWindow& window, bool check_counts, ConvProblem* p);

// True when the convolution has at least one multiply-add for the pass (every output or
// reduction extent positive). A problem without work has an all-zero (or empty) result and
// must not allocate scratch proportional to any of its sizes.
bool HasWork(const ConvProblem& p);

}  // namespace tf_fp16ops

#endif  // TF_FP16OPS_CC_KERNELS_CONV_SHAPE_H_
