"""CPU GFLOP/s of each tf_fp16ops layer type against its Keras original, in one process.

For each layer type the Keras layer and the tf_fp16ops layer with accumulation='float32' and
'float16' (same weights, float32 model, inference, each wrapped in tf.function; with
`--policy mixed_float16` a mixed-precision model fed float16 inputs, as the layer before would
give, so that no cast of the activations surrounds the op) run on the same input, interleaved,
`--repeats` times each; the figure is 2 * multiply-adds / median time
(GFLOP/s) and the ratio is ours / Keras. A second table times the training step of each layer,
forward and both gradients (input and kernel, through tf.GradientTape in tf.function, a seeded
random output gradient: 3x the forward multiply-adds), and gives the float16-accumulation rate
of both as a fraction of the ceiling of the ISA path in use (the op library's Tacc=half
micro-kernels, FpropHalfCeilingProbe, as tools/benchmark_cpu.py measures it), in fp16 steps per
CPU second of the process. The ceiling of each row is the probe timed in turn with that row's
calls (the best of those runs), so that a machine whose speed drifts during the run moves both
alike. Both fractions are also given in steady state (the calls back to back for 50 ms untimed,
then timed, the probe in turn: tools/benchmark_cpu.py `steady_in_turn`), as a model's layers run:
the first calls after an idle moment or a probe run are slower. With `--calls C` every timed
tf.function runs the layer C times, on C distinct input tensors of equal values (so that Grappler
merges no call; the train step takes the gradient of all C outputs, the weights' gradients summed
as a model that reuses a layer gets them), and the figures count C calls: the fixed cost of one
tf.function call (about 0.25 ms of CPU here, as much as a small layer's whole forward) is then
shared by C layer calls, as in a model, whose graph runs all its layers in one call.
Multiply-adds per call:
  DepthwiseConv2D   N*P*Q*C*M*KH*KW
  SeparableConv2D   depthwise + N*P*Q*(C*M)*filters
  Conv2DTranspose   N*H*W*C*KH*KW*filters (every input element meets the whole kernel)
  Conv1D            N*L'*K*C*filters
  Dense             rows*Cin*units

    .venv/bin/python tools/benchmark_layers.py [--repeats 9] [--calls 1] [--policy mixed_float16]
        [--out benchmarks/results/layers_DATE.md]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import time

from tf_fp16ops._platform.quiet import import_tensorflow

# TensorFlow's start-up lines filtered, as in the package's other tools.
tf = import_tensorflow()

import keras  # noqa: E402
import numpy as np  # noqa: E402

import tf_fp16ops  # noqa: E402
from tf_fp16ops import layers as L  # noqa: E402

MAX_CALLS = 16  # --calls: the MobileNetV2 row then holds 16 inputs, outputs and input gradients
# of 14.5 MB each (float32) in one training step: about 0.7 GB

# name, keras class, ours, args, input shape, multiply-adds
CASES = [
    (
        "DepthwiseConv2D 3x3 M=1",
        keras.layers.DepthwiseConv2D,
        L.DepthwiseConv2D,
        dict(kernel_size=3, padding="same"),
        (4, 32, 32, 64),
        4 * 32 * 32 * 64 * 9,
    ),
    # A depthwise layer of a real model (MobileNetV2's second block: 56x56, 144 channels,
    # batch 8): the row above does 2.4 M multiply-adds, so fixed per-call costs outside the op
    # library (one tf.function call, the casts) take much of its time; this one does 14x more.
    (
        "DepthwiseConv2D 3x3 M=1 (MobileNetV2 8x56x56x144)",
        keras.layers.DepthwiseConv2D,
        L.DepthwiseConv2D,
        dict(kernel_size=3, padding="same"),
        (8, 56, 56, 144),
        8 * 56 * 56 * 144 * 9,
    ),
    (
        "SeparableConv2D 3x3 64->64",
        keras.layers.SeparableConv2D,
        L.SeparableConv2D,
        dict(filters=64, kernel_size=3, padding="same"),
        (4, 32, 32, 64),
        4 * 32 * 32 * 64 * 9 + 4 * 32 * 32 * 64 * 64,
    ),
    (
        "Conv2DTranspose 3x3 s2 64->32",
        keras.layers.Conv2DTranspose,
        L.Conv2DTranspose,
        dict(filters=32, kernel_size=3, strides=2, padding="same"),
        (4, 16, 16, 64),
        4 * 16 * 16 * 64 * 9 * 32,
    ),
    (
        "Conv1D k3 causal 64->64",
        keras.layers.Conv1D,
        L.Conv1D,
        dict(filters=64, kernel_size=3, padding="causal"),
        (8, 256, 64),
        8 * 256 * 3 * 64 * 64,
    ),
    (
        "Dense 512->512 (256 rows)",
        keras.layers.Dense,
        L.Dense,
        dict(units=512),
        (256, 512),
        256 * 512 * 512,
    ),
]


def _cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return platform.processor() or "unknown CPU"


def _forward_fn(layer, xs):
    """The layer's inference on each of `xs` in one tf.function, traced once: `xs -> outputs`."""
    return tf.function(lambda xs: [layer(x) for x in xs]).get_concrete_function(xs)


