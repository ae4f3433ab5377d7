"""Loads the compiled op library `_fp16ops.so` that sits beside this file.

The library is built against one TensorFlow release (its C++ ABI and op registry change
between releases), so the version recorded at build time in `_build_info.json` must equal the
installed one; otherwise the import fails with an ImportError that says how to rebuild.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from types import ModuleType

import tensorflow as tf
from tensorflow.core.framework import op_def_pb2

LIBRARY_PATH = Path(__file__).resolve().parent / "_fp16ops.so"
BUILD_INFO_PATH = LIBRARY_PATH.with_name("_build_info.json")
REBUILD_COMMAND = "make build"
OP_NAMES = (
    "Fp16Conv2D",
    "Fp16Conv2DBackpropInput",
    "Fp16Conv2DBackpropFilter",
    "Fp16DepthwiseConv2D",
    "Fp16MatMul",
    "Fp16OpsCpuIsa",
)


def _remedy(built_for: str) -> str:
    """What to do about a missing or mismatched library: rebuild in a source tree, else install
    the TensorFlow the wheel was built for."""
    tree = LIBRARY_PATH.parent.parent
    if (tree / "Makefile").exists() and (tree / "BUILD").exists():
        return f"Rebuild it with `{REBUILD_COMMAND}` in the source tree ({tree})."
    return (
        f"Install the TensorFlow it was built for (`pip install 'tensorflow=={built_for}'`, or "
        f"`pip install 'tf_fp16ops[tf]'`), or build tf_fp16ops from source with `make wheel`."
    )


def _built_for() -> str:
    try:
        return json.loads(BUILD_INFO_PATH.read_text())["tensorflow_version"]
    except (OSError, ValueError, KeyError):
        return "unknown"


@functools.cache
def load() -> ModuleType:
    """Returns the op module made by `tf.load_op_library` for `_fp16ops.so` (once per process:
    a second `tf.load_op_library` of the same file, or of a symlink to it, registers nothing
    new and returns a module without wrappers, so the first module is kept).

    Raises:
      ImportError: the library is missing, was built for another TensorFlow version, or fails
        to load (the message names the built-for and installed versions and `make build`).
    """
    installed = tf.__version__
    built_for = _built_for()
    hint = (
        f"tf_fp16ops: the op library {LIBRARY_PATH} was built for TensorFlow {built_for}; "
        f"TensorFlow {installed} is installed. {_remedy(built_for)}"
    )
    if not LIBRARY_PATH.exists():
        raise ImportError(
            f"tf_fp16ops: the op library {LIBRARY_PATH} is missing (built for TensorFlow "
            f"{built_for}; TensorFlow {installed} is installed). {_remedy(built_for)}"
        )
    if built_for != installed:
        raise ImportError(hint)
    try:
        module = tf.load_op_library(os.fspath(LIBRARY_PATH))
    except (tf.errors.NotFoundError, OSError) as e:
        raise ImportError(f"{hint}\nLoader error: {e}") from e
    if not hasattr(module, "fp16_conv2d"):
        # The same file was loaded before (e.g. through a symlink): the ops are registered but
        # this load registered nothing, so the wrappers are generated from the registry, the
        # way tf.load_op_library generates them (tensorflow/python/framework/load_library.py).
        module = _wrappers_from_registry()
    return module


def _wrappers_from_registry() -> ModuleType:
    from tensorflow.python.framework import _pywrap_python_op_gen, op_def_registry

    op_list = op_def_pb2.OpList()
    for name in OP_NAMES:
        op_def = op_def_registry.get(name)
        if op_def is None:
            raise ImportError(
                f"tf_fp16ops: op {name} is not registered after loading {LIBRARY_PATH}; "
                f"rebuild with `{REBUILD_COMMAND}`"
            )
        op_list.op.add().CopyFrom(op_def)
    module = ModuleType("tf_fp16ops._generated_ops")
    exec(_pywrap_python_op_gen.GetPythonWrappers(op_list.SerializeToString()), module.__dict__)
    return module
