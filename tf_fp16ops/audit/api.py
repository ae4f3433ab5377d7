"""Python entry points of the audit."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .analyze import analyze
from .context import RuntimeContext
from .findings import AuditReport
from .limits import DEFAULT, Limits
from .loader import build_keras, load_object, load_path


def _check_type(name: str, value, kind: type, none_ok: bool = False) -> None:
    if (value is None and none_ok) or isinstance(value, kind):
        return
    want = f"a {kind.__name__}" + (" or None" if none_ok else "")
    raise TypeError(f"{name} must be {want}, got {type(value).__name__} {value!r:.80}")


def audit(
    source: Any,
    context: RuntimeContext | None = None,
    *,
    build_keras_model: bool = False,
    signature: str | None = None,
    limits: Limits = DEFAULT,
) -> AuditReport:
    """Audits a model file/directory path or a Python object; never executes the model.

    Args:
      source: SavedModel directory, GraphDef .pb/.pbtxt, .keras archive, or a tf.function,
        ConcreteFunction, tf.Graph, GraphDef or keras.Model.
      context: runtime context; default `RuntimeContext.from_process()`.
      build_keras_model: for .keras paths, build the model in Keras safe mode and trace it
        instead of reading its config statically.
      signature: keep only call sites reached from this SavedModel signature.
      limits: file sizes, directories a model may reference, and the budget of nodes, sites and
        call edges (`limits.Limits`; past the budget the report is partial, see
        `AuditReport.partial`).
    Raises:
      AuditInputError: unreadable or malformed input (message names the input).
      TypeError: `context`, `limits`, `signature` or `build_keras_model` of the wrong type.
    """
    _check_type("context", context, RuntimeContext, none_ok=True)
    _check_type("limits", limits, Limits)
    _check_type("signature", signature, str, none_ok=True)
    _check_type("build_keras_model", build_keras_model, bool)
    ctx = context if context is not None else RuntimeContext.from_process()
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        model = (
            build_keras(path, limits)
            if build_keras_model and path.endswith(".keras")
            else load_path(path, limits)
        )
    else:
        model = load_object(source)
    return analyze(model, ctx, signature=signature, limits=limits)


def verify(
    fn_or_model: Any,
    *inputs: Any,
    context: RuntimeContext | None = None,
    probe_switches: tuple[Mapping[str, str], ...] = (),
) -> AuditReport:
    """EXECUTES `fn_or_model(*inputs)` once and returns the audit with runtime evidence.

    The static findings (same objects as `audit()`) get `observed`: the executed node (after
    grappler, placement and the oneDNN rewrite), the accumulation observed by probe convolutions of
    the executed (op, T, Tacc, device), and "confirmed"/"contradicted"/"unverified"/"not-found".
    `report.runtime` holds the probes (rounding, 49 taps, overflow) and, when a GPU is visible, the
    decoded CUDA kernel names of one profiled call.

    Args:
      fn_or_model: a tf.function, ConcreteFunction or keras.Model.
      inputs: tensors or arrays; when empty, random inputs (seed 0) are built from the function's
        input signature or the model's input specs.
      context: runtime context for the static predictions; default: this process.
      probe_switches: for each mapping of environment variables, the probes are re-run in a
        subprocess with them set (e.g. {"TF_CONV2D_USE_FP16_ACCUMULATE": "1"}).
    Raises:
      AuditInputError: an unsupported object or unresolvable input shape; tf.errors.OpError from
        the model itself.
      TypeError: `context` not a RuntimeContext.
    """
    from .runtime.evidence import verify_object

    _check_type("context", context, RuntimeContext, none_ok=True)
    ctx = context if context is not None else RuntimeContext.from_process()
    return verify_object(fn_or_model, tuple(inputs), ctx, switch_envs=tuple(probe_switches))
