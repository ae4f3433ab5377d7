"""tf_fp16ops.layers.Conv2D against keras.layers.Conv2D and the NumPy references.

float32 accumulation: both layers compute sum(x*w) in fp32 in some order, so each is within gamma_K
* sum|x*w| of the exact value (Higham 2002, §3.1; tests/support/reference.gamma_bound) and they
differ by at most twice that. float16 accumulation: bit-exact against tests/support/reference.conv2d
(accumulation='half') on the float16-rounded input and kernel.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from support import reference
from support.keras_reference import StockLayer
from tf_fp16ops.layers import Conv2D

U32 = 2.0**-24
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

LAYER_ARGS = [
    dict(filters=4, kernel_size=3),
    dict(filters=5, kernel_size=(3, 2), strides=2, padding="same"),
    dict(filters=4, kernel_size=3, dilation_rate=2, padding="same", activation="relu"),
    dict(filters=6, kernel_size=3, groups=2, use_bias=False),
    dict(filters=4, kernel_size=(2, 3), strides=(1, 2), data_format="channels_first"),
    dict(
        filters=3,
        kernel_size=1,
        kernel_regularizer="l2",
        bias_constraint="non_neg",
        name="one_by_one",
    ),
]


def _nhwc_ref(x, w, args, accumulation):
    """Reference convolution for the Keras arguments, in NHWC."""
    s = args.get("strides", 1)
    d = args.get("dilation_rate", 1)

    def pair(v):
        return tuple(v) if isinstance(v, (tuple, list)) else (v, v)

    padding = args.get("padding", "valid").upper()
    return reference.conv2d(x, w, pair(s), pair(d), padding, accumulation)


def _input(args, dtype="float32", seed=0):
    x = np.random.default_rng(seed).normal(size=(2, 7, 8, 4)).astype(dtype)
    return x.transpose(0, 3, 1, 2) if args.get("data_format") == "channels_first" else x


@pytest.mark.parametrize(
    "args", LAYER_ARGS, ids=lambda a: ",".join(f"{k}={v}" for k, v in a.items())
)
def test_float32_accumulation_matches_keras_conv2d(args):
    x = _input(args)
    ref_layer = StockLayer(keras.layers.Conv2D, args, x.shape)
    expected = keras.ops.convert_to_numpy(ref_layer(x))
    layer = Conv2D(accumulation="float32", **args)
    layer.build(x.shape)
    weights = ref_layer.get_weights()
    if len(weights) > 1:
        weights[1] = np.random.default_rng(3).normal(size=weights[1].shape).astype("float32")
        ref_layer.set_weights(weights)
        expected = keras.ops.convert_to_numpy(ref_layer(x))
    layer.set_weights(weights)
    got = keras.ops.convert_to_numpy(layer(x))
    assert got.shape == expected.shape and got.dtype == np.float32
    # Bound from the bias-free pre-activation: sum|x*w| through the float64 reference.
    x_nhwc = x.transpose(0, 2, 3, 1) if args.get("data_format") == "channels_first" else x
    abs_sum = _nhwc_ref(
        np.abs(x_nhwc).astype(np.float64), np.abs(weights[0]).astype(np.float64), args, "float64"
    )
    if args.get("data_format") == "channels_first":
        abs_sum = abs_sum.transpose(0, 3, 1, 2)
    k = int(np.prod(weights[0].shape[:3]))
    bound = 2 * reference.gamma_bound(k + 1, abs_sum, U32) + 4 * U32 * np.abs(
        expected
    )  # + bias add
    assert np.all(np.abs(got - expected) <= bound)


@pytest.mark.parametrize("args", LAYER_ARGS[:4], ids=str)
def test_float16_accumulation_bit_exact_in_float32_model(args):
    """Under the float32 policy the layer rounds x and the kernel to float16 and runs T=half."""
    x = _input(args, seed=1)
    layer = Conv2D(accumulation="float16", **{**args, "use_bias": False, "activation": None})
    got = keras.ops.convert_to_numpy(layer(x))
    assert got.dtype == np.float32
    w16 = keras.ops.convert_to_numpy(layer.kernel).astype(np.float16)
    expected = _nhwc_ref(x.astype(np.float16), w16, args, "half").astype(np.float32)
    np.testing.assert_array_equal(got, expected)


def _conv_attrs(fn, *args):
    graph = fn.get_concrete_function(*args).graph
    ops = [op for op in graph.get_operations() if op.type == "Fp16Conv2D"]
    assert len(ops) == 1
    return ops[0].get_attr("T"), ops[0].get_attr("Tacc"), [i.op.type for i in ops[0].inputs]


@pytest.mark.parametrize("accumulation", ["float16", "float32"])
def test_mixed_float16_policy(accumulation):
    x = np.random.default_rng(2).normal(size=(2, 6, 6, 3)).astype("float32")
    layer = Conv2D(4, 3, padding="same", accumulation=accumulation, dtype="mixed_float16")
    y = layer(x)
    assert y.dtype == tf.float16
    assert [v.dtype for v in layer.weights] == ["float32", "float32"]
    layer.bias.assign(np.random.default_rng(4).normal(size=4).astype("float32"))
    t, tacc, _ = _conv_attrs(tf.function(layer), tf.TensorSpec([2, 6, 6, 3], tf.float32))
    assert t == tf.float16 and tacc == (tf.float16 if accumulation == "float16" else tf.float32)

    y = keras.ops.convert_to_numpy(layer(x))
    x16 = x.astype(np.float16)
    w16 = keras.ops.convert_to_numpy(layer.kernel).astype(np.float16)
    b16 = keras.ops.convert_to_numpy(layer.bias).astype(np.float16)
    if accumulation == "float16":
        conv = reference.conv2d(x16, w16, padding="SAME", accumulation="half")
    else:  # fp32 accumulation rounded once to half; a float64 sum differs from it only near ties
        conv = reference.conv2d(x16, w16, padding="SAME", accumulation="float64").astype(np.float16)
    expected = (conv + b16).astype(np.float16)  # one correctly rounded binary16 addition
    if accumulation == "float16":
        np.testing.assert_array_equal(y, expected)
    else:
        np.testing.assert_allclose(
            y.astype(np.float64), expected.astype(np.float64), rtol=2**-10, atol=2**-14
        )


def test_float16_policy_has_float16_variables():
    layer = Conv2D(2, 3, dtype="float16", accumulation="float32")
    y = layer(np.ones((1, 4, 4, 1), "float16"))
    assert y.dtype == tf.float16 and [v.dtype for v in layer.weights] == ["float16", "float16"]


def test_get_config_from_config_round_trip():
    layer = Conv2D(
        6,
        (3, 2),
        strides=2,
        padding="same",
        groups=2,
        activation="relu",
        use_bias=True,
        kernel_regularizer="l2",
        accumulation=tf.float16,
        dtype="mixed_float16",
        name="c",
    )
    config = layer.get_config()
    assert config["accumulation"] == "float16"
    clone = Conv2D.from_config(config)
    assert clone.get_config() == config
    assert clone.dtype_policy.name == "mixed_float16" and clone.accumulation == "float16"
    x = np.random.default_rng(5).normal(size=(1, 6, 6, 4)).astype("float32")
    layer(x)
    clone(x)
    clone.set_weights(layer.get_weights())
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(layer(x)), keras.ops.convert_to_numpy(clone(x))
    )
    serialized = keras.saving.serialize_keras_object(layer)
    assert serialized["registered_name"] == "tf_fp16ops>Conv2D"
    assert type(keras.saving.deserialize_keras_object(serialized)) is Conv2D


@pytest.fixture(scope="module")
def saved_keras_file(tmp_path_factory):
    model = keras.Sequential(
        [
            keras.Input((6, 6, 2)),
            Conv2D(4, 3, padding="same", accumulation="float16", name="c16"),
            Conv2D(2, 3, accumulation="float32", activation="relu", name="c32"),
        ]
    )
    path = str(tmp_path_factory.mktemp("keras") / "model.keras")
    model.save(path)
    x = np.random.default_rng(6).normal(size=(2, 6, 6, 2)).astype("float32")
    return model, path, x


def test_keras_file_round_trip(saved_keras_file):
    model, path, x = saved_keras_file
    loaded = keras.saving.load_model(path)
    assert [(type(layer), layer.accumulation) for layer in loaded.layers] == [
        (Conv2D, "float16"),
        (Conv2D, "float32"),
    ]
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(model(x)), keras.ops.convert_to_numpy(loaded(x))
    )


def test_keras_file_loads_in_fresh_process_after_import(saved_keras_file, tmp_path):
    model, path, x = saved_keras_file
    np.save(tmp_path / "x.npy", x)
    script = textwrap.dedent(f"""
        import numpy as np, keras
        import tf_fp16ops
        m = keras.saving.load_model({path!r})
        y = m(np.load({str(tmp_path / "x.npy")!r}))
        np.save({str(tmp_path / "y.npy")!r}, keras.ops.convert_to_numpy(y))
    """)
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=180, cwd=REPO
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), keras.ops.convert_to_numpy(model(x)))


def test_lora_argument():
    x = np.random.default_rng(7).normal(size=(1, 5, 5, 3)).astype("float32")
    ref_layer = keras.layers.Conv2D(4, 3, lora_rank=2)
    ref_layer(x)
    layer = Conv2D(4, 3, lora_rank=2, accumulation="float32")
    layer(x)
    weights = [
        np.random.default_rng(i).normal(size=v.shape).astype("float32")
        for i, v in enumerate(ref_layer.weights)
    ]
    for a, b, w in zip(ref_layer.weights, layer.weights, weights, strict=True):
        a.assign(w)
        b.assign(w)
    assert layer.lora_enabled
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(layer(x)),
        keras.ops.convert_to_numpy(ref_layer(x)),
        rtol=1e-5,
        atol=1e-5,
    )


def test_unsupported_arguments():
    with pytest.raises(ValueError, match="accumulation must be .* got 'int8'"):
        Conv2D(4, 3, accumulation="int8")
    with pytest.raises(
        ValueError, match="accumulation must be .* got tf.float64|accumulation must be"
    ):
        Conv2D(4, 3, accumulation=tf.float64)
    with pytest.raises(ValueError, match="dtype policy 'bfloat16' has compute dtype bfloat16"):
        Conv2D(4, 3, dtype="bfloat16")
    with pytest.raises(ValueError, match="compute dtype float64"):
        Conv2D(4, 3, dtype="float64")
    with pytest.raises(ValueError, match="filters"):
        Conv2D(0, 3)
    with pytest.raises(ValueError, match="padding"):
        Conv2D(4, 3, padding="causal")
    with pytest.raises(ValueError, match="groups=3"):
        Conv2D(4, 3, groups=3)
    with pytest.raises(ValueError, match="groups=2, but the input has 3 channels"):
        Conv2D(4, 3, groups=2)(np.ones((1, 5, 5, 3), "float32"))
    with pytest.raises(ValueError, match="Unrecognized keyword arguments .*unexpected_argument"):
        Conv2D(4, 3, unexpected_argument=1)
