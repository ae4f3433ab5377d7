"""Bad input gets a clear error naming the argument and the value, in eager and graph mode."""

import numpy as np
import pytest
import tensorflow as tf

import tf_fp16ops
from tf_fp16ops._platform import library as _library

_ops = _library.load()
X = np.zeros((1, 5, 5, 4), np.float16)
W = np.zeros((3, 3, 4, 2), np.float16)
ERRORS = (tf.errors.InvalidArgumentError, ValueError)


def raw(x=X, w=W, **attrs):
    base = dict(
        Tacc=tf.float16,
        strides=[1, 1, 1, 1],
        padding="VALID",
        explicit_paddings=[],
        data_format="NHWC",
        dilations=[1, 1, 1, 1],
    )
    base.update(attrs)
    return _ops.fp16_conv2d(x, w, **base)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: raw(x=np.zeros((5, 5, 4), np.float16)), "input must be 4-D"),
        (lambda: raw(w=np.zeros((3, 3, 4), np.float16)), "filter must be 4-D"),
        (
            lambda: raw(w=np.zeros((3, 3, 3, 2), np.float16)),
            "must be a multiple of the filter's in_channels (3)",
        ),
        (
            lambda: raw(w=np.zeros((3, 3, 2, 3), np.float16)),
            "out_channels (3) must be a multiple of the number of groups (2",
        ),
        (
            lambda: raw(strides=[2, 1, 1, 1]),
            "strides must be 1 in the batch and channel dimensions, got [2, 1, 1, 1]",
        ),
        (
            lambda: raw(strides=[1, 1, 1, 2]),
            "strides must be 1 in the batch and channel dimensions, got [1, 1, 1, 2]",
        ),
        (
            lambda: raw(strides=[1, 0, 1, 1]),
            "strides must be positive in the spatial dimensions, got [1, 0, 1, 1]",
        ),
        (
            lambda: raw(strides=[1, -2, 1, 1]),
            "strides must be positive in the spatial dimensions, got [1, -2, 1, 1]",
        ),
        (lambda: raw(strides=[1, 1, 1]), "strides must have 4 entries"),
        (
            lambda: raw(dilations=[1, 0, 1, 1]),
            "dilations must be positive in the spatial dimensions, got [1, 0, 1, 1]",
        ),
        (
            lambda: raw(dilations=[2, 1, 1, 1]),
            "dilations must be 1 in the batch and channel dimensions",
        ),
        (
            lambda: raw(padding="EXPLICIT", explicit_paddings=[0, 0, 1, 1]),
            "explicit_paddings must have 8 entries",
        ),
        (
            lambda: raw(padding="EXPLICIT", explicit_paddings=[0, 0, -1, 1, 0, 0, 0, 0]),
            "explicit_paddings must be non-negative, got [0, 0, -1, 1, 0, 0, 0, 0]",
        ),
        (
            lambda: raw(padding="EXPLICIT", explicit_paddings=[1, 0, 0, 0, 0, 0, 0, 0]),
            "explicit_paddings must be 0 in the batch and channel dimensions",
        ),
        (
            lambda: raw(padding="VALID", explicit_paddings=[0] * 8),
            "explicit_paddings must be empty unless padding is EXPLICIT",
        ),
        (
            lambda: raw(w=np.zeros((7, 3, 4, 2), np.float16)),
            "output height would be below 1: input height 5 is smaller than the effective "
            "filter height 7",
        ),
        (
            lambda: raw(
                w=np.zeros((9, 3, 4, 2), np.float16),
                padding="EXPLICIT",
                explicit_paddings=[0, 0, 1, 2, 0, 0, 0, 0],
            ),
            "output height would be below 1: input height 5 plus explicit padding (8) is smaller "
            "than the effective filter height 9",
        ),
        (lambda: raw(x=X.astype(np.float32), w=W.astype(np.float32)), "Tacc=half requires T=half"),
    ],
)
@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_bad_attrs_and_shapes(call, message, mode):
    if mode == "eager":
        with pytest.raises(ERRORS) as e:
            call()
    else:
        with pytest.raises(ERRORS) as e:
            tf.function(call).get_concrete_function()
    assert message in str(e.value)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            dict(padding="FULL"),
            "padding must be 'SAME', 'VALID' or a list of 4 [before, after] pairs, got 'FULL'",
        ),
        (dict(padding=[[0, 0], [1, 1]]), "explicit padding must be 4 [before, after] pairs"),
        (
            dict(strides=[1, 2, 3]),
            "strides must be an int or a list of 1, 2 or 4 ints, got [1, 2, 3]",
        ),
        (dict(strides="two"), "strides must be an int or a list of 1, 2 or 4 ints, got 'two'"),
        (dict(dilations=[1, 1, 1]), "dilations must be an int or a list of 1, 2 or 4 ints"),
        (dict(strides=0), "strides must be positive, got 0"),
        (dict(strides=[1, -2]), "strides must be positive, got [1, -2]"),
        (dict(dilations=[1, 0, 1, 1]), "dilations must be positive, got [1, 0, 1, 1]"),
        (
            dict(padding=[[0, 0], [-1, 1], [1, 1], [0, 0]]),
            "explicit padding must be non-negative, got [[0, 0], [-1, 1], [1, 1], [0, 0]]",
        ),
        (dict(data_format="NCWH"), "data_format must be 'NHWC' or 'NCHW', got 'NCWH'"),
        (dict(accumulation="bfloat16"), "accumulation must be 'float16' or 'float32'"),
        (dict(accumulation=tf.int32), "accumulation must be 'float16' or 'float32'"),
        # The whole argument is shown, not the item that failed.
        (
            dict(padding=[0, 0, 1, 1, 1, 1, 0, 0]),
            "padding must be 'SAME', 'VALID' or a list of 4 [before, after] pairs of ints, got "
            "[0, 0, 1, 1, 1, 1, 0, 0]",
        ),
        (dict(padding={"top": 1}), "pairs of ints, got {'top': 1}"),
        # The op's list(int) attrs hold int32 (TensorFlow's error at run time before).
        (dict(strides=2**40), "strides entries must fit in int32, got 1099511627776"),
        (
            dict(padding=[[0, 0], [2**31, 0], [0, 0], [0, 0]]),
            "explicit padding entries must fit in int32, got [[0, 0], [2147483648, 0], [0, 0], ",
        ),
        # A generator that never ends is read no further than 65 items.
        (dict(strides=iter(int, 1)), "strides must be an int or a list of 1, 2 or 4 ints, got"),
    ],
)
def test_python_argument_errors(kwargs, message):
    args = dict(strides=1, padding="VALID")
    args.update(kwargs)
    with pytest.raises(ValueError) as e:
        tf_fp16ops.conv2d(X, W, **args)
    assert message in str(e.value)


