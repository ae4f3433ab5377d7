"""Inputs for an executed call, built from a function's input signature.

Random data with a fixed seed (NumPy `default_rng(seed)`): floating inputs ~ N(0, 1) drawn in
float32 (float64 and float32 specs: in their own dtype) and cast to the spec's dtype, integers
uniform in [0, 10) drawn in the spec's dtype, bools uniform. Unknown dimensions come from
`--input-shape NAME=D0,D1,...`; otherwise an unknown leading (batch) dimension is 1 and any other
unknown dimension is an error naming the input. An input needing more than MAX_INPUT_BYTES (in
its dtype, or in the float32 it is drawn in) is refused before anything is allocated.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

MAX_INPUT_BYTES = 2**30  # per input; --run feeds one call, a real input is far smaller


def parse_input_shapes(items: list[str]) -> dict[str, tuple[int, ...]]:
    """Parses repeated "NAME=1,224,224,3" options.

    Raises:
      ValueError: naming the bad item.
    """
    out: dict[str, tuple[int, ...]] = {}
    for item in items:
        name, sep, dims = item.partition("=")
        try:
            shape = tuple(int(d) for d in dims.split(",")) if dims else ()
        except ValueError:
            shape = None
        if not sep or not name or shape is None or any(d < 0 for d in shape):
            raise ValueError(
                f"--input-shape expects NAME=D0,D1,... with non-negative integers, got {item!r}"
            )
        out[name] = shape
    return out


def resolve_shape(name: str, spec_shape, given: Mapping[str, tuple[int, ...]]) -> tuple[int, ...]:
    """The concrete shape for input `name`.

    Raises:
      ValueError: unknown rank or non-leading unknown dims without --input-shape, or a given
        shape that contradicts the spec.
    """
    dims = None if spec_shape.rank is None else list(spec_shape.as_list())
    if name in given:
        shape = given[name]
        if dims is not None and (
            len(shape) != len(dims)
            or any(d is not None and d != s for d, s in zip(dims, shape, strict=True))
        ):
            raise ValueError(
                f"--input-shape {name}={','.join(map(str, shape))} does not fit the signature "
                f"shape {dims}"
            )
        return tuple(shape)
    if dims is None:
        raise ValueError(f"input {name!r} has unknown rank; give --input-shape {name}=D0,D1,...")
    if dims and dims[0] is None:
        dims[0] = 1
    if any(d is None for d in dims):
        raise ValueError(
            f"input {name!r} has unknown dimensions {dims}; give --input-shape "
            f"{name}={','.join('?' if d is None else str(d) for d in dims)}"
        )
    return tuple(dims)


def random_inputs(
    specs: list[tuple[str, Any]],
    given: Mapping[str, tuple[int, ...]],
    seed: int = 0,
    max_bytes: int = MAX_INPUT_BYTES,
):
    """[(name, tf.Tensor)] for [(name, tf.TensorSpec)], in order.

    Raises:
      ValueError: a shape cannot be resolved, a dtype (string, resource, ...) cannot be
        generated, or an input needs more than `max_bytes`.
    """
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    unknown = set(given) - {n for n, _ in specs}
    if unknown:
        raise ValueError(
            f"--input-shape names unknown input(s) {sorted(unknown)}; inputs are "
            f"{[n for n, _ in specs]}"
        )
    out = []
    for name, spec in specs:
        shape = resolve_shape(name, spec.shape, given)
        dt = spec.dtype
        if not (dt.is_floating or dt.is_integer or dt.is_bool):
            raise ValueError(f"input {name!r} has dtype {dt.name}, which --run cannot generate")
        drawn = np.float64 if dt == tf.float64 else np.float32
        item = max(dt.size, np.dtype(drawn).itemsize if dt.is_floating else dt.size)
        need = math.prod(shape) * item
        if need > max_bytes:
            how = f" (drawn in {np.dtype(drawn).name})" if item != dt.size else ""
            raise ValueError(
                f"input {name!r} of shape {list(shape)} and dtype {dt.name} needs {need} bytes"
                f"{how}, over the limit of {max_bytes} bytes per --run input"
            )
        if dt.is_floating:
            v = rng.standard_normal(shape, dtype=drawn)
        elif dt.is_integer:
            v = rng.integers(0, 10, shape, dtype=dt.as_numpy_dtype)
        else:
            v = rng.integers(0, 2, shape, dtype=np.int8).astype(bool)
        out.append((name, tf.constant(v, dtype=dt)))
    return out
