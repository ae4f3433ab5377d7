"""Runs convolution cases given as JSON lines on stdin, one JSON result line per case on stdout.

Used by tests/support/fuzz_cases.py (and through it tests/ops/test_fuzz.py,
tests/ops/test_hostile_sizes.py and `make fuzz`): many cases share one process (TensorFlow starts
once), and a case that kills the process is told apart from the others by the "start" line written
before it runs.

A case: {"id", "op": "fprop" | "dgrad" | "wgrad" | "matmul", "mode": "eager" | "graph",
         "args": [tensor spec, ...] in the op's input order, "attrs": {...},
         "signature": [shape with null for unknown sizes, or null for unknown rank] (graph mode),
         "check": bool}
A tensor spec: {"shape": [...], "dtype": "float16" | "float32" | ..., "kind": "random" | ...,
                "seed": int} or {"value": [...], "dtype": "int32"}.
A result: {"id", "status": "ok", "shape", "static_shape", "nonzero" (count of nonzero
          outputs, NaN included), "problems": [...]} or
          {"id", "status": "error", "type": exception class, "message": first line}.
With "check", problems lists every disagreement with tests/support/reference.py (bit-exact for
Tacc=half, Higham's fp32 bound otherwise) and with the output shape of TensorFlow's own
Conv2D (for "matmul": BatchMatMulV2) shape function.
"""

from __future__ import annotations

import json
import os
import re
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from support import reference as R  # noqa: E402
from tf_fp16ops._platform import library as _library  # noqa: E402

OPS = _library.load()
FN = {
    "fprop": OPS.fp16_conv2d,
    "dgrad": OPS.fp16_conv2d_backprop_input,
    "wgrad": OPS.fp16_conv2d_backprop_filter,
    "matmul": OPS.fp16_mat_mul,
}
ARG_NAMES = {
    "fprop": ("input", "filter"),
    "dgrad": ("input_sizes", "filter", "out_backprop"),
    "wgrad": ("input", "filter_sizes", "out_backprop"),
    "matmul": ("x", "y"),
}


def make_tensor(spec):
    if "value" in spec:
        return np.asarray(spec["value"], dtype=spec.get("dtype", "int32"))
    shape, dtype = tuple(spec["shape"]), np.dtype(spec["dtype"])
    kind = spec.get("kind", "zeros")
    if np.prod(shape, dtype=object) == 0:  # NumPy refuses sizes such as [0, 2^62, 1, 1]
        return tf.zeros(shape, tf.as_dtype(dtype))
    if kind == "zeros" or dtype.kind != "f":
        return np.zeros(shape, dtype)
    rng = np.random.default_rng(spec.get("seed", 0))
    if kind == "random":
        v = rng.random(shape) - 0.25
    elif kind == "ints":  # sums of small integers land on binary16 midpoints and overflow
        v = rng.integers(-2048, 2049, shape).astype(np.float64)
    elif kind == "binades":  # binary16 subnormals through large values
        v = rng.integers(-8, 9, shape) * 2.0 ** rng.integers(-24, 12, shape)
    elif kind == "special":  # some inf and nan among ordinary values
        v = rng.random(shape) - 0.5
        v[rng.random(shape) < 0.05] = np.inf
        v[rng.random(shape) < 0.03] = -np.inf
        v[rng.random(shape) < 0.02] = np.nan
    else:
        raise ValueError(f"unknown tensor kind {kind!r}")
    return v.astype(np.float16).astype(dtype)


def _pyattrs(attrs):
    a = dict(attrs)
    for k in ("T", "Tacc"):
        a.pop(k, None)
    a["Tacc"] = tf.as_dtype(attrs.get("Tacc", "float16"))
    return a


_graph_fns = {}


