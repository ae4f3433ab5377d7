"""The Python wrappers' per-call shortcuts change nothing a caller can see: checked attrs are
reused only for the very same spelling of the arguments (type included, at every level), and
graph-mode ops keep the names the caller gave (eager ops have none, so no name scope is built)."""

import numpy as np
import pytest
import tensorflow as tf

import tf_fp16ops
from tf_fp16ops import ops


def test_attrs_are_reused_for_the_same_spelling_only():
    a = ops._conv_attrs((1, 1), "VALID", "NHWC", None, "float16")
    assert ops._conv_attrs((1, 1), "VALID", "NHWC", None, "float16") is a
    assert a["strides"] == [1, 1, 1, 1] and a["Tacc"] == tf.float16
    # Equal values of other types are other keys: checked again, never served the cached attrs.
    b = ops._conv_attrs([1, 1], "VALID", "NHWC", None, "float16")
    assert b is not a and b == a
    c = ops._conv_attrs((1, 1), "VALID", "NHWC", None, tf.float16)
    assert c is not a and c == a
    for bad in [(1, True), (1.0, 1.0), (True, 1)]:
        with pytest.raises(ValueError, match="strides must be"):
            ops._conv_attrs(bad, "VALID", "NHWC", None, "float16")
    with pytest.raises(ValueError, match="accumulation must be"):
        ops._conv_attrs((1, 1), "VALID", "NHWC", None, "Float16")


def test_arguments_that_have_no_exact_key_are_checked_every_call():
    # NumPy integers are valid strides but not cached; an unhashable value must not break the call.
    a = ops._conv_attrs(np.int64(2), "SAME", "NHWC", None, "float32")
    assert a["strides"] == [1, 2, 2, 1]
    assert ops._exact_key(np.int64(2)) is None
    assert ops._exact_key([[0, 0], [1, 1], [np.int32(1), 1], [0, 0]]) is None
    assert ops._exact_key((1, True)) != ops._exact_key((1, 1))
    assert ops._exact_key((1.0, 1.0)) is None
    deep = [1]
    for _ in range(100_000):  # no RecursionError: the checks refuse it with their own message
        deep = [deep]
    assert ops._exact_key((deep, "SAME", "NHWC", None, "float32")) is None
    with pytest.raises(ValueError, match=r"strides must be .*\[\[\[\[\.\.\.\]\]\]\]"):
        ops._conv_attrs(deep, "SAME", "NHWC", None, "float32")
    with pytest.raises(ValueError, match="padding must be"):
        ops._conv_attrs(1, deep, "NHWC", None, "float32")
    with pytest.raises(ValueError, match="accumulation must be"):
        ops._conv_attrs(1, "SAME", "NHWC", None, deep)
    with pytest.raises(ValueError, match=r"strides must be .*, \.\.\.\]$"):
        ops._conv_attrs(list(range(10**6)), "SAME", "NHWC", None, "float32")


def test_the_memo_of_checked_attrs_stays_bounded():
    for s in range(1, 2 * ops._ATTRS_CACHE_SIZE + 2):
        ops._conv_attrs(s, "VALID", "NHWC", None, "float32")
    assert 0 < len(ops._ATTRS_CACHE) <= ops._ATTRS_CACHE_SIZE


def test_graph_ops_carry_the_given_name_and_eager_calls_run_without_a_scope():
    x = np.ones((1, 4, 4, 2), np.float16)
    w = np.ones((3, 3, 2, 2), np.float16)

    @tf.function
    def f(x):
        return tf_fp16ops.conv2d(x, w, 1, "SAME", name="my_conv")

    graph = f.get_concrete_function(tf.TensorSpec(x.shape, tf.float16)).graph
    names = [op.name for op in graph.get_operations() if op.type == "Fp16Conv2D"]
    assert names == ["my_conv/Fp16Conv2D"]
    # Eager: same result with or without a name (by hand: 2 channels x taps inside the window;
    # the centre of a 4x4 SAME 3x3 all-ones conv sums 3 * 3 * 2 = 18 ones).
    y = tf_fp16ops.conv2d(x, w, 1, "SAME", name="my_conv").numpy()
    assert y[0, 1, 1, 0] == 18 and y[0, 0, 0, 0] == 8


@pytest.mark.parametrize("bad", [123, b"conv", ["a"], object()])
def test_a_name_that_is_not_a_string_is_refused_eager_and_traced(bad):
    x = np.ones((1, 5, 5, 2), np.float16)
    w = np.ones((3, 3, 2, 2), np.float16)
    wd = np.ones((3, 3, 2, 1), np.float16)
    for call in (
        lambda: tf_fp16ops.conv2d(x, w, 1, "SAME", name=bad),
        lambda: tf_fp16ops.conv2d_backprop_input([1, 5, 5, 2], w, x, 1, "SAME", name=bad),
        lambda: ops.depthwise_conv2d(x, wd, 1, "SAME", name=bad),
    ):
        with pytest.raises(ValueError, match="name must be a string or None"):
            call()
        with pytest.raises(ValueError, match="name must be a string or None"):
            tf.function(call)()


