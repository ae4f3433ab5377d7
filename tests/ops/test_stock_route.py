"""Float32 convolutions with accumulation='float32' run TensorFlow's own Conv2D /
Conv2DBackpropInput / Conv2DBackpropFilter where those keep the contract and were measured faster
(tf_fp16ops/_platform/stock_conv.py): while oneDNN runs TensorFlow's float32 convolutions, the
forward pass (any batch), the gradients of filters larger than 1x1 (every extent known), and 1x1
gradients on Intel CPUs; while Eigen runs them, only the forward of 1x1 filters and of long sums;
never float16 inputs, NCHW, groups, dilations, extents unknown when the op is built, a GPU, or a
oneDNN math mode other than strict.

Which op was built is read from the traced graph; the rule's oneDNN input is forced both ways
with monkeypatch (so this file checks both sides on every machine), and the query itself is
checked against TF_ENABLE_ONEDNN_OPTS in fresh processes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

import tf_fp16ops
from tf_fp16ops._platform import stock_conv

RNG = np.random.default_rng(5)


def _data(shape, dtype=np.float32):
    return tf.constant(RNG.uniform(-1, 1, shape).astype(np.float16).astype(dtype))


@pytest.fixture
def onednn(monkeypatch):
    """Sets what the rule believes about oneDNN: onednn(True) or onednn(False)."""

    def set_(on: bool):
        monkeypatch.setattr(stock_conv, "onednn_runs_float32_convs", lambda: on)
        # The eager fast path keeps the op an eager call ran, for a process whose oneDNN does
        # not change: a fresh store for each setting.
        monkeypatch.setattr(tf_fp16ops.ops, "_EAGER_PLANS", {})

    return set_


def _conv_types(fn, *args) -> list[str]:
    """The convolution op types of `fn`'s graph traced on `args` (tf.TensorSpec or tensors)."""
    graph = tf.function(fn).get_concrete_function(*args).graph
    return sorted(op.type for op in graph.get_operations() if "Conv" in op.type)


PASSES = {
    "fprop": lambda x, w, dy, **k: tf_fp16ops.conv2d(x, w, **k),
    "dgrad": lambda x, w, dy, **k: tf_fp16ops.conv2d_backprop_input(tf.shape(x), w, dy, **k),
    "wgrad": lambda x, w, dy, **k: tf_fp16ops.conv2d_backprop_filter(x, tf.shape(w), dy, **k),
}
STOCK = {"fprop": "Conv2D", "dgrad": "Conv2DBackpropInput", "wgrad": "Conv2DBackpropFilter"}
OURS = {
    "fprop": "Fp16Conv2D",
    "dgrad": "Fp16Conv2DBackpropInput",
    "wgrad": "Fp16Conv2DBackpropFilter",
}
# x NHWC, w HWIO, strides, padding, dy NHWC (the output shape, by hand).
PROBLEMS = [
    ((2, 9, 9, 8), (3, 3, 8, 4), 1, "SAME", (2, 9, 9, 4)),
    ((2, 9, 10, 8), (3, 2, 8, 4), 2, "VALID", (2, 4, 5, 4)),
    ((1, 7, 6, 3), (2, 3, 3, 5), 2, [[0, 0], [1, 1], [0, 2], [0, 0]], (1, 4, 3, 5)),
]