def test_sizes_may_mix_tensors_and_ints_as_in_conv2d_transpose():
    # [tf.shape(dy)[0], H, W, C]: refused as "must be 4 integers" before.
    dy = tf.ones((2, 4, 4, 2), tf.float16)
    w = tf.ones((3, 3, 3, 2), tf.float16)

    @tf.function(input_signature=[tf.TensorSpec([None, 4, 4, 2], tf.float16)])
    def dgrad(dy):
        sizes = [tf.shape(dy)[0], 4, 4, 3]
        return tf_fp16ops.conv2d_backprop_input(sizes, w, dy, 1, "SAME", accumulation="float16")

    want = tf_fp16ops.conv2d_backprop_input([2, 4, 4, 3], w, dy, 1, "SAME", accumulation="float16")
    assert np.array_equal(dgrad(dy).numpy(), want.numpy())


@pytest.mark.parametrize(
    "sizes",
    [
        [tf.constant(2), 2**32 + 6, 6, 2],  # was packed into int32 and wrapped to 6
        [tf.constant(2), np.int64(2**32 + 6), 6, 2],
        [tf.constant(2), True, 6, 2],  # a bool, refused in plain lists too
        [tf.constant([2]), 6, 6, 2],  # not a scalar
        [tf.constant(2), 6, 6],
        [tf.constant(2.0), 6, 6, 2],
    ],
    ids=["int_beyond_int32", "np_int64", "bool", "vector", "three", "float_tensor"],
)
def test_mixed_sizes_are_checked_not_wrapped(sizes):
    w = tf.ones((3, 3, 2, 4), tf.float16)
    dy = tf.ones((2, 4, 4, 4), tf.float16)
    with pytest.raises(ValueError, match=r"input_sizes must be 4 integers in \[0, 2\^31 - 1\]"):
        tf_fp16ops.conv2d_backprop_input(sizes, w, dy, 1, "VALID", accumulation="float16")


