#!/usr/bin/env python3
"""Checks the libraries built by `make build-cuda` on a machine without a GPU:
- bazel-bin/_fp16ops.so loads into TensorFlow, registers GPU kernels of every op for half and
  float, and still computes case C1 correctly on the CPU;
- bazel-bin/cc/kernels/gpu/libtf_fp16ops_gpu.so (same objects + the C ABI) reports the build it
  is (CUDA 13.0 runtime, SASS list, PTX arch), and a launch without a usable driver fails with
  FailedPrecondition before any kernel runs.
Usage: python tools/check_cuda_build.py [bazel-bin/_fp16ops.so [libtf_fp16ops_gpu.so]]"""

import os
import sys

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import kernels

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu_check"))
from abi import AbiError, Library, Problem  # noqa: E402

OPS = ("Fp16Conv2D", "Fp16Conv2DBackpropInput", "Fp16Conv2DBackpropFilter")


def check_op_library(path: str, failures: list) -> None:
    module = tf.load_op_library(path)
    for op in OPS:
        registered = {
            (k.device_type, tf.as_dtype(k.constraint[0].allowed_values.list.type[0]).name)
            for k in kernels.get_registered_kernels_for_op(op).kernel
        }
        for want in (
            ("GPU", "float16"),
            ("GPU", "float32"),
            ("CPU", "float16"),
            ("CPU", "float32"),
        ):
            if want not in registered:
                failures.append(
                    f"{op}: no {want[0]} kernel for T={want[1]} (registered: {sorted(registered)})"
                )
    x = np.full([1, 9, 9, 1], 0.2, np.float16)
    w = np.full([7, 7, 1, 1], 0.1, np.float16)
    y = module.fp16_conv2d(x, w, Tacc=tf.float16, strides=[1, 1, 1, 1], padding="VALID").numpy()
    if not np.all(y == np.float16(0.98046875)):
        failures.append(f"C1 with Tacc=half gave {y.ravel()[:3]}, expected 0.98046875")


def check_abi_library(path: str, failures: list) -> None:
    lib = Library(path)
    info = lib.build_info()
    if (
        info["runtime_version"] // 1000 != 13
        or 90 not in info["sass_archs"]
        or info["ptx_arch"] != info["sass_archs"][-1]
    ):
        failures.append(f"{path}: unexpected build info {info}")
    driver = lib.query_device()[0]
    if driver >= info["runtime_version"]:
        return  # a usable driver here: nothing more to check without running kernels
    p = Problem("c1", 1, 9, 9, 1, 1, 7, 7)
    try:
        lib.launch("fprop", p, "half", "half", 1, 1, 1, 0, 0)
        failures.append(f"{path}: a launch without a usable driver did not fail")
    except AbiError as e:
        if e.code != "FailedPrecondition" or "CPU" not in e.message:
            failures.append(f"{path}: launch without a driver gave {e}")


def main(argv=None) -> int:
    args = argv or sys.argv[1:]
    op_lib = args[0] if args else "bazel-bin/_fp16ops.so"
    abi_lib = args[1] if len(args) > 1 else "bazel-bin/cc/kernels/gpu/libtf_fp16ops_gpu.so"
    failures = []
    check_op_library(op_lib, failures)
    check_abi_library(abi_lib, failures)
    for f in failures:
        print("check_cuda_build:", f, file=sys.stderr)
    print(f"check_cuda_build: {op_lib}, {abi_lib}: {'FAILED' if failures else 'ok'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
