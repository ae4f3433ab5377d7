"""Fp16MatMul (tf_fp16ops.matmul) and tf_fp16ops.einsum: bit-exact against the NumPy reference
(tests/support/reference.py batch_matmul, a sequential fma_half chain over k) with accumulation
float16, within Higham's bound of a float64 sum with float32; the hand-computed cases of the
numerics contract; gradients; shape rules and errors; every CPU instruction-set path."""

from __future__ import annotations

import itertools
import string

import numpy as np
import pytest
import tensorflow as tf

import tf_fp16ops
from support import reference as R
from support.cpu_features import run_on_isa
from tf_fp16ops._platform import library as _library

OPS = _library.load()


def bits_equal(a, b):
    a, b = np.asarray(a, np.float16), np.asarray(b, np.float16)
    return a.shape == b.shape and bool(
        np.all((a.view(np.uint16) == b.view(np.uint16)) | (np.isnan(a) & np.isnan(b)))
    )


def values(rng, shape, kind):
    if kind == "random":
        v = rng.random(shape) - 0.25
    elif kind == "binades":  # binary16 subnormals, midpoints, large values
        v = rng.integers(-8, 9, shape) * 2.0 ** rng.integers(-20, 8, shape)
    else:  # integers: sums land on binary16 midpoints and overflow
        v = rng.integers(-300, 301, shape).astype(np.float64)
    return v.astype(np.float16)


SHAPES = [
    # (x shape, y shape, adj_x, adj_y)
    ((5, 7), (7, 3), False, False),
    ((1, 1), (1, 1), False, False),
    ((17, 40), (40, 33), False, False),  # lane tails of 16 and 32
    ((9, 12), (19, 12), False, True),
    ((12, 9), (12, 19), True, False),
    ((12, 9), (19, 12), True, True),
    ((2, 3, 6, 5), (2, 3, 5, 4), False, False),
    ((2, 1, 6, 5), (1, 3, 5, 4), False, False),  # both broadcast
    ((4, 6, 5), (5, 4), False, False),  # 2-D y: a Dense kernel
    ((6, 5), (3, 5, 4), False, False),  # 2-D x
    ((2, 3, 5, 6), (3, 4, 5), True, True),  # ranks differ
]


@pytest.mark.parametrize("kind", ["random", "binades", "ints"])
@pytest.mark.parametrize("xs, ys, adj_x, adj_y", SHAPES)
def test_half_accumulation_is_bit_exact(xs, ys, adj_x, adj_y, kind):
    rng = np.random.default_rng(abs(hash((xs, ys, adj_x, adj_y, kind))) % 2**32)
    x, y = values(rng, xs, kind), values(rng, ys, kind)
    ours = tf_fp16ops.matmul(x, y, transpose_a=adj_x, transpose_b=adj_y, accumulation="float16")
    ref = R.batch_matmul(x, y, adj_x, adj_y, accumulation="half")
    assert ours.dtype == tf.float16
    assert bits_equal(ours.numpy(), ref)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("xs, ys, adj_x, adj_y", SHAPES)
def test_float_accumulation_within_fp32_bound(xs, ys, adj_x, adj_y, dtype):
    rng = np.random.default_rng(3)
    x, y = values(rng, xs, "random").astype(dtype), values(rng, ys, "random").astype(dtype)
    ours = tf_fp16ops.matmul(x, y, adjoint_a=adj_x, adjoint_b=adj_y, accumulation="float32")
    f64 = lambda a: a.astype(np.float64)  # noqa: E731
    ref = R.batch_matmul(f64(x), f64(y), adj_x, adj_y, accumulation="float64")
    absr = R.batch_matmul(np.abs(f64(x)), np.abs(f64(y)), adj_x, adj_y, accumulation="float64")
    k = xs[-2] if adj_x else xs[-1]
    u = 2.0**-11 if dtype == "float16" else 2.0**-24
    bound = R.gamma_bound(k, absr, 2.0**-24) + np.abs(ref) * u * 1.001
    assert ours.dtype == tf.as_dtype(dtype)
    assert np.all(np.abs(ours.numpy().astype(np.float64) - ref) <= bound)


