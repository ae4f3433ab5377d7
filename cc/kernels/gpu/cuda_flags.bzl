"""Compile commands of the CUDA objects (cc/kernels/gpu/BUILD) for the toolchain that
//third_party/cuda:cuda_configure.bzl set up: clang (default) or nvcc."""

load(
    "@local_config_cuda//:cuda_config.bzl",
    "CLANG",
    "CUDA_ARCHS",
    "CUDA_COMPILER",
    "CUDA_MISSING",
    "CUDA_ROOT",
    "CUDA_VERSION",
    "CUTLASS_DIR",
    "NVCC",
)

ARCHS_80 = [a for a in CUDA_ARCHS if int(a) >= 80] or CUDA_ARCHS[-1:]
HAS_SM70 = "70" in CUDA_ARCHS

def _arch_flags(sass, ptx, hopper = False):
    """Target flags of one compile: SASS for each of `sass`, PTX for `ptx` ("" for none)."""
    if CUDA_COMPILER == "clang":
        if hopper:
            return "--cuda-gpu-arch=sm_90a --no-cuda-include-ptx=all"
        return " ".join(["--cuda-gpu-arch=sm_%s" % a for a in sass] +
                        ["--no-cuda-include-ptx=all"] +
                        (["--cuda-include-ptx=sm_%s" % ptx] if ptx else []))
    if hopper:
        return "-gencode arch=compute_90a,code=sm_90a"
    return " ".join(["-gencode arch=compute_%s,code=sm_%s" % (a, a) for a in sass] +
                    (["-gencode arch=compute_%s,code=compute_%s" % (ptx, ptx)] if ptx else []))

def target_flags(src, sm80, sm70, hopper):
    """Target flags of one source's compile.

    Args:
      src: the source file name.
      sm80: the CUTLASS 2.x sm80 sources (targets >= 80).
      sm70: the Volta sources (sm_70 and compute_70 when sm_70 is a target).
      hopper: the sm_90a sources.

    Returns:
      The compiler's target flags, a string.
    """
    if src in hopper:
        return _arch_flags([], "", hopper = True)
    if src in sm80:
        return _arch_flags(ARCHS_80, CUDA_ARCHS[-1])
    if src in sm70:
        if HAS_SM70:
            # compute_70 PTX too: with lazy module loading (the CUDA 12 default) it costs nothing
            # on other GPUs, tools/check_cuda_build.py reads its mma.sync instructions, and a
            # driver can JIT it for a GPU check of these kernels on a newer GPU.
            return _arch_flags(["70"], "70") + " -DTF_FP16OPS_SM70_KERNELS"
        return _arch_flags(CUDA_ARCHS[-1:], "")
    if src == "c_api.cc" and CUDA_COMPILER == "clang":
        return "--cuda-host-only"
    return _arch_flags(CUDA_ARCHS, CUDA_ARCHS[-1])

_INCLUDES = "-I. -I$(GENDIR) -I%s/include -I%s/tools/util/include" % (CUTLASS_DIR, CUTLASS_DIR)

# clang as the CUDA compiler, as TensorFlow's --config=cuda_clang and CUTLASS's CMake (for clang)
# set it up: clang does not define __CUDACC_VER_MAJOR/MINOR__, and CUTLASS enables its mma.sync
# and wgmma code only when they say CUDA >= 11 / 12 (without them the tensor-op kernels compile
# to empty bodies: tools/check_cuda_build.py checks the SASS for the MMA instructions); CUTLASS's
# unroll thresholds; no warning for CUDA 12.5 being newer than clang 19 knows of, nor for
# CUTLASS's `#pragma unroll (N)` spelling.
_CLANG_FLAGS = " ".join([
    "-x cuda --cuda-path=%s" % CUDA_ROOT,
    "-D__CUDACC_VER_MAJOR__=%d -D__CUDACC_VER_MINOR__=%d" % (
        CUDA_VERSION // 1000,
        CUDA_VERSION % 1000 // 10,
    ),
    "-mllvm -pragma-unroll-threshold=100000 -mllvm -unroll-threshold=5000",
    "-Wno-unknown-cuda-version -Wno-cuda-compat",
    "-std=c++17 -O3 -DNDEBUG -fPIC",
    _INCLUDES,
])

_NVCC_FLAGS = ("-x cu -std=c++17 --expt-relaxed-constexpr -O3 -DNDEBUG -Xcompiler -fPIC " +
               _INCLUDES)

CUDA_COMPILE = ("%s %s" % (CLANG, _CLANG_FLAGS)) if CUDA_COMPILER == "clang" else ("%s %s" % (
    NVCC,
    _NVCC_FLAGS,
))

CUDA_MISSING_CMD = ("echo 'bazel build --config=cuda (%s toolchain): not found: %s' >&2; exit 1" % (
    CUDA_COMPILER,
    CUDA_MISSING,
))
