"""The evaluation set of `tf_fp16ops.sensitivity`: `x` checked against the model's inputs
(`check_x`) and read as batches `(x, y or None)` once per pass (`Source`: array slices or a
tf.data.Dataset, streamed)."""

from __future__ import annotations

import math

import keras
import numpy as np


def check_x(model, x, arg: str = "x"):
    """`x` as arrays whose ranks and fixed dimensions match the model's inputs (a leading batch
    axis); raises ValueError naming `arg` (the argument `x`, or the command line's `--inputs`
    file) and its shape otherwise."""
    specs = keras.tree.flatten(model.inputs) if getattr(model, "inputs", None) else []
    if len(specs) == 1 and isinstance(x, (list, tuple)) and len(x) == 1 and hasattr(x[0], "shape"):
        x = x[0]
    if len(specs) == 1 and not isinstance(x, dict):
        arrays = [x]
    else:
        arrays = keras.tree.flatten(x)
        if specs and len(arrays) != len(specs):
            raise ValueError(
                f"{arg} holds {len(arrays)} arrays; the model takes {len(specs)} inputs"
            )
    checked = []
    for a, spec in zip(arrays, specs or [None] * len(arrays), strict=True):
        try:
            arr = a if hasattr(a, "shape") and hasattr(a, "dtype") else np.asarray(a)
            kind = np.asarray(arr).dtype.kind
        except (TypeError, ValueError) as e:
            raise ValueError(
                f"{arg} must be an array-like of numbers, got {type(a).__name__}: {e}"
            ) from None
        shape = tuple(arr.shape)
        if kind not in "biuf":
            raise ValueError(f"{arg} must hold numbers, got dtype {arr.dtype} (shape {shape})")
        if spec is not None:
            want = tuple(spec.shape)
            if len(shape) != len(want) or any(
                w is not None and w != d for w, d in zip(want[1:], shape[1:], strict=True)
            ):
                want_txt = "(N, " + ", ".join(str(d) for d in want[1:]) + ")"
                raise ValueError(
                    f"{arg} has shape {shape}; the model's input {spec.name!r} takes {want_txt} "
                    "(N samples on axis 0)"
                )
        checked.append(arr)
    if len(specs) == 1 and not isinstance(x, dict):
        return checked[0]
    return keras.tree.pack_sequence_as(x, checked)


def _structure(spec) -> str:
    """A dataset's element_spec in one short line: each tensor as dtype[shape]."""

    def one(t):
        shape = getattr(t, "shape", None)
        dtype = getattr(getattr(t, "dtype", None), "name", None)
        if shape is None or dtype is None:
            return type(t).__name__
        if shape.rank is None:
            return f"{dtype}[...]"
        dims = ", ".join("None" if d is None else str(d) for d in shape.as_list())
        return f"{dtype}[{dims}]"

    if isinstance(spec, tuple):
        return "(" + ", ".join(_structure(t) for t in spec) + ")"
    if isinstance(spec, dict):
        return "{" + ", ".join(f"{k!r}: {_structure(v)}" for k, v in spec.items()) + "}"
    if isinstance(spec, list):
        return "[" + ", ".join(_structure(t) for t in spec) + "]"
    return one(spec)


class Source:
    """The evaluation set as batches `(x, y or None)`, read again for each pass: slices of
    arrays (`batch_size` samples) or the elements of a tf.data.Dataset, streamed."""

    def __init__(self, model, x, y, batch_size: int | None):
        import tensorflow as tf

        self.model = model
        self.dataset = x if isinstance(x, tf.data.Dataset) else None
        if self.dataset is not None:
            if y is not None:
                raise ValueError(
                    "y must be None when x is a tf.data.Dataset (its elements give the labels: "
                    "(x, y) pairs)"
                )
            if batch_size is not None:
                raise ValueError(
                    f"batch_size must be None when x is a tf.data.Dataset (its elements are the "
                    f"batches), got {batch_size!r}"
                )
            spec = self.dataset.element_spec
            if isinstance(spec, tuple) and len(spec) not in (1, 2, 3):
                raise ValueError(
                    f"x: the dataset's elements are {len(spec)}-tuples "
                    f"{_structure(spec)}; sensitivity takes x or (x, y) elements"
                )
            card = int(self.dataset.cardinality())
            if card == tf.data.INFINITE_CARDINALITY:
                raise ValueError("x is an infinite tf.data.Dataset; pass a finite one (.take(n))")
            self.num_batches = card if card >= 0 else None  # None: UNKNOWN until read once
            self.labelled: bool | None = None  # known after the first batch
            self.x = self.y = None
            return
        self.batch_size = 32 if batch_size is None else batch_size
        self.x = check_x(model, x)
        n = len(keras.tree.flatten(self.x)[0])
        if n == 0:
            raise ValueError("x must hold at least one sample")
        if y is not None and len(y) != n:
            raise ValueError(f"y has {len(y)} labels for {n} samples of x")
        self.y = None if y is None else np.asarray(y)
        self.labelled = y is not None
        self.num_batches = math.ceil(n / self.batch_size)

    def __iter__(self):
        if self.dataset is None:
            n = len(keras.tree.flatten(self.x)[0])
            for start in range(0, n, self.batch_size):
                stop = start + self.batch_size
                yield (
                    keras.tree.map_structure(lambda a, s=start, e=stop: a[s:e], self.x),
                    None if self.y is None else self.y[start:stop],
                )
            return
        count = 0
        for element in self.dataset:
            xb, yb, weights = keras.utils.unpack_x_y_sample_weight(element)
            if weights is not None:
                raise ValueError(
                    "x: the dataset's elements are (x, y, sample_weight); sensitivity takes x or "
                    "(x, y) elements"
                )
            if self.labelled is None:
                self.labelled = yb is not None
            elif self.labelled != (yb is not None):
                raise ValueError(f"x: batch {count} of the dataset differs in having labels")
            xb = check_x(self.model, xb)
            count += 1
            yield xb, None if yb is None else keras.ops.convert_to_numpy(yb)
        if self.num_batches is None:
            self.num_batches = count