def test_half_and_float_differ_on_uniform_data():
    # The seed question for matmul: 256-term dot products of U[0,1) values. Sequential fp16
    # accumulation (spacing 2^-4 at 64..128) differs from fp32 rounded once on most outputs.
    rng = np.random.default_rng(0)
    x, y = rng.random((64, 256)).astype(np.float16), rng.random((256, 64)).astype(np.float16)
    h = tf_fp16ops.matmul(x, y, accumulation="float16").numpy()
    f = tf_fp16ops.matmul(x, y, accumulation="float32").numpy()
    assert bits_equal(h, R.batch_matmul(x, y))
    assert np.mean(h != f) > 0.5


# Hand-computed cases (README "Numerics"): x [1, K] @ y [K, 1].
CASES = [
    # the double-rounding trap: exact sum 2051 - 2^-20 -> 2050 once, 2051 -> 2052 twice
    ([2050, 1 + 2**-10], [1, 1 - 2**-10], 2050, 2052),
    ([65504, 65504, -65504], [1, 1, 1], np.inf, 65504),  # overflow stays inf
    ([300, 300], [300, -300], np.inf, 0),  # 90000 > 65504
    ([1.0] * 4096, [1.0] * 4096, 2048, 4096),  # stagnation at 2048
    ([2048, 1, 1], [1, 1, 1], 2048, 2050),  # order: k ascending
    ([1, 1, 2048], [1, 1, 1], 2050, 2050),
    ([np.inf, np.inf], [1, -1], np.nan, np.nan),  # inf - inf
    ([np.inf, np.inf], [1, 0], np.nan, np.nan),  # inf * 0
    ([0.199951171875] * 49, [0.0999755859375] * 49, 0.98046875, 0.9794921875),  # 49 taps
]


@pytest.mark.parametrize("x, y, half, single", CASES)
def test_hand_computed_cases(x, y, half, single):
    x = np.asarray([x], np.float16)
    y = np.asarray(y, np.float16)[:, None]
    for acc, want in (("float16", half), ("float32", single)):
        got = float(tf_fp16ops.matmul(x, y, accumulation=acc).numpy()[0, 0])
        assert (np.isnan(want) and np.isnan(got)) or got == want, (acc, got, want)
    # The same through the adjoint layouts.
    got = tf_fp16ops.matmul(x.T, y.T, transpose_a=True, transpose_b=True).numpy()[0, 0]
    assert (np.isnan(half) and np.isnan(got)) or float(got) == half


def test_empty_sum_is_positive_zero_and_empty_shapes():
    x, y = tf.zeros([2, 3, 0], tf.float16), tf.zeros([0, 4], tf.float16)
    for acc in ("float16", "float32"):
        z = tf_fp16ops.matmul(x, y, accumulation=acc).numpy()
        assert z.shape == (2, 3, 4)
        assert np.all(z == 0) and not np.any(np.signbit(z))
    # Negative zeros multiply to +0 terms; a sum of -0 * 1 alone is +0 + (-0) = +0.
    neg = tf_fp16ops.matmul(tf.constant([[-0.0]], tf.float16), tf.constant([[1.0]], tf.float16))
    assert not np.signbit(neg.numpy()[0, 0])
    assert tf_fp16ops.matmul(
        tf.zeros([0, 3, 5], tf.float16), tf.zeros([5, 2], tf.float16)
    ).shape == (
        0,
        3,
        2,
    )
    assert tf_fp16ops.matmul(
        tf.zeros([3, 0], tf.float32), tf.zeros([0, 0], tf.float32), accumulation="float32"
    ).shape == (3, 0)


def test_graph_mode_unknown_sizes_and_static_shape():
    fn = tf.function(lambda a, b: tf_fp16ops.matmul(a, b, transpose_b=True))
    conc = fn.get_concrete_function(
        tf.TensorSpec([None, 1, None, 5], tf.float16), tf.TensorSpec([3, 7, 5], tf.float16)
    )
    assert conc.structured_outputs.shape.as_list() == [None, 3, None, 7]
    rng = np.random.default_rng(5)
    x, y = values(rng, (2, 1, 4, 5), "random"), values(rng, (3, 7, 5), "random")
    assert bits_equal(conc(x, y).numpy(), R.batch_matmul(x, y, adj_y=True))
    # Unknown rank: unknown output shape, the kernel checks at run time.
    conc = tf.function(lambda a, b: OPS.fp16_mat_mul(a, b, Tacc=tf.float16)).get_concrete_function(
        tf.TensorSpec(None, tf.float16), tf.TensorSpec(None, tf.float16)
    )
    assert conc.structured_outputs.shape.rank is None
    with pytest.raises(tf.errors.InvalidArgumentError, match="x must have rank >= 2"):
        conc(np.ones([3], np.float16), np.ones([3, 3], np.float16))