def _train_fn(layer, xs, dys):
    """The training step of `layer` on each of `xs` in one tf.function, traced once: forward,
    input gradients and the weights' gradients (summed over the calls) for the output gradients
    `dys`. The outputs are returned too: unused, the forward op would be pruned (the gradients of
    a linear op do not read its output)."""

    def step(xs):
        with tf.GradientTape() as tape:
            tape.watch(xs)
            outs = [layer(x) for x in xs]
        grads = tape.gradient(outs, xs + layer.trainable_weights, output_gradients=dys)
        return outs + grads

    return tf.function(step).get_concrete_function(xs)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument(
        "--calls", type=int, default=1, help="layer calls per tf.function call (default 1)"
    )
    parser.add_argument("--out", default=None, help="write the Markdown table here")
    parser.add_argument(
        "--policy",
        choices=("float32", "mixed_float16"),
        default="float32",
        help="Keras dtype policy of the layers (default float32: the op's casts are timed too)",
    )
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    # Every call's input and output stay alive through one tf.function call.
    if not 1 <= args.calls <= MAX_CALLS:
        parser.error(f"--calls must be in [1, {MAX_CALLS}], got {args.calls}")
    # Checked before the run, not when the tables are written at its end.
    if args.out is not None and not os.path.isdir(os.path.dirname(os.path.abspath(args.out))):
        parser.error(f"--out: no directory {os.path.dirname(os.path.abspath(args.out))!r}")
    if args.out is not None and (not args.out or os.path.isdir(args.out)):
        parser.error(f"--out: {args.out!r} is not a file name")
    if args.out is not None and not os.access(os.path.dirname(os.path.abspath(args.out)), os.W_OK):
        parser.error(f"--out: cannot write in {os.path.dirname(os.path.abspath(args.out))!r}")

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from benchmark_cpu import ceiling_rate, steady_in_turn

    keras.mixed_precision.set_global_policy(args.policy)
    # The activations' dtype: float16 in a mixed-precision model (the previous layer's output).
    x_dtype = "float16" if args.policy == "mixed_float16" else "float32"
    threads = tf.config.threading.get_intra_op_parallelism_threads() or os.cpu_count()
    isa, probe_rate = ceiling_rate(threads, seconds=0.05)
    ceilings = []
    rows, train_rows = [], []
    # A bar on a terminal only: Keras draws it with carriage returns and colour codes on any
    # POSIX stdout, which would land in a redirected table.
    progress = (
        keras.utils.Progbar(len(CASES), unit_name="layer type") if sys.stdout.isatty() else None
    )
    for i, (name, keras_cls, ours_cls, kw, shape, macs) in enumerate(CASES):
        x = tf.constant(np.random.default_rng(0).normal(size=shape).astype(x_dtype))
        # The C inputs of one call: distinct tensors of equal values.
        xs = [tf.identity(x) for _ in range(args.calls)]
        macs *= args.calls
        ref = keras_cls(**kw)
        ref(x)
        peers = {"keras": ref}
        for acc in ("float32", "float16"):
            layer = ours_cls(accumulation=acc, **kw)
            layer(x)
            layer.set_weights(ref.get_weights())
            peers[acc] = layer
        fns = {k: _forward_fn(v, xs) for k, v in peers.items()}
        for f in fns.values():
            [r.numpy() for r in f(xs)]
        times = {k: [] for k in fns}
        for _ in range(args.repeats):
            for k, f in fns.items():
                t = time.perf_counter()
                [r.numpy() for r in f(xs)]
                times[k].append(time.perf_counter() - t)
        gflops = {k: 2 * macs / float(np.median(v)) / 1e9 for k, v in times.items()}

        # The fp16-accumulation forward again in CPU seconds, and the training step (forward,
        # input gradient, kernel gradient) of Keras and of ours, interleaved. The output
        # gradient is random (seeded, the same for every peer), as a loss gives: the implicit
        # all-ones one makes most fp16 sums of the gradients exact binary16 midpoints, the rare
        # path of the AVX2 and AVX-512 kHalf step (README "Performance (CPU)").
        dy = tf.constant(
            np.random.default_rng(1).normal(size=ref(x).shape).astype(ref.compute_dtype)
        )
        dys = [dy] * args.calls
        cpu_fns = {
            "fwd16": fns["float16"],
            "train_keras": _train_fn(ref, xs, dys),
            "train16": _train_fn(peers["float16"], xs, dys),
        }
        for f in cpu_fns.values():
            [t.numpy() for t in tf.nest.flatten(f(xs))]
        cpu = {k: [] for k in cpu_fns}
        wall = {k: [] for k in cpu_fns}
        probe_rate()  # warm-up, not counted
        rates = []
        for _ in range(args.repeats):
            for k, f in cpu_fns.items():
                t, c = time.perf_counter(), time.process_time()
                [r.numpy() for r in tf.nest.flatten(f(xs))]
                cpu[k].append(time.process_time() - c)
                wall[k].append(time.perf_counter() - t)
            # The ceiling in turn with the calls, 20 ms after them (TensorFlow's pool threads
            # spin for a while after an op).
            time.sleep(0.02)
            rates.append(probe_rate())
        ceiling = max(rates)
        ceilings.append(ceiling)
        med = {k: float(np.median(v)) for k, v in cpu.items()}
        medw = {k: float(np.median(v)) for k, v in wall.items()}
        # The same two calls in steady state (back to back for 50 ms untimed, then timed, the
        # probe in turn; tools/benchmark_cpu.py `steady_in_turn`), as a model's layers run.
        steady = {
            k: steady_in_turn(
                lambda f=cpu_fns[k], xs=xs: tf.nest.flatten(f(xs)), probe_rate, args.repeats
            )
            for k in ("fwd16", "train16")
        }
        train_rows.append(
            (
                name,
                macs / med["fwd16"] / ceiling,
                3 * macs / med["train16"] / ceiling,
                macs / steady["fwd16"][0] / steady["fwd16"][1],
                3 * macs / steady["train16"][0] / steady["train16"][1],
                medw["train_keras"] / medw["train16"],
            )
        )
        rows.append((name, gflops))
        if progress is not None:
            progress.update(i + 1)
    cpu = _cpu_model()
    header = (
        f"CPU: {cpu} ({os.cpu_count()} logical CPUs), TensorFlow {tf.__version__}, "
        f"ops ISA path {tf_fp16ops.ops.cpu_isa()}, median of {args.repeats}, "
        f"{args.calls} layer call{'s' if args.calls > 1 else ''} per tf.function call, "
        f"{datetime.date.today().isoformat()}; GFLOP/s = 2 * multiply-adds / median time"
    )
    lines = [
        header,
        "",
        f"| layer ({args.policy} model, inference) | Keras | ours fp32 acc | ours fp16 acc | "
        "ratio fp32/Keras | ratio fp16/Keras |",
        "|---|---|---|---|---|---|",
    ]
    for name, g in rows:
        lines.append(
            f"| {name} | {g['keras']:.2f} | {g['float32']:.2f} | {g['float16']:.2f} | "
            f"{g['float32'] / g['keras']:.2f}x | {g['float16'] / g['keras']:.2f}x |"
        )
    lines += [
        "",
        f"Float16 accumulation against the {isa} ceiling ({min(ceilings) / 1e9:.2f}-"
        f"{max(ceilings) / 1e9:.2f} G fp16 steps per CPU second over the rows, {threads} threads, "
        f"each row's the best of {args.repeats} probe runs in turn with its calls; steps = "
        "multiply-adds, 3x for forward + both gradients):",
        "",
        f"| layer ({args.policy} model) | fwd fp16 acc / ceiling (CPU s) "
        "| fwd + both gradients fp16 acc / ceiling (CPU s) "
        "| fwd; fwd + both gradients, steady state "
        "| fwd + both gradients fp16 / Keras (wall) |",
        "|---|---|---|---|---|",
    ]
    for name, fwd, train, fwd_s, train_s, vs_keras in train_rows:
        lines.append(
            f"| {name} | {100 * fwd:.0f}% | {100 * train:.0f}% "
            f"| {100 * fwd_s:.0f}%; {100 * train_s:.0f}% | {vs_keras:.2f}x |"
        )
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(f"# tools/benchmark_layers.py\n\n{text}\n")


if __name__ == "__main__":
    main()
