"""Runtime context: the facts outside the model that decide what a convolution computes in.

A `RuntimeContext` is a frozen value. `RuntimeContext.from_process()` reads the current process
(environment variables, visible GPUs, TensorFlow build info, TF32 and optimizer options, the CPU
flags of /proc/cpuinfo that decide whether oneDNN takes T=half convolutions);
`with_overrides()` applies command-line overrides. Passes take it as an argument; nothing here
is global state.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np

# Environment variables that matter for convolution precision (docs/design.md "Cases and their
# public sources": the switches, and grappler's auto mixed precision).
RELEVANT_ENV = (
    "TF_FP16_CONV_USE_FP32_COMPUTE",
    "TF_CONV2D_USE_FP16_ACCUMULATE",
    "TF_ENABLE_AUTO_MIXED_PRECISION",
    "TF_ENABLE_AUTO_MIXED_PRECISION_GRAPH_REWRITE",
    "TF_AUTO_MIXED_PRECISION_GRAPH_REWRITE_ALLOWLIST_ADD",
    "TF_AUTO_MIXED_PRECISION_GRAPH_REWRITE_ALLOWLIST_REMOVE",
    "TF_AUTO_MIXED_PRECISION_GRAPH_REWRITE_LEVEL",
    "TF_FP16_MATMUL_USE_FP32_COMPUTE",
    "NVIDIA_TF32_OVERRIDE",
    "TF_ENABLE_ONEDNN_OPTS",
    "TF_XLA_FLAGS",
)

# CPU flags (as /proc/cpuinfo spells them) that TensorFlow's x86-64 Linux build tests:
#  * oneDNN on by default when any of ONEDNN_DEFAULT_ON_FLAGS is present
#    (tensorflow/core/util/port.cc, DefaultOneDnnPolicy / IsMklEnabled); TF_ENABLE_ONEDNN_OPTS
#    overrides the default ("0"/"false" off, "1"/"true" on, case-insensitive; any other value
#    keeps the default: ReadBoolFromEnvVar, tensorflow/core/util/env_var.cc);
#  * DT_HALF supported by oneDNN when (avx512bw and (avx512_fp16 or amx_fp16)) or avx_ne_convert
#    (tensorflow/core/util/util.cc, IsDataTypeSupportedByOneDNNOnThisCPU, ENABLE_ONEDNN_V3 branch).
# When both hold, the oneDNN layout pass (tensorflow/core/common_runtime/mkl_layout_pass.cc)
# rewrites T=half convolutions to _MklNative* kernels.
ONEDNN_DEFAULT_ON_FLAGS = (
    "avx512_vnni",
    "avx512_bf16",
    "avx_vnni",
    "amx_tile",
    "amx_int8",
    "amx_bf16",
)
ONEDNN_HALF_FLAGS = ("avx512bw", "avx512_fp16", "amx_fp16", "avx_ne_convert")
CPU_FLAGS = tuple(sorted(set(ONEDNN_DEFAULT_ON_FLAGS + ONEDNN_HALF_FLAGS)))


def onednn_takes_half(flags, onednn_opts: str | None) -> tuple[bool, str]:
    """Whether TensorFlow's oneDNN rewrite takes T=half convolutions on a CPU, and why.

    Args:
      flags: the CPU's /proc/cpuinfo flags (any iterable of str; others than CPU_FLAGS ignored).
      onednn_opts: the value of TF_ENABLE_ONEDNN_OPTS, or None when unset.
    Returns:
      (takes_half, reason). The rule is TensorFlow's (sources at CPU_FLAGS above), for the
      x86-64 Linux builds (INTEL_MKL, ENABLE_ONEDNN_V3) that the PyPI wheels are.
    """
    have = set(flags)
    default = [f for f in ONEDNN_DEFAULT_ON_FLAGS if f in have]
    shown = "unset" if onednn_opts is None else repr(onednn_opts)
    low = None if onednn_opts is None else onednn_opts.lower()
    if low in ("0", "false"):
        return False, f"TF_ENABLE_ONEDNN_OPTS={shown} turns oneDNN off"
    if low in ("1", "true"):
        on = f"TF_ENABLE_ONEDNN_OPTS={shown} turns oneDNN on"
    elif default:
        on = f"oneDNN on by default with {default[0]}, TF_ENABLE_ONEDNN_OPTS={shown}"
    else:
        return False, (
            f"oneDNN off by default (none of {', '.join(ONEDNN_DEFAULT_ON_FLAGS)}; "
            f"TF_ENABLE_ONEDNN_OPTS={shown})"
        )
    if "avx512bw" in have and ("avx512_fp16" in have or "amx_fp16" in have):
        feat = "avx512bw+" + ("avx512_fp16" if "avx512_fp16" in have else "amx_fp16")
    elif "avx_ne_convert" in have:
        feat = "avx_ne_convert"
    else:
        return False, (
            f"{on}, but the CPU lacks avx512_fp16/amx_fp16 (with avx512bw) and "
            "avx_ne_convert, so T=half stays on the Eigen kernels"
        )
    return True, f"{on}; CPU has {feat}"


def read_cpu_flags(path: str = "/proc/cpuinfo") -> tuple[str, ...] | None:
    """The CPU_FLAGS present in the first "flags" line of `path` (x86 Linux), sorted; None when the
    file is unreadable or has no "flags" line (not Linux, or not an x86 CPU)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, sep, value = line.partition(":")
                if sep and key.strip() == "flags":
                    have = set(value.split())
                    return tuple(x for x in CPU_FLAGS if x in have)
    except OSError:
        return None
    return None


