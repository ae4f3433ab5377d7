#!/usr/bin/env python3
"""Checks a library built by `make build-cuda` on a machine without a GPU: it loads into
TensorFlow, registers GPU kernels of every op for half and float, and still computes case C1
correctly on the CPU. Usage: python tools/check_cuda_build.py [bazel-bin/_fp16ops.so]"""
import sys

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import kernels

OPS = ("Fp16Conv2D", "Fp16Conv2DBackpropInput", "Fp16Conv2DBackpropFilter")


def main(argv=None) -> int:
    path = (argv or sys.argv[1:] or ["bazel-bin/_fp16ops.so"])[0]
    module = tf.load_op_library(path)
    failures = []
    for op in OPS:
        registered = {(k.device_type, tf.as_dtype(k.constraint[0].allowed_values.list.type[0]).name)
                      for k in kernels.get_registered_kernels_for_op(op).kernel}
        for want in (("GPU", "float16"), ("GPU", "float32"), ("CPU", "float16"), ("CPU", "float32")):
            if want not in registered:
                failures.append(f"{op}: no {want[0]} kernel for T={want[1]} (registered: {sorted(registered)})")
    x = np.full([1, 9, 9, 1], 0.2, np.float16)
    w = np.full([7, 7, 1, 1], 0.1, np.float16)
    y = module.fp16_conv2d(x, w, Tacc=tf.float16, strides=[1, 1, 1, 1], padding="VALID").numpy()
    if not np.all(y == np.float16(0.98046875)):
        failures.append(f"C1 with Tacc=half gave {y.ravel()[:3]}, expected 0.98046875")
    for f in failures:
        print("check_cuda_build:", f, file=sys.stderr)
    print(f"check_cuda_build: {path}: {'FAILED' if failures else 'ok'} (GPU kernels registered for {len(OPS)} ops)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