@pytest.mark.parametrize(
    "xs, ys, kw, match",
    [
        ((3,), (3, 2), {}, r"x must have rank >= 2, got shape \[3\]"),
        ((2, 3), (4,), {}, r"y must have rank >= 2"),
        ((2, 3), (4, 2), {}, r"inner dimensions of x \[2, 3\] and y \[4, 2\] differ: 3 vs 4"),
        ((2, 3), (2, 4), {"adj_y": True}, r"inner dimensions .* \(adj_y\) differ: 3 vs 4"),
        ((2, 2, 3), (3, 3, 4), {}, r"batch dimensions of x \[2, 2, 3\] and y \[3, 3, 4\] do not"),
    ],
)
def test_shape_errors_name_the_argument(xs, ys, kw, match):
    x, y = np.ones(xs, np.float16), np.ones(ys, np.float16)
    with pytest.raises(tf.errors.InvalidArgumentError, match=match):  # eager: the kernel
        OPS.fp16_mat_mul(x, y, Tacc=tf.float16, **kw)
    with pytest.raises(ValueError, match=match):  # graph build: the shape function
        tf.function(lambda: OPS.fp16_mat_mul(x, y, Tacc=tf.float16, **kw)).get_concrete_function()


def test_python_argument_errors():
    h = np.ones([2, 2], np.float16)
    with pytest.raises(ValueError, match="transpose_a must be a bool, got 1"):
        tf_fp16ops.matmul(h, h, transpose_a=1)
    with pytest.raises(ValueError, match="only one of transpose_b and adjoint_b"):
        tf_fp16ops.matmul(h, h, transpose_b=True, adjoint_b=True)
    with pytest.raises(ValueError, match="b must have the dtype of a"):
        tf_fp16ops.matmul(h, h.astype(np.float32))
    with pytest.raises(ValueError, match="a must be float16 or float32, got dtype float64"):
        tf_fp16ops.matmul(h.astype(np.float64), h.astype(np.float64))
    with pytest.raises(ValueError, match="accumulation='float16' needs float16 inputs"):
        tf_fp16ops.matmul(h.astype(np.float32), h.astype(np.float32))
    with pytest.raises(ValueError, match="accumulation must be"):
        tf_fp16ops.matmul(h, h, accumulation="bfloat16")
    with pytest.raises(ValueError, match="a must have rank >= 2"):
        tf_fp16ops.matmul(np.ones([2], np.float16), h)
    with pytest.raises(tf.errors.InvalidArgumentError, match="Tacc=half requires T=half"):
        OPS.fp16_mat_mul(h.astype(np.float32), h.astype(np.float32), Tacc=tf.float16)


# ------------------------------------------------------------------------------ gradients
@pytest.mark.parametrize("adj_x, adj_y", list(itertools.product([False, True], repeat=2)))
def test_gradients_are_the_reference_products(adj_x, adj_y):
    rng = np.random.default_rng(11)
    x = values(rng, (3, 7, 6) if adj_x else (3, 6, 7), "binades")
    y = values(rng, (3, 5, 7) if adj_y else (3, 7, 5), "binades")
    g = values(rng, (3, 6, 5), "random")
    xt, yt = tf.constant(x), tf.constant(y)
    with tf.GradientTape() as tape:
        tape.watch([xt, yt])
        z = tf_fp16ops.matmul(xt, yt, transpose_a=adj_x, transpose_b=adj_y)
    dx, dy = tape.gradient(z, [xt, yt], output_gradients=tf.constant(g))
    xm = np.swapaxes(x, -1, -2) if adj_x else x  # [3, 6, 7]
    ym = np.swapaxes(y, -1, -2) if adj_y else y  # [3, 7, 5]
    ref_dx = R.batch_matmul(g, ym, adj_y=True)  # [3, 6, 7], over n ascending
    ref_dy = R.batch_matmul(xm, g, adj_x=True)  # [3, 7, 5], over m ascending
    assert bits_equal(dx.numpy(), np.swapaxes(ref_dx, -1, -2) if adj_x else ref_dx)
    assert bits_equal(dy.numpy(), np.swapaxes(ref_dy, -1, -2) if adj_y else ref_dy)