def read_cpu_model(path: str = "/proc/cpuinfo") -> str:
    """The CPU's name as `path`'s first "model name" line gives it (e.g. "AMD EPYC 7B13"), else
    `platform.processor()` or `platform.machine()`: the name benchmarks and probe reports print
    next to their figures."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, sep, value = line.partition(":")
                if sep and key.strip() == "model name":
                    return value.strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


# Bounds of the --compute-capability / --cudnn-version overrides: real values are single or double
# digits (compute capability 3.5 .. 12.x; cuDNN 7.x .. 9.x, or the integer form 8907), so larger
# numbers are typos, rejected rather than carried into the report.
MAX_CC_MAJOR = 99
MAX_CC_MINOR = 99
MAX_CUDNN_PART = 99999


@dataclass(frozen=True)
class RuntimeContext:
    """Where and how the audited model would run.

    Attributes:
      device: "gpu" or "cpu": the device convolutions are assumed to be placed on (a node's own
        `device` field wins over it).
      env: relevant environment variables that are set, as sorted (name, value) pairs; a variable
        absent here is unset.
      amp: whether grappler's auto mixed precision rewrite is requested.
      compute_capability: GPU compute capability (major, minor), or None when unknown/no GPU.
      cudnn_version: cuDNN version as a tuple, e.g. (9, 3, 0), or None when unknown.
      tf32: whether TensorFloat-32 execution is enabled (tf.config default True).
      tf_version: TensorFlow version string of the auditing process.
      origin: "process" or "process + overrides: ...".
      cpu_flags: the CPU_FLAGS the target CPU has (from /proc/cpuinfo), or None when unknown.
      cpu_onednn_fp16: command-line override of whether oneDNN takes T=half convs on CPU (None:
        derived from `cpu_flags` and TF_ENABLE_ONEDNN_OPTS; see `onednn_half()`).
    """

    device: str = "cpu"
    env: tuple[tuple[str, str], ...] = ()
    amp: bool = False
    compute_capability: tuple[int, int] | None = None
    cudnn_version: tuple[int, ...] | None = None
    tf32: bool = True
    tf_version: str = ""
    origin: str = "explicit"
    overrides: tuple[str, ...] = field(default=())
    cpu_flags: tuple[str, ...] | None = None
    cpu_onednn_fp16: bool | None = None

    def __post_init__(self):
        """Checks the fields given (the Python API builds contexts too) and brings a mapping `env`,
        list-valued versions and the device's case to the stored form.

        Raises:
          ValueError: a device other than "cpu"/"gpu" (any case), a compute capability that is
            not two ints (major, minor) within 0..99, a cuDNN version that is not ints.
          TypeError: `env` neither a mapping nor (name, value) pairs of strings.
        """
        device = self.device.lower() if isinstance(self.device, str) else self.device
        if device not in ("cpu", "gpu"):
            raise ValueError(f"device must be 'cpu' or 'gpu', got {self.device!r}")
        object.__setattr__(self, "device", device)
        env = self.env
        try:
            pairs = tuple((k, v) for k, v in (env.items() if isinstance(env, Mapping) else env))
        except (TypeError, ValueError):
            raise TypeError(f"env must be a mapping of names to strings, got {env!r:.80}") from None
        for k, v in pairs:
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError(
                    f"env must map names to strings (environment values), got {k!r:.40}: {v!r:.40}"
                )
        object.__setattr__(self, "env", tuple(sorted(pairs)))
        for name in ("amp", "tf32"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be a bool, got {getattr(self, name)!r:.40}")
        if self.cpu_onednn_fp16 is not None and not isinstance(self.cpu_onednn_fp16, bool):
            raise TypeError(
                f"cpu_onednn_fp16 must be None or a bool, got {self.cpu_onednn_fp16!r:.40}"
            )
        if not isinstance(self.tf_version, str):
            raise TypeError(f"tf_version must be a string, got {self.tf_version!r:.40}")
        if self.cpu_flags is not None:
            if isinstance(self.cpu_flags, str) or not all(
                isinstance(f, str) for f in self.cpu_flags
            ):
                raise TypeError(
                    f"cpu_flags must be None or a tuple of flag names, got {self.cpu_flags!r:.60}"
                )
            object.__setattr__(self, "cpu_flags", tuple(self.cpu_flags))
        for name, limit, size in (
            ("compute_capability", MAX_CC_MAJOR, 2),
            ("cudnn_version", MAX_CUDNN_PART, None),
        ):
            v = getattr(self, name)
            if v is None:
                continue
            ok = isinstance(v, (tuple, list)) and (size is None or len(v) == size) and len(v) > 0
            ok = ok and all(
                isinstance(x, (int, np.integer))
                and not isinstance(x, (bool, np.bool_))
                and 0 <= x <= limit
                for x in v
            )
            if not ok:
                what = "(major, minor), two ints" if size == 2 else "a tuple of ints"
                raise ValueError(f"{name} must be {what} in 0..{limit}, got {v!r:.60}")
            object.__setattr__(self, name, tuple(int(x) for x in v))

    def onednn_half(self) -> tuple[bool | None, str]:
        """(whether TensorFlow's oneDNN rewrite takes T=half convs on the target CPU, why); None
        when unknown (no CPU facts and no override)."""
        if self.cpu_onednn_fp16 is not None:
            shown = "yes" if self.cpu_onednn_fp16 else "no"
            return self.cpu_onednn_fp16, f"--cpu-onednn-fp16 {shown}"
        if self.cpu_flags is None:
            return None, "CPU flags unknown (no /proc/cpuinfo flags; pass --cpu-onednn-fp16 yes|no)"
        return onednn_takes_half(self.cpu_flags, self.getenv("TF_ENABLE_ONEDNN_OPTS"))

    def getenv(self, name: str) -> str | None:
        """The value of environment variable `name` in this context, or None when unset."""
        for key, value in self.env:
            if key == name:
                return value
        return None

    def to_dict(self) -> dict:
        return {
            "device": self.device,
            "env": dict(self.env),
            "amp": self.amp,
            "compute_capability": list(self.compute_capability)
            if self.compute_capability
            else None,
            "cudnn_version": list(self.cudnn_version) if self.cudnn_version else None,
            "tf32": self.tf32,
            "tf_version": self.tf_version,
            "origin": self.origin,
            "overrides": list(self.overrides),
            "cpu_flags": list(self.cpu_flags) if self.cpu_flags is not None else None,
            "cpu_onednn_fp16": self.onednn_half()[0],
            "cpu_onednn_fp16_reason": self.onednn_half()[1],
        }

    @staticmethod
    def from_process(environ: Mapping[str, str] | None = None) -> RuntimeContext:
        """Reads the current process: env vars, visible GPUs, cuDNN from TF build info, TF32, AMP
        option.

        When TensorFlow is already imported here (an audit of a Python object, `--run`), its
        `tf.config` and build info are read. Otherwise TensorFlow is not imported (a static audit
        needs none): its version and build info are read from the installed files, a GPU is
        visible when the TensorFlow build has CUDA and `nvidia-smi` lists one (first of
        CUDA_VISIBLE_DEVICES), and TF32 / auto mixed precision are as a fresh TensorFlow process
        has them (TF32 on, AMP off); the context's `origin` says so.
        """
        environ = os.environ if environ is None else environ
        env = tuple(sorted((k, environ[k]) for k in RELEVANT_ENV if k in environ))
        flags = read_cpu_flags()
        if "tensorflow" not in sys.modules:
            return replace(_from_installed_files(env, environ), cpu_flags=flags)
        import tensorflow as tf

        gpus = tf.config.list_physical_devices("GPU")
        cc = None
        if gpus:
            try:
                details = tf.config.experimental.get_device_details(gpus[0])
                cc = details.get("compute_capability")
            except (ValueError, RuntimeError):
                cc = None
        build = tf.sysconfig.get_build_info()
        cudnn = (
            _parse_version(str(build.get("cudnn_version", "")))
            if build.get("is_cuda_build")
            else None
        )
        try:
            tf32 = bool(tf.config.experimental.tensor_float_32_execution_enabled())
        except AttributeError:
            tf32 = True
        amp = bool(
            tf.config.optimizer.get_experimental_options().get("auto_mixed_precision", False)
        )
        return RuntimeContext(
            device="gpu" if gpus else "cpu",
            env=env,
            amp=amp,
            compute_capability=tuple(cc) if cc else None,
            cudnn_version=cudnn,
            tf32=tf32,
            tf_version=tf.__version__,
            origin="process",
            cpu_flags=flags,
        )

    def with_overrides(
        self,
        *,
        device: str | None = None,
        env: Mapping[str, str] | None = None,
        amp: bool | None = None,
        compute_capability: str | None = None,
        cudnn_version: str | None = None,
        cpu_onednn_fp16: str | bool | None = None,
    ) -> RuntimeContext:
        """Returns a copy with command-line overrides applied.

        `cpu_onednn_fp16` ("yes"/"no" or a bool) states whether oneDNN takes T=half convs on the
        target CPU instead of deriving it from this machine's CPU flags.

        Raises:
          ValueError: naming the argument and the bad value (device not gpu/cpu, malformed
            versions).
        """
        changes: dict = {}
        notes: list[str] = list(self.overrides)
        if device is not None:
            if device not in ("gpu", "cpu"):
                raise ValueError(f"--device must be 'gpu' or 'cpu', got {device!r}")
            changes["device"] = device
            notes.append(f"device={device}")
        if env:
            merged = dict(self.env)
            for k, v in env.items():
                merged[k] = v
                notes.append(f"{k}={v!r}")
            changes["env"] = tuple(sorted(merged.items()))
        if amp is not None:
            changes["amp"] = amp
            notes.append(f"amp={amp}")
        if compute_capability is not None:
            cc = _parse_version(compute_capability)
            if cc is None or len(cc) != 2 or not 1 <= cc[0] <= MAX_CC_MAJOR or cc[1] > MAX_CC_MINOR:
                raise ValueError(
                    f"--compute-capability must look like 8.0 "
                    f"(MAJOR.MINOR, major 1..{MAX_CC_MAJOR}, "
                    f"minor 0..{MAX_CC_MINOR}), got {compute_capability!r}"
                )
            changes["compute_capability"] = cc
            notes.append(f"compute_capability={compute_capability}")
        if cudnn_version is not None:
            v = _parse_version(cudnn_version)
            if v is None or len(v) > 3 or v[0] < 1 or max(v) > MAX_CUDNN_PART:
                raise ValueError(
                    f"--cudnn-version must look like 8.9.7 (1 to 3 parts, the first >= 1, each at "
                    f"most {MAX_CUDNN_PART}), got {cudnn_version!r}"
                )
            changes["cudnn_version"] = v
            notes.append(f"cudnn_version={cudnn_version}")
        if cpu_onednn_fp16 is not None:
            if isinstance(cpu_onednn_fp16, bool):
                flag = cpu_onednn_fp16
            elif cpu_onednn_fp16 in ("yes", "no"):
                flag = cpu_onednn_fp16 == "yes"
            else:
                raise ValueError(
                    f"--cpu-onednn-fp16 must be 'yes' or 'no', got {cpu_onednn_fp16!r}"
                )
            changes["cpu_onednn_fp16"] = flag
            notes.append(f"cpu_onednn_fp16={'yes' if flag else 'no'}")
        if not changes:
            return self
        base = self.origin.split(" + ")[0]
        return replace(
            self,
            **changes,
            overrides=tuple(notes),
            origin=f"{base} + overrides: {', '.join(notes)}",
        )


def _parse_version(text: str) -> tuple[int, ...] | None:
    parts = text.strip().split(".")
    if not text.strip() or not all(p.isdigit() for p in parts):
        return None
    return tuple(int(p) for p in parts)


# Distribution names TensorFlow is published under (the version is read from the installed one).
_TF_DISTRIBUTIONS = (
    "tensorflow",
    "tensorflow-cpu",
    "tensorflow-gpu",
    "tensorflow-intel",
    "tf-nightly",
)


def _installed_tensorflow() -> tuple[str, dict]:
    """(version, build info dict) of the installed TensorFlow without importing it; ("", {}) when
    none is installed. The build info is tensorflow/python/platform/build_info.py (a dict literal
    module; `tf.sysconfig.get_build_info()` returns the same dict)."""
    version = ""
    for name in _TF_DISTRIBUTIONS:
        try:
            version = importlib.metadata.version(name)
            break
        except importlib.metadata.PackageNotFoundError:
            continue
    try:
        spec = importlib.util.find_spec("tensorflow")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return version, {}
    path = os.path.join(
        list(spec.submodule_search_locations)[0], "python", "platform", "build_info.py"
    )
    try:
        bspec = importlib.util.spec_from_file_location("_tf_fp16ops_tf_build_info", path)
        module = importlib.util.module_from_spec(bspec)
        bspec.loader.exec_module(module)
        return version, dict(getattr(module, "build_info", {}))
    except (OSError, ImportError, SyntaxError, AttributeError, TypeError):
        return version, {}


def _nvidia_smi_compute_capability(environ: Mapping[str, str]) -> tuple[int, int] | None:
    """Compute capability of the first GPU CUDA_VISIBLE_DEVICES leaves visible, from
    `nvidia-smi --query-gpu=compute_cap` (drivers >= 510); None when no GPU is listed."""
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    first = None
    if visible is not None:
        first = visible.split(",")[0].strip()
        if not first or first.startswith("-"):
            return None
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    cmd = [exe, "--query-gpu=compute_cap", "--format=csv,noheader"]
    if first is not None:
        cmd += ["-i", first]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = r.stdout.strip().splitlines() if r.returncode == 0 else []
    cc = _parse_version(lines[0]) if lines else None
    return (cc[0], cc[1]) if cc is not None and len(cc) == 2 else None


def _from_installed_files(env: tuple, environ: Mapping[str, str]) -> RuntimeContext:
    version, build = _installed_tensorflow()
    cuda = bool(build.get("is_cuda_build"))
    cc = _nvidia_smi_compute_capability(environ) if cuda else None
    cudnn = _parse_version(str(build.get("cudnn_version", ""))) if cuda else None
    how = "TensorFlow not imported" if version else "TensorFlow not installed"
    return RuntimeContext(
        device="gpu" if cc else "cpu",
        env=env,
        amp=False,
        compute_capability=cc,
        cudnn_version=cudnn,
        tf32=True,
        tf_version=version,
        origin=f"process ({how})",
    )
