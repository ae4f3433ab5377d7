#!/usr/bin/env python3
"""CPU benchmark: Fp16Conv2D (float16 and float32 accumulation) side by side with tf.nn.conv2d
(float16, float32) in one process, and TensorFlow's own fp16-accumulate CPU path
(TF_CONV2D_USE_FP16_ACCUMULATE=1, read once per process) in a subprocess on the same inputs.

Reports GFLOP/s (2 * N * P * Q * K * KH * KW * Cg / median time) and the ratios the op library
targets: ours fp16-accumulate vs TF's fp16-accumulate path, ours float vs tf.nn.conv2d float.

The ceiling: the fp16 step itself (cc/kernels/cpu/accumulate.cc, compiled here with g++ into a
small library) on 8 rows x 32 lanes of independent accumulators with the same L1-resident
weight row (no memory traffic), one thread per TensorFlow intra-op thread, for every ISA path
the CPU has (TF_FP16OPS_CPU_ISA, one subprocess each). Each conv shape's fp16-accumulation rate
is reported as a fraction of the ceiling of the path the op library chose.
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
    ("8x28x28x128 * 1x1x128x128 VALID", (8, 28, 28, 128), (1, 1, 128, 128), "VALID"),
    ("8x56x56x16 * 3x3x16x16 SAME", (8, 56, 56, 16), (3, 3, 16, 16), "SAME"),
]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Key of the table row for tf.nn.conv2d with its float16-accumulation switch.
TF_FP16ACC_KEY = "tf.nn.conv2d fp16, TF_CONV2D_USE_FP16_ACCUMULATE=1"
CEILING_SHIM = r"""
#include <cstdint>
#include "cc/kernels/cpu/accumulate.h"
#include "cc/kernels/cpu/fprop_fp16.h"
using namespace tf_fp16ops::cpu;
extern "C" const char* isa() { return AccumulateIsa(); }
// Returns the steps done. AVX512-FP16: the fprop micro-kernel (8 x 96 accumulators); other
// paths: AccumulateRowsMulti on 8 rows x 32 lanes (acc: 256 floats, x: terms, w: 32 floats).
extern "C" int64_t run(int64_t terms, float* acc, const float* x, const float* w) {
  const int64_t steps = Fp16MicroKernelProbe(terms, acc);
  if (steps > 0) return steps;
  float* accs[8];
  const float* xs[8];
  for (int r = 0; r < 8; ++r) { accs[r] = acc + 32 * r; xs[r] = x; }
  AccumulateRowsMulti(Accumulation::kHalf, 8, accs, 32, xs, terms, w, 0);
  return 256 * terms;
}
"""


def build_ceiling_lib(tmp):
    src = os.path.join(tmp, "ceiling.cc")
    with open(src, "w") as f:
        f.write(CEILING_SHIM)
    lib = os.path.join(tmp, "ceiling.so")
    subprocess.run(
        [
            "g++",
            "-O3",
            "-std=c++17",
            "-fno-fast-math",
            "-shared",
            "-fPIC",
            "-I",
            ROOT,
            src,
            os.path.join(ROOT, "cc/kernels/cpu/accumulate.cc"),
            os.path.join(ROOT, "cc/kernels/cpu/fprop_fp16.cc"),
            "-o",
            lib,
        ],
        check=True,
        capture_output=True,
    )
    return lib


def ceiling_steps_per_s(lib_path, threads, repeats):
    """fp16 steps per second of the path TF_FP16OPS_CPU_ISA selects, `threads` threads."""
    import ctypes
    import threading

    lib = ctypes.CDLL(lib_path)
    lib.isa.restype = ctypes.c_char_p
    lib.run.argtypes = [ctypes.c_int64] + [ctypes.c_void_p] * 3
    lib.run.restype = ctypes.c_int64
    terms = 1 << 20 if os.environ.get("TF_FP16OPS_CPU_ISA") == "avx512fp16" else 1 << 16
    # acc = 1024 + 1 * 0.25 rounds back to 1024 every step: a steady state with no binary16
    # midpoint and no subnormal, the common case of every path.
    x = np.full(terms, 1.0, np.float32)
    w = np.full(32, 0.25, np.float32)
    accs = [np.full(256, 1024.0, np.float32) for _ in range(threads)]
    steps = lib.run(1, accs[0].ctypes.data, x.ctypes.data, w.ctypes.data)  # steps per term

    def once():
        ts = [
            threading.Thread(
                target=lib.run, args=(terms, a.ctypes.data, x.ctypes.data, w.ctypes.data)
            )
            for a in accs
        ]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

    cpu_sec = median_seconds(once, repeats, clock=time.process_time)
    return lib.isa().decode(), threads * steps * terms / cpu_sec


def median_seconds(fn, repeats: int, clock=time.perf_counter) -> float:
    """Median over `repeats` calls of `clock` time (wall by default; time.process_time gives
    the CPU seconds of all threads of this process)."""
    fn()  # warm-up (kernel construction, thread pool)
    times = []
    for _ in range(repeats):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return statistics.median(times)


def inputs(xs, ws, dtype):
    rng = np.random.default_rng(0)
    return rng.random(xs).astype(np.float16).astype(dtype), (rng.random(ws) - 0.5).astype(
        np.float16
    ).astype(dtype)


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        return next(
            ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith("Model name")
        )
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


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
        out[name] = median_seconds(
            lambda x=x, w=w, pad=pad: tf.nn.conv2d(x, w, 1, pad).numpy(), repeats
        )
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--markdown", help="also write the table to this Markdown file")
    parser.add_argument("--tf-only-json", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--ceiling-json", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.tf_only_json:
        print(json.dumps(tf_only(args.repeats)))
        return 0
    if args.ceiling_json:
        lib, threads = args.ceiling_json.split(",")
        print(json.dumps(ceiling_steps_per_s(lib, int(threads), args.repeats)))
        return 0

    env = dict(os.environ, TF_CONV2D_USE_FP16_ACCUMULATE="1", TF_CPP_MIN_LOG_LEVEL="3")
    sub = subprocess.run(
        [sys.executable, __file__, "--tf-only-json", "--repeats", str(args.repeats)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    tf_fp16acc = json.loads(sub.stdout.strip().splitlines()[-1])

    import tempfile

    import tensorflow as tf

    import tf_fp16ops
    from tf_fp16ops.ops import _ops  # noqa: F401  (loaded library)

    threads = tf.config.threading.get_intra_op_parallelism_threads() or os.cpu_count()
    ceilings = {}
    with tempfile.TemporaryDirectory() as tmp:
        lib = build_ceiling_lib(tmp)
        for isa in ("avx512fp16", "avx512", "avx2", "scalar"):
            r = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--ceiling-json",
                    f"{lib},{threads}",
                    "--repeats",
                    str(args.repeats),
                ],
                env=dict(os.environ, TF_FP16OPS_CPU_ISA=isa),
                capture_output=True,
                text=True,
                check=True,
            )
            got, rate = json.loads(r.stdout.strip().splitlines()[-1])
            if got == isa:
                ceilings[isa] = rate
    chosen = tf_fp16ops.ops.cpu_isa()

    rows = []
    for name, xs, ws, pad in SHAPES:
        fl = flops(xs, ws, pad)
        x16, w16 = inputs(xs, ws, np.float16)
        x32, w32 = inputs(xs, ws, np.float32)
        t = {
            "ours fp16 in, fp16 acc": median_seconds(
                lambda x16=x16, w16=w16, pad=pad: tf_fp16ops.conv2d(
                    x16, w16, 1, pad, accumulation="float16"
                ).numpy(),
                args.repeats,
            ),
            "ours fp16 in, fp32 acc": median_seconds(
                lambda x16=x16, w16=w16, pad=pad: tf_fp16ops.conv2d(
                    x16, w16, 1, pad, accumulation="float32"
                ).numpy(),
                args.repeats,
            ),
            "ours fp32 in, fp32 acc": median_seconds(
                lambda x32=x32, w32=w32, pad=pad: tf_fp16ops.conv2d(
                    x32, w32, 1, pad, accumulation="float32"
                ).numpy(),
                args.repeats,
            ),
            "tf.nn.conv2d fp16": median_seconds(
                lambda x16=x16, w16=w16, pad=pad: tf.nn.conv2d(x16, w16, 1, pad).numpy(),
                args.repeats,
            ),
            "tf.nn.conv2d fp32": median_seconds(
                lambda x32=x32, w32=w32, pad=pad: tf.nn.conv2d(x32, w32, 1, pad).numpy(),
                args.repeats,
            ),
            TF_FP16ACC_KEY: tf_fp16acc[name],
        }
        gf = {k: fl / v / 1e9 for k, v in t.items()}
        # Fraction of the ceiling in steps per CPU second (all threads), so that other load
        # on a shared machine slows both alike.
        cpu_sec = median_seconds(
            lambda x16=x16, w16=w16, pad=pad: tf_fp16ops.conv2d(
                x16, w16, 1, pad, accumulation="float16"
            ).numpy(),
            args.repeats,
            clock=time.process_time,
        )
        rows.append((name, gf, fl / 2 / cpu_sec / ceilings[chosen]))

    lines = [
        f"CPU benchmark, {datetime.date.today().isoformat()}, {cpu_model()}, "
        f"{os.cpu_count()} cores, TensorFlow {tf.__version__}, median of {args.repeats}, GFLOP/s",
        "",
        f"fp16-step ceiling ({threads} threads, G steps per CPU second; 1 step = 1 multiply-add): "
        + ", ".join(f"{k} {v / 1e9:.1f}" for k, v in ceilings.items())
        + f"; the op library uses {chosen}",
        "",
        "| shape | path | GFLOP/s |",
        "|---|---|---|",
    ]
    for name, gf, _ in rows:
        for k, v in gf.items():
            lines.append(f"| {name} | {k} | {v:.1f} |")
    lines += [
        "",
        "| shape | ours fp16-acc / ceiling | ours fp16-acc / TF fp16-acc path "
        "| ours fp32-acc (fp32 in) / tf.nn.conv2d fp32 "
        "| ours fp32-acc (fp16 in) / tf.nn.conv2d fp16 |",
        "|---|---|---|---|---|",
    ]
    for name, gf, frac in rows:
        lines.append(
            f"| {name} | {100 * frac:.0f}% "
            f"| {gf['ours fp16 in, fp16 acc'] / gf[TF_FP16ACC_KEY]:.2f}x "
            f"| {gf['ours fp32 in, fp32 acc'] / gf['tf.nn.conv2d fp32']:.2f}x "
            f"| {gf['ours fp16 in, fp32 acc'] / gf['tf.nn.conv2d fp16']:.2f}x |"
        )
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(
                text + f"\n\nCommand: `python tools/benchmark_cpu.py --repeats {args.repeats}`\n"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
