#!/usr/bin/env python3
"""CPU benchmark: Fp16Conv2D (float16 and float32 accumulation) side by side with tf.nn.conv2d
(float16, float32) in one process, and TensorFlow's own fp16-accumulate CPU path
(TF_CONV2D_USE_FP16_ACCUMULATE=1, read once per process) in a subprocess on the same inputs.

Reports GFLOP/s (2 * N * P * Q * K * KH * KW * Cg / median time) and the ratios the op library
targets: ours fp16-accumulate vs TF's fp16-accumulate path, ours float vs tf.nn.conv2d float.
Usage: python tools/benchmark_cpu.py [--repeats R] [--markdown FILE]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

SHAPES = [  # name, x NHWC, w HWIO, padding
    ("seed 16x32x32x16 * 3x3x16x16 VALID", (16, 32, 32, 16), (3, 3, 16, 16), "VALID"),
    ("8x28x28x128 * 3x3x128x128 SAME", (8, 28, 28, 128), (3, 3, 128, 128), "SAME"),
]


def median_seconds(fn, repeats: int) -> float:
    fn()  # warm-up (kernel construction, thread pool)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def inputs(xs, ws, dtype):
    rng = np.random.default_rng(0)
    return rng.random(xs).astype(np.float16).astype(dtype), (rng.random(ws) - 0.5).astype(np.float16).astype(dtype)


def flops(xs, ws, padding):
    n, h, w, _ = xs
    kh, kw, cg, k = ws
    p, q = (h, w) if padding == "SAME" else (h - kh + 1, w - kw + 1)
    return 2.0 * n * p * q * k * kh * kw * cg


def tf_only(repeats: int) -> dict:
    import tensorflow as tf
    out = {}
    for name, xs, ws, pad in SHAPES:
        x, w = inputs(xs, ws, np.float16)
        out[name] = median_seconds(lambda: tf.nn.conv2d(x, w, 1, pad).numpy(), repeats)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--markdown", help="also write the table to this Markdown file")
    parser.add_argument("--tf-only-json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.tf_only_json:
        print(json.dumps(tf_only(args.repeats)))
        return 0

    env = dict(os.environ, TF_CONV2D_USE_FP16_ACCUMULATE="1", TF_CPP_MIN_LOG_LEVEL="3")
    sub = subprocess.run([sys.executable, __file__, "--tf-only-json", "--repeats", str(args.repeats)],
                         env=env, capture_output=True, text=True, check=True)
    tf_fp16acc = json.loads(sub.stdout.strip().splitlines()[-1])

    import tensorflow as tf
    import tf_fp16ops
    from tf_fp16ops.ops import _ops  # noqa: F401  (loaded library)

    rows = []
    for name, xs, ws, pad in SHAPES:
        fl = flops(xs, ws, pad)
        x16, w16 = inputs(xs, ws, np.float16)
        x32, w32 = inputs(xs, ws, np.float32)
        t = {
            "ours fp16 in, fp16 acc": median_seconds(lambda: tf_fp16ops.conv2d(x16, w16, 1, pad, accumulation="float16").numpy(), args.repeats),
            "ours fp16 in, fp32 acc": median_seconds(lambda: tf_fp16ops.conv2d(x16, w16, 1, pad, accumulation="float32").numpy(), args.repeats),
            "ours fp32 in, fp32 acc": median_seconds(lambda: tf_fp16ops.conv2d(x32, w32, 1, pad, accumulation="float32").numpy(), args.repeats),
            "tf.nn.conv2d fp16": median_seconds(lambda: tf.nn.conv2d(x16, w16, 1, pad).numpy(), args.repeats),
            "tf.nn.conv2d fp32": median_seconds(lambda: tf.nn.conv2d(x32, w32, 1, pad).numpy(), args.repeats),
            "tf.nn.conv2d fp16, TF_CONV2D_USE_FP16_ACCUMULATE=1": tf_fp16acc[name],
        }
        gf = {k: fl / v / 1e9 for k, v in t.items()}
        rows.append((name, gf))

    lines = [f"CPU benchmark, {datetime.date.today().isoformat()}, {platform.processor() or platform.machine()}, "
             f"{os.cpu_count()} cores, TensorFlow {tf.__version__}, median of {args.repeats}, GFLOP/s",
             "", "| shape | path | GFLOP/s |", "|---|---|---|"]
    for name, gf in rows:
        for k, v in gf.items():
            lines.append(f"| {name} | {k} | {v:.1f} |")
    lines += ["", "| shape | ours fp16-acc / TF fp16-acc path | ours fp32-acc (fp32 in) / tf.nn.conv2d fp32 | ours fp32-acc (fp16 in) / tf.nn.conv2d fp16 |",
              "|---|---|---|---|"]
    for name, gf in rows:
        lines.append(f"| {name} | {gf['ours fp16 in, fp16 acc'] / gf['tf.nn.conv2d fp16, TF_CONV2D_USE_FP16_ACCUMULATE=1']:.2f}x "
                     f"| {gf['ours fp32 in, fp32 acc'] / gf['tf.nn.conv2d fp32']:.2f}x "
                     f"| {gf['ours fp16 in, fp32 acc'] / gf['tf.nn.conv2d fp16']:.2f}x |")
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text + "\n\nCommand: `python tools/benchmark_cpu.py --repeats %d`\n" % args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
