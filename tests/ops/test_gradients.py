"""Gradients of Fp16Conv2D (dgrad, wgrad) and of its backprop ops (second order).

Checks:
  * T=float: tf.test.compute_gradient's numerical Jacobian (central differences) against the
    registered gradients, for the forward op and for both backprop ops.
  * T=half, Tacc=half: tf.GradientTape results bit-exact against tests/support/reference.py's
    sequential binary16 FMA references with the documented orders (dgrad (kh, kw, ko);
    wgrad (n, p, q)).
  * T=float, Tacc=float: within gamma_K * sum|terms| of the float64 reference (Higham 2002, §3.1).
All paddings (VALID, SAME, EXPLICIT), strides, dilations, NHWC/NCHW and groups.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import tf_fp16ops
from support import reference

U32 = 2.0**-24

# (name, x NHWC shape, w HWIO shape, strides (h, w), dilations (h, w), padding in NHWC terms,
#  data_format)
CONFIGS = [
    ("valid", (2, 5, 6, 3), (3, 2, 3, 4), (1, 1), (1, 1), "VALID", "NHWC"),
    ("same_stride2", (1, 7, 6, 2), (3, 3, 2, 3), (2, 2), (1, 1), "SAME", "NHWC"),
    ("explicit_dilated", (2, 6, 5, 2), (2, 3, 2, 3), (1, 1), (2, 2), ((1, 2), (0, 1)), "NHWC"),
    ("same_nchw", (2, 6, 5, 3), (3, 2, 3, 2), (2, 1), (1, 1), "SAME", "NCHW"),
    ("groups", (1, 5, 5, 4), (3, 3, 2, 6), (1, 1), (1, 1), "VALID", "NHWC"),
    (
        "explicit_nchw_groups_stride",
        (2, 6, 7, 4),
        (2, 3, 1, 4),
        (2, 2),
        (1, 1),
        ((2, 1), (1, 0)),
        "NCHW",
    ),
]
IDS = [c[0] for c in CONFIGS]


def _op_padding(padding, data_format):
    if isinstance(padding, str):
        return padding
    (top, bottom), (left, right) = padding
    return (
        [[0, 0], [top, bottom], [left, right], [0, 0]]
        if data_format == "NHWC"
        else [[0, 0], [0, 0], [top, bottom], [left, right]]
    )


def _to(data_format, a):
    """NHWC array -> data_format."""
    return a if data_format == "NHWC" else np.ascontiguousarray(a.transpose(0, 3, 1, 2))


def _from(data_format, a):
    return a if data_format == "NHWC" else np.ascontiguousarray(a.transpose(0, 2, 3, 1))


def _kwargs(cfg, accumulation):
    _, _, _, s, d, padding, fmt = cfg
    return dict(
        strides=list(s),
        dilations=list(d),
        padding=_op_padding(padding, fmt),
        data_format=fmt,
        accumulation=accumulation,
    )


def _data(cfg, dtype, seed):
    _, xs, ws, s, d, padding, _ = cfg
    rng = np.random.default_rng(seed)
    g = reference.geometry(xs, ws, s, d, padding)
    x = rng.normal(size=xs).astype(dtype)
    w = rng.normal(size=ws).astype(dtype)
    dy = rng.normal(size=(g.N, g.P, g.Q, g.K)).astype(dtype)
    return x, w, dy


def _tape_grads(cfg, x, w, dy, accumulation):
    fmt = cfg[-1]
    xt, wt = tf.constant(_to(fmt, x)), tf.constant(w)
    with tf.GradientTape() as tape:
        tape.watch([xt, wt])
        y = tf_fp16ops.conv2d(xt, wt, **_kwargs(cfg, accumulation))
    dx, dw = tape.gradient(y, [xt, wt], output_gradients=tf.constant(_to(fmt, dy)))
    return _from(fmt, dx.numpy()), dw.numpy()


@pytest.mark.parametrize("cfg", CONFIGS, ids=IDS)
def test_half_gradients_bit_exact(cfg):
    x, w, dy = _data(cfg, np.float16, seed=1)
    s, d, padding = cfg[3], cfg[4], cfg[5]
    dx, dw = _tape_grads(cfg, x, w, dy, "float16")
    assert dx.dtype == dw.dtype == np.float16
    np.testing.assert_array_equal(
        dx, reference.conv2d_backprop_input(x.shape, w, dy, s, d, padding, "half")
    )
    np.testing.assert_array_equal(
        dw, reference.conv2d_backprop_filter(x, w.shape, dy, s, d, padding, "half")
    )


@pytest.mark.parametrize("cfg", CONFIGS, ids=IDS)
def test_float_gradients_within_gamma_bound(cfg):
    x, w, dy = _data(cfg, np.float32, seed=2)
    s, d, padding = cfg[3], cfg[4], cfg[5]
    dx, dw = _tape_grads(cfg, x, w, dy, "float32")

    def f64(a):
        return np.abs(a).astype(np.float64)

    dx_ref = reference.conv2d_backprop_input(
        x.shape, w.astype(np.float64), dy.astype(np.float64), s, d, padding, "float64"
    )
    dx_abs = reference.conv2d_backprop_input(x.shape, f64(w), f64(dy), s, d, padding, "float64")
    dw_ref = reference.conv2d_backprop_filter(
        x.astype(np.float64), w.shape, dy.astype(np.float64), s, d, padding, "float64"
    )
    dw_abs = reference.conv2d_backprop_filter(f64(x), w.shape, f64(dy), s, d, padding, "float64")
    g = reference.geometry(x.shape, w.shape, s, d, padding)
    k_dgrad = g.KH * g.KW * (g.K // g.groups)
    k_wgrad = g.N * g.P * g.Q
    assert np.all(
        np.abs(dx - dx_ref) <= reference.gamma_bound(k_dgrad, dx_abs, U32) + U32 * np.abs(dx_ref)
    )
    assert np.all(
        np.abs(dw - dw_ref) <= reference.gamma_bound(k_wgrad, dw_abs, U32) + U32 * np.abs(dw_ref)
    )


def _assert_jacobians_close(theoretical, numerical):
    for t, n in zip(theoretical, numerical, strict=True):
        assert t.shape == n.shape
        np.testing.assert_allclose(t, n, rtol=1e-2, atol=1e-2)
        assert np.abs(t).max() > 0.1  # the check compares something non-trivial


@pytest.mark.parametrize("cfg", CONFIGS, ids=IDS)
def test_compute_gradient_forward(cfg):
    x, w, _ = _data(cfg, np.float32, seed=3)
    fmt = cfg[-1]
    kw = _kwargs(cfg, "float32")
    theoretical, numerical = tf.test.compute_gradient(
        lambda a, b: tf_fp16ops.conv2d(a, b, **kw), [tf.constant(_to(fmt, x)), tf.constant(w)]
    )
    _assert_jacobians_close(theoretical, numerical)


@pytest.mark.parametrize("cfg", CONFIGS, ids=IDS)
def test_compute_gradient_of_backprop_ops(cfg):
    """Second order: the gradients registered for Fp16Conv2DBackpropInput / ...Filter."""
    x, w, dy = _data(cfg, np.float32, seed=4)
    fmt = cfg[-1]
    kw = _kwargs(cfg, "float32")
    xt, wt, dyt = tf.constant(_to(fmt, x)), tf.constant(w), tf.constant(_to(fmt, dy))
    x_sizes = tf.constant(xt.shape.as_list(), tf.int32)
    w_sizes = tf.constant(w.shape, tf.int32)
    _assert_jacobians_close(
        *tf.test.compute_gradient(
            lambda b, g: tf_fp16ops.conv2d_backprop_input(x_sizes, b, g, **kw), [wt, dyt]
        )
    )
    _assert_jacobians_close(
        *tf.test.compute_gradient(
            lambda a, g: tf_fp16ops.conv2d_backprop_filter(a, w_sizes, g, **kw), [xt, dyt]
        )
    )


def test_double_backprop_through_gradient_tape():
    """A gradient penalty d/dw |d(sum(conv(x, w) * dy))/dx|^2.

    It uses Fp16Conv2DBackpropInput's gradient.
    """
    cfg = CONFIGS[2]
    x, w, dy = _data(cfg, np.float32, seed=5)
    kw = _kwargs(cfg, "float32")
    xt, dyt = tf.constant(x), tf.constant(dy)

    def penalty(wv):
        with tf.GradientTape() as inner:
            inner.watch(xt)
            y = tf_fp16ops.conv2d(xt, wv, **kw)
        dx = inner.gradient(y, xt, output_gradients=dyt)
        return tf.reduce_sum(dx * dx)[None]

    _assert_jacobians_close(*tf.test.compute_gradient(penalty, [tf.constant(w)]))


@pytest.mark.parametrize("cfg", [CONFIGS[1], CONFIGS[4], CONFIGS[5]], ids=[IDS[1], IDS[4], IDS[5]])
def test_second_order_half_bit_exact(cfg):
    """The gradients of Fp16Conv2DBackpropInput are wgrad and fprop with the same Tacc=half."""
    x, w, dy = _data(cfg, np.float16, seed=6)
    s, d, padding = cfg[3], cfg[4], cfg[5]
    g_dx = np.random.default_rng(7).normal(size=x.shape).astype(np.float16)  # upstream of dx
    fmt = cfg[-1]
    wt, dyt = tf.constant(w), tf.constant(_to(fmt, dy))
    with tf.GradientTape() as tape:
        tape.watch([wt, dyt])
        dx = tf_fp16ops.conv2d_backprop_input(
            tf.constant(_to(fmt, x).shape, tf.int32), wt, dyt, **_kwargs(cfg, "float16")
        )
    d_w, d_dy = tape.gradient(dx, [wt, dyt], output_gradients=tf.constant(_to(fmt, g_dx)))
    np.testing.assert_array_equal(
        d_w.numpy(), reference.conv2d_backprop_filter(g_dx, w.shape, dy, s, d, padding, "half")
    )
    np.testing.assert_array_equal(
        _from(fmt, d_dy.numpy()), reference.conv2d(g_dx, w, s, d, padding, "half")
    )

    g_dw = np.random.default_rng(8).normal(size=w.shape).astype(np.float16)  # upstream of dw
    xt = tf.constant(_to(fmt, x))
    with tf.GradientTape() as tape:
        tape.watch([xt, dyt])
        dw = tf_fp16ops.conv2d_backprop_filter(
            xt, tf.constant(w.shape, tf.int32), dyt, **_kwargs(cfg, "float16")
        )
    d_x, d_dy = tape.gradient(dw, [xt, dyt], output_gradients=tf.constant(g_dw))
    np.testing.assert_array_equal(
        _from(fmt, d_x.numpy()),
        reference.conv2d_backprop_input(x.shape, g_dw, dy, s, d, padding, "half"),
    )
    np.testing.assert_array_equal(
        _from(fmt, d_dy.numpy()), reference.conv2d(x, g_dw, s, d, padding, "half")
    )


@settings(max_examples=12, deadline=None)
@given(
    n=st.integers(1, 2),
    h=st.integers(3, 7),
    w_=st.integers(3, 7),
    cg=st.integers(1, 3),
    groups=st.integers(1, 2),
    kg=st.integers(1, 3),
    kh=st.integers(1, 3),
    kw=st.integers(1, 3),
    stride=st.integers(1, 2),
    dilation=st.integers(1, 2),
    padding=st.sampled_from(["VALID", "SAME", "EXPLICIT"]),
    data_format=st.sampled_from(["NHWC", "NCHW"]),
    seed=st.integers(0, 2**16),
)
def test_half_gradients_bit_exact_random_geometry(
    n, h, w_, cg, groups, kg, kh, kw, stride, dilation, padding, data_format, seed
):
    if stride > 1 and dilation > 1:
        dilation = 1
    pad = ((seed % 2, kh // 2), (kw // 2, (seed // 2) % 2)) if padding == "EXPLICIT" else padding
    eh, ew = (kh - 1) * dilation + 1, (kw - 1) * dilation + 1
    if pad == "VALID" and (h < eh or w_ < ew):
        return  # empty output; covered by the op's shape tests
    if isinstance(pad, tuple) and (h + sum(pad[0]) < eh or w_ + sum(pad[1]) < ew):
        return
    cfg = (
        "h",
        (n, h, w_, cg * groups),
        (kh, kw, cg, kg * groups),
        (stride, stride),
        (dilation, dilation),
        pad,
        data_format,
    )
    x, w, dy = _data(cfg, np.float16, seed)
    dx, dw = _tape_grads(cfg, x, w, dy, "float16")
    s, d = cfg[3], cfg[4]
    np.testing.assert_array_equal(
        dx, reference.conv2d_backprop_input(x.shape, w, dy, s, d, pad, "half")
    )
    np.testing.assert_array_equal(
        dw, reference.conv2d_backprop_filter(x, w.shape, dy, s, d, pad, "half")
    )


def test_gradient_keeps_accumulation_attr():
    x = tf.ones([1, 4, 4, 2], tf.float16)
    w = tf.ones([2, 2, 2, 3], tf.float16)

    @tf.function
    def grads(x, w):
        with tf.GradientTape() as tape:
            tape.watch([x, w])
            y = tf_fp16ops.conv2d(x, w, 1, "VALID", accumulation="float32")
        return tape.gradient(y, [x, w])

    graph = grads.get_concrete_function(x, w).graph
    backprops = [op for op in graph.get_operations() if op.type.startswith("Fp16Conv2DBackprop")]
    assert sorted(op.type for op in backprops) == [
        "Fp16Conv2DBackpropFilter",
        "Fp16Conv2DBackpropInput",
    ]
    assert all(
        op.get_attr("Tacc") == tf.float32 and op.get_attr("T") == tf.float16 for op in backprops
    )


@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_bad_out_backprop_shapes(mode):
    """Wrong out_backprop / sizes shapes name the argument and the shapes (issue item 7)."""
    w = tf.ones([3, 3, 2, 4], tf.float16)
    x = tf.ones([1, 5, 5, 2], tf.float16)
    dy = tf.ones([1, 3, 3, 4], tf.float16)
    bad_channels = tf.ones([1, 3, 3, 5], tf.float16)
    cases = [
        (
            lambda: tf_fp16ops.conv2d_backprop_input([1, 5, 5, 2], w, bad_channels, 1, "VALID"),
            "out_backprop has shape [1",
        ),
        (
            lambda: tf_fp16ops.conv2d_backprop_filter(x, [3, 3, 2, 4], bad_channels, 1, "VALID"),
            "out_backprop has shape [1",
        ),
        (
            lambda: tf_fp16ops.conv2d_backprop_input(
                [1, 5, 5, 2], w, tf.ones([3, 3, 4], tf.float16), 1, "VALID"
            ),
            "out_backprop must be 4-D",
        ),
        (
            lambda: tf_fp16ops.conv2d_backprop_input([1, 5, 5, 3], w, dy, 1, "VALID"),
            "input channels (3) must be a multiple of the filter's in_channels (2)",
        ),
        (
            lambda: tf_fp16ops.conv2d_backprop_filter(x, [3, 3, 3, 4], dy, 1, "VALID"),
            "input channels (2) must be a multiple of the filter's in_channels (3)",
        ),
    ]
    for call, message in cases:
        run = call if mode == "eager" else tf.function(call, autograph=False)
        with pytest.raises((tf.errors.InvalidArgumentError, ValueError)) as e:
            run()
        assert message in str(e.value)
