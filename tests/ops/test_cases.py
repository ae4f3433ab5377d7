"""The real-world cases of docs/design.md "Cases and their public sources" (seed question, 49-tap
window, single rounding, overflow/stagnation/order, non-finite inputs) with their hand-computed
values."""

import numpy as np
import pytest
import tensorflow as tf

import tf_fp16ops

F16 = np.float16


def conv_1x1(x_along_c, w_along_c, accumulation):
    """1x1 convolution of a single pixel: x [1,1,1,C], w [1,1,C,1]."""
    x = np.asarray(x_along_c, F16).reshape(1, 1, 1, -1)
    w = np.asarray(w_along_c, F16).reshape(1, 1, -1, 1)
    return float(tf_fp16ops.conv2d(x, w, 1, "VALID", accumulation=accumulation).numpy().ravel()[0])


def test_seed_overflow_probe():
    # 65519 rounds to 65504 in fp16; 65504^2 overflows; the second fused step adds to inf.
    x = np.full([1, 1, 4, 1], 65519, F16)
    w = np.array([65519, -65519], F16).reshape(1, 2, 1, 1)
    half = tf_fp16ops.conv2d(x, w, 1, "VALID", accumulation="float16").numpy().ravel()
    flt = tf_fp16ops.conv2d(x, w, 1, "VALID", accumulation="float32").numpy().ravel()
    assert np.all(np.isposinf(half)) and half.shape == (3,)
    np.testing.assert_array_equal(flt, [0, 0, 0])


@pytest.mark.parametrize(
    "accumulation, expected", [("float32", 0.9794921875), ("float16", 0.98046875)]
)
def test_c1_49_tap_window(accumulation, expected):
    x = np.full([1, 9, 9, 1], 0.2, F16)  # 0.199951171875
    w = np.full([7, 7, 1, 1], 0.1, F16)  # 0.0999755859375
    y = tf_fp16ops.conv2d(x, w, 1, "VALID", accumulation=accumulation).numpy()
    assert y.shape == (1, 3, 3, 1)
    np.testing.assert_array_equal(y, np.full(y.shape, expected, F16))


def test_c1_tensorflow_cpu_accumulates_in_float_by_default():
    # TF's own Conv2D with T=half gives the fp32-accumulation value unless
    # TF_CONV2D_USE_FP16_ACCUMULATE is exactly "1" (checked in a subprocess by test_demo).
    x = np.full([1, 9, 9, 1], 0.2, F16)
    w = np.full([7, 7, 1, 1], 0.1, F16)
    np.testing.assert_array_equal(
        tf.nn.conv2d(x, w, 1, "VALID").numpy(), np.full([1, 3, 3, 1], 0.9794921875, F16)
    )


def test_c2_single_rounding_not_fp32_then_half():
    x, w = [2050, 1 + 2**-10], [1, 1 - 2**-10]
    assert conv_1x1(x, w, "float16") == 2050.0
    assert conv_1x1(x, w, "float32") == 2052.0  # 2051 is a binary16 tie, rounds to even


@pytest.mark.parametrize(
    "x, w, half, flt",
    [
        ([65504, 65504, -65504], [1, 1, 1], np.inf, 65504.0),
        ([300, 300], [300, -300], np.inf, 0.0),
        ([65504, 65504], [1, 1], np.inf, np.inf),
        ([1.0] * 4096, [1.0] * 4096, 2048.0, 4096.0),
        ([1.0] * 3000, [1.0] * 3000, 2048.0, 3000.0),
        ([2048, 1, 1], [1, 1, 1], 2048.0, 2050.0),
        ([1, 1, 2048], [1, 1, 1], 2050.0, 2050.0),
    ],
)
def test_c3_overflow_stagnation_order(x, w, half, flt):
    assert conv_1x1(x, w, "float16") == half
    assert conv_1x1(x, w, "float32") == flt


@pytest.mark.parametrize("w, expected", [([1, -1], "nan"), ([1, 1], np.inf), ([1, 0], "nan")])
@pytest.mark.parametrize("accumulation", ["float16", "float32"])
def test_c4_non_finite_inputs(w, expected, accumulation):
    y = conv_1x1([np.inf, np.inf], w, accumulation)
    if expected == "nan":
        assert np.isnan(y)
    else:
        assert y == expected


def test_seed_shapes_half_and_float_differ_while_tensorflow_does_not():
    rng = np.random.default_rng(0)
    x = rng.random((16, 32, 32, 16)).astype(F16)
    w = rng.random((3, 3, 16, 16)).astype(F16)
    half = tf_fp16ops.conv2d(x, w, 1, "VALID", accumulation="float16").numpy().astype(np.float64)
    flt = tf_fp16ops.conv2d(x, w, 1, "VALID", accumulation="float32").numpy().astype(np.float64)
    differ = np.mean(half != flt)
    max_diff = np.max(np.abs(half - flt))
    # Seed question (docs/design.md): about 77% of outputs differ, max |diff| 0.25-0.31 on outputs
    # near 36.
    assert 0.6 < differ < 0.9
    assert 0.125 <= max_diff <= 0.5
    tf16 = tf.nn.conv2d(x, w, 1, "VALID").numpy()
    tf32 = tf.cast(
        tf.nn.conv2d(x.astype(np.float32), w.astype(np.float32), 1, "VALID"), tf.float16
    ).numpy()
    assert np.max(np.abs(tf16.astype(np.float64) - tf32.astype(np.float64))) == 0.0