def run_op(case, tensors):
    fn = FN[case["op"]]
    attrs = _pyattrs(case["attrs"])
    # Typed tensors, so that the generated wrapper converts nothing (a NumPy float32 array
    # would be converted to a half filter, an int64 one to int32 sizes).
    tensors = [t if tf.is_tensor(t) else tf.constant(t) for t in tensors]
    if case.get("mode", "eager") == "eager":
        return fn(*tensors, **attrs), None
    sig = case.get("signature") or [None] * len(tensors)
    specs = [
        tf.TensorSpec(None if s is None else s, tf.as_dtype(t.dtype))
        for s, t in zip(sig, tensors, strict=True)
    ]
    key = (
        case["op"],
        json.dumps(case["attrs"], sort_keys=True),
        json.dumps(sig),
        tuple(str(t.dtype) for t in tensors),
    )
    if key not in _graph_fns:
        _graph_fns[key] = tf.function(lambda *a: fn(*a, **attrs)).get_concrete_function(*specs)
    conc = _graph_fns[key]
    static = conc.structured_outputs.shape
    return conc(*tensors), (None if static.rank is None else [d for d in static.as_list()])


_tf_graph = [None, 0]


def tf_conv_shape(x_shape, w_shape, attrs, dtype):
    """Output shape of TensorFlow's Conv2D shape function, or the error it raises."""
    if _tf_graph[0] is None or _tf_graph[1] > 200:
        _tf_graph[0], _tf_graph[1] = tf.Graph(), 0
    _tf_graph[1] += 1
    with _tf_graph[0].as_default():
        x = tf.compat.v1.placeholder(dtype, x_shape)
        w = tf.compat.v1.placeholder(dtype, w_shape)
        try:
            y = tf.raw_ops.Conv2D(
                input=x,
                filter=w,
                strides=attrs["strides"],
                padding=attrs["padding"],
                explicit_paddings=attrs.get("explicit_paddings", []),
                data_format=attrs.get("data_format", "NHWC"),
                dilations=attrs.get("dilations", [1, 1, 1, 1]),
            )
        except (ValueError, tf.errors.InvalidArgumentError) as e:
            return None, str(e).splitlines()[0]
    return y.shape.as_list(), None


def tf_matmul_shape(x_shape, y_shape, attrs, dtype):
    """Output shape of TensorFlow's BatchMatMulV2 shape function, or the error it raises."""
    if _tf_graph[0] is None or _tf_graph[1] > 200:
        _tf_graph[0], _tf_graph[1] = tf.Graph(), 0
    _tf_graph[1] += 1
    with _tf_graph[0].as_default():
        x = tf.compat.v1.placeholder(dtype, x_shape)
        y = tf.compat.v1.placeholder(dtype, y_shape)
        try:
            z = tf.raw_ops.BatchMatMulV2(
                x=x, y=y, adj_x=attrs.get("adj_x", False), adj_y=attrs.get("adj_y", False)
            )
        except (ValueError, tf.errors.InvalidArgumentError) as e:
            return None, str(e).splitlines()[0]
    return z.shape.as_list(), None


def _nhwc(a, nchw):
    return np.transpose(a, (0, 2, 3, 1)) if nchw else a


def _ref_padding(attrs):
    if attrs["padding"] != "EXPLICIT":
        return attrs["padding"]
    p = attrs["explicit_paddings"]
    if attrs.get("data_format", "NHWC") == "NCHW":
        return ((p[4], p[5]), (p[6], p[7]))
    return ((p[2], p[3]), (p[4], p[5]))


def _hw(attrs, name):
    v = attrs.get(name, [1, 1, 1, 1])
    return (v[2], v[3]) if attrs.get("data_format", "NHWC") == "NCHW" else (v[1], v[2])


