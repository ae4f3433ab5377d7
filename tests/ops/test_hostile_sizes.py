"""Hostile sizes and arguments to every op of the library: each case runs in a worker process
(tests/support/fuzz_cases.py), so a crash is a failure of that case, printed with its reproducer.

Every case either raises the TensorFlow-conventional error (InvalidArgumentError, or
ValueError/TypeError from the generated wrapper or at graph build), or returns the result
TensorFlow's conventions give (empty shapes: the output shape tf.nn.conv2d's shape function
gives, zeros for an empty sum). The two regression cases at the top are the reproducers of
the crashes fixed in cc/kernels/conv_shape.cc and cc/kernels/cpu/conv2d_cpu.cc.
"""

from __future__ import annotations

import pytest

from support import fuzz_cases as F

I32 = 2**31 - 1
I64 = 2**63 - 1
ATTRS = {
    "Tacc": "float16",
    "strides": [1, 1, 1, 1],
    "padding": "VALID",
    "explicit_paddings": [],
    "data_format": "NHWC",
    "dilations": [1, 1, 1, 1],
}


def t(shape, dtype="float16", kind="random"):
    return {"shape": list(shape), "dtype": dtype, "kind": kind, "seed": 1}


def sizes(v, dtype="int32"):
    return {"value": v, "dtype": dtype}


def case(name, op, args, expect, mode="eager", signature=None, **attrs):
    a = dict(ATTRS)
    a.update(attrs)
    c = {"id": name, "op": op, "mode": mode, "args": args, "attrs": a, "check": False}
    if signature is not None:
        c["signature"] = signature
    return c, expect


