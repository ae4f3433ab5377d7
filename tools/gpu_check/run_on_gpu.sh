#!/usr/bin/env bash
# One command for the GPU check: builds libtf_fp16ops_gpu.so if it is missing (needs nvcc and the
# CUTLASS headers) and runs check.py (needs PyTorch with CUDA and cuDNN; no TensorFlow).
# Usage: tools/gpu_check/run_on_gpu.sh OUT_DIR [LIB]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${1:?usage: run_on_gpu.sh OUT_DIR [LIB]}"
LIB="${2:-$ROOT/build/gpu_check/libtf_fp16ops_gpu.so}"
if [[ ! -f "$LIB" ]]; then
  "$ROOT/tools/gpu_check/build.sh" "$(dirname "$LIB")"
fi
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
"$PY" "$ROOT/tools/gpu_check/check.py" --lib "$LIB" --out "$OUT" 2>&1 | tee "$OUT/gpu_check.log"
exit "${PIPESTATUS[0]}"