def reference(case, tensors):
    """tests/support/reference.py's result in the op's layout and the fp32 error bound (or None)."""
    attrs = case["attrs"]
    nchw = attrs.get("data_format", "NHWC") == "NCHW"
    half = attrs.get("Tacc", "float16") in ("float16", "half")
    op = case["op"]
    f64 = lambda a: a.astype(np.float64)  # noqa: E731
    if op == "matmul":
        x, y = tensors
        adj = dict(adj_x=attrs.get("adj_x", False), adj_y=attrs.get("adj_y", False))
        if half:
            return R.batch_matmul(x, y, accumulation="half", **adj), None, 0
        ref = R.batch_matmul(f64(x), f64(y), accumulation="float64", **adj)
        absr = R.batch_matmul(np.abs(f64(x)), np.abs(f64(y)), accumulation="float64", **adj)
        return ref, absr, x.shape[-2] if adj["adj_x"] else x.shape[-1]
    kw = dict(
        strides=_hw(attrs, "strides"),
        dilations=_hw(attrs, "dilations"),
        padding=_ref_padding(attrs),
    )
    if op == "fprop":
        x, w = _nhwc(tensors[0], nchw), tensors[1]
        if half:
            return R.conv2d(x, w, accumulation="half", **kw), None, 0
        ref = R.conv2d(f64(x), f64(w), accumulation="float64", **kw)
        absr = R.conv2d(np.abs(f64(x)), np.abs(f64(w)), accumulation="float64", **kw)
        terms = w.shape[0] * w.shape[1] * w.shape[2]
    elif op == "dgrad":
        sizes, w, dy = tensors
        xs = tuple(int(v) for v in (sizes[[0, 2, 3, 1]] if nchw else sizes))
        dy = _nhwc(dy, nchw)
        if half:
            return R.conv2d_backprop_input(xs, w, dy, accumulation="half", **kw), None, 0
        ref = R.conv2d_backprop_input(xs, f64(w), f64(dy), accumulation="float64", **kw)
        absr = R.conv2d_backprop_input(
            xs, np.abs(f64(w)), np.abs(f64(dy)), accumulation="float64", **kw
        )
        terms = w.shape[0] * w.shape[1] * w.shape[3]
    else:
        x, sizes, dy = tensors
        x, dy = _nhwc(x, nchw), _nhwc(dy, nchw)
        ws = tuple(int(v) for v in sizes)
        if half:
            return R.conv2d_backprop_filter(x, ws, dy, accumulation="half", **kw), None, 0
        ref = R.conv2d_backprop_filter(f64(x), ws, f64(dy), accumulation="float64", **kw)
        absr = R.conv2d_backprop_filter(
            np.abs(f64(x)), ws, np.abs(f64(dy)), accumulation="float64", **kw
        )
        terms = dy.shape[0] * dy.shape[1] * dy.shape[2]
    return ref, absr, terms


def tf_accepts(case, tensors):
    """Problems when TensorFlow's Conv2D shape function accepts the geometry we raised for."""
    op = case["op"]
    if op == "matmul":
        shape, err = tf_matmul_shape(
            tensors[0].shape, tensors[1].shape, case["attrs"], tf.as_dtype(tensors[0].dtype)
        )
        if err is not None:
            return []
        return [
            f"TensorFlow's BatchMatMulV2 gives output shape {shape} for these shapes, we raised"
        ]
    if op == "fprop":
        xs, ws = tensors[0].shape, tensors[1].shape
    elif op == "dgrad":
        xs, ws = tuple(int(v) for v in tensors[0]), tensors[1].shape
    else:
        xs, ws = tensors[0].shape, tuple(int(v) for v in tensors[1])
    if len(xs) != 4 or len(ws) != 4:
        return []
    shape, err = tf_conv_shape(xs, ws, case["attrs"], tf.as_dtype(tensors[-1].dtype))
    if err is not None or (op != "fprop" and list(tensors[2].shape) != shape):
        return []
    return [f"TensorFlow's Conv2D gives output shape {shape} for this geometry, we raised"]