X, W, DY = t([1, 5, 5, 4]), t([3, 3, 4, 2]), t([1, 3, 3, 2])
ERR = "error"
CASES = dict(
    (c["id"], (c, e))
    for c, e in [
        # --- regression: SIGFPE in the shape function (input channels known 0, filter unknown)
        case(
            "fprop-graph-C0-filter-unknown-rank",
            "fprop",
            [t([1, 5, 5, 0]), W],
            ERR,
            mode="graph",
            signature=[[None, None, None, 0], None],
        ),
        case(
            "fprop-graph-C0-filter-unknown-dims",
            "fprop",
            [t([1, 5, 5, 0]), W],
            ERR,
            mode="graph",
            signature=[[None, None, None, 0], [None, None, None, None]],
        ),
        case(
            "fprop-graph-C0-Cg0",
            "fprop",
            [t([1, 5, 5, 0]), t([3, 3, 0, 2])],
            ERR,
            mode="graph",
            signature=[[None, None, None, 0], [None, None, 0, None]],
        ),
        case(
            "fprop-graph-Cg0-C-unknown",
            "fprop",
            [t([1, 5, 5, 0]), t([3, 3, 0, 2])],
            ERR,
            mode="graph",
            signature=[[None, None, None, None], [3, 3, 0, 2]],
        ),
        # --- regression: wgrad scratch sized by the output width with batch 0 (8.8 GB for 2^28)
        case(
            "wgrad-N0-wide-2^28",
            "wgrad",
            [t([0, 1, 2**28, 1]), sizes([1, 1, 1, 1]), t([0, 1, 2**28, 1])],
            [1, 1, 1, 1],
        ),
        case(
            "wgrad-N0-wide-2^30-K8",
            "wgrad",
            [t([0, 1, 2**30, 8]), sizes([1, 1, 8, 8]), t([0, 1, 2**30, 8])],
            [1, 1, 8, 8],
        ),
        case(
            "wgrad-N0-wide-2^40",
            "wgrad",
            [t([0, 3, 2**40, 2]), sizes([3, 3, 2, 2]), t([0, 1, 2**40 - 2, 2])],
            [3, 3, 2, 2],
        ),
        # --- empty shapes follow tf.nn.conv2d (its shape function's output shape)
        case("fprop-SAME-H0", "fprop", [t([1, 0, 5, 4]), W], [1, 0, 5, 2], padding="SAME"),
        case("fprop-SAME-H0-W0", "fprop", [t([2, 0, 0, 4]), W], [2, 0, 0, 2], padding="SAME"),
        case("fprop-N0", "fprop", [t([0, 5, 5, 4]), W], [0, 3, 3, 2]),
        case("fprop-K0", "fprop", [X, t([3, 3, 4, 0])], [1, 3, 3, 0]),
        case(
            "fprop-SAME-H0-NCHW",
            "fprop",
            [t([1, 4, 0, 5]), W],
            [1, 2, 0, 5],
            padding="SAME",
            data_format="NCHW",
            Tacc="float32",
        ),
        case(
            "fprop-graph-SAME-H0",
            "fprop",
            [t([1, 0, 5, 4]), W],
            [1, 0, 5, 2],
            mode="graph",
            signature=[[None, None, None, 4], None],
            padding="SAME",
        ),
        case(
            "dgrad-SAME-H0",
            "dgrad",
            [sizes([1, 0, 5, 4]), W, t([1, 0, 5, 2])],
            [1, 0, 5, 4],
            padding="SAME",
        ),
        case("dgrad-N0", "dgrad", [sizes([0, 5, 5, 4]), W, t([0, 3, 3, 2])], [0, 5, 5, 4]),
        case(
            "dgrad-K0",
            "dgrad",
            [sizes([1, 5, 5, 4]), t([3, 3, 4, 0]), t([1, 3, 3, 0])],
            [1, 5, 5, 4],
        ),
        case(
            "wgrad-SAME-H0",
            "wgrad",
            [t([1, 0, 5, 4]), sizes([3, 3, 4, 2]), t([1, 0, 5, 2])],
            [3, 3, 4, 2],
            padding="SAME",
        ),
        case("wgrad-K0", "wgrad", [X, sizes([3, 3, 4, 0]), t([1, 3, 3, 0])], [3, 3, 4, 0]),
        case("fprop-VALID-H-smaller-than-filter", "fprop", [t([1, 2, 5, 4]), W], ERR),
        case("fprop-C0", "fprop", [t([1, 5, 5, 0]), W], ERR),
        case("fprop-KH0", "fprop", [X, t([0, 3, 4, 2])], ERR),
        case("fprop-Cg0", "fprop", [t([1, 5, 5, 0]), t([3, 3, 0, 2])], ERR),
        # --- huge sizes: no int64 overflow, no allocation before the problem is known to have work
        case(
            "fprop-SAME-H-2^62",
            "fprop",
            [t([0, 2**62, 1, 1]), t([1, 1, 1, 1])],
            [0, 2**62, 1, 1],
            padding="SAME",
        ),
        case(
            "fprop-SAME-H-2^63-1",
            "fprop",
            [t([0, I64, 1, 1]), t([1, 1, 1, 1])],
            ERR,
            padding="SAME",
            strides=[1, 2, 1, 1],
        ),
        case(
            "fprop-SAME-H-2^63-1-stride-1",
            "fprop",
            [t([0, I64, 1, 1]), t([1, 1, 1, 1])],
            ERR,
            padding="SAME",
        ),
        case(
            "fprop-elements-overflow", "fprop", [t([2**31, 2**31, 2**31, 0]), t([1, 1, 1, 1])], ERR
        ),
        case(
            "fprop-output-elements-overflow",
            "fprop",
            [t([2**40, 2**20, 0, 1]), t([1, 1, 1, 2**10])],
            [2**40, 2**20, 0, 2**10],
            padding="SAME",
        ),
        case(
            "fprop-dilation-times-filter-above-2^31",
            "fprop",
            [t([1, 1, 1, 1]), t([2, 1, 1, 1])],
            [1, 1, 1, 1],
            padding="SAME",
            dilations=[1, I32, 1, 1],
        ),
        case(
            "fprop-dilation-VALID-huge",
            "fprop",
            [t([1, 1, 1, 1]), t([2, 1, 1, 1])],
            ERR,
            dilations=[1, I32, 1, 1],
        ),
        case("fprop-stride-int32-max", "fprop", [X, W], [1, 1, 1, 2], strides=[1, I32, I32, 1]),
        case(
            "fprop-explicit-int32-max",
            "fprop",
            [t([0, 5, 5, 4]), W],
            [0, I32 * 2 + 3, 3, 2],
            padding="EXPLICIT",
            explicit_paddings=[0, 0, I32, I32, 0, 0, 0, 0],
        ),
        case(
            "fprop-explicit-above-int32",
            "fprop",
            [X, W],
            ERR,
            padding="EXPLICIT",
            explicit_paddings=[0, 0, 2**31, 0, 0, 0, 0, 0],
        ),
        case(
            "fprop-explicit-huge-nonzero-work",
            "fprop",
            [t([1, 1, 1, 1]), t([1, 1, 1, 1])],
            ERR,
            padding="EXPLICIT",
            explicit_paddings=[0, 0, I32, I32, I32, I32, 0, 0],
        ),
        case("dgrad-sizes-int32-max", "dgrad", [sizes([I32, I32, I32, I32]), W, DY], ERR),
        case("wgrad-sizes-int32-max", "wgrad", [X, sizes([I32, I32, I32, I32]), DY], ERR),
        case(
            "wgrad-filter-huge-zero-batch",
            "wgrad",
            [t([0, 5, 5, 4]), sizes([3, 3, 4, 2**16]), t([0, 3, 3, 2**16])],
            [3, 3, 4, 2**16],
        ),
        # --- negative sizes
        case("dgrad-sizes-negative", "dgrad", [sizes([1, -5, 5, 4]), W, DY], ERR),
        case("wgrad-sizes-negative", "wgrad", [X, sizes([3, 3, -4, 2]), DY], ERR),
        case("dgrad-sizes-int32-min", "dgrad", [sizes([-(2**31), 5, 5, 4]), W, DY], ERR),
        case("fprop-stride-negative", "fprop", [X, W], ERR, strides=[1, -1, 1, 1]),
        case("fprop-stride-int32-min", "fprop", [X, W], ERR, strides=[1, -(2**31), 1, 1]),
        case("fprop-dilation-negative", "fprop", [X, W], ERR, dilations=[1, 1, -3, 1]),
        case(
            "fprop-explicit-negative",
            "fprop",
            [X, W],
            ERR,
            padding="EXPLICIT",
            explicit_paddings=[0, 0, -1, 0, 0, 0, 0, 0],
        ),
        case(
            "fprop-explicit-int64-min",
            "fprop",
            [X, W],
            ERR,
            padding="EXPLICIT",
            explicit_paddings=[0, 0, -(2**63), 0, 0, 0, 0, 0],
        ),
        case(
            "fprop-explicit-int64-max",
            "fprop",
            [X, W],
            ERR,
            padding="EXPLICIT",
            explicit_paddings=[0, 0, I64, I64, 0, 0, 0, 0],
        ),
        # --- wrong lengths and ranks
        case("fprop-strides-3", "fprop", [X, W], ERR, strides=[1, 1, 1]),
        case("fprop-strides-5", "fprop", [X, W], ERR, strides=[1, 1, 1, 1, 1]),
        case("fprop-strides-empty", "fprop", [X, W], ERR, strides=[]),
        case("fprop-dilations-2", "fprop", [X, W], ERR, dilations=[1, 1]),
        case(
            "fprop-explicit-7", "fprop", [X, W], ERR, padding="EXPLICIT", explicit_paddings=[0] * 7
        ),
        case("fprop-input-rank-3", "fprop", [t([5, 5, 4]), W], ERR),
        case("fprop-input-rank-5", "fprop", [t([1, 1, 5, 5, 4]), W], ERR),
        case("fprop-filter-rank-2", "fprop", [X, t([3, 3])], ERR),
        case("fprop-input-scalar", "fprop", [t([]), W], ERR),
        case("dgrad-sizes-3", "dgrad", [sizes([1, 5, 5]), W, DY], ERR),
        case("dgrad-sizes-5", "dgrad", [sizes([1, 5, 5, 4, 1]), W, DY], ERR),
        case("dgrad-sizes-2d", "dgrad", [sizes([[1, 5], [5, 4]]), W, DY], ERR),
        case("wgrad-sizes-3", "wgrad", [X, sizes([3, 3, 4]), DY], ERR),
        case("wgrad-sizes-scalar", "wgrad", [X, sizes(4), DY], ERR),
        case("dgrad-dy-rank-3", "dgrad", [sizes([1, 5, 5, 4]), W, t([3, 3, 2])], ERR),
        case("wgrad-dy-wrong-shape", "wgrad", [X, sizes([3, 3, 4, 2]), t([1, 3, 4, 2])], ERR),
        case("dgrad-dy-wrong-shape", "dgrad", [sizes([1, 5, 5, 4]), W, t([1, 3, 3, 3])], ERR),
        case(
            "graph-dgrad-sizes-unknown-length",
            "dgrad",
            [sizes([1, 5, 5, 4, 1]), W, DY],
            ERR,
            mode="graph",
            signature=[[None], None, None],
        ),
        case(
            "graph-wgrad-dy-unknown-rank",
            "wgrad",
            [X, sizes([3, 3, 4, 2]), t([1, 3, 4, 2])],
            ERR,
            mode="graph",
            signature=[None, [4], None],
        ),
        # --- wrong dtypes
        case("dgrad-sizes-int64", "dgrad", [sizes([1, 5, 5, 4], "int64"), W, DY], ERR),
        case("dgrad-sizes-float", "dgrad", [sizes([1, 5, 5, 4], "float32"), W, DY], ERR),
        case("wgrad-sizes-float16", "wgrad", [X, sizes([3, 3, 4, 2], "float16"), DY], ERR),
        case(
            "fprop-input-int32", "fprop", [t([1, 5, 5, 4], "int32"), t([3, 3, 4, 2], "int32")], ERR
        ),
        case(
            "fprop-float64",
            "fprop",
            [t([1, 5, 5, 4], "float64"), t([3, 3, 4, 2], "float64")],
            ERR,
            Tacc="float32",
        ),
        case("fprop-mixed-dtypes", "fprop", [X, t([3, 3, 4, 2], "float32")], ERR),
        case("fprop-bfloat16-Tacc", "fprop", [X, W], ERR, Tacc="bfloat16"),
        case(
            "fprop-float32-Tacc-half",
            "fprop",
            [t([1, 5, 5, 4], "float32"), t([3, 3, 4, 2], "float32")],
            ERR,
        ),
        case(
            "dgrad-dy-float32-filter-half",
            "dgrad",
            [sizes([1, 5, 5, 4]), W, t([1, 3, 3, 2], "float32")],
            ERR,
        ),
        case("fprop-padding-bad-string", "fprop", [X, W], ERR, padding="FULL"),
        case("fprop-data-format-bad", "fprop", [X, W], ERR, data_format="NCWH"),
    ]
)


