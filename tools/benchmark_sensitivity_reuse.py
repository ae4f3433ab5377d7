"""tf_fp16ops.sensitivity with reuse=False (whole-model runs, the sweep before reuse existed),
reuse=True and reuse='stacked', in one process.

MobileNetV2 (keras.applications, weights=None, 32x32, classifier_activation=None,
keras.utils.set_random_seed(0)) on 8 standard-normal inputs, tolerance 1e-2, no labels, as in
README "Sensitivity". Each call is timed whole and, separately, its one-at-a-time sweep (the
time spent in the sweep's model calls, which reuse speeds up; the greedy set search runs whole
models in every mode); calls cycle through the three modes `--repeats` times after one warm-up
call, and all must give the same table (checked).

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
from tf_fp16ops.audit.context import read_cpu_model as cpu_name  # noqa: E402
from tf_fp16ops.layer_sensitivity import replicas  # noqa: E402

MODES = (False, True, "stacked")


class SweepClock:
    """Sums the wall time of the sweep's per-batch model calls (`Replicas.__call__` with the
    sweep function) while installed."""

    def __init__(self):
        self.seconds = 0.0
        self._call = replicas.Replicas.__call__
        clock = self

        def timed(replicas, fn, xb):
            t0 = time.perf_counter()
            try:
                return clock._call(replicas, fn, xb)
            finally:
                if fn.__name__ == "sweep_fn":
                    clock.seconds += time.perf_counter() - t0

        replicas.Replicas.__call__ = timed


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
    clock = SweepClock()
    tf_fp16ops.sensitivity(model, x[:2], tolerance=1e-2, progress=False, layers=["Conv1"])
    times = {m: [] for m in MODES}
    sweeps = {m: [] for m in MODES}
    tables = {}
    for _ in range(args.repeats):
        for reuse in MODES:
            clock.seconds = 0.0
            t0 = time.perf_counter()
            r = tf_fp16ops.sensitivity(model, x, tolerance=1e-2, progress=False, reuse=reuse)
            times[reuse].append(time.perf_counter() - t0)
            sweeps[reuse].append(clock.seconds)
            tables[reuse] = [(e.name, e.max_rel, e.mean_rel, e.in_fp16_set) for e in r.layers]
    same = tables[False] == tables[True] == tables["stacked"]
    n = len(tables[True])
    header = (
        f"{datetime.date.today()}, {cpu_name()}, {os.cpu_count()} CPUs, TensorFlow "
        f"{tf.__version__}, MobileNetV2 32x32, 8 inputs, {n} layers, median of {args.repeats}"
    )
    whole = {m: float(np.median(times[m])) for m in MODES}
    sweep = {m: float(np.median(sweeps[m])) for m in MODES}
    lines = [
        "| reuse | sweep s | sweep speed-up | whole call s | whole-call speed-up |",
        "|---|---|---|---|---|",
    ] + [
        f"| {m!r} | {sweep[m]:.2f} | {sweep[False] / sweep[m]:.2f}x | {whole[m]:.1f} | "
        f"{whole[False] / whole[m]:.2f}x |"
        for m in MODES
    ]
    lines.append(f"\nIdentical tables (names, max_rel, mean_rel, set): {'yes' if same else 'NO'}")
    print(header)
    print("\n".join(lines))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(
                f"# Sensitivity sweep, {header}\n\nCommand: `.venv/bin/python "
                f"tools/benchmark_sensitivity_reuse.py --repeats {args.repeats} --out "
                f"{args.out}`\n\n" + "\n".join(lines) + "\n"
            )


if __name__ == "__main__":
    main()
