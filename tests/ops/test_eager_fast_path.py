"""The eager fast path (tf_fp16ops/ops.py, `_eager_call`): an eager call of `conv2d` or its
backprops with the signature of an earlier call that passed every check runs the op that call
ran, without checking again. It must change nothing a caller can see: the same op, attrs and
bits; every call that differs in an operand's dtype or shape, a sizes value or the spelling of an
argument is checked (and raises its error); a call that raised keeps nothing; a function being
traced takes the checked path (name scopes, graph rules).

oneDNN keeps the floating-point math mode it read when it first ran (`stock_conv.onednn_ran`):
that premise is checked against TensorFlow in fresh processes."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import tf_fp16ops
from tf_fp16ops import ops
from tf_fp16ops._platform import stock_conv

RNG = np.random.default_rng(11)


def _data(shape, dtype=np.float32):
    return tf.constant(RNG.uniform(-1, 1, shape).astype(np.float16).astype(dtype))


@pytest.fixture
def plans(monkeypatch):
    """An empty store of kept ops for the test, and a count of the checked path's calls."""
    monkeypatch.setattr(ops, "_EAGER_PLANS", {})
    checked = []
    real = ops._run_conv_op

    def counting(op_type, *args, **kwargs):
        checked.append(op_type)
        return real(op_type, *args, **kwargs)

    monkeypatch.setattr(ops, "_run_conv_op", counting)
    return checked


def _calls(accumulation, dtype):
    """The three passes of a 2x7x6x3 * 3x3x3x4 SAME convolution, eager, as (name, call)."""
    x, w, dy = _data((2, 7, 6, 3), dtype), _data((3, 3, 3, 4), dtype), _data((2, 7, 6, 4), dtype)
    xs, ws = tf.constant([2, 7, 6, 3]), tf.constant([3, 3, 3, 4])
    kw = dict(strides=1, padding="SAME", accumulation=accumulation)
    return [
        ("fprop", lambda: tf_fp16ops.conv2d(x, w, **kw)),
        ("dgrad", lambda: tf_fp16ops.conv2d_backprop_input(xs, w, dy, **kw)),
        ("wgrad", lambda: tf_fp16ops.conv2d_backprop_filter(x, ws, dy, **kw)),
    ]


@pytest.mark.parametrize("accumulation, dtype", [("float16", np.float16), ("float32", np.float32)])
def test_a_repeated_call_runs_the_kept_op_with_the_same_bits(plans, accumulation, dtype):
    for name, call in _calls(accumulation, dtype):
        first = call().numpy()
        assert len(plans) == 1, name  # checked once
        for _ in range(3):
            again = call().numpy()
            np.testing.assert_array_equal(again.view(np.uint8), first.view(np.uint8), err_msg=name)
        assert len(plans) == 1, name  # not checked again
        plans.clear()


def test_the_kept_op_is_the_one_the_checked_path_chose(plans):
    """Float32 with accumulation='float32' keeps TensorFlow's op where the rule hands the call
    over, the op library's where it does not; each gives its own bits (compared with the op
    called directly)."""
    x, w = _data((2, 7, 6, 3)), _data((3, 3, 3, 4))
    attrs = ops._conv_attrs(1, "SAME", "NHWC", None, "float32")
    stock = stock_conv.stock_wins("fprop", tf.float32, [2, 7, 6, 3], [3, 3, 3, 4], None, attrs)
    if stock:
        want = tf.raw_ops.Conv2D(input=x, filter=w, strides=[1, 1, 1, 1], padding="SAME")
    else:
        want = ops.raw_ops.fp16_conv2d(x, w, **attrs)
    for _ in range(2):
        got = tf_fp16ops.conv2d(x, w, 1, "SAME", accumulation="float32")
        np.testing.assert_array_equal(got.numpy().view(np.uint32), want.numpy().view(np.uint32))
    (plan,) = ops._EAGER_PLANS.values()
    assert plan.func is (ops.gen_nn_ops.conv2d if stock else ops._ops.fp16_conv2d)


