"""The Fp16DepthwiseConv2D op (tf_fp16ops.depthwise_conv2d) that DepthwiseConv2D and
SeparableConv2D run: bit-exact against tests/support/reference.depthwise_conv2d (and its gradients
against the reference's grouped dgrad and wgrad) with float16 accumulation on every CPU
instruction-set path (TF_FP16OPS_CPU_ISA caps it, in a fresh process),
within fp32 rounding of tf.nn.depthwise_conv2d with float32 accumulation, and clear errors."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import tf_fp16ops
from support import reference
from tf_fp16ops import ops

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = r"""
import sys, numpy as np
sys.path.insert(0, {tests!r})
import tensorflow as tf
from support import reference as R
from tf_fp16ops import ops
rng = np.random.default_rng(11)
bad = compared = negzero = 0
for trial in range(10):
    c, m = int(rng.integers(1, 40)), int(rng.integers(1, 4))
    shape = (2, int(rng.integers(3, 9)), int(rng.integers(3, 9)), c)
    kh, kw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    s, d = (1 + trial % 2, 1 + trial % 3 // 2), (1 + trial % 4 // 3, 1)
    pad = "SAME" if trial % 2 else "VALID"
    if trial % 3 == 1:   # many binades: binary16 subnormals and midpoints
        x = rng.integers(-8, 8, shape) * 2.0 ** rng.integers(-20, 4, shape)
        w = rng.integers(-8, 8, (kh, kw, c, m)) * 2.0 ** rng.integers(-12, 6, (kh, kw, c, m))
    else:
        x, w = rng.normal(size=shape) * 30, rng.normal(size=(kh, kw, c, m))
    x, w = x.astype(np.float16), w.astype(np.float16)
    try:
        ref = R.depthwise_conv2d(x, w, s, d, pad, "half")
    except ValueError:
        continue
    if min(ref.shape) == 0:
        continue
    ours = ops.depthwise_conv2d(x, w, list(s), pad, list(d), accumulation="float16").numpy()
    same = (ours.view(np.uint16) == ref.view(np.uint16)) | (np.isnan(ours) & np.isnan(ref))
    bad += int((~same).sum())
    compared += same.size
    x32, w32 = x.astype(np.float32), w.astype(np.float32)
    ours32 = ops.depthwise_conv2d(x32, w32, list(s), pad, list(d), accumulation="float32").numpy()
    exact = R.depthwise_conv2d(x32.astype(np.float64), w32.astype(np.float64), s, d, pad, "float64")
    absum = R.depthwise_conv2d(np.abs(x32).astype(np.float64), np.abs(w32).astype(np.float64), s, d,
                               pad, "float64")
    bad += int((np.abs(ours32 - exact) > R.gamma_bound(kh * kw, absum, 2.0 ** -24)).sum())
# The gradients (the grouped dgrad and wgrad with one input channel per group, run by the
# channel-vectorized depthwise kernels): C and C*M across whole vectors and lane tails (8- and
# 16-lane vectors), widths that fill register tiles of rows and leave remainders, strides,
# dilations, both paddings; random dy (and binades) against the reference's dgrad and wgrad.
for trial in range(8):
    c, m = (8, 9, 17, 23, 16, 33, 5, 12)[trial], 1 + trial % 3
    shape = (2, int(rng.integers(3, 8)), (11, 13, 6, 9, 14, 5, 12, 7)[trial], c)
    kh, kw = 1 + trial % 3, 3 - trial % 2
    s, d = (1 + trial % 2, 1 + trial % 2), (1 + trial % 4 // 3, 1 + trial % 4 // 3)
    pad = "SAME" if trial % 2 == 0 else "VALID"
    if trial % 3 == 1:
        x = rng.integers(-8, 8, shape) * 2.0 ** rng.integers(-20, 4, shape)
        w = rng.integers(-8, 8, (kh, kw, c, m)) * 2.0 ** rng.integers(-12, 6, (kh, kw, c, m))
    else:
        x, w = rng.normal(size=shape) * 30, rng.normal(size=(kh, kw, c, m))
    x, w = x.astype(np.float16), w.astype(np.float16)
    try:
        yshape = R.depthwise_conv2d(x, w, s, d, pad, "half").shape
    except ValueError:
        continue
    if min(yshape) == 0:
        continue
    dy = rng.normal(size=yshape).astype(np.float16)
    if trial % 4 == 3:
        dy = rng.integers(-8, 8, yshape) * 2.0 ** rng.integers(-14, 2, yshape)
        dy = dy.astype(np.float16)
    xt, wt_ = tf.constant(x), tf.constant(w)
    with tf.GradientTape() as tape:
        tape.watch([xt, wt_])
        y = ops.depthwise_conv2d(xt, wt_, list(s), pad, list(d), accumulation="float16")
    dx, dw = tape.gradient(y, [xt, wt_], output_gradients=tf.constant(dy))
    wg = w.reshape(kh, kw, 1, c * m)
    ref_y = R.depthwise_conv2d(x, w, s, d, pad, "half")
    ref_dx = R.conv2d_backprop_input(x.shape, wg, dy, s, d, pad, "half")
    ref_dw = R.conv2d_backprop_filter(x, wg.shape, dy, s, d, pad, "half").reshape(w.shape)
    for got, ref in ((y.numpy(), ref_y), (dx.numpy(), ref_dx), (dw.numpy(), ref_dw)):
        same = (got.view(np.uint16) == ref.view(np.uint16)) | (np.isnan(got) & np.isnan(ref))
        bad += int((~same).sum())
        compared += same.size
# More than 512 taps (23x23): the kernels take the terms in chunks, the accumulators stored
# between them (as binary16 on the binary16-buffer path).
x = (rng.normal(size=(1, 24, 30, 19)) * 4).astype(np.float16)
w = rng.normal(size=(23, 23, 19, 1)).astype(np.float16)
ours = ops.depthwise_conv2d(x, w, 1, "VALID", accumulation="float16").numpy()
ref = R.depthwise_conv2d(x, w, (1, 1), (1, 1), "VALID", "half")
same = (ours.view(np.uint16) == ref.view(np.uint16)) | (np.isnan(ours) & np.isnan(ref))
bad += int((~same).sum())
compared += same.size
# Rows wide enough for several register tiles of output positions between the padded edges:
# strides, dilations, both paddings, a lane tail (37 channels), and an infinite filter value,
# whose padded terms (0 * inf) give NaN.
for kh, kw, s, d, pad, width in ((3, 3, 1, 1, "SAME", 41), (3, 5, 2, 1, "SAME", 40),
                                 (1, 3, 1, 3, "VALID", 45), (3, 3, 2, 2, "SAME", 50),
                                 (5, 5, 1, 1, "SAME", 30), (2, 7, 3, 1, "VALID", 38)):
    x = (rng.normal(size=(2, 5, width, 37)) * 30).astype(np.float16)
    w = rng.normal(size=(kh, kw, 37, 1)).astype(np.float16)
    w[0, 0, 3, 0] = np.inf
    ours = ops.depthwise_conv2d(x, w, s, pad, d, accumulation="float16").numpy()
    ref = R.depthwise_conv2d(x, w, (s, s), (d, d), pad, "half")
    same = (ours.view(np.uint16) == ref.view(np.uint16)) | (np.isnan(ours) & np.isnan(ref))
    bad += int((~same).sum())
    compared += same.size
# Gradients with more than 512 terms per output (the kernels take them in chunks, the
# accumulators stored between them, as binary16 on the binary16-buffer path): a 23x23 filter
# (dgrad: up to 529 taps per input element) and a 3x17x19 reduction (wgrad: 969 terms).
for shape, fshape, pad in (((1, 24, 30, 19), (23, 23, 19, 1), "VALID"),
                           ((3, 17, 19, 11), (1, 2, 11, 1), "SAME")):
    x = (rng.normal(size=shape) * 4).astype(np.float16)
    w = rng.normal(size=fshape).astype(np.float16)
    yshape = R.depthwise_conv2d(x, w, (1, 1), (1, 1), pad, "half").shape
    dy = rng.normal(size=yshape).astype(np.float16)
    xt, wt_ = tf.constant(x), tf.constant(w)
    with tf.GradientTape() as tape:
        tape.watch([xt, wt_])
        y = ops.depthwise_conv2d(xt, wt_, 1, pad, accumulation="float16")
    dx, dw = tape.gradient(y, [xt, wt_], output_gradients=tf.constant(dy))
    wg = w.reshape(fshape[0], fshape[1], 1, fshape[2])
    ref_dx = R.conv2d_backprop_input(x.shape, wg, dy, (1, 1), (1, 1), pad, "half")
    ref_dw = R.conv2d_backprop_filter(x, wg.shape, dy, (1, 1), (1, 1), pad, "half").reshape(fshape)
    for got, ref in ((dx.numpy(), ref_dx), (dw.numpy(), ref_dw)):
        same = (got.view(np.uint16) == ref.view(np.uint16)) | (np.isnan(got) & np.isnan(ref))
        bad += int((~same).sum())
        compared += same.size
# Stride 1 along W with one filter per channel (the AVX2 and AVX-512 sliding-window kernels of
# the forward pass, dgrad and wgrad, on float copies of the rows that the next output row
# reuses): blocks of 4 (AVX2) or 8 (AVX-512) outputs and remainders, a lane tail, rows of padding
# above and below, stride 2 and dilation 2 along H (2x3 with dilation 2: rows whose index mod KH
# repeats within one output row), and tiny binades whose steps underflow to -0 before padded
# (zero) terms turn them into +0 (forward) or stay -0 (dgrad skips the terms that do not exist).
# Channels: 19 (a 16-lane vector and a tail), 40 and 64 (wgrad's 32-lane blocks: whole blocks of
# two 16-lane vectors, then a tail block).
for kh, kw, sh, dh, pad, c in ((3, 3, 1, 1, "SAME", 19), (3, 5, 1, 2, "SAME", 40),
                               (2, 4, 1, 1, "VALID", 19), (2, 3, 1, 2, "SAME", 64),
                               (3, 3, 2, 1, "SAME", 40), (2, 3, 2, 2, "VALID", 19)):
    shape = (2, 6, 13, c)
    x = rng.integers(-8, 8, shape) * 2.0 ** rng.integers(-24, -8, shape)
    w = rng.integers(-8, 8, (kh, kw, c, 1)) * 2.0 ** rng.integers(-8, 0, (kh, kw, c, 1))
    x, w = x.astype(np.float16), w.astype(np.float16)
    ref = R.depthwise_conv2d(x, w, (sh, 1), (dh, 1), pad, "half")
    dy = rng.integers(-8, 8, ref.shape) * 2.0 ** rng.integers(-24, -8, ref.shape)
    dy = dy.astype(np.float16)
    xt, wt_ = tf.constant(x), tf.constant(w)
    with tf.GradientTape() as tape:
        tape.watch([xt, wt_])
        y = ops.depthwise_conv2d(xt, wt_, [sh, 1], pad, [1, dh, 1, 1], accumulation="float16")
    dx, dw = tape.gradient(y, [xt, wt_], output_gradients=tf.constant(dy))
    wg = w.reshape(kh, kw, 1, c)
    ref_dx = R.conv2d_backprop_input(x.shape, wg, dy, (sh, 1), (dh, 1), pad, "half")
    ref_dw = R.conv2d_backprop_filter(x, wg.shape, dy, (sh, 1), (dh, 1), pad, "half")
    ref_dw = ref_dw.reshape(w.shape)
    for got, want in ((y.numpy(), ref), (dx.numpy(), ref_dx), (dw.numpy(), ref_dw)):
        same = got.view(np.uint16) == want.view(np.uint16)
        bad += int((~same).sum())
        compared += same.size
        negzero += int(((want == 0) & np.signbit(want)).sum())
# The fused forms (the op's float32 operands with Tacc=half, and its bias): float32 operands
# rounded to float16 by NumPy (to nearest even: midpoints, values beyond 65504 -> inf, float32
# subnormals -> 0) before the reference's float16 sum, which is returned as float32; a bias added
# to the float32 result in float32, or to the float16 result in float32 and rounded to float16
# (TensorFlow's float16 BiasAdd computes in float32). Sliding-window shapes (the rounding and
# the bias in the kernel's loads and stores), strided and dilated ones (a float16 copy of the
# input, the bias after each output row), a multiplier of 2 (the binary32 route); the gradients
# against the reference's float16 dgrad/wgrad of the rounded operands, widened, and the bias's
# as the sum of dy over (n, p, q).
for kh, kw, s, d, pad, c, m in ((3, 3, 1, 1, "SAME", 19, 1), (3, 3, 1, 1, "SAME", 64, 1),
                                (3, 5, 2, 1, "SAME", 40, 1), (2, 3, 1, 2, "VALID", 17, 1),
                                (3, 3, 1, 1, "SAME", 6, 2), (1, 1, 1, 1, "VALID", 33, 1)):
    shape = (2, 5, 23, c)
    x = rng.normal(size=shape) * 30
    x.flat[::7] = rng.integers(-2047, 2048, x.size)[::7] * 2.0 ** -12 + 2.0 ** -13  # midpoints
    x.flat[3::11] = rng.integers(-9, 9, x.flat[3::11].size) * 2.0**-140  # float32 subnormals
    x.flat[5::13] = 65520.0 * np.sign(rng.normal(size=x.flat[5::13].size))  # rounds to +-inf
    x = x.astype(np.float32)
    w = rng.normal(size=(kh, kw, c, m)).astype(np.float32)
    b = (rng.normal(size=c * m) * 4).astype(np.float32)
    x16, w16, b16 = x.astype(np.float16), w.astype(np.float16), b.astype(np.float16)
    ref16 = R.depthwise_conv2d(x16, w16, (s, s), (d, d), pad, "half")
    dy = rng.normal(size=ref16.shape).astype(np.float32)
    xt, wt_, bt, bt16 = tf.constant(x), tf.constant(w), tf.constant(b), tf.constant(b16)
    s4, d4 = [1, s, s, 1], [1, d, d, 1]
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([xt, wt_, bt])
        y32 = ops._depthwise_op(xt, wt_, None, tf.float16, s4, pad, d4)
        y32b = ops._depthwise_op(xt, wt_, bt, tf.float16, s4, pad, d4)
    y16b = ops.depthwise_conv2d(x16, w16, s, pad, d, bias=bt16).numpy()
    want16b = (ref16.astype(np.float32) + b16.astype(np.float32)).astype(np.float16)
    dx, dw, db = tape.gradient(y32b, [xt, wt_, bt], output_gradients=tf.constant(dy))
    wg = w16.reshape(kh, kw, 1, c * m)
    dy16 = dy.astype(np.float16)
    ref_dx = R.conv2d_backprop_input(x.shape, wg, dy16, (s, s), (d, d), pad, "half")
    ref_dw = R.conv2d_backprop_filter(x16, wg.shape, dy16, (s, s), (d, d), pad, "half")
    for got, want in ((y32.numpy(), ref16.astype(np.float32)),
                      (y32b.numpy(), ref16.astype(np.float32) + b),
                      (y16b, want16b),
                      (dx.numpy(), ref_dx.astype(np.float32)),
                      (dw.numpy(), ref_dw.reshape(w.shape).astype(np.float32))):
        same = (got == want) | (np.isnan(got) & np.isnan(want))
        same &= np.isnan(want) | (np.signbit(got) == np.signbit(want))  # -0 vs +0; NaN's sign free
        bad += int((~same).sum())
        compared += same.size
    # float32 sums of dy: ordering may differ from NumPy's; within a few ulps of the exact sum
    exact_db = dy.astype(np.float64).sum(axis=(0, 1, 2))
    bad += int((np.abs(db.numpy() - exact_db) > 1e-5 * np.abs(dy).sum(axis=(0, 1, 2))).sum())
print("isa", ops.cpu_isa())
print("negzero", negzero)
print("compared", compared)
print("mismatches", bad)
"""


def test_float16_bit_exact_native_isa_path(capsys):
    exec(SCRIPT.format(tests=TESTS), {})  # this process: the best path of the CPU
    out = dict(line.split(" ", 1) for line in capsys.readouterr().out.splitlines() if " " in line)
    assert out["mismatches"] == "0" and int(out["compared"]) > 1000, out
    assert int(out["negzero"]) > 0, out  # the -0 results the sliding-window case is there for


@pytest.mark.parametrize("isa", ["avx512", "avx2", "scalar"])
def test_float16_bit_exact_capped_isa_path(isa):
    env = dict(os.environ, TF_FP16OPS_CPU_ISA=isa)
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(tests=TESTS)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if " " in line)
    if isa != "scalar" and lines["isa"] != isa:
        pytest.skip(f"this CPU has no {isa} path (runs {lines['isa']})")
    assert lines["isa"] == isa and lines["mismatches"] == "0" and int(lines["compared"]) > 1000


def test_same_bits_as_grouped_conv2d():
    rng = np.random.default_rng(3)
    x = (rng.normal(size=(2, 9, 7, 5)) * 10).astype(np.float16)
    w = rng.normal(size=(3, 3, 5, 2)).astype(np.float16)
    ours = ops.depthwise_conv2d(x, w, 2, "SAME", accumulation="float16").numpy()
    grouped = ops.conv2d(x, w.reshape(3, 3, 1, 10), 2, "SAME", accumulation="float16").numpy()
    np.testing.assert_array_equal(ours.view(np.uint16), grouped.view(np.uint16))


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_float32_accumulation_matches_tf(dtype):
    rng = np.random.default_rng(4)
    x = rng.normal(size=(2, 8, 8, 6)).astype(dtype)
    w = rng.normal(size=(3, 3, 6, 2)).astype(dtype)
    ours = ops.depthwise_conv2d(x, w, 1, "SAME", dilations=2, accumulation="float32").numpy()
    exact = reference.depthwise_conv2d(
        x.astype(np.float64), w.astype(np.float64), (1, 1), (2, 2), "SAME", "float64"
    )
    # float32: 9 terms, gamma_9 * sum|x w| <= 9 * 2^-24 * sum|x w|; float16 output: one rounding.
    absum = reference.depthwise_conv2d(
        np.abs(x).astype(np.float64),
        np.abs(w).astype(np.float64),
        (1, 1),
        (2, 2),
        "SAME",
        "float64",
    )
    u = 2.0**-24 if dtype == "float32" else 2.0**-11
    assert np.all(np.abs(ours - exact) <= 10 * 2.0**-24 * absum + u * np.abs(exact) + 2.0**-24)
    tf_out = tf.nn.depthwise_conv2d(
        x.astype("float32"), w.astype("float32"), [1, 1, 1, 1], "SAME", dilations=[2, 2]
    ).numpy()
    assert np.abs(ours.astype(np.float64) - tf_out).max() <= 2 * u * np.abs(tf_out).max()


def test_layer_runs_the_op():
    layer = tf_fp16ops.layers.DepthwiseConv2D(3, accumulation="float16")
    graph = tf.function(layer).get_concrete_function(tf.TensorSpec([1, 5, 5, 4], tf.float32)).graph
    types = [o.type for o in graph.get_operations()]
    assert "Fp16DepthwiseConv2D" in types and "Fp16Conv2D" not in types


def test_bad_inputs():
    x16 = np.ones((1, 5, 5, 3), np.float16)
    w16 = np.ones((3, 3, 3, 1), np.float16)
    with pytest.raises(ValueError, match=r"accumulation='float16' needs float16 inputs"):
        ops.depthwise_conv2d(x16.astype("float32"), w16.astype("float32"), 1, "VALID")
    raw = dict(Tacc=tf.float16, strides=[1, 1, 1, 1], padding="VALID", dilations=[1, 1, 1, 1])
    with pytest.raises(tf.errors.InvalidArgumentError, match="num_bias must be 0 or 1, got 2"):
        ops._ops.fp16_depthwise_conv2d(x16, w16, [np.ones(3, np.float16)] * 2, **raw)
    for bias, message in (
        (np.ones(2, np.float16), r"bias must be 1-D with C\*M = 3 elements .*got shape \[2\]"),
        (np.ones((1, 3), np.float16), r"bias must be 1-D.*\[1,3\]"),
    ):
        with pytest.raises((tf.errors.InvalidArgumentError, ValueError), match=message):
            ops.depthwise_conv2d(x16, w16, 1, "VALID", bias=bias)

        # The kernel's own check, where the graph does not know the bias's size.
        @tf.function(input_signature=[tf.TensorSpec(None, tf.float16)])
        def unknown(b):
            return ops.depthwise_conv2d(x16, w16, 1, "VALID", bias=b)

        with pytest.raises(tf.errors.InvalidArgumentError, match=message):
            unknown(bias)
    with pytest.raises(ValueError, match="bias must have the dtype of input"):
        ops.depthwise_conv2d(x16, w16, 1, "VALID", bias=np.ones(3, np.float32))
    # A Python list takes the input's dtype, as with tf.nn.bias_add: 9 ones + 0.5 (hand sum).
    y = ops.depthwise_conv2d(x16, w16, 1, "VALID", bias=[0.5, 0.5, 0.5]).numpy()
    assert y.dtype == np.float16 and np.all(y == 9.5)
    with pytest.raises(
        (tf.errors.InvalidArgumentError, ValueError), match="must equal the input channels"
    ):
        ops.depthwise_conv2d(x16, np.ones((3, 3, 2, 1), np.float16), 1, "VALID")
    with pytest.raises((tf.errors.InvalidArgumentError, ValueError), match="rank 4|4-D"):
        ops.depthwise_conv2d(x16[0], w16, 1, "VALID")
    with pytest.raises(ValueError, match="padding must be 'SAME' or 'VALID', got 'EXPLICIT'"):
        ops.depthwise_conv2d(x16, w16, 1, "EXPLICIT")
    with pytest.raises(ValueError, match="strides must be"):
        ops.depthwise_conv2d(x16, w16, "2", "VALID")
    with pytest.raises((tf.errors.InvalidArgumentError, ValueError), match="strides"):
        ops.depthwise_conv2d(x16, w16, [0, 1], "VALID")
    with pytest.raises((tf.errors.InvalidArgumentError, ValueError)):
        ops.depthwise_conv2d(x16, np.ones((7, 7, 3, 1), np.float16), 1, "VALID")  # output size <= 0
    with pytest.raises(
        ValueError, match=r"filter must have the dtype of input \(float16\), got float32"
    ):
        ops.depthwise_conv2d(x16, w16.astype("float32"), 1, "VALID")


def _tf_static_shape(x_shape, w_shape, strides, padding):
    # TensorFlow's shape function for tf.nn.depthwise_conv2d (its eager CPU kernel returns an
    # input-shaped empty tensor instead for an empty input, so the graph shape is the reference).
    fn = tf.function(lambda a, b: tf.nn.depthwise_conv2d(a, b, strides, padding))
    spec = [tf.TensorSpec(x_shape, tf.float16), tf.TensorSpec(w_shape, tf.float16)]
    return tuple(fn.get_concrete_function(*spec).structured_outputs.shape)


EMPTY = [  # (input, filter, padding): zero H (SAME), zero batch, zero channels, zero multiplier
    ((1, 0, 4, 3), (3, 3, 3, 2), "SAME"),
    ((1, 4, 0, 3), (3, 3, 3, 2), "SAME"),
    ((0, 5, 5, 3), (3, 3, 3, 2), "SAME"),
    ((0, 5, 5, 3), (3, 3, 3, 2), "VALID"),
    ((1, 5, 5, 0), (3, 3, 0, 2), "SAME"),
    ((1, 5, 5, 3), (3, 3, 3, 0), "VALID"),
]


@pytest.mark.parametrize("x_shape,w_shape,padding", EMPTY)
@pytest.mark.parametrize("accumulation", ["float16", "float32"])
def test_empty_outputs_as_tf(x_shape, w_shape, padding, accumulation):
    expected = _tf_static_shape(x_shape, w_shape, [1, 1, 1, 1], padding)
    assert 0 in expected
    x = tf.constant(np.ones(x_shape, np.float16))
    w = tf.constant(np.ones(w_shape, np.float16))
    with tf.GradientTape() as tape:
        tape.watch([x, w])
        y = ops.depthwise_conv2d(x, w, 1, padding, accumulation=accumulation)
    assert tuple(y.shape) == expected
    dx, dw = tape.gradient(y, [x, w])
    assert dx.shape == x.shape and dw.shape == w.shape
    assert not np.any(dx.numpy()) and not np.any(dw.numpy())
    graph_shape = tf.function(
        lambda a, b: ops.depthwise_conv2d(a, b, 1, padding, accumulation=accumulation)
    ).get_concrete_function(tf.TensorSpec(x_shape, tf.float16), tf.TensorSpec(w_shape, tf.float16))
    assert tuple(graph_shape.structured_outputs.shape) == expected
    # the grouped conv2d (groups = C, filter [KH, KW, 1, C*M]) agrees where it accepts the sizes
    if x_shape[3] > 0:
        wg = np.ones(w_shape[:2] + (1, w_shape[2] * w_shape[3]), np.float16)
        yg = ops.conv2d(x, wg, 1, padding, accumulation=accumulation)
        assert tuple(yg.shape) == expected


def test_sizes_tf_rejects():
    x = np.ones((1, 2, 2, 3), np.float16)
    with pytest.raises(ValueError):  # TF's shape function rejects it too
        _tf_static_shape((1, 2, 2, 3), (3, 3, 3, 2), [1, 1, 1, 1], "VALID")
    with pytest.raises(tf.errors.InvalidArgumentError, match="output height would be below 1"):
        ops.depthwise_conv2d(x, np.ones((3, 3, 3, 2), np.float16), 1, "VALID")
    with pytest.raises(tf.errors.InvalidArgumentError, match="filter sizes .* must be positive"):
        ops.depthwise_conv2d(x, np.ones((0, 3, 3, 2), np.float16), 1, "SAME")


UNKNOWN_SCRIPT = r"""
import numpy as np, tensorflow as tf
from tf_fp16ops import ops
spec = [tf.TensorSpec([None, None, None, 3], tf.float16), tf.TensorSpec([3, 3, None, None],
        tf.float16)]
@tf.function(input_signature=spec)
def f(x, w):
    with tf.GradientTape() as tape:
        tape.watch([x, w])
        y = ops.depthwise_conv2d(x, w, 2, "SAME")
    return (y,) + tuple(tape.gradient(y, [x, w]))
print("static", f.get_concrete_function().structured_outputs[0].shape)
for xs, ws in [((1, 0, 4, 3), (3, 3, 3, 2)), ((2, 5, 5, 3), (3, 3, 3, 0)), ((0, 5, 5, 3),
               (3, 3, 3, 1)), ((1, 5, 5, 3), (3, 3, 3, 1))]:
    y, dx, dw = f(np.ones(xs, np.float16), np.ones(ws, np.float16))
    print("shapes", tuple(y.shape), tuple(dx.shape), tuple(dw.shape))
"""


def test_unknown_dims_in_graph_mode():
    out = subprocess.run(
        [sys.executable, "-c", UNKNOWN_SCRIPT], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith(("static", "shapes"))]
    assert lines == [
        "static (None, None, None, None)",
        "shapes (1, 0, 2, 6) (1, 0, 4, 3) (3, 3, 3, 2)",
        "shapes (2, 3, 3, 0) (2, 5, 5, 3) (3, 3, 3, 0)",
        "shapes (0, 3, 3, 3) (0, 5, 5, 3) (3, 3, 3, 1)",
        "shapes (1, 3, 3, 3) (1, 5, 5, 3) (3, 3, 3, 1)",
    ]