def test_a_zero_dimensional_array_is_an_int():
    # strides=np.array(2) raised "TypeError: iteration over a 0-d array".
    y = tf_fp16ops.conv2d(X, W, strides=np.array(2), padding="VALID", accumulation="float16")
    assert y.shape == tf_fp16ops.conv2d(X, W, 2, "VALID", accumulation="float16").shape


@pytest.mark.parametrize("call", ["matmul", "einsum"])
def test_matmul_names_a_bad_name(call):
    a = tf.ones((2, 2), tf.float16)
    with pytest.raises(ValueError, match="^name must be a string or None, got 5$"):
        if call == "matmul":
            tf_fp16ops.matmul(a, a, name=5)
        else:
            tf_fp16ops.einsum("ij,jk->ik", a, a, name=5)


def test_unsupported_dtypes():
    with pytest.raises(ValueError, match="input must be float16 or float32, got dtype float64"):
        tf_fp16ops.conv2d(X.astype(np.float64), W.astype(np.float64), 1, "VALID")
    with pytest.raises(
        ValueError, match=r"filters must have the dtype of input \(float16\), got float32"
    ):
        tf_fp16ops.conv2d(X, W.astype(np.float32), 1, "VALID")
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match="attr 'T' of double is not in the list of allowed values: half, float",
    ):
        raw(x=X.astype(np.float64), w=W.astype(np.float64), Tacc=tf.float32)


def test_element_counts_that_overflow_are_rejected_at_graph_build():
    # Input (2^30 * 4 elements) and filter (4 * 2^40) are representable; the output (2^70) is not.
    @tf.function(
        input_signature=[
            tf.TensorSpec([1 << 30, 1, 1, 4], tf.float16),
            tf.TensorSpec([1, 1, 4, 1 << 40], tf.float16),
        ]
    )
    def f(x, w):
        return tf_fp16ops.conv2d(x, w, 1, "VALID")

    with pytest.raises(ValueError, match="output has too many elements"):
        f.get_concrete_function()


def test_shape_function_keeps_int64_sizes_beyond_int32():
    # 3 * 2^31 positions: the output shape is computed with int64 sizes (nothing is allocated).
    @tf.function(
        input_signature=[
            tf.TensorSpec([1, 1, 3 << 31, 1], tf.float16),
            tf.TensorSpec([1, 2, 1, 1], tf.float16),
        ]
    )
    def f(x, w):
        return tf_fp16ops.conv2d(x, w, 1, "VALID")

    assert f.get_concrete_function().output_shapes.as_list() == [1, 1, (3 << 31) - 1, 1]


def test_unknown_shapes_give_partial_output_shape():
    @tf.function(
        input_signature=[
            tf.TensorSpec([None, None, None, 4], tf.float16),
            tf.TensorSpec([3, 3, 4, 8], tf.float16),
        ]
    )
    def f(x, w):
        return tf_fp16ops.conv2d(x, w, 1, "SAME")

    assert f.get_concrete_function().output_shapes.as_list() == [None, None, None, 8]


@pytest.mark.parametrize(
    "data_format, x_shape, expected",
    [
        ("NHWC", [None, 32, 30, 4], [None, 16, 15, 8]),
        ("NCHW", [None, 4, 32, 30], [None, 8, 16, 15]),
        ("NHWC", [None, 32, None, None], [None, 16, None, 8]),
    ],
)
def test_unknown_batch_keeps_spatial_output_sizes(data_format, x_shape, expected):
    # A Keras export has an unknown batch: the spatial sizes must still be inferred (FLOPs in the
    # audit).
    @tf.function(
        input_signature=[
            tf.TensorSpec(x_shape, tf.float16),
            tf.TensorSpec([3, 3, 4, 8], tf.float16),
        ]
    )
    def f(x, w):
        return tf_fp16ops.conv2d(x, w, 2, "SAME", data_format=data_format)

    assert f.get_concrete_function().output_shapes.as_list() == expected