def mcase(name, args, expect, mode="eager", signature=None, **attrs):
    """A Fp16MatMul case (x, y); attrs Tacc, adj_x, adj_y."""
    a = {"Tacc": "float16", "adj_x": False, "adj_y": False}
    a.update(attrs)
    c = {"id": name, "op": "matmul", "mode": mode, "args": args, "attrs": a, "check": False}
    if signature is not None:
        c["signature"] = signature
    return c, expect


CASES.update(
    (c["id"], (c, e))
    for c, e in [
        # --- zero sizes: empty outputs, K = 0 gives +0 (the empty sum)
        mcase("matmul-K0", [t([3, 0]), t([0, 4])], [3, 4]),
        mcase("matmul-M0", [t([0, 5]), t([5, 4])], [0, 4]),
        mcase("matmul-N0-adj", [t([5, 3]), t([0, 5])], [3, 0], adj_x=True, adj_y=True),
        mcase("matmul-batch0-broadcast", [t([0, 1, 2, 3]), t([4, 3, 2])], [0, 4, 2, 2]),
        mcase(
            "matmul-K0-float",
            [t([2, 2, 0], "float32"), t([0, 3], "float32")],
            [2, 2, 3],
            Tacc="float32",
        ),
        # --- huge sizes: no int64 overflow, no allocation before there is work
        mcase("matmul-M-2^62-empty", [t([0, 2**62, 3]), t([3, 2])], [0, 2**62, 2]),
        mcase("matmul-output-overflow", [t([2**31, 2**31, 0]), t([0, 2**31])], ERR),
        mcase("matmul-output-overflow-batch", [t([2**40, 1, 0]), t([1, 0, 2**30])], ERR),
        mcase("matmul-K-2^62-empty", [t([0, 2, 2**62]), t([2**62, 0])], [0, 2, 0]),
        mcase("matmul-I64-dims-empty", [t([I64, 0]), t([0, 0])], [I64, 0], Tacc="float32"),
        # --- wrong ranks, inner and batch sizes, dtypes
        mcase("matmul-rank0", [t([]), t([2, 2])], ERR),
        mcase("matmul-rank1", [t([3]), t([3, 2])], ERR),
        mcase("matmul-inner", [t([2, 3]), t([4, 2])], ERR),
        mcase("matmul-inner-adj", [t([3, 2]), t([2, 4])], ERR, adj_x=True, adj_y=True),
        mcase("matmul-batch-mismatch", [t([2, 2, 3]), t([3, 3, 2])], ERR),
        mcase("matmul-batch-0-vs-2", [t([0, 2, 3]), t([2, 3, 2])], ERR),
        mcase("matmul-tacc-half-T-float", [t([2, 2], "float32"), t([2, 2], "float32")], ERR),
        mcase("matmul-dtype-int32", [t([2, 2], "int32"), t([2, 2], "int32")], ERR),
        mcase("matmul-dtype-mix", [t([2, 2]), t([2, 2], "float32")], ERR),
        mcase("matmul-tacc-int", [t([2, 2]), t([2, 2])], ERR, Tacc="int32"),
        # --- graph mode with unknown sizes: the shape function's checks
        mcase(
            "matmul-graph-unknown-rank-rank1",
            [t([3]), t([3, 2])],
            ERR,
            mode="graph",
            signature=[None, None],
        ),
        mcase(
            "matmul-graph-inner",
            [t([2, 3]), t([4, 2])],
            ERR,
            mode="graph",
            signature=[[None, 3], [4, None]],
        ),
        mcase(
            "matmul-graph-unknown-batch",
            [t([2, 0, 3]), t([3, 2])],
            [2, 0, 2],
            mode="graph",
            signature=[[None, None, 3], [3, None]],
        ),
        mcase(
            "matmul-graph-overflow",
            [t([0, 1, 1]), t([1, 1])],
            ERR,
            mode="graph",
            signature=[[2**40, 2**20, 1], [1, 2**40]],
        ),
    ]
)

