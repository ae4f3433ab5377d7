#!/usr/bin/env python3
"""CPU benchmark: Fp16Conv2D (float16 and float32 accumulation) side by side with tf.nn.conv2d
(float16, float32) in one process, and TensorFlow's own fp16-accumulate CPU path
(TF_CONV2D_USE_FP16_ACCUMULATE=1, read once per process) in a subprocess on the same inputs.

Reports GFLOP/s (2 * N * P * Q * K * KH * KW * Cg / median time) and the ratios the op library
targets: ours fp16-accumulate vs TF's fp16-accumulate path, ours float vs tf.nn.conv2d float
(forward, and the float32 dgrad and wgrad against TensorFlow's Conv2DBackpropInput/Filter), each
as a ratio of wall time and of the process's CPU seconds. For float32 inputs "ours" is the public
function (`tf_fp16ops.conv2d` and its gradients), which runs TensorFlow's own op where that is
faster (tf_fp16ops/_platform/stock_conv.py), and "kernel" the op library's own CPU kernel
(`tf_fp16ops.ops.raw_ops`: the generated op functions behind AutoGraph's do_not_convert, about
2.5 us a call), both reported. Peers are timed in turn within every
repeat (see `interleaved`).

The ceiling of each instruction-set path (AVX512-FP16, AVX-512, AVX2, scalar; one subprocess
each, TF_FP16OPS_CPU_ISA capping the path): the op library's own Tacc=half fprop micro-kernel of
that path on its full accumulator tile, operands in L1 (cc/kernels/cpu/conv2d_cpu.h,
FpropHalfCeilingProbe, called through ctypes on the loaded `_fp16ops.so`; where the path has two
kHalf micro-kernels, as AVX2 has, the faster of them), on as many threads as
TensorFlow's intra-op pool, in fp16 steps (multiply-adds) per CPU second of the probe's own
threads, the best of the repeats (a peak rate). Each shape's fp16-accumulation rate, in steps
per CPU second of its calls, is reported as a fraction of the ceiling of the path the op library
chose, that path's probe timed in turn with the shape's calls within every repeat (the shape's
median, the probe's best), so that a change of the machine's speed during the run falls on both.
A fraction above 100% means the ceiling did not measure the kernel the convolution ran: it is
printed as a benchmark error (and the exit status is 1), never as a figure. The fraction is given
twice: for eager calls (Python dispatch and .numpy() included, as a user calling the op from
Python pays them) and for calls made GRAPH_CALLS at a time back to back in one tf.function in
steady state (the per-call cost inside a model's graph: `steady_in_turn`, the probe in turn with
each batch of timed calls). The float32 ratios are given again for GRAPH_CALLS calls per
tf.function call of each peer (`graph_fp32_peers`), where no per-call Python runs: what a
model's graph sees.
`--calls C` times the eager peers (the ceiling fraction's, in turn with the probe, and those of
the GFLOP/s, fp32 and gradient tables) C calls at a time back to back (each call with its
.numpy(), the time per call reported): one call per timing (the default) measures a lone call
(for the ceiling fraction: after the probe's 20 ms pause, TensorFlow's pool threads asleep), C
calls the rate of a loop of them, whose medians move much less between runs on a small shared
machine (the peers still in turn within every repeat).
Usage: python tools/benchmark_cpu.py [--repeats R] [--calls C] [--markdown FILE]
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
ISAS = ("avx512fp16", "avx512", "avx2", "scalar")
PASSES = ("fprop", "dgrad", "wgrad")


# The micro-kernel variants FpropHalfCeilingProbe may have on one path
# (cc/kernels/cpu/conv2d_cpu.h): 0 the row tiles of 16 lanes (or AVX512-FP16's spatial kernel),
# 1 rows of 32 lanes (on AVX2 its other kHalf kernel, which rows of 32 lanes or more run; on
# AVX512-FP16 the register tile of its NHWC kernels and Fp16MatMul).
CEILING_VARIANTS = (0, 1)


def ceiling_probe(threads: int, seconds: float = 0.2, variant: int = 0):
    """(path, rate): `rate()` runs the op library's Tacc=half fprop micro-kernel `variant` on the
    path TF_FP16OPS_CPU_ISA selects in this process on `threads` threads at once, about `seconds`
    of one thread each, and returns its fp16 steps per CPU second of those threads (not of the
    process: TensorFlow's pool threads spin for a while after each op and would be counted).
    `rate` is None where the path has no such variant."""
    import ctypes
    import threading

    from tf_fp16ops import ops
    from tf_fp16ops._platform import library as _library

    isa = ops.cpu_isa()  # loads the op library (and fixes its path choice)
    probe = ctypes.CDLL(str(_library.LIBRARY_PATH)).TfFp16opsFpropHalfCeilingProbe
    probe.argtypes = [ctypes.c_int64, ctypes.POINTER(ctypes.c_float), ctypes.c_int]
    probe.restype = ctypes.c_int64
    sinks = [ctypes.c_float() for _ in range(threads)]
    if probe(1, ctypes.byref(sinks[0]), variant) == 0:
        return isa, None
    reps = 16  # calibrated so that one run takes about `seconds` of one thread
    while True:
        t0 = time.perf_counter()
        probe(reps, ctypes.byref(sinks[0]), variant)
        dt = time.perf_counter() - t0
        if dt > 0.02:
            break
        reps *= 4
    reps = max(1, int(reps * seconds / dt))
    done = []  # (steps, CPU seconds of the thread) per thread

    def one(sink) -> None:
        c0 = time.thread_time()
        steps = probe(reps, ctypes.byref(sink), variant)
        done.append((steps, time.thread_time() - c0))

    def rate() -> float:
        done.clear()
        ts = [threading.Thread(target=one, args=(s,)) for s in sinks]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return sum(d[0] for d in done) / sum(d[1] for d in done)

    return isa, rate


def ceiling_rate(threads: int, seconds: float = 0.2):
    """(path, rate): `rate()` runs every micro-kernel variant of the path in use
    (`ceiling_probe`) and returns the fastest one's rate: the path's ceiling is the fastest kernel
    it runs, so that no shape whose calls run any of its kernels can exceed it."""
    probes = [ceiling_probe(threads, seconds, v) for v in CEILING_VARIANTS]
    rates = [r for _, r in probes if r is not None]
    return probes[0][0], lambda: max(r() for r in rates)


def ceiling_steps_per_s(threads: int, repeats: int) -> tuple[str, float]:
    """(path, fp16 steps per CPU second) of `ceiling_rate`, the best of `repeats` runs (a peak
    rate)."""
    isa, rate = ceiling_rate(threads)
    rate()  # warm-up
    return isa, max(rate() for _ in range(repeats))


def ceiling_cell(fraction: float) -> tuple[str, bool]:
    """The table cell for a shape's fraction of its path's ceiling, and whether it is a figure:
    above 100% the ceiling is not a bound of that shape, which is a benchmark error."""
    if not fraction <= 1.0:
        return f"**benchmark error: {100 * fraction:.0f}% exceeds the ceiling**", False
    return f"{100 * fraction:.0f}%", True


def interleaved(fns: dict, repeats: int, calls: int = 1) -> dict:
    """{key: (median wall seconds, median CPU seconds of the process)} per call of each callable
    (`calls` calls back to back per timing), the
    peers timed in turn within every repeat, so that a change of the machine's load during the
    run falls on all of them alike, in reverse order every other repeat: the call that follows
    another op runs slower (caches, TensorFlow's allocator and thread pool; on a 2-core Zen 4
    guest TensorFlow's own Conv2DBackpropFilter timed 0.70x of itself when it always followed
    the op library's kernel); reversed, every peer runs right after itself every other repeat
    and no peer always follows the same other one."""
    for fn in fns.values():
        fn()  # warm-up (kernel construction, thread pool)
    wall = {k: [] for k in fns}
    cpu = {k: [] for k in fns}
    keys = list(fns)
    for r in range(repeats):
        for k in keys if r % 2 == 0 else keys[::-1]:
            fn = fns[k]
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(calls):
                fn()
            wall[k].append((time.perf_counter() - t0) / calls)
            cpu[k].append((time.process_time() - c0) / calls)
    return {k: (statistics.median(wall[k]), statistics.median(cpu[k])) for k in fns}


def steady_in_turn(fn, probe_rate, repeats: int, settle_s: float = 0.05, timed: int = 3):
    """(median CPU seconds of the process per call of `fn`, best `probe_rate()`): each repeat
    calls `fn` back to back for `settle_s` untimed, times the next `timed` calls, then runs the
    probe 20 ms later (once TensorFlow's pool threads have stopped spinning). The untimed calls
    are there because the first calls after an idle or probe moment run slower: on a 2-core
    Xeon KVM guest a 1x1x128 fprop took 1.9, 1.4, 1.1 ms of CPU in its first three calls after a
    200 ms sleep and 0.8 ms back to back, and 1.55 ms right after a probe run (steady state is what
    a model's graph sees, its ops running back to back)."""
    cpu, rates = [], []
    for r in range(repeats + 1):  # repeat 0: warm-up, not counted
        end = time.perf_counter() + settle_s
        while time.perf_counter() < end:
            fn()
        c0 = time.process_time()
        for _ in range(timed):
            fn()
        dt = (time.process_time() - c0) / timed
        time.sleep(0.02)
        rate = probe_rate()
        if r:
            cpu.append(dt)
            rates.append(rate)
    return statistics.median(cpu), max(rates)


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


def tf_only(repeats: int, calls: int = 1) -> dict:
    from tf_fp16ops._platform.quiet import import_tensorflow

    tf = import_tensorflow()  # TensorFlow's noise lines filtered, as in the package's tools

    fns = {}
    for name, xs, ws, pad in SHAPES:
        x, w = inputs(xs, ws, np.float16)
        fns[name] = lambda x=x, w=w, pad=pad: tf.nn.conv2d(x, w, 1, pad).numpy()
    return {k: v[0] for k, v in interleaved(fns, repeats, calls).items()}


def kernel_attrs(tf, pad) -> dict:
    """The Fp16Conv2D attrs of a stride-1 NHWC float32-accumulation call with `pad`."""
    one = [1, 1, 1, 1]
    return dict(
        Tacc=tf.float32,
        strides=one,
        padding=pad,
        explicit_paddings=[],
        data_format="NHWC",
        dilations=one,
    )


def peers(tf, tf_fp16ops, x16, w16, x32, w32, pad) -> dict:
    """The in-process paths of one shape, keyed by their table names."""
    raw_ops, attrs = tf_fp16ops.ops.raw_ops, kernel_attrs(tf, pad)
    return {
        "ours fp16 in, fp16 acc": lambda: tf_fp16ops.conv2d(
            x16, w16, 1, pad, accumulation="float16"
        ).numpy(),
        "ours fp16 in, fp32 acc": lambda: tf_fp16ops.conv2d(
            x16, w16, 1, pad, accumulation="float32"
        ).numpy(),
        "ours fp32 in, fp32 acc": lambda: tf_fp16ops.conv2d(
            x32, w32, 1, pad, accumulation="float32"
        ).numpy(),
        "kernel fp32 in, fp32 acc": lambda: raw_ops.fp16_conv2d(x32, w32, **attrs).numpy(),
        "tf.nn.conv2d fp16": lambda: tf.nn.conv2d(x16, w16, 1, pad).numpy(),
        "tf.nn.conv2d fp32": lambda: tf.nn.conv2d(x32, w32, 1, pad).numpy(),
    }


# Calls of the op per tf.function call in the in-graph figure.
GRAPH_CALLS = 8


def graph_fp16acc(tf, tf_fp16ops, x16, w16, pad, calls: int = GRAPH_CALLS):
    """A callable that runs `calls` float16-accumulation calls of one shape back to back in one
    tf.function (as the ops of a model run), on `calls` distinct input tensors (equal values:
    distinct arguments keep Grappler from merging the calls). The results are the function's
    outputs (so every call runs), left as tensors as the next op of a model takes them: no
    .numpy() copy."""
    xs = [tf.constant(x16) for _ in range(calls)]
    w = tf.constant(w16)

    # Traced once here into a concrete function (a graph of its own per shape): calling it
    # skips tf.function's dispatch, and TensorFlow's retracing warning, which counts the traces
    # of every function made from the same Python code.
    run = tf.function(
        lambda xs, w: [tf_fp16ops.conv2d(x, w, 1, pad, accumulation="float16") for x in xs]
    ).get_concrete_function(xs, w)
    return lambda: run(xs, w)


def float32_operands(xs, ws, pad):
    """x, w (`inputs`) and an output gradient dy [N, P, Q, K] of one stride-1 shape, float32
    NumPy arrays of binary16 values."""
    x, w = inputs(xs, ws, np.float32)
    n, h, wd, _ = xs
    kh, kw, _, k = ws
    p, q = (h, wd) if pad == "SAME" else (h - kh + 1, wd - kw + 1)
    dy = np.random.default_rng(1).random((n, p, q, k)).astype(np.float16).astype(np.float32)
    return x, w, dy


def _calls_of(body):
    """The function `(xs, dys) -> [body(x, dy) for each pair]`, with `body` closed over (not a
    default argument, which tf.function would take as a third input)."""
    return lambda xs, dys: [body(a, b) for a, b in zip(xs, dys, strict=True)]


def graph_fp32_peers(tf, tf_fp16ops, xs, ws, pad, calls: int = GRAPH_CALLS) -> dict:
    """Float32 (Tacc=float) fprop, dgrad and wgrad of one shape, ours (the public functions) and
    TensorFlow's, `calls` at a time back to back in one tf.function each (as a model's graph
    runs them), on distinct operands (equal values) so that Grappler merges no call; keyed by
    (pass, who). Results left as tensors, as the next op of a model takes them."""
    x, w, dy = (tf.constant(a) for a in float32_operands(xs, ws, pad))
    xs_, dys = [tf.identity(x) for _ in range(calls)], [tf.identity(dy) for _ in range(calls)]
    xsz, wsz = tf.constant(xs, tf.int32), tf.constant(ws, tf.int32)
    one = [1, 1, 1, 1]
    bodies = {
        ("fprop", "ours"): lambda x, dy: tf_fp16ops.conv2d(x, w, 1, pad, accumulation="float32"),
        ("fprop", "tf"): lambda x, dy: tf.nn.conv2d(x, w, 1, pad),
        ("dgrad", "ours"): lambda x, dy: tf_fp16ops.conv2d_backprop_input(
            xsz, w, dy, 1, pad, accumulation="float32"
        ),
        ("dgrad", "tf"): lambda x, dy: tf.raw_ops.Conv2DBackpropInput(
            input_sizes=xsz, filter=w, out_backprop=dy, strides=one, padding=pad
        ),
        ("wgrad", "ours"): lambda x, dy: tf_fp16ops.conv2d_backprop_filter(
            x, wsz, dy, 1, pad, accumulation="float32"
        ),
        ("wgrad", "tf"): lambda x, dy: tf.raw_ops.Conv2DBackpropFilter(
            input=x, filter_sizes=wsz, out_backprop=dy, strides=one, padding=pad
        ),
    }
    out = {}
    for key, body in bodies.items():
        fn = tf.function(_calls_of(body)).get_concrete_function(xs_, dys)  # as in graph_fp16acc
        out[key] = lambda fn=fn: fn(xs_, dys)
    return out


def gradient_peers(tf, tf_fp16ops, xs, ws, pad) -> dict:
    """dgrad and wgrad of one shape in float32 (Tacc=float), ours and TensorFlow's, keyed by
    (pass, who)."""
    x, w, dy = float32_operands(xs, ws, pad)
    xsz, wsz = tf.constant(xs, tf.int32), tf.constant(ws, tf.int32)
    raw_ops, attrs = tf_fp16ops.ops.raw_ops, kernel_attrs(tf, pad)
    return {
        ("dgrad", "kernel"): lambda: raw_ops.fp16_conv2d_backprop_input(
            xsz, w, dy, **attrs
        ).numpy(),
        ("wgrad", "kernel"): lambda: raw_ops.fp16_conv2d_backprop_filter(
            x, wsz, dy, **attrs
        ).numpy(),
        ("dgrad", "ours"): lambda: tf_fp16ops.conv2d_backprop_input(
            xsz, w, dy, 1, pad, accumulation="float32"
        ).numpy(),
        ("dgrad", "tf"): lambda: tf.raw_ops.Conv2DBackpropInput(
            input_sizes=xsz, filter=w, out_backprop=dy, strides=[1, 1, 1, 1], padding=pad
        ).numpy(),
        ("wgrad", "ours"): lambda: tf_fp16ops.conv2d_backprop_filter(
            x, wsz, dy, 1, pad, accumulation="float32"
        ).numpy(),
        ("wgrad", "tf"): lambda: tf.raw_ops.Conv2DBackpropFilter(
            input=x, filter_sizes=wsz, out_backprop=dy, strides=[1, 1, 1, 1], padding=pad
        ).numpy(),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--calls", type=int, default=1, help="eager calls per timing (default 1; see above)"
    )
    parser.add_argument("--markdown", help="also write the table to this Markdown file")
    parser.add_argument("--tf-only-json", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--ceiling-json", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.calls < 1:
        parser.error(f"--repeats and --calls must be >= 1, got {args.repeats} and {args.calls}")
    if args.tf_only_json:
        print(json.dumps(tf_only(args.repeats, args.calls)))
        return 0
    if args.ceiling_json:
        print(json.dumps(ceiling_steps_per_s(int(args.ceiling_json), args.repeats)))
        return 0

    env = dict(os.environ, TF_CONV2D_USE_FP16_ACCUMULATE="1", TF_CPP_MIN_LOG_LEVEL="3")
    sub = subprocess.run(
        [sys.executable, __file__, "--tf-only-json", "--repeats", str(args.repeats)]
        + ["--calls", str(args.calls)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    tf_fp16acc = json.loads(sub.stdout.strip().splitlines()[-1])

    from tf_fp16ops._platform.quiet import import_tensorflow

    tf = import_tensorflow()  # TensorFlow's noise lines filtered, as in the package's tools

    import tf_fp16ops
    from tf_fp16ops.ops import _ops  # noqa: F401  (loaded library)

    threads = tf.config.threading.get_intra_op_parallelism_threads() or os.cpu_count()
    ceilings = {}
    for isa in ISAS:
        r = subprocess.run(
            [
                sys.executable,
                __file__,
                "--ceiling-json",
                str(threads),
                "--repeats",
                str(args.repeats),
            ],
            env=dict(os.environ, TF_FP16OPS_CPU_ISA=isa, TF_CPP_MIN_LOG_LEVEL="3"),
            capture_output=True,
            text=True,
            check=True,
        )
        got, rate = json.loads(r.stdout.strip().splitlines()[-1])
        if got == isa:
            ceilings[isa] = rate
    chosen = tf_fp16ops.ops.cpu_isa()
    _, probe_rate = ceiling_rate(threads, seconds=0.05)
    in_turn = []

    rows, grads, graph32 = [], [], []
    for name, xs, ws, pad in SHAPES:
        fl = flops(xs, ws, pad)
        x16, w16 = inputs(xs, ws, np.float16)
        x32, w32 = inputs(xs, ws, np.float32)
        fns = peers(tf, tf_fp16ops, x16, w16, x32, w32, pad)
        t = interleaved(fns, args.repeats, args.calls)
        gf = {k: fl / v[0] / 1e9 for k, v in t.items()}
        gf[TF_FP16ACC_KEY] = fl / tf_fp16acc[name] / 1e9
        # Fraction of the ceiling in steps per CPU second (all threads), so that other load
        # on a shared machine slows both alike; the fp32 ratio in CPU seconds for the same
        # reason (wall-clock ratios are in the GFLOP/s table).
        # The ceiling is the chosen path's probe timed in turn with this shape's calls, the best
        # of those runs (a peak rate): a probe timed apart moved by 5-20% between runs on a
        # 2-core Zen 4 guest, while the 3x3x128 shape ran the probe's tile at 100-106% of it,
        # and single in-turn runs still dipped by up to 40%. In a pass of its own, so that the
        # probe does not change the figures of the table above; each probe run starts 20 ms
        # after the op, once TensorFlow's pool threads have stopped spinning.
        rates = []

        def probe_after_pause(r=rates):
            time.sleep(0.02)
            r.append(probe_rate())

        # The eager calls --calls at a time back to back, as the eager peers above; the probe
        # once after each batch.
        fp16acc = fns["ours fp16 in, fp16 acc"]
        pair = interleaved(
            {
                "ours": lambda f=fp16acc: [f() for _ in range(args.calls)],
                "probe": probe_after_pause,
            },
            args.repeats,
        )
        ceiling = max(rates[1:])  # [0]: the warm-up run
        frac = fl / 2 / (pair["ours"][1] / args.calls) / ceiling
        # The same calls GRAPH_CALLS at a time in one tf.function, in steady state: the per-call
        # cost inside a model's graph, not of eager calls.
        graph_cpu, graph_ceiling = steady_in_turn(
            graph_fp16acc(tf, tf_fp16ops, x16, w16, pad), probe_rate, args.repeats
        )
        frac_graph = fl / 2 / (graph_cpu / GRAPH_CALLS) / graph_ceiling
        in_turn.append((ceiling, graph_ceiling))
        cpu_ratio = tuple(
            t["tf.nn.conv2d fp32"][1] / t[f"{who} fp32 in, fp32 acc"][1]
            for who in ("ours", "kernel")
        )
        rows.append((name, gf, (frac, frac_graph), cpu_ratio))
        g = interleaved(gradient_peers(tf, tf_fp16ops, xs, ws, pad), args.repeats, args.calls)
        gg = interleaved(graph_fp32_peers(tf, tf_fp16ops, xs, ws, pad), args.repeats)
        graph32.append((name, {ps: gg[(ps, "tf")][1] / gg[(ps, "ours")][1] for ps in PASSES}))
        grads.append(
            (
                name,
                {
                    (ps, who): (
                        g[(ps, "tf")][0] / g[(ps, who)][0],
                        g[(ps, "tf")][1] / g[(ps, who)][1],
                    )
                    for ps in ("dgrad", "wgrad")
                    for who in ("ours", "kernel")
                },
            )
        )

    lines = [
        f"CPU benchmark, {datetime.date.today().isoformat()}, {cpu_model()}, "
        f"{os.cpu_count()} cores, TensorFlow {tf.__version__}, median of {args.repeats}"
        f"{f' timings of {args.calls} calls' if args.calls > 1 else ''}, GFLOP/s",
        "",
        f"fp16-step ceiling ({threads} threads, G steps per CPU second, best of {args.repeats}; "
        "1 step = 1 multiply-add): "
        + ", ".join(f"{k} {v / 1e9:.1f}" for k, v in ceilings.items())
        + f"; the op library uses {chosen}; its ceiling timed in turn with each shape's calls, "
        f"eager and {GRAPH_CALLS} per tf.function call (best of its runs; the fractions below "
        "are of these): " + ", ".join(f"{a / 1e9:.1f}/{b / 1e9:.1f}" for a, b in in_turn),
        "",
        "| shape | path | GFLOP/s |",
        "|---|---|---|",
    ]
    for name, gf, _, _ in rows:
        for k, v in gf.items():
            lines.append(f"| {name} | {k} | {v:.1f} |")
    lines += [
        "",
        "| shape | ours fp16-acc / ceiling (eager; in a tf.function) "
        "| ours fp16-acc / TF fp16-acc path "
        "| ours fp32-acc (fp32 in) / tf.nn.conv2d fp32 (wall; CPU s) "
        "| kernel fp32-acc (fp32 in) / tf.nn.conv2d fp32 (wall; CPU s) "
        "| ours fp32-acc (fp16 in) / tf.nn.conv2d fp16 |",
        "|---|---|---|---|---|---|",
    ]
    errors = []
    for name, gf, fracs, cpu_ratio in rows:
        cells = [ceiling_cell(f) for f in fracs]
        if not all(ok for _, ok in cells):
            errors.append(name)
        lines.append(
            f"| {name} | {'; '.join(c for c, _ in cells)} "
            f"| {gf['ours fp16 in, fp16 acc'] / gf[TF_FP16ACC_KEY]:.2f}x "
            f"| {gf['ours fp32 in, fp32 acc'] / gf['tf.nn.conv2d fp32']:.2f}x; {cpu_ratio[0]:.2f}x "
            f"| {gf['kernel fp32 in, fp32 acc'] / gf['tf.nn.conv2d fp32']:.2f}x; "
            f"{cpu_ratio[1]:.2f}x "
            f"| {gf['ours fp16 in, fp32 acc'] / gf['tf.nn.conv2d fp16']:.2f}x |"
        )
    lines += [
        "",
        "| shape | ours dgrad fp32 / TF Conv2DBackpropInput fp32 (wall; CPU s) "
        "| kernel dgrad / same "
        "| ours wgrad fp32 / TF Conv2DBackpropFilter fp32 (wall; CPU s) | kernel wgrad / same |",
        "|---|---|---|---|---|",
    ]
    for name, r in grads:
        cells = [
            f"{r[(ps, who)][0]:.2f}x; {r[(ps, who)][1]:.2f}x"
            for ps in ("dgrad", "wgrad")
            for who in ("ours", "kernel")
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"| shape | ours / TF, fp32 in a tf.function ({GRAPH_CALLS} calls per call; CPU s): "
        "fprop | dgrad | wgrad |",
        "|---|---|---|---|",
    ]
    for name, r in graph32:
        lines.append(f"| {name} | " + " | ".join(f"{r[ps]:.2f}x" for ps in PASSES) + " |")
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(
                text + f"\n\nCommand: `python tools/benchmark_cpu.py --repeats {args.repeats}`\n"
            )
    if errors:
        print(
            f"benchmark error: {', '.join(errors)} ran faster than the {chosen} ceiling, so the "
            "ceiling does not measure the kernel these shapes ran",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
