"""Every CPU instruction-set path (AVX512-FP16, AVX-512, AVX2, scalar) is bit-exact against the
NumPy reference: each runs in a fresh process with TF_FP16OPS_CPU_ISA capping the path. The
ops run on TensorFlow's threads, which set MXCSR.FTZ/DAZ: the "binades" trials (binary16
subnormal products, sums and results) show that the fp16 path does not depend on them."""

import pytest

from support.cpu_features import run_on_isa

SCRIPT = r"""
import sys, numpy as np
sys.path.insert(0, {tests!r})
import tf_fp16ops
from support import reference as R
rng = np.random.default_rng(7)
bad = 0
for trial in range(15):
    c, k = int(rng.integers(1, 40)), int(rng.integers(1, 40))
    if trial >= 12:  # lane tails of the 32-lane FP16 blocks: 16, 17..31, 33..48
        k = (16, 23, 41)[trial - 12]
    shape = (2, int(rng.integers(3, 8)), int(rng.integers(3, 8)), c)
    if trial % 3 == 0:
        x, w = rng.random(shape), rng.random((3, 3, c, k)) - 0.5
    elif trial % 3 == 1:   # many binades: binary16 subnormals and midpoints
        x = rng.integers(-8, 8, shape) * 2.0 ** rng.integers(-20, 4, shape)
        w = rng.integers(-8, 8, (3, 3, c, k)) * 2.0 ** rng.integers(-12, 6, (3, 3, c, k))
    else:
        x, w = rng.integers(0, 2049, shape), rng.integers(-3, 4, (3, 3, c, k))
    x, w = x.astype(np.float16), w.astype(np.float16)
    for acc in ("float16", "float32"):
        ours = tf_fp16ops.conv2d(x, w, 1, "SAME", accumulation=acc).numpy()
        if acc == "float16":
            ref = R.conv2d(x, w, padding="SAME")
            same = (ours.view(np.uint16) == ref.view(np.uint16)) | (np.isnan(ours) & np.isnan(ref))
            bad += int((~same).sum())
        else:
            x64, w64 = x.astype(np.float64), w.astype(np.float64)
            ref = R.conv2d(x64, w64, padding="SAME", accumulation="float64")
            absr = R.conv2d(np.abs(x64), np.abs(w64), padding="SAME", accumulation="float64")
            bound = R.gamma_bound(9 * c, absr, 2.0 ** -24) + np.maximum(
                np.abs(ref) * 2.0 ** -11, 2.0 ** -25
            ) * 1.001
            ok = np.abs(ours.astype(np.float64) - ref) <= bound
            bad += int((~ok[np.isfinite(ref) & (np.abs(ref) < 65504)]).sum())
print("isa", tf_fp16ops.ops.cpu_isa())
print("mismatches", bad)
"""


@pytest.mark.parametrize("isa", ["avx512fp16", "avx512", "avx2", "scalar"])
def test_isa_path_is_exact(isa):
    lines = run_on_isa(SCRIPT, isa)
    assert lines == [f"isa {isa}", "mismatches 0"]


PADDING_SCRIPT = r"""
import numpy as np
import tf_fp16ops
# Padded positions are zero terms of the sum (README "Numerics"), so an infinite weight that
# meets padding gives 0 * inf = NaN, on the contiguous-row path (border tiles read a zero-padded
# copy of their window) and on the per-tap path (dilation 2). Expected values by hand.
# 1 x 4 row of ones, filter [inf, 1, 1], SAME: q=0 meets a padded column with the inf tap;
# q=1..3 see inf + 1 + 1 or inf + 1 + 0 * 1.
# 2 x 2 ones, 3x3 filter of ones with inf at (0, 0), SAME: only output (1, 1) puts the inf tap
# inside the input (inf + three ones); the others meet it on padding.
# The same 2 x 2 case with dilation 2 (effective 5x5, SAME): the inf tap reads x[p-2, q-2],
# always padding, so every output is NaN.
cases = [
    ((1, 1, 4, 1), np.array([np.inf, 1, 1]).reshape(1, 3, 1, 1), 1,
     [[np.nan, np.inf, np.inf, np.inf]]),
    ((1, 2, 2, 1), np.where(np.arange(9).reshape(3, 3, 1, 1) == 0, np.inf, 1.0), 1,
     [[np.nan, np.nan], [np.nan, np.inf]]),
    ((1, 2, 2, 1), np.where(np.arange(9).reshape(3, 3, 1, 1) == 0, np.inf, 1.0), 2,
     [[np.nan, np.nan], [np.nan, np.nan]]),
]
bad = 0
for xs, w, d, expected in cases:
    expected = np.array(expected)
    for acc, dt in (("float16", np.float16), ("float32", np.float16), ("float32", np.float32)):
        y = tf_fp16ops.conv2d(np.ones(xs, dt), w.astype(dt), 1, "SAME", dilations=d,
                              accumulation=acc).numpy()[0, :, :, 0].astype(np.float64)
        same = (y == expected) | (np.isnan(y) & np.isnan(expected))
        bad += int((~same).sum())
print("isa", tf_fp16ops.ops.cpu_isa())
print("mismatches", bad)
"""