def test_unknown_batch_still_reports_a_known_bad_size():
    @tf.function(
        input_signature=[
            tf.TensorSpec([None, 2, 9, 4], tf.float16),
            tf.TensorSpec([3, 3, 4, 8], tf.float16),
        ]
    )
    def f(x, w):
        return tf_fp16ops.conv2d(x, w, 1, "VALID")

    with pytest.raises(ValueError, match="output height would be below 1"):
        f.get_concrete_function()


@pytest.mark.parametrize(
    "sizes, message",
    [
        ([1, 5, 5], "input_sizes must be a 1-D tensor of 4 int32 values"),
        ([1, -5, 5, 4], "input_sizes must be non-negative"),
        (
            [1, 6, 5, 4],
            "out_backprop has shape [1,3,3,2] but the convolution of input_sizes [1, 6, 5, 4]",
        ),
    ],
)
def test_backprop_input_bad_sizes(sizes, message):
    # The kernel's own checks (sizes only known at run time), through the raw op.
    dy = np.zeros((1, 3, 3, 2), np.float16)
    with pytest.raises(ERRORS) as e:
        _ops.fp16_conv2d_backprop_input(
            tf.constant(sizes, tf.int32),
            W,
            dy,
            Tacc=tf.float16,
            strides=[1, 1, 1, 1],
            padding="VALID",
        )
    assert message in str(e.value)


@pytest.mark.parametrize(
    "sizes, message",
    [
        ([3, 3, 4], "filter_sizes must be a 1-D tensor of 4 int32 values"),
        ([3, 3, 4, 5], "out_backprop has shape [1,3,3,2] but the convolution of input"),
    ],
)
def test_backprop_filter_bad_sizes(sizes, message):
    dy = np.zeros((1, 3, 3, 2), np.float16)
    with pytest.raises(ERRORS) as e:
        _ops.fp16_conv2d_backprop_filter(
            X,
            tf.constant(sizes, tf.int32),
            dy,
            Tacc=tf.float16,
            strides=[1, 1, 1, 1],
            padding="VALID",
        )
    assert message in str(e.value)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(strides="12"), "strides must be an int or a list of 1, 2 or 4 ints, got '12'"),
        (
            dict(strides=[1.5, 1]),
            "strides must be an int or a list of 1, 2 or 4 ints, got [1.5, 1]",
        ),
        (dict(strides=[True, 1]), "strides must be an int or a list of 1, 2 or 4 ints"),
        (dict(strides=2**63), "strides entries must fit in int64"),
        (dict(dilations=[1, 2**70]), "dilations entries must fit in int64"),
        (
            dict(padding=[[0, 0], [1.9, 1.9], [1, 1], [0, 0]]),
            "padding must be 'SAME', 'VALID' or a list of 4 [before, after] pairs of ints",
        ),
        (
            dict(padding=["00", "11", "11", "00"]),
            "padding must be 'SAME', 'VALID' or a list of 4 [before, after] pairs of ints",
        ),
        (dict(padding=[[0, 0], [2**63, 0], [0, 0], [0, 0]]), "padding entries must fit in int64"),
    ],
)
def test_python_arguments_are_not_coerced(kwargs, message):
    args = dict(strides=1, padding="VALID")
    args.update(kwargs)
    with pytest.raises(ValueError) as e:
        tf_fp16ops.conv2d(X, W, **args)
    assert message in str(e.value)


@pytest.mark.parametrize(
    "sizes, message",
    [
        (
            [True, 5, 5, 4],
            "input_sizes must be 4 integers (a 1-D int32 tensor), got [True, 5, 5, 4]",
        ),
        (
            [1, 2**63, 5, 4],
            f"input_sizes must be 4 integers in [0, 2^31 - 1], got [1, {2**63}, 5, 4]",
        ),
    ],
)
def test_sizes_are_shown_as_given(sizes, message):
    """NumPy would read True as 1 and turn 2**63 into a float: the list is checked as written."""
    with pytest.raises(ValueError) as e:
        tf_fp16ops.conv2d_backprop_input(sizes, W, np.ones((1, 3, 3, 2), np.float16), 1, "VALID")
    assert message in str(e.value)


