"""Whether this machine's CPU makes TensorFlow hand T=half convolutions to oneDNN, written out by
hand from TensorFlow's rule (independent of tf_fp16ops.audit.context, which the tests check):
oneDNN on (TF_ENABLE_ONEDNN_OPTS unset: default on for avx512_vnni/avx512_bf16/avx_vnni/amx_tile/
amx_int8/amx_bf16, tensorflow/core/util/port.cc) and DT_HALF supported, i.e. avx512bw with
avx512_fp16 or amx_fp16, or avx_ne_convert (tensorflow/core/util/util.cc,
IsDataTypeSupportedByOneDNNOnThisCPU)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest


def _flags() -> set[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def has_half_features() -> bool:
    """The CPU features of TensorFlow's DT_HALF rule (oneDNN may still be off)."""
    f = _flags()
    return ("avx512bw" in f and bool(f & {"avx512_fp16", "amx_fp16"})) or "avx_ne_convert" in f


def onednn_on_here() -> bool:
    """oneDNN's CPU kernels on in this process's environment (TensorFlow's default rule)."""
    f = _flags()
    env = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "").lower()
    return env in ("1", "true") or (
        env not in ("0", "false")
        and bool(f & {"avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16"})
    )


def onednn_takes_half_here() -> bool:
    """The features, and oneDNN on in this process's environment."""
    return onednn_on_here() and has_half_features()


def eigen_runs_stock_convs(dtype: str) -> bool:
    """Whether TensorFlow's Eigen CPU kernels (not oneDNN's) run stock convolutions of `dtype`
    ("float16" or "float32") here. Those kernels refuse NCHW Conv2D ("currently only supports
    the NHWC tensor format on the CPU") and dilated Conv2DBackpropInput ("do not yet support
    dilation rates larger than 1"); oneDNN's run both."""
    if dtype in ("float16", "mixed_float16"):
        return not onednn_takes_half_here()
    return not onednn_on_here()


ONEDNN_HALF_REASON = (
    "this CPU lacks the features for which TensorFlow hands T=half convs to oneDNN "
    "(avx512bw + avx512_fp16/amx_fp16, or avx_ne_convert)"
)


def run_on_isa(script: str, isa: str) -> list[str]:
    """Runs `script` (a str.format template; `{tests}` is the tests folder, for `from support
    import ...`) in a Python subprocess with the op library capped at `isa` (TF_FP16OPS_CPU_ISA);
    returns its stdout lines after the line "isa NAME" that the script prints, that line
    included. Skips, naming the path the CPU runs, when this CPU has no `isa` path (scalar exists
    everywhere)."""
    tests = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ, TF_FP16OPS_CPU_ISA=isa, TF_CPP_MIN_LOG_LEVEL="3")
    r = subprocess.run(
        [sys.executable, "-c", script.format(tests=tests)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.strip().splitlines()
    at = max(i for i, line in enumerate(lines) if line.startswith("isa "))
    ran = lines[at].split(" ", 1)[1]
    if isa != "scalar" and ran != isa:
        pytest.skip(f"this CPU has no {isa} path (it runs {ran})")
    return lines[at:]