def test_every_differing_call_is_checked_and_raises_its_error(plans):
    x, w = _data((2, 7, 6, 3)), _data((3, 3, 3, 4))
    tf_fp16ops.conv2d(x, w, 1, "SAME", accumulation="float32")
    assert len(plans) == 1
    with pytest.raises(ValueError, match=r"filters must have the dtype of input \(float32\)"):
        tf_fp16ops.conv2d(x, tf.cast(w, tf.float16), 1, "SAME", accumulation="float32")
    with pytest.raises(ValueError, match="accumulation='float16' needs float16 inputs"):
        tf_fp16ops.conv2d(x, w, 1, "SAME", accumulation="float16")
    with pytest.raises(ValueError, match="strides must be"):
        tf_fp16ops.conv2d(x, w, True, "SAME", accumulation="float32")  # equal to 1, not 1
    # (the op's own check: InvalidArgumentError eagerly, ValueError when a graph is built)
    with pytest.raises(tf.errors.InvalidArgumentError, match="strides must be 1 in the batch"):
        tf_fp16ops.conv2d(x, w, [2, 1, 1, 1], "SAME", accumulation="float32")
    with pytest.raises(ValueError, match="name must be a string or None"):
        tf_fp16ops.conv2d(x, w, 1, "SAME", accumulation="float32", name=5)
    # Another shape, another sizes value: checked, and the output shapes by hand.
    assert tf_fp16ops.conv2d(x[:, :5], w, 1, "SAME", accumulation="float32").shape == (2, 5, 6, 4)
    dy = _data((2, 7, 6, 4))
    assert tf_fp16ops.conv2d_backprop_filter(
        x, tf.constant([3, 3, 3, 4]), dy, 1, "SAME", accumulation="float32"
    ).shape == (3, 3, 3, 4)
    with pytest.raises((ValueError, tf.errors.InvalidArgumentError)):
        tf_fp16ops.conv2d_backprop_filter(
            x, tf.constant([3, 3, 3, 5]), dy, 1, "SAME", accumulation="float32"
        )
    # Every call above reached the checks but the kept one and the bool stride (refused when
    # its attrs were checked, before the op is built).
    assert len(plans) == 8


def test_a_call_that_raised_keeps_nothing(plans):
    x, w = _data((1, 2, 2, 1)), _data((3, 3, 1, 1))  # VALID: the window exceeds the input
    for _ in range(2):
        with pytest.raises(tf.errors.InvalidArgumentError):
            tf_fp16ops.conv2d(x, w, 1, "VALID", accumulation="float32")
    assert ops._EAGER_PLANS == {} and len(plans) == 2


def test_operands_other_than_eager_tensors_take_the_checked_path(plans):
    x, w = np.ones((1, 4, 4, 2), np.float16), np.ones((3, 3, 2, 2), np.float16)
    for _ in range(2):
        y = tf_fp16ops.conv2d(x, w, 1, "VALID")
    assert y.numpy().tolist() == [[[[18.0, 18.0], [18.0, 18.0]], [[18.0, 18.0], [18.0, 18.0]]]]
    sizes = [1, 4, 4, 2]  # a list, not an int32 tensor
    for _ in range(2):
        tf_fp16ops.conv2d_backprop_input(
            sizes, tf.constant(w), tf.ones([1, 2, 2, 2], tf.float16), 1, "VALID"
        )
    assert len(plans) == 4 and ops._EAGER_PLANS == {}


def test_a_function_being_traced_takes_the_checked_path(plans):
    """Eager tensors captured by a tf.function are eager tensors while it is traced: the op it
    builds gets the caller's name scope, as without the fast path."""
    x, w = _data((1, 4, 4, 2), np.float16), _data((3, 3, 2, 2), np.float16)
    tf_fp16ops.conv2d(x, w, 1, "VALID", name="conv")  # kept
    graph = tf.function(lambda: tf_fp16ops.conv2d(x, w, 1, "VALID", name="conv"))
    ops_built = graph.get_concrete_function().graph.get_operations()
    assert [op.name for op in ops_built if op.type == "Fp16Conv2D"] == ["conv/Fp16Conv2D"]
    assert len(plans) == 2


