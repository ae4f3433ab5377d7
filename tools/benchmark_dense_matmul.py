"""Dense's product on the CPU: the 1x1 Fp16Conv2D that tf_fp16ops.layers.Dense runs today
(`layers.dense_matmul`) against Fp16MatMul (`tf_fp16ops.matmul`), in one process, interleaved.

For each shape and accumulation both paths run on the same operands, each wrapped in
tf.function, `--repeats` times each in alternation; the figure is 2 * rows * Cin * units /
median time (GFLOP/s), the ratio matmul / conv. Both paths compute the same sums in the same
order (over Cin ascending), so their float16-accumulation results are compared bit for bit.

    .venv/bin/python tools/benchmark_dense_matmul.py [--repeats 9] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import datetime
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tf_fp16ops  # noqa: E402
from tf_fp16ops import layers as L  # noqa: E402
from tf_fp16ops.audit.context import read_cpu_model as cpu_name  # noqa: E402

SHAPES = [(256, 512, 512), (64, 768, 3072), (2048, 64, 64), (8, 1024, 1024)]  # rows, Cin, units


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--out", help="write the Markdown table here too")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    lines = [
        "| rows x Cin x units | accumulation | 1x1 conv GFLOP/s | matmul GFLOP/s | matmul / conv |"
        " bits equal |",
        "|---|---|---|---|---|---|",
    ]
    for rows, cin, units in SHAPES:
        for acc in ("float16", "float32"):
            dtype = np.float16 if acc == "float16" else np.float32
            x = tf.constant((rng.random((rows, cin)) - 0.5).astype(dtype))
            w = tf.constant((rng.random((cin, units)) - 0.5).astype(dtype))
            conv = tf.function(lambda a, b, acc=acc: L.dense_matmul(a, b, acc))
            mm = tf.function(lambda a, b, acc=acc: tf_fp16ops.matmul(a, b, accumulation=acc))
            yc, ym = conv(x, w).numpy(), mm(x, w).numpy()
            same = bool(np.array_equal(yc.view(np.uint8), ym.view(np.uint8)))
            times = {"conv": [], "mm": []}
            for _ in range(args.repeats):
                for key, fn in (("conv", conv), ("mm", mm)):
                    t0 = time.perf_counter()
                    fn(x, w).numpy()
                    times[key].append(time.perf_counter() - t0)
            flops = 2.0 * rows * cin * units
            gc = flops / np.median(times["conv"]) / 1e9
            gm = flops / np.median(times["mm"]) / 1e9
            lines.append(
                f"| {rows}x{cin}x{units} | {acc} | {gc:.2f} | {gm:.2f} | {gm / gc:.2f}x | "
                f"{'yes' if same else 'no'} |"
            )
            print(lines[-1], flush=True)
    header = (
        f"Dense product: 1x1 Fp16Conv2D vs Fp16MatMul, {datetime.date.today()}, {cpu_name()}, "
        f"{os.cpu_count()} CPUs, TensorFlow {tf.__version__}, CPU path "
        f"{tf_fp16ops.ops.cpu_isa()}, median of {args.repeats}, peers interleaved"
    )
    print(header)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(
                f"# {header}\n\nCommand: `.venv/bin/python tools/benchmark_dense_matmul.py"
                f" --repeats {args.repeats} --out {args.out}`\n\n" + "\n".join(lines) + "\n"
            )


if __name__ == "__main__":
    main()