@pytest.mark.parametrize("pass_", PASSES)
@pytest.mark.parametrize("xs, ws, s, pad, ys", PROBLEMS)
def test_onednn_side_runs_tensorflows_op_with_the_same_attrs(onednn, pass_, xs, ws, s, pad, ys):
    onednn(True)
    x, w, dy = _data(xs), _data(ws), _data(ys)
    run = PASSES[pass_]

    def ours(x, w, dy):
        return run(x, w, dy, strides=s, padding=pad, accumulation="float32")

    assert _conv_types(ours, x, w, dy) == [STOCK[pass_]]
    explicit = [v for pair in pad for v in pair] if not isinstance(pad, str) else []
    attrs = dict(
        strides=[1, s, s, 1],
        padding="EXPLICIT" if explicit else pad,
        explicit_paddings=explicit,
    )
    if pass_ == "fprop":
        want = tf.raw_ops.Conv2D(input=x, filter=w, **attrs)
    elif pass_ == "dgrad":
        want = tf.raw_ops.Conv2DBackpropInput(
            input_sizes=tf.shape(x), filter=w, out_backprop=dy, **attrs
        )
    else:
        want = tf.raw_ops.Conv2DBackpropFilter(
            input=x, filter_sizes=tf.shape(w), out_backprop=dy, **attrs
        )
    got = ours(x, w, dy)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.numpy().view(np.uint32), want.numpy().view(np.uint32))


def test_eager_gradients_ignore_grapplers_bfloat16_rewrite(onednn):
    """Grappler rewrites graphs, not eager ops: with its oneDNN bfloat16 rewrite on, an eager
    float32 dgrad still runs TensorFlow's op (its bits), while a graph being built takes the op
    library's. The two differ in their order of sums on this data (checked, so that the test
    can tell them apart)."""
    onednn(True)
    xs, ws, _, _, ys = PROBLEMS[0]
    x, w, dy = _data(xs), _data((3, 3, 8, 4)), _data(ys)
    stock = tf.raw_ops.Conv2DBackpropInput(
        input_sizes=tf.shape(x), filter=w, out_backprop=dy, strides=[1, 1, 1, 1], padding="SAME"
    )
    kernel = tf_fp16ops.ops.raw_ops.fp16_conv2d_backprop_input(
        tf.shape(x), w, dy, **tf_fp16ops.ops._conv_attrs(1, "SAME", "NHWC", None, "float32")
    )
    assert (stock.numpy().view(np.uint32) != kernel.numpy().view(np.uint32)).any()
    options = tf.config.optimizer.get_experimental_options()
    try:
        tf.config.optimizer.set_experimental_options({"auto_mixed_precision_onednn_bfloat16": True})
        got = tf_fp16ops.conv2d_backprop_input(
            tf.shape(x), w, dy, 1, "SAME", accumulation="float32"
        )
        np.testing.assert_array_equal(got.numpy().view(np.uint32), stock.numpy().view(np.uint32))
        assert _conv_types(
            lambda x, w, dy: PASSES["dgrad"](
                x, w, dy, strides=1, padding="SAME", accumulation="float32"
            ),
            x,
            w,
            dy,
        ) == [OURS["dgrad"]]
    finally:
        tf.config.optimizer.set_experimental_options(
            {"auto_mixed_precision_onednn_bfloat16": False, **options}
        )


def test_the_forward_takes_any_batch_and_the_gradients_a_known_one(onednn):
    """An unknown batch (a Keras model's input) keeps the forward on TensorFlow's op, which has no
    sizes operand to disagree with it; the gradients keep the op library's kernels then."""
    onednn(True)
    x = tf.TensorSpec([None, 9, 9, 8], tf.float32)
    dy = tf.TensorSpec([None, 9, 9, 4], tf.float32)
    w = _data((3, 3, 8, 4))
    for pass_, expected in (("fprop", STOCK), ("dgrad", OURS), ("wgrad", OURS)):
        run = PASSES[pass_]
        types = _conv_types(
            lambda x, w, dy, run=run: run(
                x, w, dy, strides=1, padding="SAME", accumulation="float32"
            ),
            x,
            w,
            dy,
        )
        assert types == [expected[pass_]], pass_