def test_the_store_stays_bounded(plans):
    w = _data((1, 1, 1, 1), np.float16)
    for h in range(1, ops._EAGER_PLANS_SIZE + 10):
        tf_fp16ops.conv2d(_data((1, h, 1, 1), np.float16), w, 1, "VALID")
    assert 0 < len(ops._EAGER_PLANS) <= ops._EAGER_PLANS_SIZE


# oneDNN reads its floating-point math mode once per process, when it first runs: a BF16 mode
# set after a first float32 Conv2D leaves a later (new) problem's bits those of strict; set
# before it, it changes them (the control).
MODE_SCRIPT = r"""
import hashlib, os, sys
import numpy as np
import tensorflow as tf
rng = np.random.default_rng(1)
def conv(shape, k):
    x = tf.constant(rng.standard_normal(shape), tf.float32)
    w = tf.constant(rng.standard_normal([3, 3, shape[-1], k]), tf.float32)
    return tf.raw_ops.Conv2D(input=x, filter=w, strides=[1, 1, 1, 1], padding="SAME").numpy()
variable, when = sys.argv[1], sys.argv[2]
if when == "before":
    os.environ[variable] = "BF16"
conv([1, 6, 6, 8], 8)
if when == "after":
    os.environ[variable] = "BF16"
print(hashlib.sha1(conv([2, 20, 20, 64], 64).tobytes()).hexdigest())
"""


