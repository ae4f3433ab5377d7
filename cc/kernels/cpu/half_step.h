// The vector kHalf step shared by the CPU functors (cc/kernels/cpu/accumulate.cc for the conv
// passes, cc/kernels/cpu/depthwise_cpu.cc for Fp16DepthwiseConv2D): acc = round_fp16(x * w + acc)
// with one rounding, on binary16 values held in binary32 lanes. Each function is compiled for its
// ISA by a target attribute and called only where CPUID reported that ISA
// (cc/kernels/cpu/accumulate.cc, ChosenIsa). The proofs are in docs/numerics.md.
#ifndef TF_FP16OPS_CC_KERNELS_CPU_HALF_STEP_H_
#define TF_FP16OPS_CC_KERNELS_CPU_HALF_STEP_H_

#if defined(__x86_64__)
#include <immintrin.h>

namespace tf_fp16ops {
namespace cpu {

// Vector kHalf step, branch-free: the binary32 FMA is evaluated rounded down and rounded up
// (AVX-512 embedded rounding). Equal results mean the sum is exact; otherwise they are adjacent
// binary32 numbers around the exact sum, and the one whose bit pattern is odd is its
// round-to-odd value: min(bits) | 1 (for either sign the smaller pattern has the smaller
// magnitude). Both are computed with integer ops, leaving the mask registers free:
//   odd_bits = min_u32(down, up) | min_u32(down ^ up, 1).
// An exact zero sum of opposite signs gives -0 down and +0 up, hence the bit pattern 1 (the
// least binary32 subnormal), which the conversion rounds to +0, as round to nearest does
// (IEEE 754-2019, 6.3). One conversion then rounds to binary16 (docs/numerics.md).
__attribute__((target("avx512f,avx512vl,avx512dq,f16c,fma"))) inline __m512 HalfStep512(__m512 acc,
                                                                                        __m512 x,
                                                                                        __m512 w) {
  const __m512i down = _mm512_castps_si512(
      _mm512_fmadd_round_ps(x, w, acc, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC));
  const __m512i up = _mm512_castps_si512(
      _mm512_fmadd_round_ps(x, w, acc, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC));
  const __m512i inexact = _mm512_min_epu32(_mm512_xor_si512(down, up), _mm512_set1_epi32(1));
  const __m512 odd = _mm512_castsi512_ps(_mm512_or_si512(_mm512_min_epu32(down, up), inexact));
  return _mm512_cvtph_ps(_mm512_cvtps_ph(odd, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// ---------------------------------------------------------------- AVX2 (8 lanes)
// s = fl32(x * w + acc) rounds once more to binary16 correctly unless s is a binary16 midpoint
// (low 13 bits 0x1000) or lies in the binary16 subnormal range; only then the exact error e of
// the sum (TwoSum, Knuth TAOCP vol. 2, 4.2.2) moves an even s to its round-to-odd neighbour
// before the conversion.
__attribute__((target("avx2,f16c,fma"))) inline __m256 HalfStep256(__m256 acc, __m256 x, __m256 w) {
  __m256 s = _mm256_fmadd_ps(x, w, acc);
  __m256i sb = _mm256_castps_si256(s);
  const __m256i magnitude = _mm256_and_si256(sb, _mm256_set1_epi32(0x7FFFFFFF));
  const __m256i midpoint = _mm256_cmpeq_epi32(_mm256_and_si256(sb, _mm256_set1_epi32(0x1FFF)),
                                              _mm256_set1_epi32(0x1000));
  // 0 < |s| < 2^-14 as signed compares on the magnitude bits.
  const __m256i small =
      _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(0x38800000), magnitude),
                       _mm256_cmpgt_epi32(magnitude, _mm256_setzero_si256()));
  if (__builtin_expect(!_mm256_testz_si256(_mm256_or_si256(midpoint, small), _mm256_set1_epi32(-1)),
                       0)) {
    const __m256 p = _mm256_mul_ps(x, w);
    const __m256 bb = _mm256_sub_ps(s, p);
    const __m256 e = _mm256_add_ps(_mm256_sub_ps(p, _mm256_sub_ps(s, bb)), _mm256_sub_ps(acc, bb));
    const __m256i one = _mm256_set1_epi32(1);
    const __m256i inexact = _mm256_castps_si256(_mm256_cmp_ps(e, _mm256_setzero_ps(), _CMP_NEQ_OQ));
    const __m256i even = _mm256_cmpeq_epi32(_mm256_and_si256(sb, one), _mm256_setzero_si256());
    const __m256i delta =
        _mm256_or_si256(_mm256_srai_epi32(_mm256_xor_si256(sb, _mm256_castps_si256(e)), 31), one);
    sb = _mm256_add_epi32(sb, _mm256_and_si256(_mm256_and_si256(inexact, even), delta));
    s = _mm256_castsi256_ps(sb);
  }
  return _mm256_cvtph_ps(_mm256_cvtps_ph(s, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

}  // namespace cpu
}  // namespace tf_fp16ops

#endif  // defined(__x86_64__)
#endif  // TF_FP16OPS_CC_KERNELS_CPU_HALF_STEP_H_
