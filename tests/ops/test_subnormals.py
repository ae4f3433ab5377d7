"""Subnormals under TensorFlow's thread settings (MXCSR.FTZ/DAZ set on the threads that run
kernels; docs/numerics.md, section 3): Tacc=float with T=float flushes binary32 subnormals as
tf.nn.conv2d does, while Tacc=half gives binary16 subnormals bit-exactly."""

import numpy as np
import tensorflow as tf

import tf_fp16ops
from support import reference as R


def test_float32_subnormals_are_flushed_like_tf_conv2d():
    w = np.ones((1, 1, 1, 1), np.float32)
    x = np.full((1, 1, 1, 1), 2.0**-130, np.float32)  # subnormal input
    ours = tf_fp16ops.conv2d(x, w, 1, "VALID", accumulation="float32").numpy()
    assert ours.ravel().tolist() == [0.0] == tf.nn.conv2d(x, w, 1, "VALID").numpy().ravel().tolist()
    x = np.full((1, 1, 1, 1), 2.0**-100, np.float32)  # subnormal result 2^-130
    w = np.full((1, 1, 1, 1), 2.0**-30, np.float32)
    assert tf_fp16ops.conv2d(x, w, 1, "VALID", accumulation="float32").numpy().ravel()[0] == 0.0


def test_half_accumulation_keeps_binary16_subnormals():
    rng = np.random.default_rng(5)
    # Products 2^-30 .. 2^-16 and sums in the binary16 subnormal range (< 2^-14).
    x = rng.integers(-7, 8, (2, 6, 6, 8)) * 2.0 ** rng.integers(-15, -9, (2, 6, 6, 8))
    w = rng.integers(-7, 8, (3, 3, 8, 5)) * 2.0 ** rng.integers(-15, -8, (3, 3, 8, 5))
    x, w = x.astype(np.float16), w.astype(np.float16)
    ref = R.conv2d(x, w, padding="SAME")
    subnormal = (ref != 0) & (np.abs(ref) < 2.0**-14)
    assert subnormal.mean() > 0.5
    for data in ("NHWC", "NCHW"):
        xin = x if data == "NHWC" else np.transpose(x, (0, 3, 1, 2))
        ours = tf_fp16ops.conv2d(
            xin, w, 1, "SAME", data_format=data, accumulation="float16"
        ).numpy()
        ours = ours if data == "NHWC" else np.transpose(ours, (0, 2, 3, 1))
        assert np.array_equal(ours.view(np.uint16), ref.view(np.uint16))
