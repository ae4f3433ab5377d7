"""`make demo`: the seed question, answered.

A user compared TensorFlow's float16 conv2d with float32 conv2d cast to float16 and saw a
difference of exactly 0: TensorFlow's CPU kernel accumulates in float32 unless
TF_CONV2D_USE_FP16_ACCUMULATE is exactly "1" (cuDNN on GPU: unless TF_FP16_CONV_USE_FP32_COMPUTE
is exactly "0"), and both switches are process-wide. Where oneDNN takes T=half convolutions (a CPU
with avx512_fp16 / amx_fp16 or avx_ne_convert, TF_ENABLE_ONEDNN_OPTS not "0"; TensorFlow's rule in
tensorflow/core/util/util.cc) the oneDNN kernel accumulates in fp32 and ignores the CPU switch; the
demo then also runs with TF_ENABLE_ONEDNN_OPTS=0. Fp16Conv2D makes the accumulation an
op attribute, so both can run side by side. Then the audit tool reports, for a bundled example
model, which convolutions really accumulate in fp16.

Usage: python -m tf_fp16ops.demo [--seed N] [--no-audit] [--workdir DIR] [--logdir DIR]

The example model and the TensorBoard logs go to --workdir: by default build/demo of the source
tree the package is imported from, else a new temporary directory; the demo names it. Without an
op library for the installed TensorFlow the demo prints one line saying so on stderr and exits 2.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tf_fp16ops._platform.cli import ArgumentParser
from tf_fp16ops._platform.quiet import import_tensorflow

try:
    tf = import_tensorflow()  # without TensorFlow's start-up lines on stderr
except ImportError as _e:
    if __name__ != "__main__":
        raise
    print(
        f"python -m tf_fp16ops.demo: error: the demo needs TensorFlow: {_e}; "
        "pip install 'tf_fp16ops[tf]'",
        file=sys.stderr,
    )
    sys.exit(2)

import tf_fp16ops  # noqa: E402 - after TensorFlow: registers the ops and the Keras layer

SEED_X_SHAPE = (16, 32, 32, 16)
SEED_W_SHAPE = (3, 3, 16, 16)


@dataclass(frozen=True)
class Difference:
    """Elementwise comparison of two float16 results of the same shape."""

    max_abs: float
    share_differ: float  # fraction of outputs whose values differ (0..1)

    @staticmethod
    def of(a, b) -> Difference:
        a = np.asarray(a, np.float64)
        b = np.asarray(b, np.float64)
        return Difference(float(np.max(np.abs(a - b))), float(np.mean(a != b)))


@dataclass(frozen=True)
class SeedResult:
    tf_fp16_vs_fp32_cast: Difference  # TensorFlow: conv16 vs conv16_32 in this process
    tf_fp16_accumulate_vs_fp32_cast: (
        Difference | None
    )  # with TF_CONV2D_USE_FP16_ACCUMULATE=1 (subprocess)
    ours_half_vs_float: Difference  # Fp16Conv2D accumulation float16 vs float32
    overflow_half: tuple[float, ...]  # Fp16Conv2D float16 accumulation on the overflow probe
    overflow_float: tuple[float, ...]  # Fp16Conv2D float32 accumulation on the overflow probe
    # kernel that ran the T=half conv in that subprocess ("_MklNativeConv2D" oneDNN, "Conv2D" Eigen)
    tf_fp16_accumulate_kernel: str = ""
    # same with TF_ENABLE_ONEDNN_OPTS=0 too; run only when oneDNN took the conv above
    tf_fp16_accumulate_eigen_vs_fp32_cast: Difference | None = None

    @property
    def onednn_took_conv(self) -> bool:
        return self.tf_fp16_accumulate_kernel.startswith("_Mkl")


def seed_inputs(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """x ~ U[0,1) [16,32,32,16] NHWC and w ~ U[0,1) [3,3,16,16] HWIO, rounded to float16."""
    rng = np.random.default_rng(seed)
    return rng.random(SEED_X_SHAPE).astype(np.float16), rng.random(SEED_W_SHAPE).astype(np.float16)


def tf_pair(x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The seed's two functions: conv16 (float16 conv2d) and conv16_32 (float32 conv2d cast to
    float16)."""
    conv16 = tf.nn.conv2d(x, w, 1, "VALID").numpy()
    conv16_32 = tf.cast(
        tf.nn.conv2d(x.astype(np.float32), w.astype(np.float32), 1, "VALID"), tf.float16
    ).numpy()
    return conv16, conv16_32