@pytest.mark.parametrize("isa", ["avx512fp16", "avx512", "avx2", "scalar"])
def test_an_infinite_weight_meeting_padding_gives_nan(isa):
    lines = run_on_isa(PADDING_SCRIPT, isa)
    assert lines == [f"isa {isa}", "mismatches 0"]


# Forward windows whose kernel rows all lie inside x (VALID, or the interior of SAME, over
# several position tiles per output row): the contiguous-row path sums a tile's KH kernel rows in
# one call, their terms dilation_h rows of x apart. Strides and dilations along H, KH up to 5,
# output channels with 32-lane blocks and 8/16-lane rests, and windows of KW * C terms below and
# above what one block of the AVX2 kernels holds. Bits against the NumPy reference.
WINDOW_SCRIPT = r"""
import sys, numpy as np
sys.path.insert(0, {tests!r})
import tf_fp16ops
from support import reference as R
rng = np.random.default_rng(11)
bad = 0
#        C,  K, KH, KW, sh, dh, sw, padding
cases = [(16, 16, 3, 3, 1, 1, 1, "VALID"),
         (16, 16, 3, 3, 2, 2, 1, "SAME"),
         (5, 23, 5, 2, 1, 2, 2, "VALID"),
         (40, 40, 5, 3, 2, 1, 1, "VALID"),
         (64, 24, 3, 3, 1, 2, 1, "SAME"),
         (7, 48, 2, 4, 1, 3, 1, "VALID"),
         (3, 9, 4, 1, 1, 1, 1, "SAME")]
for trial, (c, k, kh, kw, sh, dh, sw, pad) in enumerate(cases):
    shape = (2, (kh - 1) * dh + 1 + 4 * sh, 21, c)
    kind = trial % 3
    if kind == 0:
        x, w = rng.random(shape), rng.random((kh, kw, c, k)) - 0.5
    elif kind == 1:   # many binades: binary16 subnormals and midpoints
        x = rng.integers(-8, 8, shape) * 2.0 ** rng.integers(-20, 4, shape)
        w = rng.integers(-8, 8, (kh, kw, c, k)) * 2.0 ** rng.integers(-12, 6, (kh, kw, c, k))
    else:
        x, w = rng.integers(0, 2049, shape), rng.integers(-3, 4, (kh, kw, c, k))
    x, w = x.astype(np.float16), w.astype(np.float16)
    ours = tf_fp16ops.conv2d(x, w, [sh, sw], pad, dilations=[dh, 1]).numpy()
    ref = R.conv2d(x, w, strides=(sh, sw), dilations=(dh, 1), padding=pad)
    same = (ours.view(np.uint16) == ref.view(np.uint16)) | (np.isnan(ours) & np.isnan(ref))
    bad += int((~same).sum())
print("isa", tf_fp16ops.ops.cpu_isa())
print("mismatches", bad)
"""


@pytest.mark.parametrize("isa", ["avx512fp16", "avx512", "avx2", "scalar"])
def test_fprop_windows_inside_the_input_are_exact(isa):
    lines = run_on_isa(WINDOW_SCRIPT, isa)
    assert lines == [f"isa {isa}", "mismatches 0"]