def _deep_dict(depth):
    d = 1
    for _ in range(depth):
        d = {0: d}
    return d


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"strides": set(range(10**6))}, "strides must be"),
        ({"strides": _deep_dict(100_000)}, "strides must be"),
        ({"accumulation": _deep_dict(100_000)}, "accumulation must be"),
        ({"padding": "S" * 10**7}, "padding must be"),
        ({"data_format": "N" * 10**7}, "data_format must be"),
        ({"strides": 10**5000}, "strides entries must fit in int64, got .*<int of 16610 bits>"),
        ({"strides": [10**5000, 1]}, "strides entries must fit in int64"),
        ({"padding": [[0, 0], [10**5000, 0], [0, 0], [0, 0]]}, "padding entries must fit"),
    ],
)
def test_hostile_arguments_get_one_short_message_naming_them(kwargs, message):
    x = np.ones((1, 5, 5, 2), np.float16)
    w = np.ones((3, 3, 2, 2), np.float16)
    args = {"strides": 1, "padding": "SAME", **kwargs}
    with pytest.raises(ValueError, match=message) as err:
        tf_fp16ops.conv2d(x, w, **args)
    assert len(str(err.value)) < 2000


def test_input_sizes_with_huge_ints_get_a_short_message():
    w = np.ones((3, 3, 2, 2), np.float16)
    dy = np.ones((1, 5, 5, 2), np.float16)
    with pytest.raises(ValueError, match="input_sizes must be") as err:
        tf_fp16ops.conv2d_backprop_input([10**5000] * 4, w, dy, 1, "SAME")
    assert len(str(err.value)) < 2000


def test_long_list_arguments_cost_no_more_than_their_check():
    # The memo's key stops at lists longer than any valid one (5 entries) before building anything.
    row = [0] * 3000
    assert ops._exact_key(([row] * 3000, "SAME", "NHWC", None, "float16")) is None
    assert ops._exact_key(list(range(6))) is None


RAW_OPS_IN_A_FUNCTION = """
import numpy as np
import tensorflow as tf
from tf_fp16ops import ops

r = ops.raw_ops
x = tf.constant(np.arange(32).reshape(1, 4, 4, 2) % 5, tf.float16)
w = tf.constant(np.ones((1, 1, 2, 2)), tf.float16)
a = dict(strides=[1, 1, 1, 1], padding="VALID", Tacc=tf.float16)
calls = [
    lambda: r.fp16_conv2d(x, w, **a),
    lambda: r.Fp16Conv2D(input=x, filter=w, **a),
    lambda: r.fp16_conv2d_backprop_input([1, 4, 4, 2], w, x, **a),
    lambda: r.Fp16Conv2DBackpropFilter(input=x, filter_sizes=[1, 1, 2, 2], out_backprop=x, **a),
    lambda: r.fp16_mat_mul(tf.ones((2, 3), tf.float16), x[0, 0, :3], Tacc=tf.float16),
]
for call in calls:
    graph = tf.function(call)().numpy()
    assert (graph == call().numpy()).all()
print(float(tf.function(calls[0])().numpy().sum()))
"""


def test_raw_ops_trace_in_a_function_without_autograph_warnings(tmp_path):
    """The op functions of `ops.raw_ops` (snake_case and CamelCase) called inside a tf.function
    give the eager results and print nothing: AutoGraph, which could not read their generated
    code, printed "AutoGraph could not transform <function fp16_conv2d ...>" (once per function
    and process, hence a fresh process). Sum by hand: x holds (0..31) mod 5 over 16 positions of
    2 channels (six cycles 0..4 and 0, 1: 61), each output channel sums both channels, and 2
    output channels: 2 * 61 = 122."""
    import os
    import subprocess
    import sys

    # From a file: AutoGraph converts only functions whose source it can read (not `-c` code).
    script = tmp_path / "raw_ops_in_a_function.py"
    script.write_text(RAW_OPS_IN_A_FUNCTION)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run([sys.executable, script], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert float(out.stdout.split()[-1]) == 122.0
    assert "AutoGraph" not in out.stderr, out.stderr


def test_raw_ops_help_lists_the_op_functions():
    """help(ops.raw_ops) lists every op function of the library (pydoc lists a module's functions
    whose __module__ is the module's own name): both spellings of each of the six ops."""
    import pydoc

    text = pydoc.render_doc(ops.raw_ops, renderer=pydoc.plaintext)
    names = ["conv2d", "conv2d_backprop_input", "conv2d_backprop_filter", "depthwise_conv2d"]
    names += ["mat_mul", "ops_cpu_isa"]
    for name in names:
        assert f"fp16_{name}(" in text, name
    assert len(ops.raw_ops.__all__) == 12
    assert {n for n in ops.raw_ops.__all__ if n.islower()} == {f"fp16_{n}" for n in names}
