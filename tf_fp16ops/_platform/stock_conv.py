"""When TensorFlow's own float32 convolution is the faster way to keep the `Tacc=float` contract.

`accumulation="float32"` with float32 inputs promises binary32 products summed in binary32, the
result left in binary32. TensorFlow's own CPU `Conv2D`, `Conv2DBackpropInput` and
`Conv2DBackpropFilter` keep that promise too (oneDNN's f32 primitives under the default `strict`
floating-point math mode, Eigen's float32 contractions), in their own order of sums, so
`tf_fp16ops.conv2d` and its two backprops, and the gradients registered for the op family, hand
such a call to them where they were measured to be faster than the op library's CPU kernels
(README, "Performance (CPU)"): while oneDNN runs TensorFlow's float32 convolutions
(`TF_ENABLE_ONEDNN_OPTS`, TensorFlow's `IsMklEnabled()`), the forward pass and both gradients;
while Eigen runs them, the forward of 1x1 filters and of long sums.

oneDNN's forward won on both CPUs measured: on an Intel Xeon with AVX512-FP16, 12 of 14 problems
from 8x28x28x8 * 3x3x8x8 to 8x7x7x512 * 3x3x512x512 (ours/oneDNN 0.43x at 8x14x14x256 *
3x3x256x256, 0.57x at 8x7x7x512 * 3x3x512x512, 0.82-0.90x on the 3x3x128 and 56x16 benchmark
shapes; a tie at 0.94-1.12x on 8x28x28x8 * 3x3x8x8 and 8x14x14x256 * 1x1x256x1024), and on an
AMD EPYC (Zen 4) on the four benchmark shapes (0.65-1.02x across runs, the 3x3x128 and 56x16
shapes below 0.93x on every run). So did its gradients, those of 1x1 filters (the op library's:
one product over all positions) included: on the Xeon, dgrad 0.64-0.94x and wgrad 0.53-0.76x on
five of six 1x1 problems from 4x7x7x512 to 8x56x56x256 (the sixth wgrad, 4x7x7x512 -> 512,
1.28x); on the Zen 4, in a tf.function (8 calls per call, two runs, CPU seconds), dgrad
0.85-0.94x on all five 1x1 problems from 32x7x7x1024 -> 256 to 8x56x56x256 -> 64, wgrad
0.81-0.96x on three of them, 1.00-1.03x on 8x14x14x512 -> 512 and 1.09-1.12x on the
benchmark's 8x28x28x128 -> 128.

Against Eigen's kernels (`TF_ENABLE_ONEDNN_OPTS=0`) the op library's won the gradients of every
benchmark shape (1.1-2.8x, Xeon, its AVX-512 path) and keep them; the forward goes to Eigen for
1x1 filters (ours/Eigen 0.49-0.95x on 7 of 9 1x1 problems on the Xeon's AVX-512 path, 0.70-0.86x
on the benchmark's 1x1 shape on the Zen 4, 0.89-0.93x on an AVX2 Zen 1, where TensorFlow leaves
oneDNN off; 1.07-1.10x on 8x28x28x512 * 1x1x512x128, a tie at
stride 2) and for sums of at least `EIGEN_FPROP_MIN_TERMS` terms per output (KH * KW * C; 3x3x256
0.52-0.70x at 7x7, 14x14 and 28x28, 3x3x512 0.40-0.45x; below that the op library's tied or won:
3x3x192 1.00-1.02x, 5x5x64 1.07x, 3x3x128 1.05-1.16x, the 16-channel benchmark shapes
1.17-1.24x). TensorFlow's wheel builds Eigen without FMA: Eigen rounds each product to binary32
before adding it, where oneDNN and the op library do one fused multiply-add per term (checked in
tests/ops/test_stock_route.py).

Never on a machine with a visible GPU (cuDNN's float32 convolutions may take TF32 tensor cores),
never to oneDNN when its floating-point math mode is set to anything but `strict`
(`ONEDNN_DEFAULT_FPMATH_MODE`, TensorFlow's `TF_SET_ONEDNN_FPMATH_MODE`: bf16/tf32/f16/any allow
down-conversions, oneDNN "Primitive Attributes: floating-point math mode") or, for a graph being
built, Grappler's oneDNN bfloat16 auto mixed precision is on (Grappler rewrites graphs, not eager
ops), and only for what the stock ops handle and what is known
when the op is built: NHWC, one group, dilations 1, strides 1 on batch and channels and at most
the input's extent, explicit pads below the filter's extent, every extent static (for the
gradients the batch too; the forward takes any batch, having no sizes operand to disagree with
it), a positive output size, matching the output gradient's (every other call runs the op
library's kernel, which also gives this package's error messages).
"""

