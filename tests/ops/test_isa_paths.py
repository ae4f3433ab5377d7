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
        # The op library's kernel itself (float32 with Tacc=float may go to oneDNN through
        # tf_fp16ops.conv2d, which skips padded terms: README "Numerics").
        attrs = tf_fp16ops.ops._conv_attrs(1, "SAME", "NHWC", d, acc)
        y = tf_fp16ops.ops.raw_ops.fp16_conv2d(np.ones(xs, dt), w.astype(dt), **attrs)
        y = y.numpy()[0, :, :, 0].astype(np.float64)
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


# Output channels as lanes (on AVX512-FP16 the NHWC kernel for K / groups >= 32, which reads x
# in place and points padded taps at zeros): strides, dilations, explicit padding, groups, 1x1,
# one input channel, output positions that end mid register tile, 32-lane blocks with rests;
# infinities and NaN among the operands, and an infinite weight that meets padding (0 * inf
# gives NaN, as on every other path). Bits against the NumPy reference on every path.
CHANNEL_LANES_SCRIPT = r"""
import sys, numpy as np
sys.path.insert(0, {tests!r})
import tf_fp16ops
from support import reference as R
rng = np.random.default_rng(17)
bad = 0
#        N, H, W, C, groups, K, KH, KW, strides, dilations, padding
cases = [(2, 7, 9, 12, 1, 32, 3, 3, (1, 1), (1, 1), "SAME"),
         (1, 6, 11, 5, 1, 33, 3, 2, (2, 1), (1, 1), "VALID"),
         (2, 9, 8, 16, 2, 96, 3, 3, (1, 1), (2, 2), "SAME"),
         (1, 5, 13, 40, 1, 130, 1, 1, (1, 1), (1, 1), "VALID"),
         (1, 8, 7, 1, 1, 64, 2, 3, (1, 2), (1, 1), ((1, 2), (0, 3))),
         (3, 5, 5, 24, 3, 300, 3, 3, (2, 2), (1, 1), "SAME"),
         (1, 9, 6, 9, 1, 100, 5, 1, (1, 1), (1, 1), "SAME"),
         (2, 4, 4, 32, 1, 128, 3, 3, (1, 1), (1, 1), "SAME")]
for trial, (n, h, wd, c, groups, k, kh, kw, st, dl, pad) in enumerate(cases):
    xs, ws = (n, h, wd, c), (kh, kw, c // groups, k)
    kind = trial % 4
    if kind == 0:
        x, w = rng.random(xs), rng.random(ws) - 0.5
    elif kind == 1:   # many binades: binary16 subnormals and midpoints
        x = rng.integers(-8, 8, xs) * 2.0 ** rng.integers(-20, 4, xs)
        w = rng.integers(-8, 8, ws) * 2.0 ** rng.integers(-12, 6, ws)
    elif kind == 2:   # integers: sums on binary16 midpoints, overflow to inf
        x, w = rng.integers(0, 2049, xs), rng.integers(-3, 4, ws)
    else:             # infinities and NaN; an infinite weight meets padding
        x, w = rng.random(xs) * 3e4, rng.integers(-2, 3, ws).astype(np.float64)
        x.reshape(-1)[rng.integers(0, x.size, 2)] = (np.inf, np.nan)
        w[0, 0, 0, 1] = np.inf
    x, w = x.astype(np.float16), w.astype(np.float16)
    padding = pad if isinstance(pad, str) else [[0, 0], list(pad[0]), list(pad[1]), [0, 0]]
    ours = tf_fp16ops.conv2d(x, w, list(st), padding, dilations=list(dl)).numpy()
    ref = R.conv2d(x, w, strides=st, dilations=dl, padding=pad)
    same = (ours.view(np.uint16) == ref.view(np.uint16)) | (np.isnan(ours) & np.isnan(ref))
    bad += int((~same).sum())
    if kind == 3:
        bad += int(not np.isnan(ref).any())  # the case must reach 0 * inf
print("isa", tf_fp16ops.ops.cpu_isa())
print("mismatches", bad)
"""


@pytest.mark.parametrize("isa", ["avx512fp16", "avx512", "avx2", "scalar"])
def test_output_channel_lanes_are_exact(isa):
    lines = run_on_isa(CHANNEL_LANES_SCRIPT, isa)
    assert lines == [f"isa {isa}", "mismatches 0"]


