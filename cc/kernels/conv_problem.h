// The one description of a 2-D convolution shared by every layer of the op library: the shape
// functions and OpKernels (through cc/kernels/conv_params.h), the CPU functors (cc/kernels/cpu),
// the GPU launchers (cc/kernels/gpu) and their C ABI. TensorFlow-free, so that GPU code and host
// tests can include it. All sizes are int64 elements.
//
// Layouts (TensorFlow's): activations NHWC (NCHW when `nchw`), x [N,H,W,C], y/dy [N,P,Q,K];
// filter HWIO [KH, KW, Cg, K] with Cg = C / groups input channels per group and K / groups output
// channels per group. The bottom/right padding is implied by P and Q:
//   pad_bottom = (P - 1) * stride_h + (KH - 1) * dilation_h + 1 - H - pad_top
// (negative for VALID windows that leave input rows unused).
#ifndef TF_FP16OPS_CC_KERNELS_CONV_PROBLEM_H_
#define TF_FP16OPS_CC_KERNELS_CONV_PROBLEM_H_

#include <cstdint>

namespace tf_fp16ops {

// The three passes of a convolution, in cuDNN/CUTLASS's names.
enum class Pass : int {
  kFprop = 0,  // y  = conv(x, w)                       (Fp16Conv2D)
  kDgrad = 1,  // dx = conv_backprop_input(w, dy)       (Fp16Conv2DBackpropInput)
  kWgrad = 2,  // dw = conv_backprop_filter(x, dy)      (Fp16Conv2DBackpropFilter)
};

struct ConvProblem {
  int64_t N = 0, H = 0, W = 0, C = 0;     // input batch, height, width, channels (all groups)
  int64_t KH = 0, KW = 0, Cg = 0, K = 0;  // filter HWIO; Cg = C / groups; K output channels
  int64_t groups = 1;                     // C / Cg
  int64_t P = 0, Q = 0;                   // output height and width
  int64_t stride_h = 1, stride_w = 1;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t pad_top = 0, pad_left = 0;  // bottom/right padding is implied by P and Q
  bool nchw = false;                  // activations NCHW instead of NHWC

  // Element counts of x, y (or dy) and the filter. A problem from ComputeConvProblem
  // (cc/kernels/conv_shape.h) with check_counts has all three within int64.
  constexpr int64_t InputElements() const { return N * H * W * C; }
  constexpr int64_t OutputElements() const { return N * P * Q * K; }
  constexpr int64_t FilterElements() const { return KH * KW * Cg * K; }
  // The implicit-GEMM extents of a pass for one group, as CUTLASS's
  // conv::implicit_gemm_problem_size (cutlass/conv/convolution.h) with C -> Cg, K -> K / groups:
  //   fprop  M = N*P*Q,       N = K/groups,  K = KH*KW*Cg
  //   dgrad  M = N*H*W,       N = Cg,        K = KH*KW*(K/groups)
  //   wgrad  M = K/groups,    N = KH*KW*Cg,  K = N*P*Q
  constexpr int64_t GemmM(Pass pass) const {
    return pass == Pass::kFprop ? N * P * Q : pass == Pass::kDgrad ? N * H * W : K / groups;
  }
  constexpr int64_t GemmN(Pass pass) const {
    return pass == Pass::kFprop ? K / groups : pass == Pass::kDgrad ? Cg : KH * KW * Cg;
  }
  constexpr int64_t GemmK(Pass pass) const {
    return pass == Pass::kFprop   ? KH * KW * Cg
           : pass == Pass::kDgrad ? KH * KW * (K / groups)
                                  : N * P * Q;
  }
};

}  // namespace tf_fp16ops

#endif  // TF_FP16OPS_CC_KERNELS_CONV_PROBLEM_H_