def test_unknown_int64_sizes_below_zero_are_refused_at_run_time():
    """An int64 size not known when the graph is built is checked when it runs, both bounds."""
    f = tf.function(
        lambda s: tf_fp16ops.conv2d_backprop_input(
            s, W, np.ones((1, 3, 3, 2), np.float16), 1, "VALID"
        ),
        input_signature=[tf.TensorSpec([4], tf.int64)],
    )
    with pytest.raises(tf.errors.InvalidArgumentError, match="input_sizes must be non-negative"):
        f(tf.constant([1, 5 - 2**32, 5, 4], tf.int64))


@pytest.mark.parametrize("bad", [(1, True), (1.0, 1.0), (True,)])
def test_arguments_equal_to_valid_ones_are_still_refused(bad):
    """(1, True) and (1.0, 1.0) compare and hash equal to (1, 1): a valid call just before must not
    let them through (no memo of checked arguments)."""
    tf_fp16ops.conv2d(X, W, strides=(1, 1), padding="VALID")
    tf_fp16ops.conv2d(X, W, strides=(1,), padding="VALID")
    with pytest.raises(ValueError, match="strides must be an int or a list of 1, 2 or 4 ints"):
        tf_fp16ops.conv2d(X, W, strides=bad, padding="VALID")


@pytest.mark.parametrize(
    "sizes, message",
    [
        (
            [1, 2**32 + 5, 5, 4],
            "input_sizes must be 4 integers in [0, 2^31 - 1], got [1, 4294967301, 5, 4]",
        ),
        ([1, -5, 5, 4], "input_sizes must be 4 integers in [0, 2^31 - 1], got [1, -5, 5, 4]"),
        ([3.7, 5, 5, 4], "input_sizes must be 4 integers (a 1-D int32 tensor)"),
        (
            tf.constant([1, 2**31, 5, 4], tf.int64),
            "input_sizes must be 4 integers in [0, 2^31 - 1]",
        ),
        (
            tf.constant([1.0, 5, 5, 4]),
            "input_sizes must be an int32 (or int64) tensor, got dtype float32",
        ),
        (
            tf.constant([1, -5, 5, 4], tf.int32),
            "input_sizes must be 4 integers in [0, 2^31 - 1], got [1, -5, 5, 4]",
        ),
    ],
)
@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_sizes_are_never_wrapped_to_int32(sizes, message, mode):
    dy = np.zeros((1, 3, 3, 2), np.float16)

    def call():
        return tf_fp16ops.conv2d_backprop_input(sizes, W, dy, 1, "VALID")

    with pytest.raises(ValueError) as e:
        call() if mode == "eager" else tf.function(call).get_concrete_function()
    assert message in str(e.value)


def test_backprop_wrappers_check_dtypes():
    dy = np.zeros((1, 3, 3, 2), np.float64)
    with pytest.raises(ValueError, match="filters must be float16 or float32, got dtype float64"):
        tf_fp16ops.conv2d_backprop_input([1, 5, 5, 4], W.astype(np.float64), dy, 1, "VALID")
    with pytest.raises(
        ValueError, match=r"out_backprop must have the dtype of input \(float16\), got float32"
    ):
        tf_fp16ops.conv2d_backprop_filter(X, [3, 3, 4, 2], dy.astype(np.float32), 1, "VALID")
    with pytest.raises(
        ValueError, match=r"^out_backprop must have the dtype of filters \(float16\), got float32$"
    ):
        tf_fp16ops.conv2d_backprop_input([1, 5, 5, 4], W, dy.astype(np.float32), 1, "VALID")