# Forward convolutions with fewer than 32 output channels per group and stride 1 (on
# AVX512-FP16 the spatial kernel, which cuts each image into bands of output rows of about 768
# positions and lays out each band's input rows, halo included, on its own): several bands per
# image with padding rows above, below and between, dilated halos, groups, explicit padding,
# tall filters, a last band shorter than the others; infinities and NaN near band borders. Bits
# against the NumPy reference on every path.
SPATIAL_BANDS_SCRIPT = r"""
import sys, numpy as np
sys.path.insert(0, {tests!r})
import tf_fp16ops
from support import reference as R
rng = np.random.default_rng(23)
bad = 0
#        N, H, W, groups, Cg, K, KH, KW, dilation, padding
cases = [(2, 40, 30, 1, 5, 12, 3, 3, (2, 1), "SAME"),
         (3, 64, 40, 1, 16, 16, 3, 3, (1, 1), "VALID"),
         (1, 33, 50, 2, 4, 16, 5, 5, (1, 1), "SAME"),
         (2, 50, 20, 1, 3, 20, 3, 2, (1, 2), ((3, 1), (0, 2))),
         (1, 90, 9, 1, 2, 5, 7, 1, (1, 1), "SAME"),
         (2, 29, 61, 3, 7, 30, 2, 3, (3, 1), ((0, 4), (2, 0)))]
for trial, (n, h, wd, groups, cg, k, kh, kw, d, pad) in enumerate(cases):
    xs, ws = (n, h, wd, cg * groups), (kh, kw, cg, k)
    kind = trial % 3
    if kind == 0:
        x, w = rng.random(xs), rng.random(ws) - 0.5
    elif kind == 1:   # many binades: binary16 subnormals and midpoints
        x = rng.integers(-8, 8, xs) * 2.0 ** rng.integers(-20, 4, xs)
        w = rng.integers(-8, 8, ws) * 2.0 ** rng.integers(-12, 6, ws)
    else:             # infinities and NaN on rows near band borders
        x, w = rng.random(xs) * 3e4, rng.integers(-2, 3, ws).astype(np.float64)
        x[0, h // 2, 1, 0], x[-1, h // 3, -1, -1], x[0, -1, 0, 0] = np.inf, np.nan, -np.inf
    x, w = x.astype(np.float16), w.astype(np.float16)
    padding = pad if isinstance(pad, str) else [[0, 0], list(pad[0]), list(pad[1]), [0, 0]]
    ours = tf_fp16ops.conv2d(x, w, 1, padding, dilations=list(d)).numpy()
    ref = R.conv2d(x, w, dilations=d, padding=pad)
    same = (ours.view(np.uint16) == ref.view(np.uint16)) | (np.isnan(ours) & np.isnan(ref))
    bad += int((~same).sum())
print("isa", tf_fp16ops.ops.cpu_isa())
print("mismatches", bad)
"""


@pytest.mark.parametrize("isa", ["avx512fp16", "avx512", "avx2", "scalar"])
def test_spatial_bands_are_exact(isa):
    lines = run_on_isa(SPATIAL_BANDS_SCRIPT, isa)
    assert lines == [f"isa {isa}", "mismatches 0"]


