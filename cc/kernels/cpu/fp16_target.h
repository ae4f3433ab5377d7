// The function attribute of the code that runs AVX512-FP16 instructions (VFMADD231PH and the
// binary16 vector moves): compiled for that extension whatever the build's -march, and called only
// where the CPU has it (AccumulateIsa() is "avx512fp16", cc/kernels/cpu/accumulate.h).
#ifndef TF_FP16OPS_CC_KERNELS_CPU_FP16_TARGET_H_
#define TF_FP16OPS_CC_KERNELS_CPU_FP16_TARGET_H_

#define TF_FP16OPS_FP16_TARGET \
  __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx512fp16,f16c,fma")))

#endif  // TF_FP16OPS_CC_KERNELS_CPU_FP16_TARGET_H_