def test_onednn_side_tape_gradients_are_tensorflows(onednn):
    onednn(True)
    x, w = _data((2, 9, 9, 8)), _data((3, 3, 8, 4))
    c = _data((2, 9, 9, 4))  # the loss sum(y * c) gives dy = c whatever y's bits
    attrs = dict(strides=[1, 1, 1, 1], padding="SAME")
    want = [
        tf.raw_ops.Conv2DBackpropInput(input_sizes=tf.shape(x), filter=w, out_backprop=c, **attrs),
        tf.raw_ops.Conv2DBackpropFilter(input=x, filter_sizes=tf.shape(w), out_backprop=c, **attrs),
    ]
    op_attrs = dict(
        Tacc=tf.float32, explicit_paddings=[], data_format="NHWC", dilations=[1, 1, 1, 1], **attrs
    )
    convs = {
        "conv2d": lambda x, w: tf_fp16ops.conv2d(x, w, 1, "SAME", accumulation="float32"),
        # The registered gradient of the op itself (a graph that holds Fp16Conv2D T=float).
        "raw op": lambda x, w: tf_fp16ops.ops.raw_ops.fp16_conv2d(x, w, **op_attrs),
    }
    for what, conv in convs.items():

        def grads(x, w, conv=conv):
            with tf.GradientTape() as tape:
                tape.watch([x, w])
                loss = tf.reduce_sum(conv(x, w) * c)
            return tape.gradient(loss, [x, w])

        # conv2d itself builds TensorFlow's Conv2D, whose gradients are TensorFlow's own.
        forward = "Conv2D" if what == "conv2d" else "Fp16Conv2D"
        assert _conv_types(grads, x, w) == sorted(
            ["Conv2DBackpropFilter", "Conv2DBackpropInput", forward]
        ), what
        for g, r in zip(grads(x, w), want, strict=True):
            np.testing.assert_array_equal(g.numpy().view(np.uint32), r.numpy().view(np.uint32))


@pytest.mark.parametrize("pass_", PASSES)
def test_1x1_filters_follow_the_side(onednn, pass_):
    """With oneDNN, every pass of 1x1 filters goes to TensorFlow's op (on every CPU vendor: no
    rule reads it); on the Eigen side only forwards go, 1x1 ones among them, never short 3x3 ones
    (measured; module docstring of stock_conv)."""
    run = PASSES[pass_]
    one_by_one = STOCK[pass_]
    eigen_1x1 = STOCK[pass_] if pass_ == "fprop" else OURS[pass_]
    # (x, w, strides, padding, dy, oneDNN on, expected op)
    cases = [
        ((2, 5, 6, 8), (1, 1, 8, 4), 1, "VALID", (2, 5, 6, 4), True, one_by_one),
        ((2, 5, 6, 8), (1, 1, 8, 4), 2, "SAME", (2, 3, 3, 4), True, one_by_one),
        ((2, 5, 6, 8), (3, 3, 8, 4), 1, "SAME", (2, 5, 6, 4), True, STOCK[pass_]),
        ((2, 5, 6, 8), (3, 3, 8, 4), 1, "SAME", (2, 5, 6, 4), False, OURS[pass_]),
        ((2, 5, 6, 8), (1, 1, 8, 4), 1, "VALID", (2, 5, 6, 4), False, eigen_1x1),
    ]
    for xs, ws, s, pad, ys, on, expected in cases:
        onednn(on)
        types = _conv_types(
            lambda x, w, dy, s=s, pad=pad: run(
                x, w, dy, strides=s, padding=pad, accumulation="float32"
            ),
            _data(xs),
            _data(ws),
            _data(ys),
        )
        assert types == [expected], (xs, ws, s, pad, on)


@pytest.mark.parametrize("pass_", PASSES)
def test_the_eigen_side_hands_over_the_forward_of_long_sums(onednn, pass_):
    """Without oneDNN, a forward of at least EIGEN_FPROP_MIN_TERMS = KH * KW * C terms per output
    goes to TensorFlow's Conv2D (2 x 1 x 1024 = 2048 terms), a shorter one stays the op
    library's (2 x 1 x 1023 = 2046); the gradients stay the op library's either way."""
    onednn(False)
    assert stock_conv.EIGEN_FPROP_MIN_TERMS == 2048
    run = PASSES[pass_]
    for c, long_sum in ((1024, True), (1023, False)):
        types = _conv_types(
            lambda x, w, dy: run(x, w, dy, strides=1, padding="VALID", accumulation="float32"),
            _data((1, 3, 2, c)),
            _data((2, 1, c, 2)),
            _data((1, 2, 2, 2)),
        )
        stock = long_sum and pass_ == "fprop"
        assert types == [STOCK[pass_] if stock else OURS[pass_]], c