from __future__ import annotations

import functools
import os

import tensorflow as tf

# Environment variables that change oneDNN's float32 math from `strict` (no down-conversion).
FPMATH_VARIABLES = (
    "ONEDNN_DEFAULT_FPMATH_MODE",
    "DNNL_DEFAULT_FPMATH_MODE",
    "TF_SET_ONEDNN_FPMATH_MODE",
)


@functools.cache
def _no_gpu() -> bool:
    return not tf.config.list_physical_devices("GPU")


@functools.cache
def _mkl_enabled() -> bool:
    from tensorflow.python.util import _pywrap_util_port  # the query tf.test uses

    return bool(_pywrap_util_port.IsMklEnabled())


def onednn_runs_float32_convs() -> bool:
    """Whether TensorFlow's CPU float32 convolutions run oneDNN in this process (TensorFlow's
    `IsMklEnabled()`, which reads `TF_ENABLE_ONEDNN_OPTS` once per process: asked once)."""
    return _mkl_enabled()


def _environment_strict() -> bool:
    return all(os.environ.get(v, "").strip().upper() in ("", "STRICT") for v in FPMATH_VARIABLES)


# oneDNN and TensorFlow read these variables once per process, when they first need them, and
# keep what they read: a mode other than strict, once seen (here at import, or in any later
# call), is kept too, even if the variable is changed or removed afterwards.
_non_strict_seen = not _environment_strict()
# Once TensorFlow's oneDNN has run a convolution, the mode it read then is the mode for good
# (checked on TensorFlow 2.21: ONEDNN_DEFAULT_FPMATH_MODE=BF16 or TF_SET_ONEDNN_FPMATH_MODE=BF16
# set after a first float32 Conv2D leaves the next Conv2D's bits those of strict; set before it,
# they change them): `onednn_ran` records that it ran while the mode was strict.
_strict_for_good = False


def strict_fpmath() -> bool:
    """True unless an environment variable lets oneDNN compute float32 in a narrower type, now or
    when this module was imported or last asked (see `_non_strict_seen`), or True for good once
    oneDNN ran under strict (`onednn_ran`)."""
    global _non_strict_seen
    if _strict_for_good:
        return True
    if not _non_strict_seen and not _environment_strict():
        _non_strict_seen = True
    return not _non_strict_seen


def onednn_ran() -> bool:
    """Records that TensorFlow's oneDNN convolution has just run in this process, handed over by
    `stock_wins` (eagerly, synchronously, on a problem with elements: an empty one returns before
    oneDNN reads anything): if the mode was strict then, oneDNN keeps it (see
    `_strict_for_good`). Returns whether the mode is now strict for good."""
    global _strict_for_good
    if strict_fpmath():
        _strict_for_good = True
    return _strict_for_good


def bfloat16_rewrite() -> bool:
    """Whether Grappler's oneDNN auto mixed precision would rewrite float32 graph ops to bfloat16
    (`tf.config.optimizer.set_experimental_options`; the op library's ops are not rewritten)."""
    options = tf.config.optimizer.get_experimental_options()
    return any(
        options.get(k) for k in ("auto_mixed_precision_onednn_bfloat16", "auto_mixed_precision_mkl")
    )


# On the Eigen side (oneDNN off) the forward goes to TensorFlow's Conv2D for 1x1 filters and for
# at least this many terms per output (KH * KW * C): measured, module docstring.
EIGEN_FPROP_MIN_TERMS = 2048