def conv_kernel(x: np.ndarray, w: np.ndarray) -> str:
    """The kernel op that runs tf.nn.conv2d(x, w, 1, "VALID") inside a tf.function in this process,
    read from the partitioned graph: "Conv2D" (TensorFlow's Eigen kernel) or "_MklNativeConv2D"
    (oneDNN, after tensorflow/core/common_runtime/mkl_layout_pass.cc)."""
    from tf_fp16ops.audit.runtime.executed import collect

    run = collect(lambda a, b: tf.nn.conv2d(a, b, 1, "VALID"), [tf.constant(x), tf.constant(w)])
    return ", ".join(sorted({n.kernel_op for n in run.executed_conv_nodes()}))


_SUBPROCESS = """
import json, sys, numpy as np
sys.path.insert(0, {root!r})
from tf_fp16ops.demo import seed_inputs, tf_pair, Difference, conv_kernel
x, w = seed_inputs({seed})
d = Difference.of(*tf_pair(x, w))
print(json.dumps([d.max_abs, d.share_differ, conv_kernel(x, w)]))
"""


def tf_fp16_accumulate_difference(
    seed: int = 0, onednn_opts: str | None = None
) -> tuple[Difference, str] | None:
    """Runs tf_pair in a fresh process with TF_CONV2D_USE_FP16_ACCUMULATE=1 (read once per
    process by TensorFlow's CPU Conv2D, tensorflow/core/kernels/conv_ops_impl.h) and, when
    `onednn_opts` is given, TF_ENABLE_ONEDNN_OPTS=`onednn_opts` (None: inherited).

    Returns:
      (difference to fp32-conv-then-cast, kernel that ran the conv), or None if the process fails.
    """
    root = str(Path(__file__).resolve().parent.parent)
    env = dict(os.environ, TF_CONV2D_USE_FP16_ACCUMULATE="1", TF_CPP_MIN_LOG_LEVEL="3")
    if onednn_opts is not None:
        env["TF_ENABLE_ONEDNN_OPTS"] = onednn_opts
    try:
        r = subprocess.run(
            [sys.executable, "-c", _SUBPROCESS.format(root=root, seed=seed)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        max_abs, share, kernel = json.loads(r.stdout.strip().splitlines()[-1])
        return Difference(max_abs, share), kernel
    except (subprocess.SubprocessError, ValueError, IndexError, OSError):
        return None


def overflow_probe(accumulation: str) -> tuple[float, ...]:
    """x = 65519 (65504 in float16) in [1,1,4,1], w = [65519, -65519] in [1,2,1,1], VALID."""
    x = np.full([1, 1, 4, 1], 65519, np.float16)
    w = np.array([65519, -65519], np.float16).reshape(1, 2, 1, 1)
    y = tf_fp16ops.conv2d(x, w, 1, "VALID", accumulation=accumulation).numpy().ravel()
    return tuple(float(v) for v in y)


def seed_comparison(seed: int = 0, with_tf_fp16_accumulate: bool = True) -> SeedResult:
    x, w = seed_inputs(seed)
    half = tf_fp16ops.conv2d(x, w, 1, "VALID", accumulation="float16").numpy()
    flt = tf_fp16ops.conv2d(x, w, 1, "VALID", accumulation="float32").numpy()
    acc = tf_fp16_accumulate_difference(seed) if with_tf_fp16_accumulate else None
    kernel = acc[1] if acc else ""
    eigen = None
    if kernel.startswith("_Mkl"):  # oneDNN took the conv and ignored the switch: run Eigen's too
        e = tf_fp16_accumulate_difference(seed, onednn_opts="0")
        eigen = e[0] if e else None
    return SeedResult(
        tf_fp16_vs_fp32_cast=Difference.of(*tf_pair(x, w)),
        tf_fp16_accumulate_vs_fp32_cast=acc[0] if acc else None,
        ours_half_vs_float=Difference.of(half, flt),
        overflow_half=overflow_probe("float16"),
        overflow_float=overflow_probe("float32"),
        tf_fp16_accumulate_kernel=kernel,
        tf_fp16_accumulate_eigen_vs_fp32_cast=eigen,
    )


def format_table(r: SeedResult) -> str:
    rows = [
        (
            "comparison on x~U[0,1) [16,32,32,16], w~U[0,1) [3,3,16,16], VALID",
            "max |diff|",
            "outputs that differ",
        )
    ]

    def add(label, d: Difference | None):
        rows.append(
            (
                label,
                "n/a" if d is None else f"{d.max_abs:.4g}",
                "n/a" if d is None else f"{100 * d.share_differ:.1f}%",
            )
        )

    add("tf.nn.conv2d fp16  vs  fp32 conv cast to fp16 (this process)", r.tf_fp16_vs_fp32_cast)
    add(
        "  same, TF_CONV2D_USE_FP16_ACCUMULATE=1 (fresh process)", r.tf_fp16_accumulate_vs_fp32_cast
    )
    if r.onednn_took_conv:
        add(
            "  same, also TF_ENABLE_ONEDNN_OPTS=0 (fresh process)",
            r.tf_fp16_accumulate_eigen_vs_fp32_cast,
        )
    add("tf_fp16ops.conv2d accumulation=float16  vs  float32", r.ours_half_vs_float)
    w0 = max(len(a) for a, _, _ in rows)
    lines = [f"{a:<{w0}}  {b:>10}  {c:>19}" for a, b, c in rows]
    lines.insert(1, "-" * len(lines[0]))
    if r.onednn_took_conv:
        lines += [
            "",
            f"Note: oneDNN ran the fp16 conv ({r.tf_fp16_accumulate_kernel}, fp32 "
            "accumulation) and ignores TF_CONV2D_USE_FP16_ACCUMULATE; "
            "TF_ENABLE_ONEDNN_OPTS=0 restores the Eigen kernel.",
        ]
    lines += [
        "",
        "Overflow probe: x = 65519 (65504 in fp16) x4, w = [65519, -65519], VALID",
        f"  tf_fp16ops.conv2d accumulation=float16 -> {list(r.overflow_half)}",
        f"  tf_fp16ops.conv2d accumulation=float32 -> {list(r.overflow_float)}",
    ]
    return "\n".join(lines)


def run_audit(workdir: Path, logdir: Path) -> int:
    """Writes the bundled example SavedModel (first run) into `workdir`, prints the audit report
    and writes its TensorBoard logs into `logdir`; the `tensorboard --logdir` hint goes to
    stdout, the audit's other stderr lines stay on stderr."""
    from tf_fp16ops.audit import cli, demo_example

    model = demo_example(workdir / "example_savedmodel")
    print(f"\n== Audit of the bundled example ({model}) ==")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        status = cli.main([str(model), "--logdir", str(logdir)])
    for line in err.getvalue().splitlines():
        print(line, file=sys.stdout if line.startswith("TensorBoard: ") else sys.stderr)
    return status


def default_workdir() -> Path:
    """build/demo of the source tree the package sits in, else a new temporary directory."""
    tree = Path(__file__).resolve().parent.parent
    if (tree / "Makefile").is_file() and (tree / "BUILD").is_file():
        return tree / "build" / "demo"
    return Path(tempfile.mkdtemp(prefix="tf_fp16ops_demo_"))


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="random seed for the seed-question inputs"
    )
    parser.add_argument(
        "--no-audit", action="store_true", help="skip the audit of the bundled example"
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        help="where the example model (and the TensorBoard logs) go (default: build/demo of the "
        "source tree the package is imported from, else a new temporary directory)",
    )
    parser.add_argument(
        "--logdir", type=Path, help="where the TensorBoard logs go (default: WORKDIR/audit_logs)"
    )
    args = parser.parse_args(argv)
    try:
        from tf_fp16ops._platform import library as _library

        _library.load()
    except tf_fp16ops.OpLibraryError as e:
        print(f"python -m tf_fp16ops.demo: error: {e}", file=sys.stderr)
        return 2
    print("== The seed question: does TensorFlow's float16 conv2d accumulate in float16? ==\n")
    print(format_table(seed_comparison(args.seed)))
    if args.no_audit:
        return 0
    workdir = args.workdir or default_workdir()
    logdir = args.logdir or workdir / "audit_logs"
    workdir.mkdir(parents=True, exist_ok=True)
    run_audit(workdir, logdir)
    print(f"\nDemo files: the example model in {workdir}, the TensorBoard logs in {logdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