# Two terms whose sum tells a fused multiply-add from a product rounded first: with a = 1 + 2^-12,
# a * a = 1 + 2^-11 + 2^-24 exactly; 1 * b = b = -(1 + 2^-11). Summed in channel order (b first),
# an FMA gives fl(a*a + b) = 2^-24, a product rounded to binary32 first (1 + 2^-11, the tie to
# even) gives 0; in the other order both give 0 (the product a*a is rounded before b is added).
FMA_SCRIPT = r"""
import numpy as np
import tf_fp16ops
a, b = np.float32(1 + 2 ** -12), np.float32(-(1 + 2 ** -11))
out = []
for xs, ws in (([1, a], [b, a]), ([a, 1], [a, b])):
    x = np.array(xs, np.float32).reshape(1, 1, 1, 2)
    w = np.array(ws, np.float32).reshape(1, 1, 2, 1)
    routed = tf_fp16ops.conv2d(x, w, 1, "VALID", accumulation="float32")
    attrs = tf_fp16ops.ops._conv_attrs(1, "VALID", "NHWC", None, "float32")
    kernel = tf_fp16ops.ops.raw_ops.fp16_conv2d(x, w, **attrs)
    out += [float(t.numpy().ravel()[0] / 2 ** -24) for t in (routed, kernel)]
print(*out)
"""


@pytest.mark.parametrize("onednn_opts", ["0", "1"])
def test_eigen_rounds_each_product_and_onednn_fuses(onednn_opts):
    """A 1x1 float32 forward goes to TensorFlow's Conv2D on both sides. Eigen (TensorFlow's wheel
    builds it without FMA) rounds each product first: 0 in both orders; oneDNN fuses: 2^-24 in
    at least one order; the op library's kernel fuses in channel order: 2^-24, then 0 (hand
    values above)."""
    env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS=onednn_opts, TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run(
        [sys.executable, "-c", FMA_SCRIPT], env=env, capture_output=True, text=True, check=True
    )
    routed_1, kernel_1, routed_2, kernel_2 = (float(v) for v in out.stdout.split())
    assert (kernel_1, kernel_2) == (1.0, 0.0)
    if onednn_opts == "0":
        assert (routed_1, routed_2) == (0.0, 0.0)
    else:
        assert 1.0 in (routed_1, routed_2) and {routed_1, routed_2} <= {0.0, 1.0}


