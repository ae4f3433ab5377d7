"""Compares the outputs of two models on the same inputs (e.g. a model and its `convert`ed copy).

For each output (in the order of `keras.tree.flatten`, named after `model_a.output_names`
when they match), computed in float64 from `model(inputs, training=False)`:
  max_abs  = max |a - b| over elements;
  max_rel  = max_abs / max |a| (the infinity-norm relative difference, model_a the reference;
             0 when both outputs are all zero, inf when only a is all zero);
  mean_abs = mean |a - b|;
  num_unequal = elements where a != b (NaN equals NaN here);
  max_abs_a = max |a| over its finite elements (0: a reference that is all zero, against which
             a relative difference measures nothing; the summary says so).
An element that is non-finite in one output and not equal in the other counts as an infinite
difference; nonfinite_a / nonfinite_b count inf and NaN elements.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class OutputDifference:
    name: str
    shape: tuple[int, ...]
    max_abs: float
    max_rel: float
    mean_abs: float
    num_elements: int
    num_unequal: int
    nonfinite_a: int
    nonfinite_b: int
    max_abs_a: float


@dataclass(frozen=True)
class ComparisonReport:
    outputs: tuple[OutputDifference, ...]

    @property
    def max_abs(self) -> float:
        return max(o.max_abs for o in self.outputs)

    @property
    def max_rel(self) -> float:
        return max(o.max_rel for o in self.outputs)

    def summary(self) -> str:
        return "\n".join(
            f"{o.name} {list(o.shape)}: max abs diff {o.max_abs:.3e}, "
            f"max rel diff {o.max_rel:.3e}, "
            f"mean abs diff {o.mean_abs:.3e}, {o.num_unequal}/{o.num_elements} elements differ"
            + (
                f", non-finite a/b {o.nonfinite_a}/{o.nonfinite_b}"
                if o.nonfinite_a or o.nonfinite_b
                else ""
            )
            + (
                "; model_a's output is all zero: the relative difference measures nothing"
                if o.max_abs_a == 0.0 and o.num_elements
                else ""
            )
            for o in self.outputs
        )


def difference(name: str, a, b) -> OutputDifference:
    """OutputDifference of two arrays of equal shape.

    See the module docstring for the definitions.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"output '{name}' has shape {a.shape} in model_a and {b.shape} in model_b")
    equal = (a == b) | (np.isnan(a) & np.isnan(b))
    finite = np.isfinite(a) & np.isfinite(b)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(equal, 0.0, np.where(finite, np.abs(a - b), np.inf))
    max_abs = float(diff.max()) if diff.size else 0.0
    finite_a = np.abs(a[np.isfinite(a)])
    scale = float(finite_a.max()) if finite_a.size else 0.0
    if max_abs == 0.0:
        max_rel = 0.0
    else:
        max_rel = max_abs / scale if scale > 0 else float("inf")
    return OutputDifference(
        name=name,
        shape=tuple(a.shape),
        max_abs=max_abs,
        max_rel=float(max_rel),
        mean_abs=float(diff.mean()) if diff.size else 0.0,
        num_elements=int(a.size),
        num_unequal=int((~equal).sum()),
        nonfinite_a=int((~np.isfinite(a)).sum()),
        nonfinite_b=int((~np.isfinite(b)).sum()),
        max_abs_a=scale,
    )


def compare(model_a, model_b, inputs) -> ComparisonReport:
    """Runs both models on `inputs` (inference mode) and reports per-output differences.

    Args:
      model_a: the reference (keras.Model or any callable taking `inputs` and `training=`).
      model_b: the model to compare, with the same output structure.
      inputs: what both models accept (array, tensor, list or dict of them).

    Returns:
      ComparisonReport with one OutputDifference per output, model_a's dtype-free float64 view.

    Raises:
      TypeError: model_a or model_b is not callable (the message names it and its type).
      ValueError: the models return different numbers of outputs or outputs of different shapes.
    """
    import keras

    for arg, m in (("model_a", model_a), ("model_b", model_b)):
        if not callable(m):
            raise TypeError(
                f"{arg} must be a keras.Model or a callable of the inputs, got {type(m).__name__}"
            )
    outs_a = keras.tree.flatten(model_a(inputs, training=False))
    outs_b = keras.tree.flatten(model_b(inputs, training=False))
    if len(outs_a) != len(outs_b):
        raise ValueError(f"model_a returns {len(outs_a)} outputs and model_b {len(outs_b)}")
    names = list(getattr(model_a, "output_names", None) or [])
    if len(names) != len(outs_a):
        names = [f"output_{i}" for i in range(len(outs_a))]
    return ComparisonReport(
        tuple(
            difference(n, keras.ops.convert_to_numpy(a), keras.ops.convert_to_numpy(b))
            for n, a, b in zip(names, outs_a, outs_b, strict=True)
        )
    )
