"""tf_fp16ops.sensitivity with and without reuse of the baseline activations, in one process.

MobileNetV2 (keras.applications, weights=None, 32x32, classifier_activation=None,
keras.utils.set_random_seed(0)) on 8 standard-normal inputs, tolerance 1e-2, no labels, as in
README "Sensitivity". Whole calls are timed (the sweep, which reuse speeds up, and the greedy
set search, which runs whole models either way); calls alternate reuse=False / reuse=True
`--repeats` times, and both must give the same table (checked).

    .venv/bin/python tools/benchmark_sensitivity_reuse.py [--repeats 1] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import datetime
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tf_fp16ops  # noqa: E402


def cpu_name() -> str:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown CPU"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--out")
    args = ap.parse_args()
    keras.utils.set_random_seed(0)
    model = keras.applications.MobileNetV2(
        weights=None, input_shape=(32, 32, 3), classifier_activation=None
    )
    x = np.random.default_rng(0).standard_normal((8, 32, 32, 3)).astype("float32")
    times = {False: [], True: []}
    tables = {}
    for _ in range(args.repeats):
        for reuse in (False, True):
            t0 = time.perf_counter()
            r = tf_fp16ops.sensitivity(model, x, tolerance=1e-2, progress=False, reuse=reuse)
            times[reuse].append(time.perf_counter() - t0)
            tables[reuse] = [(e.name, e.max_rel, e.mean_rel) for e in r.layers]
    same = tables[False] == tables[True]
    full, reused = np.median(times[False]), np.median(times[True])
    n = len(tables[True])
    header = (
        f"{datetime.date.today()}, {cpu_name()}, {os.cpu_count()} CPUs, TensorFlow "
        f"{tf.__version__}, MobileNetV2 32x32, 8 inputs, {n} layers, median of {args.repeats}"
    )
    lines = [
        "| sensitivity (sweep + greedy set search) | wall s |",
        "|---|---|",
        f"| reuse=False (every run the whole model) | {full:.1f} |",
        f"| reuse=True (sweep recomputes downstream only) | {reused:.1f} |",
        f"| speed-up | {full / reused:.2f}x |",
        f"| identical tables | {'yes' if same else 'NO'} |",
    ]
    print(header)
    print("\n".join(lines))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(
                f"# Sensitivity reuse, {header}\n\nCommand: `.venv/bin/python "
                f"tools/benchmark_sensitivity_reuse.py --repeats {args.repeats} --out "
                f"{args.out}`\n\n" + "\n".join(lines) + "\n"
            )


if __name__ == "__main__":
    main()