@pytest.mark.parametrize("adj_y", [False, True])
def test_kernel_gradient_is_one_chain_over_all_rows(adj_y):
    # x [2, 4, 6] @ kernel [6, 5]: dkernel sums over all 8 rows, batch-major, in one chain.
    rng = np.random.default_rng(12)
    x = values(rng, (2, 4, 6), "ints")
    w = values(rng, (5, 6) if adj_y else (6, 5), "ints")
    g = values(rng, (2, 4, 5), "binades")
    xt, wt = tf.constant(x), tf.constant(w)
    with tf.GradientTape() as tape:
        tape.watch(wt)
        z = tf_fp16ops.matmul(xt, wt, transpose_b=adj_y)
    dw = tape.gradient(z, wt, output_gradients=tf.constant(g)).numpy()
    ref = R.batch_matmul(x.reshape(-1, 6), g.reshape(-1, 5), adj_x=True)  # [6, 5]
    assert bits_equal(dw, ref.T if adj_y else ref)


def test_broadcast_gradients_match_tensorflow():
    rng = np.random.default_rng(13)
    x = rng.standard_normal((2, 1, 4, 3)).astype(np.float32)
    y = rng.standard_normal((5, 3, 6)).astype(np.float32)
    xt, yt = tf.constant(x), tf.constant(y)
    grads = []
    for fn in (
        lambda a, b: tf_fp16ops.matmul(a, b, accumulation="float32"),
        lambda a, b: tf.linalg.matmul(a, b),
    ):
        with tf.GradientTape() as tape:
            tape.watch([xt, yt])
            loss = tf.reduce_sum(tf.sin(fn(xt, yt)))
        grads.append([t.numpy() for t in tape.gradient(loss, [xt, yt])])
    for ours, theirs in zip(grads[0], grads[1], strict=True):
        assert ours.shape == theirs.shape
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


def test_second_order_gradient_runs_the_op():
    x = tf.constant(np.arange(6, dtype=np.float16).reshape(2, 3) / 8)
    y = tf.constant(np.arange(12, dtype=np.float16).reshape(3, 4) / 8)
    with tf.GradientTape() as outer:
        outer.watch(y)
        with tf.GradientTape() as inner:
            inner.watch(x)
            z = tf.reduce_sum(tf_fp16ops.matmul(x, y) ** 2)
        dx = inner.gradient(z, x)
    ddy = outer.gradient(dx, y)
    # d/dy sum(dx) with dx = 2 (x y) y^T: exact small integers over 8ths, so fp16 is exact.
    x64, y64 = x.numpy().astype(np.float64), y.numpy().astype(np.float64)
    with tf.GradientTape() as t:
        yv = tf.constant(y64)
        t.watch(yv)
        ref = tf.reduce_sum(2 * tf.matmul(tf.matmul(tf.constant(x64), yv), yv, transpose_b=True))
    np.testing.assert_array_equal(ddy.numpy().astype(np.float64), t.gradient(ref, yv).numpy())


# --------------------------------------------------------------------------------- einsum
EINSUMS = [
    # keras.layers.EinsumDense and MultiHeadAttention equations
    ("abc,cd->abd", (2, 5, 6), (6, 7)),
    ("abc,cde->abde", (2, 5, 6), (6, 3, 4)),  # MHA query/key/value projections
    ("abcd,cde->abe", (2, 5, 3, 4), (3, 4, 6)),  # MHA output projection
    ("aecd,abcd->acbe", (2, 7, 3, 4), (2, 5, 3, 4)),  # MHA attention scores
    ("acbe,aecd->abcd", (2, 3, 5, 7), (2, 7, 3, 4)),  # MHA attention combine
    ("ab,bc->ac", (4, 5), (5, 6)),
    ("ba,bc->ac", (5, 4), (5, 6)),  # becomes adj_x
    ("ab,cb->ac", (4, 5), (6, 5)),  # becomes adj_y
    ("abc,bd->acd", (2, 3, 4), (3, 5)),
]


