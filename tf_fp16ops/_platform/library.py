"""Finds and loads the compiled op library `_fp16ops.so` built for the installed TensorFlow.

A custom op's C++ ABI is not stable across TensorFlow minor releases (tensorflow/addons#987),
so every library is built against one TensorFlow release (its headers and
`libtensorflow_framework.so.2`) and recorded with that release in a JSON file beside it,
`{"tensorflow_version": "2.21.0", "cuda": false}`. Two places hold libraries:

* `tf_fp16ops/_fp16ops.so` with `tf_fp16ops/_build_info.json`: `make build` in a source tree
  (one library, for the virtualenv's TensorFlow);
* `tf_fp16ops/_libs/tf<major>.<minor>/_fp16ops.so` with `build_info.json` there: the wheel,
  one library per supported TensorFlow minor (`make wheel`, tools/build_wheel.py).

`load()` loads the library recorded with the installed TensorFlow's major.minor: one build per
minor, accepted for every patch release of it, as tensorflow-text (`tensorflow>=2.x,<2.x+1`) and
tensorflow-io ship theirs. When there is none, it raises `OpLibraryError` with a one-line
message naming the installed TensorFlow, the versions the libraries present were built for, and
the fix (`make build` in a source tree, else the supported TensorFlow versions).
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import tensorflow as tf
from tensorflow.core.framework import op_def_pb2

from tf_fp16ops import OpLibraryError

# tf_fp16ops/, where the libraries lie (this module is tf_fp16ops/_platform/library.py).
PACKAGE_DIR = Path(__file__).resolve().parents[1]
# The source tree's own build (`make build`).
LIBRARY_PATH = PACKAGE_DIR / "_fp16ops.so"
BUILD_INFO_PATH = LIBRARY_PATH.with_name("_build_info.json")
# The wheel's libraries, one folder per TensorFlow minor: _libs/tf2.16/_fp16ops.so ...
LIBS_DIR = PACKAGE_DIR / "_libs"
REBUILD_COMMAND = "make build"
OP_NAMES = (
    "Fp16Conv2D",
    "Fp16Conv2DBackpropInput",
    "Fp16Conv2DBackpropFilter",
    "Fp16DepthwiseConv2D",
    "Fp16MatMul",
    "Fp16OpsCpuIsa",
)


@dataclass(frozen=True)
class Library:
    """One op library and the TensorFlow release it was built against."""

    path: Path
    tensorflow_version: str  # e.g. "2.16.2"

    @property
    def minor(self) -> str:
        return minor_of(self.tensorflow_version)


def minor_of(version: str) -> str:
    """'2.16' for '2.16.2' or '2.16.0rc1'."""
    return ".".join(version.split(".")[:2])


def _read_version(info: Path) -> str | None:
    try:
        version = json.loads(info.read_text())["tensorflow_version"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return version if isinstance(version, str) and version else None


def libraries(package_dir: Path = PACKAGE_DIR) -> list[Library]:
    """The op libraries of the package in `package_dir` that have a readable build-info file:
    the source tree's build first, then the wheel's, by TensorFlow minor."""
    found = []
    candidates = [(package_dir / "_fp16ops.so", package_dir / "_build_info.json")]
    libs = package_dir / "_libs"
    if libs.is_dir():
        for d in sorted(libs.iterdir(), key=lambda p: _minor_key(p.name.removeprefix("tf"))):
            candidates.append((d / "_fp16ops.so", d / "build_info.json"))
    for path, info in candidates:
        version = _read_version(info)
        if version is not None and path.is_file():
            found.append(Library(path, version))
    return found


def _minor_key(minor: str) -> tuple:
    return tuple(int(p) if p.isdigit() else 0 for p in minor.split("."))


def source_tree(package_dir: Path = PACKAGE_DIR) -> Path | None:
    """The checkout the package sits in (its Makefile and BUILD beside it), else None."""
    tree = package_dir.parent
    return tree if (tree / "Makefile").is_file() and (tree / "BUILD").is_file() else None


def find(installed: str, package_dir: Path = PACKAGE_DIR) -> Library:
    """The library built for TensorFlow `installed`'s major.minor.

    Raises:
      OpLibraryError: there is none; the one-line message names `installed`, the versions the
        libraries present were built for, and the fix.
    """
    present = libraries(package_dir)
    for lib in present:
        if lib.minor == minor_of(installed):
            return lib
    built = ", ".join(lib.tensorflow_version for lib in present)
    tree = source_tree(package_dir)
    if tree is not None:
        if not present:
            what = f"no op library has been built in this source tree ({tree})"
        else:
            what = f"the op library in {tree} was built for TensorFlow {built}"
        raise OpLibraryError(
            f"tf_fp16ops: {what}, and TensorFlow {installed} is installed; "
            f"run `{REBUILD_COMMAND}` in {tree} to build it for TensorFlow {installed}"
        )
    if not present:
        raise OpLibraryError(
            f"tf_fp16ops: this installation ({package_dir}) holds no op library, and TensorFlow "
            f"{installed} is installed; reinstall tf_fp16ops from its wheel"
        )
    raise OpLibraryError(
        f"tf_fp16ops: no op library for the installed TensorFlow {installed}; this tf_fp16ops "
        f"holds libraries built for TensorFlow {built}: install one of those minor releases "
        "(`pip install 'tf_fp16ops[tf]'` picks one)"
    )


_loaded: Library | None = None


def loaded() -> Library | None:
    """The library `load()` loaded in this process, else None."""
    return _loaded


# The values of TF_FP16OPS_CPU_ISA, which caps the CPU kernels' instruction set (read once by the
# library, cc/kernels/cpu/accumulate.cc `DetectIsa`): unset or empty for the best path.
CPU_ISA_CAPS = ("avx512fp16", "avx512", "avx2", "scalar")


def check_cpu_isa_cap(environ=os.environ) -> None:
    """Raises ValueError, naming the variable and its value, when TF_FP16OPS_CPU_ISA holds
    anything but one of CPU_ISA_CAPS or nothing: the library takes every other value as `avx2`,
    so a misspelt cap (`SCALAR`) would run another path than the one asked for, silently."""
    value = environ.get("TF_FP16OPS_CPU_ISA", "")
    if value and value not in CPU_ISA_CAPS:
        choices = ", ".join(repr(c) for c in CPU_ISA_CAPS)
        raise ValueError(
            f"tf_fp16ops: TF_FP16OPS_CPU_ISA must be one of {choices} or empty, got {value!r}"
        )


@functools.cache
def load() -> ModuleType:
    """Returns the op module made by `tf.load_op_library` for the library built for the installed
    TensorFlow (once per process: a second `tf.load_op_library` of the same file, or of a symlink
    to it, registers nothing new and returns a module without wrappers, so the first module is
    kept).

    Raises:
      ValueError: TF_FP16OPS_CPU_ISA holds a value the library does not know (`check_cpu_isa_cap`).
      OpLibraryError (an ImportError): no library was built for the installed TensorFlow's
        minor, or it fails to load; the one-line message names the installed TensorFlow, the
        version(s) the library was built for and the fix (see `find`).
    """
    global _loaded
    check_cpu_isa_cap()
    installed = tf.__version__
    lib = find(installed)
    try:
        module = tf.load_op_library(os.fspath(lib.path))
    except (tf.errors.NotFoundError, OSError) as e:
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0]
        tree = source_tree()
        fix = (
            f"run `{REBUILD_COMMAND}` in {tree}"
            if tree is not None
            else "reinstall tf_fp16ops from its wheel"
        )
        raise OpLibraryError(
            f"tf_fp16ops: the op library {lib.path} (built for TensorFlow "
            f"{lib.tensorflow_version}) failed to load into TensorFlow {installed}: {reason}; {fix}"
        ) from None
    if not hasattr(module, "fp16_conv2d"):
        # The same file was loaded before (e.g. through a symlink): the ops are registered but
        # this load registered nothing, so the wrappers are generated from the registry, the
        # way tf.load_op_library generates them (tensorflow/python/framework/load_library.py).
        module = _wrappers_from_registry(lib)
    _loaded = lib
    return module


def _wrappers_from_registry(lib: Library) -> ModuleType:
    from tensorflow.python.framework import _pywrap_python_op_gen, op_def_registry

    op_list = op_def_pb2.OpList()
    for name in OP_NAMES:
        op_def = op_def_registry.get(name)
        if op_def is None:
            raise OpLibraryError(
                f"tf_fp16ops: op {name} is not registered after loading {lib.path}; "
                f"rebuild with `{REBUILD_COMMAND}`"
            )
        op_list.op.add().CopyFrom(op_def)
    module = ModuleType("tf_fp16ops._generated_ops")
    exec(_pywrap_python_op_gen.GetPythonWrappers(op_list.SerializeToString()), module.__dict__)
    return module
