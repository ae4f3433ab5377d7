"""Fp16Conv2D against the independent NumPy references of tests/support/reference.py on random
shapes: bit-exact for accumulation=float16, within Higham's bound for float32."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tf_fp16ops
from support import reference as R


def same_bits(a, b):
    a, b = np.asarray(a, np.float16), np.asarray(b, np.float16)
    return (a.view(np.uint16) == b.view(np.uint16)) | (np.isnan(a) & np.isnan(b))


@st.composite
def conv_problems(draw):
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    cg = draw(st.integers(1, 6))
    kg = draw(st.integers(1, 20))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dh, dw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    h = draw(st.integers((kh - 1) * dh + 1, 9))
    w = draw(st.integers((kw - 1) * dw + 1, 9))
    n = draw(st.integers(1, 2))
    pad_kind = draw(st.sampled_from(["VALID", "SAME", "EXPLICIT"]))
    pads = (
        tuple(draw(st.integers(0, 2)) for _ in range(2)),
        tuple(draw(st.integers(0, 2)) for _ in range(2)),
    )
    data_format = draw(st.sampled_from(["NHWC", "NCHW"]))
    data = draw(st.sampled_from(["uniform", "signed", "integers", "wide"]))
    seed = draw(st.integers(0, 2**31))
    return dict(
        n=n,
        h=h,
        w=w,
        groups=groups,
        cg=cg,
        k=kg * groups,
        kh=kh,
        kw=kw,
        strides=(sh, sw),
        dilations=(dh, dw),
        pad_kind=pad_kind,
        pads=pads,
        data_format=data_format,
        data=data,
        seed=seed,
    )


def make_data(p):
    rng = np.random.default_rng(p["seed"])
    xs = (p["n"], p["h"], p["w"], p["groups"] * p["cg"])
    ws = (p["kh"], p["kw"], p["cg"], p["k"])
    if p["data"] == "uniform":
        x, w = rng.random(xs), rng.random(ws)
    elif p["data"] == "signed":
        x, w = rng.standard_normal(xs) * 30, rng.standard_normal(ws)
    elif p["data"] == "integers":
        x, w = rng.integers(-2048, 2049, xs), rng.integers(-3, 4, ws)
    else:  # many binades, binary16 subnormals and midpoints included
        x = rng.integers(-16, 17, xs) * 2.0 ** rng.integers(-22, 8, xs)
        w = rng.integers(-16, 17, ws) * 2.0 ** rng.integers(-14, 6, ws)
    return x.astype(np.float16), w.astype(np.float16)


def run_ours(x, w, p, accumulation, dtype=np.float16):
    padding = (
        p["pad_kind"]
        if p["pad_kind"] != "EXPLICIT"
        else [[0, 0], list(p["pads"][0]), list(p["pads"][1]), [0, 0]]
    )
    xin = x.astype(dtype)
    if p["data_format"] == "NCHW":
        xin = xin.transpose(0, 3, 1, 2)
        if p["pad_kind"] == "EXPLICIT":
            padding = [[0, 0], [0, 0], list(p["pads"][0]), list(p["pads"][1])]
    y = tf_fp16ops.conv2d(
        xin,
        w.astype(dtype),
        p["strides"],
        padding,
        data_format=p["data_format"],
        dilations=p["dilations"],
        accumulation=accumulation,
    ).numpy()
    return y.transpose(0, 2, 3, 1) if p["data_format"] == "NCHW" else y


def ref_padding(p):
    return p["pad_kind"] if p["pad_kind"] != "EXPLICIT" else p["pads"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conv_problems())
def test_half_accumulation_is_bit_exact(p):
    x, w = make_data(p)
    ours = run_ours(x, w, p, "float16")
    ref = R.conv2d(x, w, p["strides"], p["dilations"], ref_padding(p), "half")
    assert ours.shape == ref.shape
    assert same_bits(ours, ref).all()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conv_problems(), st.sampled_from([np.float16, np.float32]))
def test_float_accumulation_within_higham_bound(p, dtype):
    x, w = make_data(p)
    ours = run_ours(x, w, p, "float32", dtype).astype(np.float64)
    ref = R.conv2d(
        x.astype(np.float64),
        w.astype(np.float64),
        p["strides"],
        p["dilations"],
        ref_padding(p),
        "float64",
    )
    abs_ref = R.conv2d(
        np.abs(x.astype(np.float64)),
        np.abs(w.astype(np.float64)),
        p["strides"],
        p["dilations"],
        ref_padding(p),
        "float64",
    )
    terms = p["kh"] * p["kw"] * p["cg"]
    bound = R.gamma_bound(terms, abs_ref, 2.0**-24)
    if (
        dtype == np.float16
    ):  # plus the final rounding to binary16 (unit roundoff 2^-11, subnormal spacing 2^-24)
        bound = bound + np.maximum(np.abs(ref) * 2.0**-11, 2.0**-25) * 1.001
    finite = np.isfinite(ref) & (np.abs(ref) < 65504)
    assert np.all(np.abs(ours - ref)[finite] <= bound[finite])


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_matches_tf_nn_conv2d_float32(data_format):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 11, 13, 6)).astype(np.float32)
    w = rng.standard_normal((3, 2, 6, 7)).astype(np.float32)
    for padding in ["SAME", "VALID", [[0, 0], [1, 2], [0, 3], [0, 0]]]:
        for strides, dilations in [((1, 1), (1, 1)), ((2, 3), (1, 1)), ((1, 1), (2, 2))]:
            expected = tf.nn.conv2d(x, w, strides, padding, dilations=dilations).numpy()
            xin, pad = x, padding
            if data_format == "NCHW":
                xin = x.transpose(0, 3, 1, 2)
                pad = (
                    padding
                    if isinstance(padding, str)
                    else [padding[0], padding[3], padding[1], padding[2]]
                )
            ours = tf_fp16ops.conv2d(
                xin,
                w,
                strides,
                pad,
                data_format=data_format,
                dilations=dilations,
                accumulation="float32",
            ).numpy()
            if data_format == "NCHW":
                ours = ours.transpose(0, 2, 3, 1)
            np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-5)


def test_grouped_convolution_equals_per_group_convolutions():
    rng = np.random.default_rng(2)
    x = rng.random((1, 6, 6, 6)).astype(np.float16)
    w = rng.random((3, 3, 2, 9)).astype(
        np.float16
    )  # 3 groups of 2 in-channels, 3 out-channels each
    y = tf_fp16ops.conv2d(x, w, 1, "SAME").numpy()
    for g in range(3):
        yg = tf_fp16ops.conv2d(
            x[..., 2 * g : 2 * g + 2], w[..., 3 * g : 3 * g + 3], 1, "SAME"
        ).numpy()
        assert same_bits(y[..., 3 * g : 3 * g + 3], yg).all()


def test_graph_and_function_modes_agree_with_eager():
    rng = np.random.default_rng(3)
    x = rng.random((1, 5, 5, 3)).astype(np.float16)
    w = rng.random((2, 2, 3, 4)).astype(np.float16)
    eager = tf_fp16ops.conv2d(x, w, 1, "VALID").numpy()
    fn = tf.function(lambda a, b: tf_fp16ops.conv2d(a, b, 1, "VALID"))
    np.testing.assert_array_equal(fn(x, w).numpy(), eager)
    g = tf.Graph()
    with g.as_default():
        y = tf_fp16ops.conv2d(tf.constant(x), tf.constant(w), 1, "VALID")
        assert y.shape.as_list() == [1, 4, 4, 4]
        assert y.op.type == "Fp16Conv2D" and y.op.get_attr("Tacc") == tf.float16
    with tf.compat.v1.Session(graph=g) as sess:
        np.testing.assert_array_equal(sess.run(y), eager)


@pytest.mark.parametrize(
    "accumulation, is_half",
    [
        ("float16", True),
        (tf.float16, True),
        (np.float16, True),
        (np.dtype("float16"), True),
        ("float32", False),
        (tf.float32, False),
        (np.float32, False),
        (np.dtype("float32"), False),
    ],
)
def test_accumulation_accepts_the_documented_spellings(accumulation, is_half):
    # The 49-tap window (docs/design.md#49-tap-window), by hand: fp16 0.98046875, fp32 0.9794921875.
    x = np.full([1, 9, 9, 1], 0.2, np.float16)
    w = np.full([7, 7, 1, 1], 0.1, np.float16)
    expected = 0.98046875 if is_half else 0.9794921875
    assert (
        tf_fp16ops.conv2d(x, w, 1, "VALID", accumulation=accumulation).numpy()[0, 0, 0, 0]
        == expected
    )


@pytest.mark.parametrize(
    "accumulation",
    [
        "half",
        "float",
        "fp16",
        "fp32",
        "Float16",
        " float16",
        "FLOAT32",
        tf.float64,
        np.float64,
        tf.bfloat16,
        19,
        1,
        None,
    ],
    ids=repr,
)
def test_accumulation_rejects_every_other_spelling_with_the_accepted_list(accumulation):
    # 19 and 1 are the DataType enum values of half and float, which tf.as_dtype would take.
    x = np.ones([1, 1, 1, 1], np.float16)
    with pytest.raises(ValueError) as e:
        tf_fp16ops.conv2d(x, x, 1, "VALID", accumulation=accumulation)
    assert str(e.value) == (
        "accumulation must be 'float16' or 'float32' (or tf.float16, tf.float32, np.float16, "
        f"np.float32), got {accumulation!r}"
    )


def test_empty_batch_returns_empty_output():
    y = tf_fp16ops.conv2d(
        np.zeros((0, 5, 5, 3), np.float16), np.zeros((3, 3, 3, 2), np.float16), 1, "SAME"
    )
    assert y.shape == (0, 5, 5, 2)


def test_long_row_of_four_million_positions():
    # Offsets past 2^24 would go wrong if an index were ever carried in a float; int64 offsets
    # past int32 are checked by shape only in test_bad_input (the tensors would need > 4 GiB).
    x = np.ones((1, 1, 1 << 22, 4), np.float16)
    w = np.ones((1, 3, 4, 1), np.float16)
    y = tf_fp16ops.conv2d(x, w, 1, "VALID").numpy()
    assert y.shape == (1, 1, (1 << 22) - 2, 1)
    assert np.all(y == 12)