NONEMPTY_SUMS = {"fprop-stride-int32-max"}


@pytest.fixture(scope="module")
def results():
    return F.run_cases([c for c, _ in CASES.values()], workers=2, timeout=600)


@pytest.mark.parametrize("name", list(CASES))
def test_hostile(results, name):
    c, expect = CASES[name]
    r = results[name]
    why = F.verdict(c, r)
    assert not why, f"{why}\nreproducer: {F.reproducer(c)}"
    if expect == ERR:
        assert r["status"] == "error", f"expected an error, got {r}\nreproducer: {F.reproducer(c)}"
        assert r["message"], r
    else:
        assert r["status"] == "ok", (
            f"expected shape {expect}, got {r}\nreproducer: {F.reproducer(c)}"
        )
        assert r["shape"] == expect
        if name not in NONEMPTY_SUMS:  # every other result is empty or a sum of no terms
            assert r["nonzero"] == 0, f"an empty sum is +0, got {r['nonzero']} nonzero outputs"


@pytest.mark.parametrize(
    "x_shape, w_shape, padding",
    [
        ((1, 0, 5, 4), (3, 3, 4, 2), "SAME"),  # H = 0: empty output
        ((2, 0, 0, 4), (3, 3, 4, 2), "SAME"),
        ((0, 5, 5, 4), (3, 3, 4, 2), "VALID"),  # N = 0
        ((1, 5, 5, 4), (3, 3, 4, 0), "VALID"),  # K = 0
        ((1, 5, 5, 4), (3, 3, 4, 0), "SAME"),
    ],
)
def test_empty_shapes_match_tensorflow(x_shape, w_shape, padding):
    # Output shapes of all three ops against TensorFlow's own: Conv2D's shape function (its
    # eager CPU kernels disagree with it for some empty inputs), and the raw backprop ops; an
    # empty sum is +0 in ours (TensorFlow's Eigen wgrad leaves such outputs uninitialized).
    import numpy as np
    import tensorflow as tf

    from tf_fp16ops._platform import library as _library

    ops = _library.load()
    attrs = dict(
        strides=[1, 1, 1, 1],
        padding=padding,
        explicit_paddings=[],
        data_format="NHWC",
        dilations=[1, 1, 1, 1],
    )
    tf_y = (
        tf.function(lambda a, b: tf.nn.conv2d(a, b, 1, padding))
        .get_concrete_function(
            tf.TensorSpec(x_shape, tf.float32), tf.TensorSpec(w_shape, tf.float32)
        )
        .output_shapes
    )
    x = tf.zeros(x_shape, tf.float16)
    w = tf.ones(w_shape, tf.float16)
    for tacc in (tf.float16, tf.float32):
        y = ops.fp16_conv2d(x, w, Tacc=tacc, **attrs)
        assert y.shape == tf_y
        dy = tf.ones(y.shape, tf.float16)
        dx = ops.fp16_conv2d_backprop_input(x_shape, w, dy, Tacc=tacc, **attrs)
        dw = ops.fp16_conv2d_backprop_filter(x, w_shape, dy, Tacc=tacc, **attrs)
        f32 = lambda t: tf.cast(t, tf.float32)  # noqa: E731
        tf_dx = tf.raw_ops.Conv2DBackpropInput(
            input_sizes=x_shape,
            filter=f32(w),
            out_backprop=f32(dy),
            strides=[1, 1, 1, 1],
            padding=padding,
        )
        tf_dw = tf.raw_ops.Conv2DBackpropFilter(
            input=f32(x),
            filter_sizes=w_shape,
            out_backprop=f32(dy),
            strides=[1, 1, 1, 1],
            padding=padding,
        )
        assert dx.shape == tf_dx.shape and dw.shape == tf_dw.shape
        assert not np.any(dx.numpy()) and not np.any(dw.numpy())