def test_huge_dilation_with_unknown_spatial_sizes():
    # Valid in eager mode; shape inference with unknown H/W must not reject it.
    x = tf.ones((1, 5, 5, 8), tf.float16)
    w = tf.ones((2, 2, 8, 4), tf.float16)
    eager = tf_fp16ops.conv2d(x, w, 1, "SAME", dilations=2**30 - 1)
    assert eager.shape == (1, 5, 5, 4)

    @tf.function(
        input_signature=[
            tf.TensorSpec([None, None, None, 8], tf.float16),
            tf.TensorSpec([2, 2, 8, 4], tf.float16),
        ]
    )
    def f(a, b):
        return tf_fp16ops.conv2d(a, b, 1, "SAME", dilations=2**30 - 1)

    assert f.get_concrete_function().output_shapes.as_list() == [None, None, None, 4]

    @tf.function(
        input_signature=[
            tf.TensorSpec([None] * 4, tf.float16),
            tf.TensorSpec([3, 3, 8, 4], tf.float16),
        ]
    )
    def g(a, b):
        return tf_fp16ops.conv2d(a, b, 1, "VALID", dilations=2**30)

    # No limit on filter size x dilation (2 * 2^30 + 1 > 2^31): the shape is unknown at graph
    # build, and a real input smaller than the dilated filter is the usual size error.
    assert g.get_concrete_function().output_shapes.as_list() == [None, None, None, 4]
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match="input height 5 .* smaller than the effective filter height 2147483649",
    ):
        g(tf.ones((1, 5, 5, 8), tf.float16), tf.ones((3, 3, 8, 4), tf.float16))


@pytest.mark.parametrize(
    "call",
    [
        lambda x, w: tf_fp16ops.conv2d(x, w, 1, "VALID"),
        lambda x, w: tf_fp16ops.conv2d_backprop_input([1, 4, 4, 2], w, x[:, :2, :2, :], 1, "VALID"),
        lambda x, w: tf_fp16ops.conv2d_backprop_filter(
            x, [3, 3, 2, 2], x[:, :2, :2, :], 1, "VALID"
        ),
        lambda x, w: tf_fp16ops.matmul(x[0, 0], w[0, 0]),
    ],
    ids=["conv2d", "dgrad", "wgrad", "matmul"],
)
def test_float32_inputs_with_the_default_float16_accumulation_is_a_value_error(call):
    """The default accumulation is float16, which needs float16 inputs: every wrapper says so
    before the op runs, naming both ways out."""
    x, w = np.ones((1, 4, 4, 2), np.float32), np.ones((3, 3, 2, 2), np.float32)
    with pytest.raises(ValueError, match=r"accumulation='float16' needs float16 inputs"):
        call(x, w)


def test_einsum_takes_two_operands_and_accumulation_by_keyword():
    a = np.ones((2, 3), np.float16)
    with pytest.raises(TypeError):
        tf_fp16ops.einsum("ij,jk,kl->il", a, a.T, a)
    np.testing.assert_array_equal(
        tf_fp16ops.einsum("ij,jk->ik", a, a.T, accumulation="float32").numpy(),
        np.full((2, 2), 3.0, np.float16),
    )


def test_padding_and_data_format_take_any_case():
    # As documented: Keras writes 'same'/'valid'; the op attrs get the upper-case names.
    rng = np.random.default_rng(0)
    x = tf.constant(rng.standard_normal((1, 5, 5, 2)).astype(np.float16))
    w = tf.constant(rng.standard_normal((3, 3, 2, 2)).astype(np.float16))
    want = tf_fp16ops.conv2d(x, w, 1, "SAME", data_format="NHWC").numpy()
    got = tf_fp16ops.conv2d(x, w, 1, "same", data_format="nhwc").numpy()
    assert want.shape == (1, 5, 5, 2)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    dw = tf.constant(rng.standard_normal((3, 3, 2, 1)).astype(np.float16))
    a = tf_fp16ops.ops.depthwise_conv2d(x, dw, 1, "Valid").numpy()
    b = tf_fp16ops.ops.depthwise_conv2d(x, dw, 1, "VALID").numpy()
    assert a.shape == (1, 3, 3, 2)
    np.testing.assert_array_equal(a.view(np.uint16), b.view(np.uint16))
    with pytest.raises(ValueError, match="padding must be 'SAME', 'VALID' or a list"):
        tf_fp16ops.conv2d(x, w, 1, "sam")
