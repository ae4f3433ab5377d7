#!/usr/bin/env bash
# Writes the GPU check bundle: one folder with the prebuilt libtf_fp16ops_gpu.so (the Bazel
# --config=cuda objects of the op library plus the C ABI) and the check scripts (standard
# library + PyTorch only). Copy the folder to a GPU machine and run ./run.sh there.
# A library of the clang / CUDA 12.5 build needs libcudart.so.12 (it finds it beside itself,
# RUNPATH $ORIGIN): give its path as CUDART and it is copied in.
# Usage: tools/gpu_check/make_bundle.sh LIB OUT_DIR [CUDART]
set -euo pipefail
LIB="${1:?usage: make_bundle.sh LIB OUT_DIR [CUDART]}"
OUT="${2:?usage: make_bundle.sh LIB OUT_DIR [CUDART]}"
CUDART="${3:-}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LIMIT=$((64 * 1024 * 1024))
rm -rf "$OUT"
mkdir -p "$OUT"
install -m 0755 "$LIB" "$OUT/libtf_fp16ops_gpu.so"
if readelf -d "$LIB" | grep -q 'Shared library: \[libcudart.so.12\]'; then
  if [ -z "$CUDART" ] || [ ! -f "$CUDART" ]; then
    echo "make_bundle: $LIB needs libcudart.so.12; pass its path as the third argument" >&2
    exit 1
  fi
  install -m 0755 "$CUDART" "$OUT/libcudart.so.12"
fi
install -m 0644 "$HERE/check.py" "$HERE/abi.py" "$HERE/problems.py" "$HERE/refs.py" "$OUT/"
cat > "$OUT/run.sh" <<'RUN'
#!/bin/sh
# Runs the GPU check (needs python3 with PyTorch + CUDA + cuDNN; no TensorFlow, nothing to
# install). Usage: ./run.sh [OUT_DIR]   (default: ./results next to this script)
DIR="$(cd "$(dirname "$0")" && pwd)"
exec "${PYTHON:-python3}" "$DIR/check.py" --lib "$DIR/libtf_fp16ops_gpu.so" --out "${1:-$DIR/results}"
RUN
chmod 0755 "$OUT/run.sh"
git -C "$HERE" rev-parse HEAD > "$OUT/COMMIT" 2>/dev/null || echo unknown > "$OUT/COMMIT"
bytes=$(du -sb "$OUT" | cut -f1)
if [ "$bytes" -gt "$LIMIT" ]; then
  echo "make_bundle: $OUT is $bytes bytes, over the 64 MiB a GPU machine takes" >&2
  exit 1
fi
echo "make_bundle: $OUT ($bytes bytes): timeout 420 $OUT/run.sh"