@pytest.mark.parametrize("pass_", PASSES)
def test_what_never_runs_tensorflows_op(onednn, monkeypatch, pass_):
    onednn(True)
    run = PASSES[pass_]
    x, w, dy = _data((2, 9, 9, 8)), _data((3, 3, 8, 4)), _data((2, 9, 9, 4))

    def types(x=x, w=w, dy=dy, **k):
        k = dict(dict(strides=1, padding="SAME", accumulation="float32"), **k)
        return _conv_types(lambda x, w, dy: run(x, w, dy, **k), x, w, dy)

    assert types() == [STOCK[pass_]]  # the baseline of the cases below
    half = [tf.cast(t, tf.float16) for t in (x, w, dy)]
    assert types(*half) == [OURS[pass_]]  # float16 inputs, Tacc=float
    assert types(*half, accumulation="float16") == [OURS[pass_]]
    assert types(dilations=2) == [OURS[pass_]]
    nchw = [tf.transpose(x, [0, 3, 1, 2]), w, tf.transpose(dy, [0, 3, 1, 2])]
    assert types(*nchw, data_format="NCHW") == [OURS[pass_]]
    grouped = _data((3, 3, 4, 4))  # C = 8 = 2 groups of 4
    assert types(w=grouped) == [OURS[pass_]]
    unknown_h = tf.TensorSpec([2, None, 9, 8], tf.float32)
    dy_spec = tf.TensorSpec([2, None, 9, 4], tf.float32)
    assert types(unknown_h, w, dy_spec) == [OURS[pass_]]
    # Strides far beyond the input (oneDNN crashed or aborted on some), strides on batch or
    # channels, explicit pads as large as the filter or on batch/channels.
    assert types(dy=_data((2, 1, 1, 4)), strides=65536) == [OURS[pass_]]
    with pytest.raises(ValueError, match="strides must be 1 in the batch and channel"):
        types(strides=[2, 1, 1, 1])
    big_pad = [[0, 0], [3, 0], [0, 0], [0, 0]]  # 3 >= KH: 9 + 3 - 3 + 1 = 10 rows, 7 columns
    assert types(dy=_data((2, 10, 7, 4)), padding=big_pad) == [OURS[pass_]]
    # A filter taller or wider than the input (oneDNN's wgrad crashed on such a problem).
    assert types(w=_data((10, 3, 8, 4))) == [OURS[pass_]]
    assert types(w=_data((3, 10, 8, 4))) == [OURS[pass_]]
    with pytest.raises(ValueError):
        types(padding=[[0, 0], [1, 1], [1, 1], [0, 1]])
    if pass_ != "fprop":  # (the forward has no dy)
        wrong_dy = _data((2, 9, 8, 4))  # not the output shape: the op library's error, not TF's
        with pytest.raises((ValueError, tf.errors.InvalidArgumentError)):
            types(dy=wrong_dy)
    # A process where oneDNN has not run yet (it reads the mode when it first runs).
    monkeypatch.setattr(stock_conv, "_strict_for_good", False)
    for var in stock_conv.FPMATH_VARIABLES:
        monkeypatch.setattr(stock_conv, "_non_strict_seen", False)
        monkeypatch.setenv(var, "strict")
        assert types() == [STOCK[pass_]], var
        monkeypatch.setenv(var, "BF16")
        assert types() == [OURS[pass_]], var
        # oneDNN keeps the mode it read: a non-strict mode once seen is kept.
        monkeypatch.setenv(var, "strict")
        assert types() == [OURS[pass_]], var
        monkeypatch.delenv(var)
    monkeypatch.setattr(stock_conv, "_non_strict_seen", False)
    options = tf.config.optimizer.get_experimental_options()
    try:  # Grappler's oneDNN bfloat16 rewrite would take TensorFlow's op, not the op library's
        tf.config.optimizer.set_experimental_options({"auto_mixed_precision_onednn_bfloat16": True})
        assert types() == [OURS[pass_]]
    finally:
        tf.config.optimizer.set_experimental_options(
            {"auto_mixed_precision_onednn_bfloat16": False, **options}
        )
    assert types() == [STOCK[pass_]]
    monkeypatch.setattr(stock_conv, "_no_gpu", lambda: False)
    assert types() == [OURS[pass_]]


def test_a_float32_conv2d_transpose_layer_runs_the_op_librarys_dgrad_forward(onednn):
    """The layer's forward is the dgrad op, always the op library's (layer table in README)."""
    onednn(True)
    layer = tf_fp16ops.layers.Conv2DTranspose(
        4, 3, strides=2, padding="same", accumulation="float32"
    )
    assert _conv_types(layer, _data((2, 5, 5, 3))) == ["Fp16Conv2DBackpropInput"]


