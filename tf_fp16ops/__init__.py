"""tf_fp16ops: TensorFlow convolutions whose accumulation precision is an op attribute.

`conv2d(..., accumulation="float16")` accumulates in IEEE binary16 with one rounding per
fused multiply-add step; `accumulation="float32"` accumulates in binary32 and rounds once.
See README "Numerics" for the exact contract and `tf_fp16ops.audit` for the graph audit.

Imports are layered (PEP 562 module `__getattr__`): importing the package or its TensorFlow-free
subpackages (`tf_fp16ops.audit` for the static audit, `tf_fp16ops.tensorboard_plugin`) neither
imports TensorFlow nor loads the compiled op library. The ops, the Keras layer (registered as
"tf_fp16ops>Conv2D") and the conversion helpers are imported on first attribute access
(`tf_fp16ops.conv2d`, `tf_fp16ops.layers`, ...), which loads the `_fp16ops.so` built for the
installed TensorFlow (tf_fp16ops/_platform/library.py). When there is none, that access raises
`OpLibraryError` (an ImportError) whose one-line message names the installed TensorFlow, the
versions the libraries present were built for and the fix; it is raised from the attribute
access itself, with no import machinery frames in its traceback.

When TensorFlow is already imported, `import tf_fp16ops` loads the library and registers the Keras
layer at once, so SavedModels and .keras files holding them load right after the import (`import
tensorflow as tf; import tf_fp16ops; tf.saved_model.load(...)`); a missing or mismatched library
does not fail that import, its OpLibraryError is raised at the first attribute access, and by
`keras.models.load_model` of a file that holds one of the layers (stand-ins registered under their
names, `_platform/missing_library.py`). Imported before TensorFlow (as `tf_fp16ops.quiet_stderr()`
wants), the package does the same as soon as the import of TensorFlow or Keras that comes later has
finished (a finder on `sys.meta_path`, `_RegisterAfterImport`, removed once it has run), so the
order of the imports does not matter; `import tf_fp16ops.layers` (or any attribute) also registers
them.
"""

from __future__ import annotations

import importlib as _importlib
import sys as _sys

__version__ = "0.1.0"

# Public name -> module that defines it (imported on first access).
_LAZY = {
    "accumulation_dtype": "tf_fp16ops.ops",
    "conv2d": "tf_fp16ops.ops",
    "conv2d_backprop_filter": "tf_fp16ops.ops",
    "conv2d_backprop_input": "tf_fp16ops.ops",
    "compare": "tf_fp16ops.comparison",
    "convert": "tf_fp16ops.conversion",
    "convert_with_report": "tf_fp16ops.conversion",
    "einsum": "tf_fp16ops.matmul_ops",
    "load_saved_model": "tf_fp16ops.saved_model",
    "matmul": "tf_fp16ops.matmul_ops",
    "sensitivity": "tf_fp16ops.layer_sensitivity.analysis",
}
_SUBMODULES = ("layers", "ops")

__all__ = sorted([*_LAZY, *_SUBMODULES, "OpLibraryError", "quiet_stderr"])


class OpLibraryError(ImportError):
    """No op library built for the installed TensorFlow, or it failed to load. The message is one
    line: the installed TensorFlow, the versions the libraries present were built for, the fix."""

    __module__ = "tf_fp16ops"


def quiet_stderr() -> None:
    """Routes this process's stderr (file descriptor 2) through a filter that drops TensorFlow's
    known noise lines and passes every other line, TensorFlow's real warnings and errors included,
    for the rest of the process (idempotent; nothing happens when the filter cannot start).

    The lines dropped are the start-up lines `TF_CPP_MIN_LOG_LEVEL` does not stop and the run-time
    line "oneDNN supports DT_HALF only on platforms with AVX-512" (severity E, written by
    TensorFlow's oneDNN layout pass, tensorflow/core/util/util.cc, the first time a T=half op is
    placed on a CPU without avx512_fp16/amx_fp16/avx_ne_convert; not an error: the Eigen kernel
    runs). This package's tools (the demo, `tf-fp16-audit --run`, `tf-fp16-sensitivity`) call it;
    call it at the start of a script of your own for the same output. Imports neither TensorFlow
    nor the op library.
    """
    from tf_fp16ops._platform.quiet import quiet_stderr as _quiet_stderr

    _quiet_stderr()


def __getattr__(name: str):
    if name not in _SUBMODULES and name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        from tf_fp16ops._platform.quiet import import_tensorflow

        # When not yet imported: without TensorFlow's start-up lines; the user's stderr is
        # given back as it was.
        import_tensorflow(keep_filtering=False)
        # The ops and the Keras layer are one unit: the layer is registered with the first op use.
        module = _importlib.import_module(f"{__name__}.layers")
        if name in _LAZY:
            module = _importlib.import_module(_LAZY[name])
        elif name in _SUBMODULES:
            module = _importlib.import_module(f"{__name__}.{name}")
    except OpLibraryError as e:
        # Raised here, without the import frames and the chained original: the message says it all.
        raise OpLibraryError(str(e)) from None
    value = module if name in _SUBMODULES else getattr(module, name)
    globals()[name] = value
    return value


def __dir__():
    # `annotations` is the __future__ feature, not part of the package.
    return sorted((set(globals()) - {"annotations"}) | set(__all__))


def _register_layers() -> None:
    try:
        _importlib.import_module(f"{__name__}.layers")  # loads the op library, registers the layer
    except OpLibraryError as e:
        # Raised again, with its message, at the first attribute access, and by loading a model
        # that holds one of the layers.
        from tf_fp16ops._platform.missing_library import register_stand_ins

        try:
            register_stand_ins(e)
        except ImportError:
            pass
    except ImportError:
        pass  # raised again, with its message, at the first attribute access


class _RegisterAfterImport:
    """A `sys.meta_path` finder that registers the layers once an import of TensorFlow or Keras
    made after this package's has finished: the outermost one, since each imports the other
    (Keras 3 imports TensorFlow as its backend, TensorFlow imports Keras for `tf.keras`), and the
    layers' module needs both complete. It finds nothing itself: it asks the finders after it and
    wraps the loader's `exec_module`. It leaves `sys.meta_path` when it registers; an import that
    fails registers nothing and leaves it in place."""

    WATCHED = ("tensorflow", "keras")

    def __init__(self) -> None:
        self._depth = 0  # imports of WATCHED modules under way

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.WATCHED:
            return None
        for finder in list(_sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader.exec_module = self._wrap(spec.loader.exec_module)
        return spec

    def _wrap(self, exec_module):
        def run(module):
            self._depth += 1
            try:
                exec_module(module)
            finally:
                self._depth -= 1
            if self._depth == 0 and self in _sys.meta_path:
                _sys.meta_path.remove(self)
                _register_layers()

        return run


if "tensorflow" in _sys.modules:
    _register_layers()
elif not any(type(f).__qualname__ == "_RegisterAfterImport" for f in _sys.meta_path):
    # (by name: a reload of this module defines the class anew)
    _sys.meta_path.insert(0, _RegisterAfterImport())
