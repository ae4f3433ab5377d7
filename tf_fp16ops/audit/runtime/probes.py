"""Accumulation probes: tiny convolutions whose result tells an fp16 accumulator from an fp32 one.

Each probe is a sum of N products placed so that one output element of the probed op is
sum_i a_i * b_i, term 0 first in the op's natural order:
  * fprop (Conv2D, _FusedConv2D, Conv3D, Fp16Conv2D): a 1 x N window along the width, input
    [1, 1, N, 1] (Conv3D: [1, 1, 1, N, 1]), filter [1, N, 1, 1]; DepthwiseConv2dNative and
    Fp16DepthwiseConv2D (and _FusedDepthwiseConv2dNative, with BiasAdd(0) + Relu for grappler's
    remapper, as _FusedConv2D's): an N x 1 window along the height, input [1, N, 1, 1], filter
    [N, 1, 1, 1] (TensorFlow 2.16's oneDNN
    3.3.4 never finishes creating its T=half depthwise kernel, brdgmm_dw:avx512_core_fp16, for a
    filter 16 or more wide: measured with 16, 49 and 64, each past 3 GiB in 20-40 s, while
    12 wide and 64 high take 0.1 s);
  * dgrad (...BackpropInput): along the output channels, out_backprop [1, 1, 1, N], filter
    [1, 1, 1, N] (depthwise: channel multiplier N), input_sizes [1, 1, 1, 1];
  * wgrad (...BackpropFilter): along the width positions, input and out_backprop [1, 1, N, 1],
    filter_sizes [1, 1, 1, 1];
  * the matmul family: a [1, N] times b [N, 1] (MatMul and this package's Fp16MatMul;
    _FusedMatMul as MatMul + BiasAdd(0) + Relu for grappler's remapper), [1, 1, N] times
    [1, N, 1] (BatchMatMul, V2, V3), and einsum "ij,jk->ik" on [1, N] and [N, 1] (Einsum).
Operands are arguments of the probe's function (never constants), so grappler's constant folding
cannot evaluate the op with another kernel than the model's.

Probes (expected values by hand, IEEE binary16; checked against a NumPy reference in the tests):
  * "rounding": 1 followed by 63 terms of 2^-12 (times 1). fp32 accumulation: 1 + 63 * 2^-12 =
    1.015380859375, rounded once to half: 1.015625. Sequential fp16 accumulation: every
    1 + 2^-12 rounds back to 1 (half an ulp of 1 is 2^-11), so 1.0.
  * "taps49": 49 terms of fp16(0.2) * fp16(0.1) (a 7x7 window; docs/design.md "Numerics
    contract"). fp32: 0.9794921875; fp16 (one rounding per step): 0.98046875.
  * "overflow": [65504, 65504] * [65504, -65504] (the seed's second answer). fp32: 0;
    fp16: the first product overflows (65504^2 > 65504), so inf (or NaN when products are
    rounded to fp16 before the sum).
Verdict per probe: "fp32" when the result equals the fp32 value, "fp16" when it equals the fp16
value (overflow: any non-finite result), else "other". A configuration's observed accumulation
is "fp16" when any probe shows fp16 rounding, "fp32" when all show the fp32 value, else
"inconclusive". For T=float the verdict "fp32" means "within fp32 rounding of the float64 sum",
"fp16" the fp16 value itself (overflow: non-finite), as Fp16DepthwiseConv2D with T=float and
Tacc=half gives: it rounds its float operands to fp16 (the probes' are fp16 values already) and
returns the fp16 sum as float.

Probes run inside a fresh tf.function so grappler and the oneDNN/Eigen kernel selection are those
of a model's function; the kernel that ran is read back from the partitioned graph.

`ProbeWorker` (what `tf-fp16-audit --run` and `verify()` use for CPU configurations) runs them in
one long-lived child process with this process's environment and stops a configuration whose
probes pass a resident-memory or time limit, so that a kernel that is pathological on some
TensorFlow or CPU cannot exhaust memory or hang the audit: that configuration is reported
"not-probed" with the limit, the TensorFlow version and the CPU, and the next one gets a fresh
child.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import select
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace

from tf_fp16ops._platform.cli import ArgumentParser

PROBE_ENV = (
    "TF_CONV2D_USE_FP16_ACCUMULATE",
    "TF_FP16_CONV_USE_FP32_COMPUTE",
    "TF_ENABLE_ONEDNN_OPTS",
    "TF_FP16_MATMUL_USE_FP32_COMPUTE",
)

# name -> (a terms, b terms, fp32-accumulation value rounded to T=half, fp16-accumulation value)
_TWO_M12 = 2.0**-12
_H02, _H01 = 0.199951171875, 0.0999755859375  # fp16(0.2), fp16(0.1)
PROBES: dict[str, tuple[tuple[float, ...], tuple[float, ...], float, float]] = {
    "rounding": ((1.0,) + (_TWO_M12,) * 63, (1.0,) * 64, 1.015625, 1.0),
    "taps49": ((_H02,) * 49, (_H01,) * 49, 0.9794921875, 0.98046875),
    "overflow": ((65504.0, 65504.0), (65504.0, -65504.0), 0.0, math.inf),
}

# The fprop ops probed along the height (depthwise kernels; see the module docstring).
DEPTHWISE_FPROP = {"DepthwiseConv2dNative", "_FusedDepthwiseConv2dNative", "Fp16DepthwiseConv2D"}
FPROP = {
    "Conv2D",
    "_FusedConv2D",
    "Conv3D",
    "DepthwiseConv2dNative",
    "_FusedDepthwiseConv2dNative",
    "Fp16Conv2D",
    "Fp16DepthwiseConv2D",
}
DGRAD = {
    "Conv2DBackpropInput",
    "Conv3DBackpropInputV2",
    "DepthwiseConv2dNativeBackpropInput",
    "Fp16Conv2DBackpropInput",
}
WGRAD = {
    "Conv2DBackpropFilter",
    "Conv3DBackpropFilterV2",
    "DepthwiseConv2dNativeBackpropFilter",
    "Fp16Conv2DBackpropFilter",
}
MATMUL = {
    "MatMul",
    "_FusedMatMul",
    "BatchMatMul",
    "BatchMatMulV2",
    "BatchMatMulV3",
    "Einsum",
    "Fp16MatMul",
}
PROBED_OPS = FPROP | DGRAD | WGRAD | MATMUL
PROBED_T = ("half", "float")


@dataclass(frozen=True)
class ProbeConfig:
    """One configuration to probe: op type, storage dtype T, Tacc (this package's ops), device
    ("cpu" or "gpu") and whether the op runs inside an XLA-compiled function
    (`tf.function(jit_compile=True)`; key suffix ":xla")."""

    op: str
    T: str
    Tacc: str | None
    device: str
    xla: bool = False

    def key(self) -> str:
        return f"{self.op}:{self.T}:{self.Tacc or '-'}:{self.device}" + (":xla" if self.xla else "")

    @staticmethod
    def parse(text: str) -> ProbeConfig:
        parts = text.split(":")
        if len(parts) not in (4, 5) or (len(parts) == 5 and parts[4] != "xla"):
            raise ValueError(
                "probe config must be OP:T:TACC:DEVICE or OP:T:TACC:DEVICE:xla (TACC '-' when "
                f"none), got {text!r}"
            )
        op, t, tacc, dev = parts[:4]
        return ProbeConfig(op, t, None if tacc == "-" else tacc, dev, len(parts) == 5)


@dataclass(frozen=True)
class ProbeOutcome:
    """One probe's result. Values are decimal strings ("1.015625", "inf", "nan") so JSON stays
    plain."""

    probe: str
    value: str
    expected_fp32: str
    expected_fp16: str
    verdict: str  # "fp32" | "fp16" | "other"

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ProbeResult:
    """Probes of one configuration in one process.

    Attributes:
      observed: "fp16", "fp32", "inconclusive", "not-probed" or "error".
      kernel: the op type that ran in the partitioned graph (e.g. "_MklNativeConv2D"), with its
        kernel label when set; "" when not seen.
      switches: PROBE_ENV variables as the probing process saw them ((name, value) for set ones).
      process: "in-process", "subprocess (same environment)" (`ProbeWorker`) or "subprocess"
        with the switches stated.
      note: why not probed / the error.
    """

    config: ProbeConfig
    observed: str
    outcomes: tuple[ProbeOutcome, ...] = ()
    kernel: str = ""
    switches: tuple[tuple[str, str], ...] = ()
    process: str = "in-process"
    note: str = ""

    def to_dict(self) -> dict:
        return {
            "config": asdict(self.config),
            "key": self.config.key(),
            "observed": self.observed,
            "outcomes": [o.to_dict() for o in self.outcomes],
            "kernel": self.kernel,
            "switches": dict(self.switches),
            "process": self.process,
            "note": self.note,
        }

    @staticmethod
    def from_dict(d: dict) -> ProbeResult:
        return ProbeResult(
            ProbeConfig(**d["config"]),
            d["observed"],
            tuple(ProbeOutcome(**o) for o in d["outcomes"]),
            d["kernel"],
            tuple(sorted(d["switches"].items())),
            d["process"],
            d["note"],
        )


def verdict(value: float, T: str, probe: str) -> str:
    """Classifies one probe result (see the module docstring)."""
    a, b, fp32, fp16 = PROBES[probe]
    if T == "half":
        if probe == "overflow":
            return "fp16" if not math.isfinite(value) else ("fp32" if value == fp32 else "other")
        return "fp32" if value == fp32 else ("fp16" if value == fp16 else "other")
    exact = math.fsum(x * y for x, y in zip(a, b, strict=True))
    bound = len(a) * 2.0**-24 * math.fsum(abs(x * y) for x, y in zip(a, b, strict=True))
    if math.isfinite(value) and abs(value - exact) <= bound:
        return "fp32"
    # T=float summed in fp16 (Fp16DepthwiseConv2D with Tacc=half rounds float operands to fp16
    # and returns the fp16 sum, exact in float): the fp16 value, or overflow's non-finite one.
    if probe == "overflow":
        return "fp16" if not math.isfinite(value) else "other"
    return "fp16" if value == fp16 else "other"


def combine(verdicts: list[str]) -> str:
    if "fp16" in verdicts:
        return "fp16"
    if verdicts and all(v == "fp32" for v in verdicts):
        return "fp32"
    return "inconclusive"


def process_switches() -> tuple[tuple[str, str], ...]:
    """The PROBE_ENV switches set in this process's environment, as (name, value) pairs."""
    return tuple((k, os.environ[k]) for k in PROBE_ENV if k in os.environ)


_switches = process_switches


def _fmt(x: float) -> str:
    return repr(float(x))


def run_probes(config: ProbeConfig) -> ProbeResult:
    """Runs every probe of `config` in this process and classifies the accumulation observed."""
    if config.op not in PROBED_OPS:
        return ProbeResult(
            config, "not-probed", switches=_switches(), note=f"no probe for op {config.op}"
        )
    if config.T not in PROBED_T:
        return ProbeResult(
            config, "not-probed", switches=_switches(), note=f"no probe for T={config.T}"
        )
    import tensorflow as tf

    if config.device == "gpu" and not tf.config.list_logical_devices("GPU"):
        return ProbeResult(
            config, "not-probed", switches=_switches(), note="no GPU visible in this process"
        )
    outcomes, kernels = [], set()
    try:
        for name, (a, b, fp32, fp16) in PROBES.items():
            value, kernel = _run_one(config, a, b)
            kernels.add(kernel)
            t_fp32 = (
                fp32 if config.T == "half" else math.fsum(x * y for x, y in zip(a, b, strict=True))
            )
            t_fp16 = fp16 if config.T == "half" else float("nan")
            outcomes.append(
                ProbeOutcome(
                    name, _fmt(value), _fmt(t_fp32), _fmt(t_fp16), verdict(value, config.T, name)
                )
            )
    except (tf.errors.OpError, ValueError, TypeError) as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return ProbeResult(
            config,
            "error",
            tuple(outcomes),
            ", ".join(sorted(k for k in kernels if k)),
            _switches(),
            note=msg[:300],
        )
    return ProbeResult(
        config,
        combine([o.verdict for o in outcomes]),
        tuple(outcomes),
        ", ".join(sorted(k for k in kernels if k)),
        _switches(),
    )


def _run_one(config: ProbeConfig, a, b) -> tuple[float, str]:
    """Builds the probe for `config`, runs it in a fresh tf.function; returns (value, kernel)."""
    import numpy as np
    import tensorflow as tf

    from .executed import collect

    dtype = tf.float16 if config.T == "half" else tf.float32
    n = len(a)
    av, bv = np.asarray(a, np.float64), np.asarray(b, np.float64)
    op, fn, args = config.op, None, None
    s4, pad = [1, 1, 1, 1], "VALID"
    if op in FPROP:
        if op in DEPTHWISE_FPROP:  # an N x 1 window along the height: see the module docstring
            x, w = av.reshape(1, n, 1, 1), bv.reshape(n, 1, 1, 1)
        else:
            x, w = av.reshape(1, 1, n, 1), bv.reshape(1, n, 1, 1)
        if op == "Conv3D":
            x, w = x.reshape(1, 1, 1, n, 1), w.reshape(1, 1, n, 1, 1)
            fn = lambda x, w: tf.raw_ops.Conv3D(input=x, filter=w, strides=[1] * 5, padding=pad)  # noqa: E731
        elif op == "DepthwiseConv2dNative":

            def fn(x, w):
                return tf.raw_ops.DepthwiseConv2dNative(input=x, filter=w, strides=s4, padding=pad)
        elif op == "_FusedDepthwiseConv2dNative":  # as _FusedConv2D's: + BiasAdd(0) + Relu

            def fn(x, w, bias):
                y = tf.raw_ops.DepthwiseConv2dNative(input=x, filter=w, strides=s4, padding=pad)
                return tf.nn.relu(tf.nn.bias_add(y, bias))
        elif op == "Fp16DepthwiseConv2D":
            lib = _ours()

            def fn(x, w):
                return lib.fp16_depthwise_conv2d(
                    x, w, [], Tacc=_tf_dtype(config.Tacc), strides=s4, padding=pad
                )
        elif op == "Fp16Conv2D":
            lib = _ours()

            def fn(x, w):
                return lib.fp16_conv2d(x, w, Tacc=_tf_dtype(config.Tacc), strides=s4, padding=pad)
        elif (
            op == "_FusedConv2D"
        ):  # Conv2D + BiasAdd(0) + Relu, fused by grappler's remapper when it can

            def fn(x, w, bias):
                return tf.nn.relu(
                    tf.nn.bias_add(
                        tf.raw_ops.Conv2D(input=x, filter=w, strides=s4, padding=pad), bias
                    )
                )
        else:
            fn = lambda x, w: tf.raw_ops.Conv2D(input=x, filter=w, strides=s4, padding=pad)  # noqa: E731
        fused = op in ("_FusedConv2D", "_FusedDepthwiseConv2dNative")
        args = (x, w, np.zeros([1])) if fused else (x, w)
    elif op in MATMUL:
        fn, args = _matmul_probe(op, av, bv, n, config.Tacc)
    elif op in DGRAD:
        dy, w = av.reshape(1, 1, 1, n), bv.reshape(1, 1, 1, n)
        sizes = tf.constant([1, 1, 1, 1], tf.int32)
        if op == "Conv3DBackpropInputV2":
            dy, w = dy.reshape(1, 1, 1, 1, n), w.reshape(1, 1, 1, 1, n)
            fn = lambda dy, w: tf.raw_ops.Conv3DBackpropInputV2(  # noqa: E731
                input_sizes=tf.constant([1, 1, 1, 1, 1], tf.int32),
                filter=w,
                out_backprop=dy,
                strides=[1] * 5,
                padding=pad,
            )
        elif op == "DepthwiseConv2dNativeBackpropInput":
            fn = lambda dy, w: tf.raw_ops.DepthwiseConv2dNativeBackpropInput(  # noqa: E731
                input_sizes=sizes, filter=w, out_backprop=dy, strides=s4, padding=pad
            )
        elif op == "Fp16Conv2DBackpropInput":
            lib = _ours()
            fn = lambda dy, w: lib.fp16_conv2d_backprop_input(  # noqa: E731
                sizes, w, dy, Tacc=_tf_dtype(config.Tacc), strides=s4, padding=pad
            )
        else:
            fn = lambda dy, w: tf.raw_ops.Conv2DBackpropInput(  # noqa: E731
                input_sizes=sizes, filter=w, out_backprop=dy, strides=s4, padding=pad
            )
        args = (dy, w)
    else:  # WGRAD
        x, dy = av.reshape(1, 1, n, 1), bv.reshape(1, 1, n, 1)
        sizes = tf.constant([1, 1, 1, 1], tf.int32)
        if op == "Conv3DBackpropFilterV2":
            x, dy = x.reshape(1, 1, 1, n, 1), dy.reshape(1, 1, 1, n, 1)
            fn = lambda x, dy: tf.raw_ops.Conv3DBackpropFilterV2(  # noqa: E731
                input=x,
                filter_sizes=tf.constant([1, 1, 1, 1, 1], tf.int32),
                out_backprop=dy,
                strides=[1] * 5,
                padding=pad,
            )
        elif op == "DepthwiseConv2dNativeBackpropFilter":
            fn = lambda x, dy: tf.raw_ops.DepthwiseConv2dNativeBackpropFilter(  # noqa: E731
                input=x, filter_sizes=sizes, out_backprop=dy, strides=s4, padding=pad
            )
        elif op == "Fp16Conv2DBackpropFilter":
            lib = _ours()
            fn = lambda x, dy: lib.fp16_conv2d_backprop_filter(  # noqa: E731
                x, sizes, dy, Tacc=_tf_dtype(config.Tacc), strides=s4, padding=pad
            )
        else:
            fn = lambda x, dy: tf.raw_ops.Conv2DBackpropFilter(  # noqa: E731
                input=x, filter_sizes=sizes, out_backprop=dy, strides=s4, padding=pad
            )
        args = (x, dy)
    device = "/GPU:0" if config.device == "gpu" else "/CPU:0"
    with tf.device(device):
        tensors = [tf.constant(v, dtype) for v in args]
        run = collect(tf.function(fn, jit_compile=config.xla), tensors)
    out = np.asarray(run.outputs[0], np.float64).reshape(-1)
    if config.xla:
        return float(out[0]), "XLA (jit_compile=True)"
    kernel = ", ".join(sorted({_kernel_name(n) for n in run.executed_conv_nodes()}))
    return float(out[0]), kernel


def _matmul_probe(op: str, av, bv, n: int, tacc: str | None = None):
    """(function, operands) of the matmul-family probe of `op` (see the module docstring);
    `tacc`: Fp16MatMul's Tacc."""
    import numpy as np
    import tensorflow as tf

    if op in ("MatMul", "_FusedMatMul", "Einsum", "Fp16MatMul"):
        x, y = av.reshape(1, n), bv.reshape(n, 1)
    else:
        x, y = av.reshape(1, 1, n), bv.reshape(1, n, 1)
    if op == "MatMul":
        return (lambda x, y: tf.raw_ops.MatMul(a=x, b=y)), (x, y)
    if op == "Fp16MatMul":
        lib = _ours()
        return (lambda x, y: lib.fp16_mat_mul(x, y, Tacc=_tf_dtype(tacc))), (x, y)
    if op == "_FusedMatMul":

        def fused(x, y, bias):
            return tf.nn.relu(tf.nn.bias_add(tf.raw_ops.MatMul(a=x, b=y), bias))

        return fused, (x, y, np.zeros([1]))
    if op == "Einsum":
        return (lambda x, y: tf.einsum("ij,jk->ik", x, y)), (x, y)
    if op == "BatchMatMulV3":
        return (lambda x, y: tf.raw_ops.BatchMatMulV3(x=x, y=y, Tout=x.dtype)), (x, y)
    raw = getattr(tf.raw_ops, op)
    return (lambda x, y: raw(x=x, y=y)), (x, y)


def _kernel_name(node) -> str:
    return node.kernel_op + (f"[{node.kernel_label}]" if node.kernel_label else "")


def _ours():
    from ..._platform import library as _library

    return _library.load()


def _tf_dtype(name: str | None):
    import tensorflow as tf

    if name not in ("half", "float"):
        raise ValueError(f"Tacc must be 'half' or 'float' for this package's ops, got {name!r}")
    return tf.float16 if name == "half" else tf.float32


def run_probes_subprocess(
    configs: list[ProbeConfig],
    env: dict[str, str],
    timeout_s: float | None = None,
    memory_mib: float | None = None,
) -> list[ProbeResult]:
    """Runs the probes of `configs` in a fresh Python process whose environment is this one's
    updated with `env` (switches are read once per process, so a new value needs a new process),
    under the limits of `ProbeWorker` (default PROBE_TIMEOUT_S per configuration and
    PROBE_MEMORY_MIB): a configuration past one is "not-probed", one whose process died "error".

    Raises:
      ValueError: a limit that is not a positive number.
    """
    shown = ", ".join(f"{k}={v!r}" for k, v in sorted(env.items())) or "inherited environment"
    worker = ProbeWorker(
        PROBE_MEMORY_MIB if memory_mib is None else memory_mib,
        PROBE_TIMEOUT_S if timeout_s is None else timeout_s,
        env=env,
        label=f"subprocess ({shown})",
    )
    try:
        return [worker.run(c) for c in configs]
    finally:
        worker.close()


# ProbeWorker's limits. A process running the probes holds 450-650 MiB resident after importing
# TensorFlow 2.16-2.21 and the probes add little (measured on the Intel Xeon with avx512_fp16 of
# README "TensorFlow versions"); the pathological 2.16 depthwise kernel passed 3 GiB within 40 s.
PROBE_MEMORY_MIB = 2048
PROBE_TIMEOUT_S = 60.0
# Starting the child: Python, TensorFlow and this package imported.
WORKER_START_TIMEOUT_S = 180.0
_POLL_S = 0.05
_MODULE = "tf_fp16ops.audit.runtime.probes"


def _resident_mib(pid: int) -> float:
    """Resident memory of process `pid` in MiB (Linux /proc; 0 when unreadable)."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


def _cpu_name() -> str:
    from ..context import read_cpu_model

    return read_cpu_model()


def _tensorflow_version() -> str:
    import importlib.metadata

    for dist in ("tensorflow", "tensorflow-cpu", "tf-nightly"):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "(version unknown)"


class ProbeWorker:
    """Runs `run_probes` in a child process, one configuration at a time, under limits.

    The child (`python -m tf_fp16ops.audit.runtime.probes --serve`) is started on first use with
    this process's environment (so the PROBE_ENV switches are this process's; a change of them
    starts a new child) and kept for later configurations. While a configuration is probed its
    resident memory (Linux /proc) and the time are watched; past `memory_mib` or `timeout_s` the
    child is killed and the configuration is reported `observed="not-probed"` with a note naming
    the limit, the TensorFlow version and the CPU; a child that dies is reported
    `observed="error"` with the tail of its stderr. Either way the next configuration gets a new
    child. The child's output never reaches this process's stdout or stderr.

    Not for GPU configurations: TensorFlow in this process maps nearly all GPU memory by default,
    so they are probed in this process (`evidence_report`).

    Args:
      memory_mib: resident-memory limit of the child, MiB (> 0).
      timeout_s: time limit of one configuration's probes, seconds (> 0).
      start_timeout_s: time limit for the child to import TensorFlow, seconds (> 0).
      env: variables set in the child's environment on top of this process's.
      label: `ProbeResult.process` of its results.
      command: the child's argv (default: `python -m tf_fp16ops.audit.runtime.probes --serve`
        with this Python); any program speaking that protocol ("ready", then one line per key).
    Raises:
      ValueError: a limit that is not a positive number (its name and value).
    """

    def __init__(
        self,
        memory_mib: float = PROBE_MEMORY_MIB,
        timeout_s: float = PROBE_TIMEOUT_S,
        start_timeout_s: float = WORKER_START_TIMEOUT_S,
        env: dict[str, str] | None = None,
        label: str = "subprocess (same environment)",
        command: list[str] | None = None,
    ):
        for name, v in (
            ("memory_mib", memory_mib),
            ("timeout_s", timeout_s),
            ("start_timeout_s", start_timeout_s),
        ):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise ValueError(f"{name} must be a positive number, got {v!r}")
        self.memory_mib, self.timeout_s, self.start_timeout_s = (
            memory_mib,
            timeout_s,
            start_timeout_s,
        )
        self.env, self.label = dict(env or {}), label
        self.command = list(command or [sys.executable, "-m", _MODULE, "--serve"])
        self._proc: subprocess.Popen | None = None
        self._parent_switches: tuple[tuple[str, str], ...] = ()
        self._env_switches: tuple[tuple[str, str], ...] = ()
        self._stderr = None
        self._buf = b""

    def close(self) -> None:
        """Stops the child (if any)."""
        proc, self._proc = self._proc, None
        atexit.unregister(self.close)
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            for f in (proc.stdin, proc.stdout):
                if f is not None:
                    f.close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
        self._buf = b""

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        lines = self._stderr.read().decode(errors="replace").strip().splitlines()
        return lines[-1][-300:] if lines else ""

    def _read_line(self, limit_s: float) -> tuple[str | None, str]:
        """(line, "") from the child, or (None, why) after a limit, its death or EOF."""
        assert self._proc is not None
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + limit_s
        while b"\n" not in self._buf:
            rss = _resident_mib(self._proc.pid)
            if rss > self.memory_mib:
                return None, f"its process passed {self.memory_mib:g} MiB resident memory"
            left = deadline - time.monotonic()
            if left <= 0:
                return None, f"it did not finish within {limit_s:g} s"
            ready, _, _ = select.select([fd], [], [], min(_POLL_S, left))
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    self._proc.wait()
                    code = self._proc.returncode
                    tail = self._stderr_tail()
                    return None, f"the probe process exited with status {code}" + (
                        f": {tail}" if tail else ""
                    )
                self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode(), ""

    def _start(self) -> str:
        """Starts the child; "" or why it failed."""
        self.close()
        self._stderr = tempfile.TemporaryFile()
        env = dict(os.environ)
        env.update(self.env)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        self._parent_switches = process_switches()
        self._env_switches = tuple((k, env[k]) for k in PROBE_ENV if k in env)
        self._proc = subprocess.Popen(
            self.command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            start_new_session=True,
        )
        atexit.register(self.close)
        line, why = self._read_line(self.start_timeout_s)
        if line != "ready":
            self.close()
            return why or f"unexpected first line from the probe process: {line[:100]!r}"
        return ""

    def run(self, config: ProbeConfig) -> ProbeResult:
        """The probes of `config` (see `run_probes`), run in the child under the limits."""
        shown = self.label
        if (
            self._proc is None
            or self._proc.poll() is not None
            or (self._parent_switches != process_switches())
        ):
            why = self._start()
            if why:
                return ProbeResult(
                    config,
                    "error",
                    switches=self._env_switches,
                    process=shown,
                    note=f"probe process did not start: {why}",
                )
        try:
            self._proc.stdin.write((config.key() + "\n").encode())
            self._proc.stdin.flush()
        except OSError:
            self.close()
            return ProbeResult(
                config,
                "error",
                switches=self._env_switches,
                process=shown,
                note="the probe process closed its input",
            )
        line, why = self._read_line(self.timeout_s)
        if line is None:
            died = why.startswith("the probe process exited")
            self.close()
            if died:
                return ProbeResult(
                    config, "error", switches=self._env_switches, process=shown, note=why
                )
            return ProbeResult(
                config,
                "not-probed",
                switches=self._env_switches,
                process=shown,
                note=(
                    f"not probed on TensorFlow {_tensorflow_version()} on {_cpu_name()}: {why} "
                    "(stopped)"
                ),
            )
        return replace(ProbeResult.from_dict(json.loads(line)), process=shown)


def _serve() -> int:
    """The child of ProbeWorker: one config key per input line, one ProbeResult JSON per line."""
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # anything else written to stdout (C++ included) goes to stderr
    import tensorflow  # noqa: F401  (imported before "ready", so its start is not probe time)

    out.write("ready\n")
    out.flush()
    for line in sys.stdin:
        config = ProbeConfig.parse(line.strip())
        out.write(json.dumps(run_probes(config).to_dict()) + "\n")
        out.flush()
    return 0


def asdict_shallow(r: ProbeResult) -> dict:
    return {k: getattr(r, k) for k in r.__dataclass_fields__}


def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(
        prog="python -m tf_fp16ops.audit.runtime.probes",
        description="Runs accumulation probes (executes tiny convolutions) and prints the results.",
    )
    p.add_argument("configs", nargs="*", metavar="OP:T:TACC:DEVICE", help="e.g. Conv2D:half:-:cpu")
    p.add_argument(
        "--serve",
        action="store_true",
        help="ProbeWorker's child: config keys on stdin, one JSON result per line on stdout",
    )
    p.add_argument("--json", action="store_true", help="print JSON (a list of ProbeResult dicts)")
    args = p.parse_args(argv)
    if args.serve:
        return _serve()
    try:
        configs = [ProbeConfig.parse(c) for c in args.configs]
    except ValueError as e:
        p.error(str(e))
    if not configs:
        p.error("give at least one OP:T:TACC:DEVICE (or --serve)")
    results = [run_probes(c) for c in configs]
    if args.json:
        print(json.dumps([r.to_dict() for r in results]))
    else:
        for r in results:
            print(
                r.config.key(),
                r.observed,
                r.kernel,
                " ".join(f"{o.probe}={o.value}" for o in r.outcomes),
                r.note,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
