"""Python entry points of the audit."""
from __future__ import annotations

import os
from typing import Any

from .analyze import analyze
from .context import RuntimeContext
from .findings import AuditReport
from .loader import build_keras, load_object, load_path


def audit(source: Any, context: RuntimeContext | None = None, *, build_keras_model: bool = False,
          signature: str | None = None) -> AuditReport:
    """Audits a model file/directory path or a Python object; never executes the model.

    Args:
      source: SavedModel directory, GraphDef .pb/.pbtxt, .keras archive, or a tf.function,
        ConcreteFunction, tf.Graph, GraphDef or keras.Model.
      context: runtime context; default `RuntimeContext.from_process()`.
      build_keras_model: for .keras paths, build the model in Keras safe mode and trace it
        instead of reading its config statically.
      signature: keep only call sites reached from this SavedModel signature.
    Raises:
      AuditInputError: unreadable or malformed input (message names the input).
    """
    ctx = context if context is not None else RuntimeContext.from_process()
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        model = build_keras(path) if build_keras_model and path.endswith(".keras") else load_path(path)
    else:
        model = load_object(source)
    return analyze(model, ctx, signature=signature)