def check(case, tensors, y, shape, static):
    problems = []
    attrs = case["attrs"]
    nchw = attrs.get("data_format", "NHWC") == "NCHW" and case["op"] != "matmul"
    if case["op"] == "matmul":
        tf_shape, tf_err = tf_matmul_shape(
            tensors[0].shape, tensors[1].shape, attrs, tf.as_dtype(tensors[0].dtype)
        )
        if tf_err is None and shape != tf_shape:
            problems.append(f"shape {shape} != TensorFlow's BatchMatMulV2 shape {tf_shape}")
    if case["op"] == "fprop":
        tf_shape, tf_err = tf_conv_shape(
            tensors[0].shape, tensors[1].shape, attrs, tf.as_dtype(tensors[0].dtype)
        )
        if tf_err is None and shape != tf_shape:
            problems.append(f"shape {shape} != TensorFlow's Conv2D shape {tf_shape}")
    if static is not None:
        for got, want in zip(static, shape, strict=False):
            if got is not None and got != want:
                problems.append(f"static shape {static} disagrees with the result {shape}")
                break
    if y.size == 0:
        return problems
    tensors = [np.asarray(t) for t in tensors]
    ref, absr, terms = reference(case, tensors)
    ref = np.transpose(ref, (0, 3, 1, 2)) if nchw and case["op"] != "wgrad" else ref
    if absr is not None and nchw and case["op"] != "wgrad":
        absr = np.transpose(absr, (0, 3, 1, 2))
    if ref.shape != y.shape:
        return problems + [f"shape {list(y.shape)} != reference shape {list(ref.shape)}"]
    if absr is None:  # Tacc=half: bit-exact, any NaN equal to any NaN
        yh = y.astype(np.float16)
        same = (yh.view(np.uint16) == ref.view(np.uint16)) | (np.isnan(yh) & np.isnan(ref))
        if not same.all():
            i = np.argwhere(~same)[0]
            problems.append(
                f"{int((~same).sum())} outputs differ from the reference, first at "
                f"{i.tolist()}: {yh[tuple(i)]!r} != {ref[tuple(i)]!r}"
            )
        return problems
    u = 2.0**-11 if y.dtype == np.float16 else 2.0**-24
    finite = np.isfinite(ref) & np.isfinite(absr) & (np.abs(ref) < 65000)
    tiny = 2.0**-25 if y.dtype == np.float16 else 2.0**-150  # half the least subnormal
    bound = R.gamma_bound(max(terms, 1), absr, 2.0**-24) + np.abs(ref) * u * 1.001 + tiny
    bad = finite & ~(np.abs(y.astype(np.float64) - ref) <= bound)
    if bad.any():
        i = np.argwhere(bad)[0]
        problems.append(
            f"{int(bad.sum())} outputs outside the fp32 bound, first at {i.tolist()}: "
            f"{y[tuple(i)]!r} vs {ref[tuple(i)]!r}"
        )
    return problems


def run_case(case):
    try:
        tensors = [make_tensor(s) for s in case["args"]]
        y, static = run_op(case, tensors)
    except (tf.errors.OpError, ValueError, TypeError) as e:
        lines = [ln for ln in str(e).splitlines() if ln.strip()]
        msg = next((ln for ln in lines if "Error" in ln or "must" in ln), lines[0] if lines else "")
        msg = re.sub(r"^\{\{function_node [^}]*\}\} ", "", msg.strip())
        out = {"status": "error", "type": type(e).__name__, "message": msg.strip()[:400]}
        if case.get("check") and not case.get("invalid"):
            out["problems"] = tf_accepts(case, tensors)
        return out
    shape = y.shape.as_list()
    y = y.numpy() if y.shape.num_elements() else np.zeros([0], y.dtype.as_numpy_dtype)
    out = {
        "status": "ok",
        "shape": shape,
        "static_shape": static,
        "nonzero": int(np.count_nonzero(y)),
    }
    if case.get("check"):
        out["problems"] = check(case, tensors, y, shape, static)
    return out


def main():
    for line in sys.stdin:
        case = json.loads(line)
        print(json.dumps({"start": case["id"]}), flush=True)
        result = run_case(case)
        result["id"] = case["id"]
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