# The dgrad with input channels as lanes (on AVX512-FP16 the NHWC kernel for Cg >= 32, which
# reads dy in place and takes no step for a tap that reaches no output position): strides 2 and
# 3 (input positions that only some taps reach), dilations, groups, 32-lane blocks with rests,
# positions that end mid register tile; infinities and NaN among the operands. Bits against the
# NumPy reference on every path.
DGRAD_LANES_SCRIPT = r"""
import sys, numpy as np
sys.path.insert(0, {tests!r})
import tf_fp16ops
from support import reference as R
rng = np.random.default_rng(19)
bad = 0
#        N, H, W, groups, Cg, K, KH, KW, stride, dilation, padding
cases = [(2, 7, 9, 1, 32, 12, 3, 3, 1, 1, "SAME"),
         (1, 9, 11, 1, 33, 7, 3, 2, 2, 1, "VALID"),
         (2, 8, 8, 2, 48, 10, 3, 3, 1, 2, "SAME"),
         (1, 5, 13, 1, 130, 40, 1, 1, 1, 1, "VALID"),
         (1, 10, 7, 1, 64, 5, 3, 3, 3, 1, "SAME"),
         (2, 6, 6, 3, 100, 9, 2, 2, 2, 1, "VALID")]
for trial, (n, h, wd, groups, cg, k, kh, kw, s, d, pad) in enumerate(cases):
    xs, ws = (n, h, wd, cg * groups), (kh, kw, cg, k)
    g = R.geometry(xs, ws, (s, s), (d, d), pad)
    dys = (n, g.P, g.Q, k)
    kind = trial % 3
    if kind == 0:
        w, dy = rng.random(ws) - 0.5, rng.random(dys)
    elif kind == 1:   # many binades: binary16 subnormals and midpoints
        w = rng.integers(-8, 8, ws) * 2.0 ** rng.integers(-12, 6, ws)
        dy = rng.integers(-8, 8, dys) * 2.0 ** rng.integers(-20, 4, dys)
    else:             # infinities and NaN among large values
        w, dy = rng.integers(-2, 3, ws).astype(np.float64), rng.random(dys) * 3e4
        dy.reshape(-1)[rng.integers(0, dy.size, 2)] = (np.inf, np.nan)
        w[0, 0, 0, 0] = np.inf
    w, dy = w.astype(np.float16), dy.astype(np.float16)
    ours = tf_fp16ops.conv2d_backprop_input(xs, w, dy, s, pad, dilations=d).numpy()
    ref = R.conv2d_backprop_input(xs, w, dy, strides=(s, s), dilations=(d, d), padding=pad)
    ref = ref.astype(np.float16)
    same = (ours.view(np.uint16) == ref.view(np.uint16)) | (np.isnan(ours) & np.isnan(ref))
    bad += int((~same).sum())
print("isa", tf_fp16ops.ops.cpu_isa())
print("mismatches", bad)
"""


@pytest.mark.parametrize("isa", ["avx512fp16", "avx512", "avx2", "scalar"])
def test_dgrad_input_channel_lanes_are_exact(isa):
    lines = run_on_isa(DGRAD_LANES_SCRIPT, isa)
    assert lines == [f"isa {isa}", "mismatches 0"]


# The wgrad with output channels as lanes (on AVX512-FP16 the NHWC kernel for K / groups >= 32:
# filter rows as register-tile rows, one segment per output row, x copied with its left and
# right zero padding, segments in calls that resume from the stored binary16 accumulators):
# strides, dilations, explicit padding, groups, output rows that end mid call (more than 256
# terms), 32-lane blocks with rests; an infinite dy meeting padded zeros gives NaN. Bits against
# the NumPy reference on every path.
WGRAD_LANES_SCRIPT = r"""
import sys, numpy as np
sys.path.insert(0, {tests!r})
import tf_fp16ops
from support import reference as R
rng = np.random.default_rng(23)
bad = 0
#        N, H, W, groups, Cg, K, KH, KW, stride, dilation, padding
cases = [(2, 7, 9, 1, 5, 32, 3, 3, 1, 1, "SAME"),
         (1, 9, 11, 1, 3, 33, 3, 2, 2, 1, "VALID"),
         (2, 8, 8, 2, 4, 96, 3, 3, 1, 2, "SAME"),
         (3, 12, 30, 1, 7, 130, 1, 1, 1, 1, "VALID"),
         (1, 10, 7, 1, 6, 64, 3, 3, 3, 1, ((2, 0), (1, 3))),
         (2, 6, 6, 3, 2, 150, 2, 2, 2, 1, "SAME"),
         (2, 9, 40, 1, 4, 40, 3, 5, 1, 1, ((1, 1), (4, 0)))]
for trial, (n, h, wd, groups, cg, k, kh, kw, s, d, pad) in enumerate(cases):
    xs, ws = (n, h, wd, cg * groups), (kh, kw, cg, k)
    g = R.geometry(xs, ws, (s, s), (d, d), pad)
    dys = (n, g.P, g.Q, k)
    kind = trial % 3
    if kind == 0:
        x, dy = rng.random(xs) - 0.5, rng.random(dys)
    elif kind == 1:   # many binades: binary16 subnormals and midpoints
        x = rng.integers(-8, 8, xs) * 2.0 ** rng.integers(-12, 6, xs)
        dy = rng.integers(-8, 8, dys) * 2.0 ** rng.integers(-20, 4, dys)
    else:             # infinities and NaN; an infinite dy at a corner meets padded zeros
        x, dy = rng.random(xs) * 3e4, rng.integers(-2, 3, dys).astype(np.float64)
        x.reshape(-1)[rng.integers(0, x.size)] = np.nan
        dy[0, 0, 0, 1] = np.inf
    x, dy = x.astype(np.float16), dy.astype(np.float16)
    padding = pad if isinstance(pad, str) else [[0, 0], list(pad[0]), list(pad[1]), [0, 0]]
    ours = tf_fp16ops.conv2d_backprop_filter(x, ws, dy, s, padding, dilations=d).numpy()
    ref = R.conv2d_backprop_filter(x, ws, dy, strides=(s, s), dilations=(d, d), padding=pad)
    ref = ref.astype(np.float16)
    same = (ours.view(np.uint16) == ref.view(np.uint16)) | (np.isnan(ours) & np.isnan(ref))
    bad += int((~same).sum())
    if kind == 2 and g.pt + g.pl > 0:  # output (0, 0) reads padding: the case reaches 0 * inf
        bad += int(not np.isnan(ref[:, :, :, 1]).any())
print("isa", tf_fp16ops.ops.cpu_isa())
print("mismatches", bad)
"""