@pytest.mark.parametrize("equation, xs, ys", EINSUMS)
def test_einsum_half_is_bit_exact(equation, xs, ys):
    rng = np.random.default_rng(17)
    a, b = values(rng, xs, "binades"), values(rng, ys, "binades")
    ours = tf_fp16ops.einsum(equation, a, b).numpy()
    assert bits_equal(ours, R.einsum_half(equation, a, b))
    f32 = tf_fp16ops.einsum(
        equation, a.astype(np.float32), b.astype(np.float32), accumulation="float32"
    ).numpy()
    np.testing.assert_allclose(
        f32, np.einsum(equation, a.astype(np.float64), b.astype(np.float64)), rtol=1e-6, atol=1e-6
    )


@pytest.mark.parametrize(
    "equation, match",
    [
        ("abc,cd", "explicit form"),
        ("abc->ab", "exactly two operands"),
        ("ab,bc,cd->ad", "exactly two operands"),
        ("aab,bc->ac", "a label repeats"),
        ("abc,cd->abz", "output label 'z'"),
        ("abc,cd->ad", "label 'b' .* summed within one operand only"),
        ("ab1,bc->ac", "labels must be letters"),
        ("abcd,cd->ab", "must have rank 4, got 3"),
    ],
)
def test_einsum_rejects_unsupported_equations(equation, match):
    a, b = np.ones([2, 3, 4], np.float16), np.ones([4, 5], np.float16)
    with pytest.raises(ValueError, match=match):
        tf_fp16ops.einsum(equation, a, b)


def test_einsum_ellipsis_and_static_size_mismatch():
    rng = np.random.default_rng(19)
    a, b = values(rng, (2, 3, 4), "random"), values(rng, (4, 5), "random")
    ours = tf_fp16ops.einsum("...b,bc->...c", a, b).numpy()
    assert bits_equal(ours, R.batch_matmul(a, b))
    with pytest.raises(ValueError, match="label 'c' of .* has size 4 in a and 3 in b"):
        tf_fp16ops.einsum("abc,cd->abd", a, np.ones([3, 5], np.float16))