@pytest.mark.parametrize(
    "make, shape, stock",
    [
        (lambda: tf_fp16ops.layers.Conv2D(4, 3, accumulation="float32"), (2, 6, 6, 3), "Conv2D"),
        (lambda: tf_fp16ops.layers.Conv1D(4, 3, accumulation="float32"), (2, 6, 3), "Conv2D"),
        # Dense's 1x1 forward as TensorFlow's MatMul on [rows, Cin] (layers.dense_matmul).
        (lambda: tf_fp16ops.layers.Dense(4, accumulation="float32"), (2, 5, 3), "MatMul"),
        # The depthwise step is its own op (never handed over); the pointwise step is Fp16Conv2D.
        (
            lambda: tf_fp16ops.layers.SeparableConv2D(4, 3, accumulation="float32"),
            (2, 6, 6, 3),
            "Conv2D",
        ),
    ],
)
def test_float32_layers_hand_over_their_forward_unless_fixed_order(onednn, make, shape, stock):
    """A float32 layer with accumulation='float32' builds TensorFlow's Conv2D, Dense TensorFlow's
    MatMul (README, layer table), with an unknown batch too (a Keras model's input); with
    `_fixed_order` (what the sensitivity sweep sets on its copy) Fp16Conv2D."""
    onednn(True)
    layer = make()
    layer(_data(shape))  # built
    spec = tf.TensorSpec((None,) + shape[1:], tf.float32)

    def forward_types():
        graph = tf.function(layer).get_concrete_function(spec).graph
        types = (op.type for op in graph.get_operations())
        return [t for t in types if t in ("Conv2D", "MatMul", "Fp16Conv2D")]

    assert forward_types() == [stock]
    layer._fixed_order = True
    assert forward_types() == ["Fp16Conv2D"]


def test_an_empty_batch_gets_the_output_shape(onednn):
    """TensorFlow's oneDNN Conv2D returns an empty batch in its input's shape (TF 2.21): a known
    empty batch stays with the op library's kernel, an unknown one is reshaped after
    TensorFlow's op, which still runs every non-empty batch (its bits)."""
    onednn(True)
    w = _data((3, 3, 3, 2))

    def conv(x):
        return tf_fp16ops.conv2d(x, w, 2, [[0, 0], [1, 2], [0, 1], [0, 0]], accumulation="float32")

    # By hand: P = (5 + 1 + 2 - 3) // 2 + 1 = 3, Q = (6 + 0 + 1 - 3) // 2 + 1 = 3.
    empty = tf.zeros([0, 5, 6, 3])
    assert conv(empty).shape == (0, 3, 3, 2)
    assert _conv_types(conv, empty) == ["Fp16Conv2D"]
    unknown = tf.function(conv, input_signature=[tf.TensorSpec([None, 5, 6, 3])])
    assert _conv_types(conv, tf.TensorSpec([None, 5, 6, 3])) == ["Conv2D"]
    assert unknown(empty).shape == (0, 3, 3, 2)
    x = _data((2, 5, 6, 3))
    want = tf.raw_ops.Conv2D(
        input=x,
        filter=w,
        strides=[1, 2, 2, 1],
        padding="EXPLICIT",
        explicit_paddings=[0, 0, 1, 2, 0, 1, 0, 0],
    )
    np.testing.assert_array_equal(unknown(x).numpy().view(np.uint32), want.numpy().view(np.uint32))
    layer = tf_fp16ops.layers.Conv2D(4, 3, accumulation="float32")
    layer(_data((1, 6, 6, 3)))
    call = tf.function(layer, input_signature=[tf.TensorSpec([None, 6, 6, 3])])
    assert call(tf.zeros([0, 6, 6, 3])).shape == (0, 4, 4, 4)


FPMATH_SCRIPT = r"""
import os
import tensorflow as tf
import tf_fp16ops
from tf_fp16ops._platform import stock_conv
stock_conv.onednn_runs_float32_convs = lambda: True  # the oneDNN side's rule on every machine
os.environ.pop("ONEDNN_DEFAULT_FPMATH_MODE", None)  # after TensorFlow and oneDNN may read it
graph = tf.function(lambda x, w: tf_fp16ops.conv2d(x, w, 1, "SAME", accumulation="float32"))
graph = graph.get_concrete_function(tf.zeros([1, 4, 4, 2]), tf.zeros([3, 3, 2, 2])).graph
print(*sorted(op.type for op in graph.get_operations() if "Conv" in op.type))
"""