@pytest.mark.parametrize("w_shape", [(1, 1, 0, 3), (0, 3, 4, 2), (3, 0, 4, 2)])
def test_a_filter_without_elements_is_refused_as_tensorflow_refuses_it(w_shape):
    # KH, KW or in_channels 0: no empty output but an InvalidArgumentError (ops.py's "Sizes"),
    # as TensorFlow's Conv2D kernels ("filter must not have zero elements") refuse it too.
    import tensorflow as tf

    import tf_fp16ops

    x_shape = (2, 5, 5, w_shape[2])
    x = tf.zeros(x_shape, tf.float16)
    w = tf.zeros(w_shape, tf.float16)
    dy = tf.zeros((2, 5, 5, w_shape[3]), tf.float16)
    calls = {
        "conv2d": lambda acc: tf_fp16ops.conv2d(x, w, 1, "SAME", accumulation=acc),
        "dgrad": lambda acc: tf_fp16ops.conv2d_backprop_input(
            x_shape, w, dy, 1, "SAME", accumulation=acc
        ),
        "wgrad": lambda acc: tf_fp16ops.conv2d_backprop_filter(
            x, w_shape, dy, 1, "SAME", accumulation=acc
        ),
    }
    for name, call in calls.items():
        for acc in ("float16", "float32"):
            with pytest.raises(tf.errors.InvalidArgumentError, match=r"filter sizes .* positive"):
                call(acc)
                pytest.fail(f"{name} accumulation={acc}: no error")
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.nn.conv2d(tf.cast(x, tf.float32), tf.cast(w, tf.float32), 1, "SAME")