def test_einsum_gradient_matches_tf_einsum():
    rng = np.random.default_rng(23)
    q = rng.standard_normal((2, 5, 3, 4)).astype(np.float32)
    k = rng.standard_normal((2, 7, 3, 4)).astype(np.float32)
    grads = []
    for fn in (
        lambda a, b: tf_fp16ops.einsum("aecd,abcd->acbe", a, b, accumulation="float32"),
        lambda a, b: tf.einsum("aecd,abcd->acbe", a, b),
    ):
        qt, kt = tf.constant(q), tf.constant(k)
        with tf.GradientTape() as tape:
            tape.watch([qt, kt])
            loss = tf.reduce_sum(tf.cos(fn(kt, qt)))
        grads.append([t.numpy() for t in tape.gradient(loss, [qt, kt])])
    for ours, theirs in zip(*grads, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


# ------------------------------------------------ einsum: sizes known only when it runs
def _graph_einsum(equation, a_spec, b_spec, fn=None):
    """einsum (or `fn`) traced with the given static shapes (None: unknown rank), float32."""
    fn = fn or (lambda x, y: tf_fp16ops.einsum(equation, x, y, accumulation="float32"))
    return tf.function(
        fn,
        input_signature=[
            tf.TensorSpec(a_spec, tf.float32),
            tf.TensorSpec(b_spec, tf.float32),
        ],
    )


@pytest.mark.parametrize(
    "equation, a_spec, b_spec, xs, ys, match",
    [
        # Flattening c and d into one contraction of 6 hid both mismatches.
        (
            "acd,cdb->ab",
            [None] * 3,
            [None] * 3,
            (4, 2, 3),
            (3, 2, 5),
            r"einsum acd,cdb->ab: label [cd] has size (2 in a and 3 in b|3 in a and 2 in b)",
        ),
        (
            "pqmk,pqkn->pqmn",
            [None] * 4,
            [None] * 4,
            (2, 3, 4, 5),
            (3, 2, 5, 6),
            r"einsum pqmk,pqkn->pqmn: label [pq] has size (2 in a and 3 in b|3 in a and 2 in b)",
        ),
        # Failed inside a Reshape naming neither the equation nor the label.
        (
            "mk,kn->mn",
            [None] * 2,
            [None] * 2,
            (2, 3),
            (5, 4),
            "einsum mk,kn->mn: label k has size 3 in a and 5 in b",
        ),
        # One side static, the other not.
        (
            "mk,kn->mn",
            [None, 3],
            [None, None],
            (2, 3),
            (5, 4),
            "einsum mk,kn->mn: label k has size 3 in a and 5 in b",
        ),
        (
            "...mk,...kn->...mn",
            [None] * 4,
            [None] * 4,
            (2, 3, 4, 5),
            (2, 4, 5, 6),
            r"einsum \.\.\.mk,\.\.\.kn->\.\.\.mn: the dimensions of \.\.\. do not match: "
            r"\[2 3\] in a and \[2 4\] in b",
        ),
    ],
)
def test_einsum_graph_mode_checks_sizes_known_only_at_run_time(
    equation, a_spec, b_spec, xs, ys, match
):
    a, b = np.ones(xs, np.float32), np.ones(ys, np.float32)
    # The reference: tf.einsum rejects the same operands.
    with pytest.raises(tf.errors.InvalidArgumentError):
        _graph_einsum(equation, a_spec, b_spec, fn=lambda x, y: tf.einsum(equation, x, y))(a, b)
    with pytest.raises(tf.errors.InvalidArgumentError, match=match):
        _graph_einsum(equation, a_spec, b_spec)(a, b)


@pytest.mark.parametrize(
    "equation, xs, ys",
    [
        ("acd,cdb->ab", (4, 2, 3), (2, 3, 5)),
        ("pqmk,pqkn->pqmn", (2, 3, 4, 5), (2, 3, 5, 6)),
        ("...mk,...kn->...mn", (2, 3, 4, 5), (2, 3, 5, 6)),
        ("mk,kn->mn", (2, 3), (3, 4)),
    ],
)
def test_einsum_graph_mode_unknown_sizes_that_agree_match_tf_einsum(equation, xs, ys):
    rng = np.random.default_rng(31)
    a = rng.standard_normal(xs).astype(np.float32)
    b = rng.standard_normal(ys).astype(np.float32)
    spec_a, spec_b = [None] * len(xs), [None] * len(ys)
    ours = _graph_einsum(equation, spec_a, spec_b)(a, b).numpy()
    np.testing.assert_allclose(ours, tf.einsum(equation, a, b).numpy(), rtol=1e-5, atol=1e-5)


def test_einsum_unknown_rank_operands():
    """Unknown rank: the equation gives the rank (checked when it runs, naming the operand); with
    '...' it cannot, a ValueError naming the operand (was: as_list() is not defined on an unknown
    TensorShape)."""
    rng = np.random.default_rng(37)
    a = rng.standard_normal((2, 3)).astype(np.float32)
    b = rng.standard_normal((3, 4)).astype(np.float32)
    f = _graph_einsum("mk,kn->mn", None, None)
    np.testing.assert_allclose(
        f(a, b).numpy(), tf.einsum("mk,kn->mn", a, b).numpy(), rtol=1e-5, atol=1e-6
    )
    with pytest.raises(
        tf.errors.InvalidArgumentError, match="einsum mk,kn->mn: operand a must have rank 2"
    ):
        f(np.ones([2, 3, 1], np.float32), b)
    with pytest.raises(
        ValueError, match=r"operand b of '\.\.\.k,\.\.\.kn->\.\.\.n' has unknown rank"
    ):
        _graph_einsum("...k,...kn->...n", [2, 3], None).get_concrete_function()


def test_einsum_static_ellipsis_mismatch_names_no_internal_label():
    """'...' dimensions that differ are named as such (the message named an internal label, 'a',
    which the equation does not hold)."""
    a, b = np.ones([2, 3, 4], np.float16), np.ones([5, 4, 6], np.float16)
    with pytest.raises(ValueError) as e:
        tf_fp16ops.einsum("...mk,...kn->...mn", a, b)
    msg = str(e.value)
    assert "the '...' dimensions of '...mk,...kn->...mn' do not match: [2] in a and [5] in b" in msg
    assert "label" not in msg
    with pytest.raises(tf.errors.InvalidArgumentError):  # the reference rejects them too
        tf.einsum("...mk,...kn->...mn", a, b)


def test_einsum_ellipsis_with_many_letters_keeps_every_dimension():
    """An equation using 50 letters with '...' left too few free letters for the ellipsis: a
    dimension was dropped (rank 51 where tf.einsum gives 52)."""
    letters = string.ascii_letters
    eq = f"...{letters[:49]},{letters[48:50]}->...{letters[:48]}{letters[49]}"
    rng = np.random.default_rng(41)
    a = rng.standard_normal([2, 3, 4] + [1] * 49).astype(np.float32)
    b = rng.standard_normal([1, 3]).astype(np.float32)
    want = tf.einsum(eq, a, b).numpy()
    ours = tf_fp16ops.einsum(eq, a, b, accumulation="float32").numpy()
    assert ours.shape == want.shape == (2, 3, 4) + (1,) * 48 + (3,)
    np.testing.assert_allclose(ours, want, rtol=1e-6, atol=1e-6)


# --------------------------------------------------------------- instruction-set paths
ISA_SCRIPT = r"""
import sys, numpy as np
sys.path.insert(0, {tests!r})
import tf_fp16ops
from support import reference as R
rng = np.random.default_rng(29)
bad = 0
for trial in range(24):
    # Rows past one register tile (8) and columns past one (96) and its 32-lane blocks; on
    # AVX512-FP16 both operands read in place (x with or without adj_x, y transposed with adj_y).
    m, k = int(rng.integers(1, 20)), int(rng.integers(1, 60))
    n = (1, 7, 16, 17, 31, 32, 33, 48, 5, 64, 9, 40, 95, 96, 97, 130, 200, 257)[trial % 18]
    adj_x, adj_y = bool(trial & 1), bool(trial & 2)
    xs, ys = (2,) + ((k, m) if adj_x else (m, k)), (n, k) if adj_y else (k, n)
    if trial % 4 == 0:
        x, y = rng.random(xs), rng.random(ys) - 0.5
    elif trial % 4 == 1:  # many binades: binary16 subnormals and midpoints
        x = rng.integers(-8, 8, xs) * 2.0 ** rng.integers(-20, 4, xs)
        y = rng.integers(-8, 8, ys) * 2.0 ** rng.integers(-12, 6, ys)
    elif trial % 4 == 2:  # integers: sums on binary16 midpoints, overflow to inf
        x, y = rng.integers(0, 2049, xs), rng.integers(-3, 4, ys)
    else:  # infinities and NaN among large values: inf - inf and 0 * inf give NaN
        x, y = rng.random(xs) * 3e4, rng.integers(-2, 3, ys).astype(np.float64)
        x.reshape(-1)[rng.integers(0, x.size, 2)] = (np.inf, -np.inf)
        y.reshape(-1)[rng.integers(0, y.size)] = np.nan
    x, y = x.astype(np.float16), y.astype(np.float16)
    ours = tf_fp16ops.matmul(x, y, transpose_a=adj_x, transpose_b=adj_y).numpy()
    ref = R.batch_matmul(x, y, adj_x, adj_y)
    same = (ours.view(np.uint16) == ref.view(np.uint16)) | (np.isnan(ours) & np.isnan(ref))
    bad += int((~same).sum())
print("isa", tf_fp16ops.ops.cpu_isa())
print("mismatches", bad)
"""


@pytest.mark.parametrize("isa", ["avx512fp16", "avx512", "avx2", "scalar"])
def test_every_isa_path_is_exact(isa):
    lines = run_on_isa(ISA_SCRIPT, isa)
    assert lines == [f"isa {isa}", "mismatches 0"]