@pytest.mark.parametrize("isa", ["avx512fp16", "avx512", "avx2", "scalar"])
def test_wgrad_output_channel_lanes_are_exact(isa):
    lines = run_on_isa(WGRAD_LANES_SCRIPT, isa)
    assert lines == [f"isa {isa}", "mismatches 0"]


# The depthwise forward with channels as lanes (on AVX512-FP16 32 binary16 lanes per step, up to
# 12 output positions per tile, padded taps reading zeros; on AVX-512 and AVX2, stride and
# dilation 1 along W, the sliding kernels on zero-padded float rows): whole 32-lane blocks and
# rests, output rows longer than one tile, strides, dilations; infinities and NaN, and an
# infinite weight that meets padding (0 * inf gives NaN; with stride 2 and, in the last case,
# on the sliding kernels). Bits against the NumPy reference.
DEPTHWISE_LANES_SCRIPT = r"""
import sys, numpy as np
sys.path.insert(0, {tests!r})
import tf_fp16ops.ops as ops
from support import reference as R
rng = np.random.default_rng(29)
bad = 0
#        N, H, W, C, KH, KW, stride, dilation, padding
cases = [(2, 7, 29, 32, 3, 3, 1, 1, "SAME"),
         (1, 9, 14, 144, 3, 3, 1, 1, "SAME"),
         (2, 8, 25, 64, 5, 3, 2, 1, "SAME"),
         (1, 10, 26, 100, 3, 3, 1, 2, "SAME"),
         (3, 5, 13, 33, 2, 4, 1, 1, "VALID"),
         (2, 6, 19, 48, 3, 3, 1, 1, "SAME")]
for trial, (n, h, wd, c, kh, kw, s, d, pad) in enumerate(cases):
    xs, ws = (n, h, wd, c), (kh, kw, c, 1)
    kind = trial % 3
    if kind == 0:
        x, w = rng.random(xs) - 0.5, rng.random(ws) - 0.5
    elif kind == 1:   # many binades: binary16 subnormals and midpoints
        x = rng.integers(-8, 8, xs) * 2.0 ** rng.integers(-20, 4, xs)
        w = rng.integers(-8, 8, ws) * 2.0 ** rng.integers(-12, 6, ws)
    else:             # infinities and NaN; an infinite weight meets padding
        x, w = rng.random(xs) * 3e4, rng.integers(-2, 3, ws).astype(np.float64)
        x.reshape(-1)[rng.integers(0, x.size, 2)] = (np.inf, np.nan)
        w[0, 0, 1, 0] = np.inf
    x, w = x.astype(np.float16), w.astype(np.float16)
    ours = ops.depthwise_conv2d(x, w, s, pad, dilations=d, accumulation="float16").numpy()
    ref = R.depthwise_conv2d(x, w, (s, s), (d, d), pad, "half")
    same = (ours.view(np.uint16) == ref.view(np.uint16)) | (np.isnan(ours) & np.isnan(ref))
    bad += int((~same).sum())
    if kind == 2:
        bad += int(not np.isnan(ref[..., 1]).any())  # the case must reach 0 * inf
print("isa", ops.cpu_isa())
print("mismatches", bad)
"""


@pytest.mark.parametrize("isa", ["avx512fp16", "avx512", "avx2", "scalar"])
def test_depthwise_channel_lanes_are_exact(isa):
    lines = run_on_isa(DEPTHWISE_LANES_SCRIPT, isa)
    assert lines == [f"isa {isa}", "mismatches 0"]


