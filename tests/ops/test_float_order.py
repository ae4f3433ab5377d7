"""Tacc=float on the CPU: one binary32 FMA per term from +0, in the order of the Tacc=half contract
(fprop (kh, kw, ci), dgrad (kh, kw, out_channel), wgrad (n, p, q), ascending), on every
instruction-set path, bit for bit against the sequential float32 reference of
tests/support/reference.py (README "Numerics"): the op library's kernels themselves (`raw_ops`),
since float32 calls of `tf_fp16ops.conv2d` may run TensorFlow's own op
(tests/ops/test_stock_route.py). The operands are binary16 values, whose partial sums are inexact
in binary32, so another order or tile shape of the sums would change bits (checked: the
sequential float32 result differs from the correctly rounded exact sum somewhere in every case)."""

import pytest

from support.cpu_features import run_on_isa

SCRIPT = r"""
import sys, numpy as np
sys.path.insert(0, {tests!r})
import tf_fp16ops
from tf_fp16ops.ops import _conv_attrs, raw_ops
from support import reference as R
rng = np.random.default_rng(11)
# (x NHWC, w HWIO, strides, dilations, padding): row tiles of 12 and 8 positions with borders,
# 1, 2 and 3 vectors of 16 (AVX2: 8) output channels with lane tails, groups, strides and dilations.
CASES = [
    ((2, 9, 31, 16), (3, 3, 16, 16), 1, 1, "SAME"),
    ((1, 6, 30, 48), (3, 3, 48, 40), 1, 1, "VALID"),
    ((1, 5, 29, 32), (1, 1, 32, 128), 1, 1, "VALID"),
    ((2, 7, 26, 24), (3, 2, 12, 34), 2, 1, [[0, 0], [1, 2], [0, 3], [0, 0]]),
    ((1, 8, 27, 8), (3, 3, 8, 50), 1, 2, "SAME"),
    # 116 output channels: AVX2's 3-vector blocks of 24 lanes, the last one masked (20 lanes).
    ((1, 6, 13, 20), (3, 3, 20, 116), 1, 1, "SAME"),
]
bad = vacuous = 0
for xs, ws, s, d, pad in CASES:
    x = rng.uniform(-1, 1, xs).astype(np.float16).astype(np.float32)
    w = rng.uniform(-1, 1, ws).astype(np.float16).astype(np.float32)
    rpad = pad if isinstance(pad, str) else (tuple(pad[1]), tuple(pad[2]))
    kw = dict(strides=(s, s), dilations=(d, d), padding=rpad)
    a = _conv_attrs(s, pad, "NHWC", d, "float32")
    y = raw_ops.fp16_conv2d(x, w, **a).numpy()
    ref = R.conv2d(x, w, accumulation="float32", **kw)
    bad += int((y.view(np.uint32) != ref.view(np.uint32)).sum())
    exact = R.conv2d(x, w, accumulation="float64", **kw).astype(np.float32)
    vacuous += int(np.array_equal(ref, exact))
    dy = rng.uniform(-1, 1, y.shape).astype(np.float16).astype(np.float32)
    dx = raw_ops.fp16_conv2d_backprop_input(np.array(xs, np.int32), w, dy, **a).numpy()
    ref = R.conv2d_backprop_input(xs, w, dy, accumulation="float32", **kw)
    bad += int((dx.view(np.uint32) != ref.view(np.uint32)).sum())
    dw = raw_ops.fp16_conv2d_backprop_filter(x, np.array(ws, np.int32), dy, **a).numpy()
    ref = R.conv2d_backprop_filter(x, ws, dy, accumulation="float32", **kw)
    bad += int((dw.view(np.uint32) != ref.view(np.uint32)).sum())
print("isa", tf_fp16ops.ops.cpu_isa())
print("vacuous", vacuous)
print("mismatches", bad)
"""


@pytest.mark.parametrize("isa", ["avx512fp16", "avx512", "avx2", "scalar"])
def test_float_accumulation_order_is_the_documented_one(isa):
    lines = run_on_isa(SCRIPT, isa)
    assert lines == [f"isa {isa}", "vacuous 0", "mismatches 0"]
