#!/usr/bin/env bash
# Builds libtf_fp16ops_gpu.so (C ABI, see c_api.cc) from the kernel sources in cc/kernels/gpu/.
#
# Usage: tools/gpu_check/build.sh [OUT_DIR]        (default OUT_DIR: build/gpu_check)
# Environment:
#   NVCC          nvcc to use (default: nvcc on PATH, else $CUDA_PATH/bin/nvcc)
#   CUTLASS_DIR   CUTLASS source root holding include/ and tools/util/include/ (default: the
#                 pinned nvidia-cutlass wheel in .venv: site-packages/cutlass_library/source)
#   GPU_ARCHS     "sm90a" (default: Hopper only, small) or "all" (sm_75, 80, 86, 89, 90 + PTX for
#                 the CUTLASS 2.x and direct kernels; sm_90a for the Hopper kernels)
#   JOBS          parallel nvcc processes (default: nproc)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${1:-$ROOT/build/gpu_check}"
NVCC="${NVCC:-$(command -v nvcc || echo "${CUDA_PATH:-/usr/local/cuda}/bin/nvcc")}"
if [[ -z "${CUTLASS_DIR:-}" ]]; then
  CUTLASS_DIR="$("$ROOT/.venv/bin/python" -c 'import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), "source"))')"
fi
[[ -f "$CUTLASS_DIR/include/cutlass/cutlass.h" ]] || { echo "CUTLASS headers not found under $CUTLASS_DIR" >&2; exit 1; }
JOBS="${JOBS:-$(nproc)}"
case "${GPU_ARCHS:-sm90a}" in
  sm90a) COMMON_ARCH="-gencode arch=compute_90a,code=sm_90a" ;;
  all) COMMON_ARCH="-gencode arch=compute_75,code=sm_75 -gencode arch=compute_80,code=sm_80 \
-gencode arch=compute_86,code=sm_86 -gencode arch=compute_89,code=sm_89 \
-gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90" ;;
  *) echo "GPU_ARCHS must be sm90a or all" >&2; exit 1 ;;
esac
HOPPER_ARCH="-gencode arch=compute_90a,code=sm_90a"
FLAGS="-x cu -std=c++17 --expt-relaxed-constexpr -O3 -Xcompiler -fPIC,-fvisibility=hidden -DNDEBUG \
-I$ROOT -I$CUTLASS_DIR/include -I$CUTLASS_DIR/tools/util/include"
mkdir -p "$OUT/obj"
SECONDS=0
jobs_file="$OUT/obj/jobs.txt"; : > "$jobs_file"
for src in "$ROOT"/cc/kernels/gpu/*.cu.cc "$ROOT"/tools/gpu_check/c_api.cc; do
  name="$(basename "$src")"; obj="$OUT/obj/${name%%.*}.o"
  if [[ "$name" == cutlass_sm90_* ]]; then arch="$HOPPER_ARCH"; else arch="$COMMON_ARCH"; fi
  echo "$NVCC $FLAGS $arch -c $src -o $obj" >> "$jobs_file"
done
xargs -P "$JOBS" -I{} bash -c '{}' < "$jobs_file"
# The C entry points are the only exported symbols; CUDA runtime linked statically.
"$NVCC" -shared -cudart static -Xcompiler -fvisibility=hidden $COMMON_ARCH $HOPPER_ARCH \
  -o "$OUT/libtf_fp16ops_gpu.so" "$OUT"/obj/*.o
echo "built $OUT/libtf_fp16ops_gpu.so in ${SECONDS}s ($(du -h "$OUT/libtf_fp16ops_gpu.so" | cut -f1), GPU_ARCHS=${GPU_ARCHS:-sm90a}, nvcc $("$NVCC" --version | tail -1))"