# 1x1 convolutions with stride 1 and no padding: the CPU kernels lay their positions out again as
# one image of rows at least 8 positions wide where they divide by 8 (cc/kernels/cpu/conv2d_cpu.cc,
# FoldedPositions; a Dense layer's rows as images of one position, [rows, 1, 1, C], become rows
# of 8), which must keep every sum's terms and order: fprop, dgrad and wgrad (whose sums run over
# all positions, in the order of the flattened rows) on row counts with each width (8, 4, 2 and
# none: 13 is prime), several images of wide rows (stacked as they are), groups, and channel
# counts on both sides of the 32-lane NHWC kernels; and
# 1x1 convolutions that must not be laid out again (explicit padding, stride 2), whose output
# positions are not their input positions. Bits against the NumPy reference on every path.
FOLDED_1X1_SCRIPT = r"""
import sys, numpy as np
sys.path.insert(0, {tests!r})
import tf_fp16ops
from support import reference as R
rng = np.random.default_rng(31)
bad = 0
#        N, H, W, groups, Cg, K, stride, padding
cases = [(40, 1, 1, 1, 5, 12, 1, "VALID"),
         (13, 1, 1, 1, 7, 40, 1, "VALID"),
         (6, 1, 1, 1, 33, 9, 1, "VALID"),
         (3, 2, 2, 1, 6, 35, 1, "VALID"),
         (4, 1, 1, 2, 4, 10, 1, "VALID"),
         (64, 1, 1, 1, 40, 3, 1, "VALID"),
         (24, 1, 3, 1, 3, 33, 1, "VALID"),
         (3, 2, 9, 1, 5, 7, 1, "VALID"),
         (2, 3, 10, 1, 33, 34, 1, "VALID"),
         (8, 1, 1, 1, 5, 6, 1, ((1, 0), (0, 2))),
         (16, 2, 3, 1, 34, 33, 1, ((0, 1), (1, 0))),
         (8, 3, 3, 1, 4, 5, 2, "VALID")]
for trial, (n, h, wd, groups, cg, k, s, pad) in enumerate(cases):
    xs, ws = (n, h, wd, cg * groups), (1, 1, cg, k)
    g = R.geometry(xs, ws, (s, s), (1, 1), pad)
    dys = (n, g.P, g.Q, k)
    kind = trial % 3
    if kind == 0:
        x, w, dy = rng.random(xs) - 0.5, rng.random(ws) - 0.5, rng.random(dys)
    elif kind == 1:   # many binades: binary16 subnormals and midpoints
        x = rng.integers(-8, 8, xs) * 2.0 ** rng.integers(-20, 4, xs)
        w = rng.integers(-8, 8, ws) * 2.0 ** rng.integers(-12, 6, ws)
        dy = rng.integers(-8, 8, dys) * 2.0 ** rng.integers(-20, 4, dys)
    else:             # large values: the wgrad sums saturate and round in their order
        x, w = rng.random(xs) * 3e3, rng.integers(-2, 3, ws).astype(np.float64)
        dy = rng.random(dys) * 4 - 2
    x, w, dy = x.astype(np.float16), w.astype(np.float16), dy.astype(np.float16)
    padding = pad if isinstance(pad, str) else [[0, 0], list(pad[0]), list(pad[1]), [0, 0]]
    pairs = [
        (tf_fp16ops.conv2d(x, w, s, padding).numpy(), R.conv2d(x, w, (s, s), padding=pad)),
        (tf_fp16ops.conv2d_backprop_input(xs, w, dy, s, padding).numpy(),
         R.conv2d_backprop_input(xs, w, dy, (s, s), padding=pad)),
        (tf_fp16ops.conv2d_backprop_filter(x, ws, dy, s, padding).numpy(),
         R.conv2d_backprop_filter(x, ws, dy, (s, s), padding=pad)),
    ]
    for ours, ref in pairs:
        ref = ref.astype(np.float16)
        same = (ours.view(np.uint16) == ref.view(np.uint16)) | (np.isnan(ours) & np.isnan(ref))
        bad += int((~same).sum())
print("isa", tf_fp16ops.ops.cpu_isa())
print("mismatches", bad)
"""


@pytest.mark.parametrize("isa", ["avx512fp16", "avx512", "avx2", "scalar"])
def test_folded_1x1_positions_are_exact(isa):
    lines = run_on_isa(FOLDED_1X1_SCRIPT, isa)
    assert lines == [f"isa {isa}", "mismatches 0"]