def test_a_math_mode_set_at_start_is_kept_when_the_variable_goes():
    """oneDNN reads ONEDNN_DEFAULT_FPMATH_MODE once: a BF16 mode in the environment at start
    keeps float32 convolutions on the op library's kernels after the variable is removed."""
    for start, expected in (("BF16", "Fp16Conv2D"), ("strict", "Conv2D")):
        env = dict(os.environ, ONEDNN_DEFAULT_FPMATH_MODE=start, TF_CPP_MIN_LOG_LEVEL="3")
        out = subprocess.run(
            [sys.executable, "-c", FPMATH_SCRIPT],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        assert out.stdout.split() == [expected], start


def test_a_filter_far_taller_than_the_input_is_computed_not_crashed(tmp_path):
    """oneDNN's Conv2DBackpropFilter died (SIGSEGV) on a 4x4 input with a 2^24 x 2 filter under
    SAME, where the op library's kernel is right; in a fresh process (with oneDNN on by default
    here where the CPU has it), against the op library's kernel called directly."""
    code = textwrap.dedent("""
        import numpy as np, tensorflow as tf, tf_fp16ops as F
        x, dy = tf.ones((1, 4, 4, 1)), tf.ones((1, 4, 4, 1))
        attrs = dict(strides=[1, 1, 1, 1], padding="SAME", explicit_paddings=[],
                     data_format="NHWC", dilations=[1, 1, 1, 1], Tacc=tf.float32)
        got = F.conv2d_backprop_filter(x, [2**24, 2, 1, 1], dy, 1, "SAME", accumulation="float32")
        want = F.ops.raw_ops.fp16_conv2d_backprop_filter(x, [2**24, 2, 1, 1], dy, **attrs)
        assert np.array_equal(got.numpy(), want.numpy())
        w = tf.ones((2**20, 16, 1, 1))
        got = F.conv2d_backprop_input([1, 3, 3, 1], w, tf.ones((1, 3, 3, 1)), 1, "SAME",
                                      accumulation="float32")
        want = F.ops.raw_ops.fp16_conv2d_backprop_input([1, 3, 3, 1], w, tf.ones((1, 3, 3, 1)),
                                                        **attrs)
        assert np.array_equal(got.numpy(), want.numpy())
        print("ok")
    """)
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    assert r.returncode == 0 and r.stdout == "ok\n", (r.returncode, r.stderr[-2000:])


def test_errors_stay_the_op_librarys(onednn):
    """A problem TensorFlow's op would refuse is not handed to it: the op library raises its own
    error (the window larger than the input)."""
    onednn(True)
    w, dy = _data((3, 3, 1, 1)), _data((1, 1, 1, 1))
    with pytest.raises(tf.errors.InvalidArgumentError, match="Fp16Conv2DBackpropInput"):
        tf_fp16ops.conv2d_backprop_input([1, 2, 2, 1], w, dy, 1, "VALID", accumulation="float32")
    with pytest.raises(tf.errors.InvalidArgumentError, match="Fp16Conv2D"):
        tf_fp16ops.conv2d(_data((1, 2, 2, 1)), w, 1, "VALID", accumulation="float32")


@pytest.mark.parametrize("value, expected", [("0", "False"), ("1", "True")])
def test_the_onednn_query_follows_tf_enable_onednn_opts(value, expected):
    """TensorFlow reads TF_ENABLE_ONEDNN_OPTS once per process: 0 turns oneDNN off, 1 on (TF
    2.9 release notes, "oneDNN CPU performance optimizations ... are enabled by default")."""
    code = (
        "from tf_fp16ops._platform import stock_conv; print(stock_conv.onednn_runs_float32_convs())"
    )
    env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS=value, TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == [expected]