def _fresh_process(script: str, *args: str) -> str:
    """`script`'s output in a fresh process with oneDNN on and no math-mode variable set."""
    env = {k: v for k, v in os.environ.items() if k not in stock_conv.FPMATH_VARIABLES}
    env.update(TF_CPP_MIN_LOG_LEVEL="3", TF_ENABLE_ONEDNN_OPTS="1")
    out = subprocess.run(
        [sys.executable, "-c", script, *args], env=env, capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


def _mode_run(variable: str, when: str) -> str:
    return _fresh_process(MODE_SCRIPT, variable, when)


@pytest.mark.parametrize("variable", ["ONEDNN_DEFAULT_FPMATH_MODE", "TF_SET_ONEDNN_FPMATH_MODE"])
def test_onednn_keeps_the_math_mode_it_first_ran_with(variable):
    strict = _mode_run(variable, "never")
    if _mode_run(variable, "before") == strict:
        pytest.skip("oneDNN computes float32 convolutions the same in BF16 mode on this CPU")
    assert _mode_run(variable, "after") == strict


@pytest.fixture
def strict_not_yet(monkeypatch):
    """The oneDNN side in a process where oneDNN has not read its math mode yet (strict so far)."""
    monkeypatch.setattr(stock_conv, "onednn_runs_float32_convs", lambda: True)
    monkeypatch.setattr(stock_conv, "_no_gpu", lambda: True)
    for var in stock_conv.FPMATH_VARIABLES:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(stock_conv, "_strict_for_good", False)
    monkeypatch.setattr(stock_conv, "_non_strict_seen", False)


def test_the_mode_is_strict_for_good_once_onednn_ran_under_strict(strict_not_yet, monkeypatch):
    stock_conv.onednn_ran()
    monkeypatch.setenv("ONEDNN_DEFAULT_FPMATH_MODE", "BF16")
    assert stock_conv.strict_fpmath()
    # A mode seen before oneDNN ran is the one it runs with: not strict, then or later.
    monkeypatch.setattr(stock_conv, "_strict_for_good", False)
    stock_conv.onednn_ran()
    monkeypatch.delenv("ONEDNN_DEFAULT_FPMATH_MODE")
    assert not stock_conv.strict_fpmath()


def test_an_eager_call_handed_to_onednn_records_that_it_ran(plans, strict_not_yet):
    x, w = _data((2, 7, 6, 3)), _data((3, 3, 3, 4))
    tf_fp16ops.conv2d(x, w, 1, "SAME", accumulation="float32")
    assert stock_conv._strict_for_good


def test_an_empty_handed_over_call_records_nothing(plans, strict_not_yet, monkeypatch):
    """TensorFlow's oneDNN gradients return an empty batch without oneDNN reading its math mode:
    such a call neither makes the mode strict for good nor keeps its op, so a mode set after it
    still keeps float32 calls on the op library's kernels."""
    x0 = tf.zeros([0, 6, 6, 8])
    for _ in range(2):
        dw = tf_fp16ops.conv2d_backprop_filter(
            x0, tf.constant([3, 3, 8, 8]), x0, 1, "SAME", accumulation="float32"
        )
        assert dw.numpy().tolist() == np.zeros([3, 3, 8, 8]).tolist()  # an empty sum
    assert not stock_conv._strict_for_good and ops._EAGER_PLANS == {} and len(plans) == 2
    monkeypatch.setenv("ONEDNN_DEFAULT_FPMATH_MODE", "BF16")
    assert not stock_conv.strict_fpmath()
    x, w = _data((2, 7, 6, 3)), _data((3, 3, 3, 4))
    got = tf_fp16ops.conv2d(x, w, 1, "SAME", accumulation="float32")
    want = ops.raw_ops.fp16_conv2d(x, w, **ops._conv_attrs(1, "SAME", "NHWC", None, "float32"))
    np.testing.assert_array_equal(got.numpy().view(np.uint32), want.numpy().view(np.uint32))


def test_asynchronous_calls_keep_nothing(plans, strict_not_yet):
    """An asynchronous op has only been queued when the call returns (it may still fail, and
    oneDNN may not have run): nothing is kept or recorded."""
    x, w = _data((2, 7, 6, 3)), _data((3, 3, 3, 4))
    tf.config.experimental.set_synchronous_execution(False)
    try:
        for _ in range(2):
            y = tf_fp16ops.conv2d(x, w, 1, "SAME", accumulation="float32")
        y.numpy()
    finally:
        tf.config.experimental.set_synchronous_execution(True)
    assert ops._EAGER_PLANS == {} and not stock_conv._strict_for_good and len(plans) == 2
    tf_fp16ops.conv2d(x, w, 1, "SAME", accumulation="float32")  # synchronous: kept, recorded
    assert len(ops._EAGER_PLANS) == 1 and stock_conv._strict_for_good


def test_a_missing_out_backprop_is_the_checked_paths_error(plans):
    w, x = tf.ones([3, 3, 2, 2], tf.float16), tf.ones([1, 4, 4, 2], tf.float16)
    with pytest.raises(ValueError, match="NoneType"):
        tf_fp16ops.conv2d_backprop_input(tf.constant([1, 4, 4, 2]), w, None, 1, "SAME")
    with pytest.raises(ValueError, match="NoneType"):
        tf_fp16ops.conv2d_backprop_filter(x, tf.constant([3, 3, 2, 2]), None, 1, "SAME")


FIRST_CALL_EMPTY_SCRIPT = r"""
import os
import numpy as np
import tensorflow as tf
import tf_fp16ops
from tf_fp16ops import ops
x0 = tf.zeros([0, 6, 6, 8], tf.float32)
tf_fp16ops.conv2d_backprop_filter(x0, tf.constant([3, 3, 8, 8]), x0, 1, "SAME",
                                  accumulation="float32")
os.environ["ONEDNN_DEFAULT_FPMATH_MODE"] = "BF16"
rng = np.random.default_rng(1)
x = tf.constant(rng.standard_normal([2, 20, 20, 64]), tf.float32)
w = tf.constant(rng.standard_normal([3, 3, 64, 64]), tf.float32)
y = tf_fp16ops.conv2d(x, w, 1, "SAME", accumulation="float32").numpy()
lib = ops.raw_ops.fp16_conv2d(x, w, **ops._conv_attrs(1, "SAME", "NHWC", None, "float32")).numpy()
print(np.array_equal(y.view(np.uint32), lib.view(np.uint32)))
"""


def test_a_mode_set_after_an_empty_first_call_is_kept_out():
    """The case behind `test_an_empty_handed_over_call_records_nothing`, in a fresh process with
    oneDNN on: a BF16 mode set after an empty float32 wgrad (the first oneDNN op) must keep the
    next float32 forward on the op library's kernel (before the fix: TensorFlow's Conv2D in
    BF16, off by 0.25)."""
    assert _fresh_process(FIRST_CALL_EMPTY_SCRIPT) == "True"