def _out_size(size: int, k: int, stride: int, padding: str, before: int, after: int) -> int:
    if padding == "SAME":
        return -(-size // stride)
    return (size + before + after - k) // stride + 1


def stock_wins(pass_: str, dtype: tf.DType, x_shape, w_shape, dy_shape, attrs: dict) -> bool:
    """Whether `pass_` ('fprop', 'dgrad' or 'wgrad') of this convolution goes to TensorFlow's own
    op: only float32 with `Tacc=float` can (see the module docstring).

    Args:
      dtype: the operands' dtype (`T`).
      x_shape: the input's shape [N, H, W, C] (NHWC), entries int or None.
      w_shape: the filter's shape [KH, KW, C, K] (HWIO), entries int or None.
      dy_shape: the output gradient's shape [N, P, Q, K] for the gradients, None for fprop.
      attrs: the op's attrs (`Tacc`, `strides`, `padding`, `explicit_paddings`, `data_format`,
        `dilations`), as `tf_fp16ops.ops` builds them.
    """
    key = (
        attrs["Tacc"],
        attrs["data_format"],
        tuple(attrs["dilations"]),
        tuple(attrs["explicit_paddings"] or ()),
        tuple(attrs["strides"]),
        attrs["padding"],
    )
    dy = None if dy_shape is None else tuple(dy_shape)
    if not _problem_fits(pass_, dtype, tuple(x_shape), tuple(w_shape), dy, key):
        return False
    if not _no_gpu():
        return False
    taps = w_shape[0] * w_shape[1]
    if onednn_runs_float32_convs():
        if not strict_fpmath():
            return False
    elif pass_ != "fprop" or (taps != 1 and taps * w_shape[2] < EIGEN_FPROP_MIN_TERMS):
        return False  # Eigen: only the forward of 1x1 filters and of long sums
    # Grappler rewrites graphs only: an eager op runs as it is, so only a graph being built asks
    # (the query builds TensorFlow's whole ConfigProto, about 40 us a call).
    return tf.executing_eagerly() or not bfloat16_rewrite()


@functools.lru_cache(maxsize=1024)
def _problem_fits(pass_: str, dtype: tf.DType, x_shape, w_shape, dy_shape, attrs_key) -> bool:
    """The part of `stock_wins` that depends on the problem alone (not on the process), cached:
    an eager call asks it for every gradient (a few us of Python each time otherwise)."""
    tacc, data_format, dilations, explicit_paddings, strides, padding = attrs_key
    if dtype != tf.float32 or tacc != tf.float32:
        return False
    if data_format != "NHWC" or dilations != (1, 1, 1, 1):
        return False
    fprop = pass_ == "fprop"
    if (
        len(x_shape) != 4
        or len(w_shape) != 4
        or (not fprop and (dy_shape is None or len(dy_shape) != 4))
    ):
        return False
    n, h, w, c = x_shape
    kh, kw, wc, k = w_shape
    if any(not isinstance(d, int) or d < 1 for d in (h, w, c, kh, kw, wc, k)) or c != wc:
        return False
    if fprop:
        # Any batch but a known empty one: the forward has no sizes operand to disagree with it,
        # but TensorFlow's oneDNN Conv2D returns its input's shape for an empty batch (TF 2.21),
        # so a batch unknown here gets its output reshaped (`tf_fp16ops.ops._conv`).
        if isinstance(n, int) and n < 1:
            return False
    elif not isinstance(n, int) or n < 0 or dy_shape[0] != n:
        return False  # the batch too must be known and agree (else oneDNN aborts or reads 0)
    pads = explicit_paddings or (0,) * 8
    sn, sh, sw, sc = strides
    # Strides and pads within what the stock kernels handle: oneDNN crashed, aborted or gave
    # wrong sums for strides far beyond the input (16384 .. 2^31) or pads near 2^31 that the op
    # library's kernels compute right; a stride above the extent or a pad of the filter's size
    # or more only adds zero terms, so those stay with the op library.
    if (sn, sc) != (1, 1) or any(pads[i] for i in (0, 1, 6, 7)) or sh > h or sw > w:
        return False
    if max(pads[2:4]) >= kh or max(pads[4:6]) >= kw:
        return False
    # A filter taller or wider than the input (most of every window padding): oneDNN's
    # Conv2DBackpropFilter crashed (SIGSEGV) on a 4x4 input with a 2^24x2 filter under SAME, and
    # its Conv2DBackpropInput failed to allocate ("could not create a memory object").
    if kh > h or kw > w:
        return False
    p = _out_size(h, kh, sh, padding, pads[2], pads[3])
    q = _out_size(w, kw, sw, padding, pads[4], pads[5])
    return p >= 1 and q >= 1 and (fprop or tuple(dy_shape[1:]) == (p, q, k))
