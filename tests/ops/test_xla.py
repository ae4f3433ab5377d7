"""Fp16Conv2D has no XLA (tf2xla) kernel: jit_compile=True must fail with a message that says so
and how to run instead; jit_compile=False (tf.function's default) must work."""

from __future__ import annotations

import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import tf_fp16ops
from tf_fp16ops.layers import Conv2D

X = tf.ones([1, 5, 5, 2], tf.float16)
W = tf.ones([3, 3, 2, 4], tf.float16)
DY = tf.ones([1, 3, 3, 4], tf.float16)

CALLS = {
    "conv2d": lambda: tf_fp16ops.conv2d(X, W, 1, "VALID"),
    "backprop_input": lambda: tf_fp16ops.conv2d_backprop_input([1, 5, 5, 2], W, DY, 1, "VALID"),
    "backprop_filter": lambda: tf_fp16ops.conv2d_backprop_filter(X, [3, 3, 2, 4], DY, 1, "VALID"),
}
OP_TYPES = {
    "conv2d": "Fp16Conv2D",
    "backprop_input": "Fp16Conv2DBackpropInput",
    "backprop_filter": "Fp16Conv2DBackpropFilter",
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_jit_compile_true_says_no_xla_kernel_and_how_to_run(name):
    with pytest.raises(ValueError) as e:
        tf.function(CALLS[name], jit_compile=True)()
    message = str(e.value)
    assert f"{OP_TYPES[name]} has no XLA kernel" in message
    assert "jit_compile=False" in message


@pytest.mark.parametrize("name", sorted(CALLS))
def test_jit_compile_false_runs(name):
    # All-ones data: every output is an exact small integer (a count of taps), same in fp16 and
    # fp32.
    eager = CALLS[name]().numpy()
    graph = tf.function(CALLS[name], jit_compile=False)().numpy()
    np.testing.assert_array_equal(eager, graph)
    assert eager.max() > 0


def test_nested_function_inside_jit_is_refused():
    inner = tf.function(CALLS["conv2d"])
    with pytest.raises(ValueError, match="Fp16Conv2D has no XLA kernel"):
        tf.function(lambda: inner(), jit_compile=True)()


def test_keras_layer_under_jit_function():
    layer = Conv2D(3, 3, accumulation="float32")
    layer(np.ones((1, 5, 5, 2), "float32"))
    with pytest.raises(ValueError, match="has no XLA kernel.*jit_compile=False"):
        tf.function(layer, jit_compile=True)(np.ones((1, 5, 5, 2), "float32"))


def test_keras_compile_jit_true_falls_back_to_no_jit():
    model = keras.Sequential(
        [keras.Input((5, 5, 2)), Conv2D(3, 3, accumulation="float32"), keras.layers.Flatten()]
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.compile(optimizer="sgd", loss="mse", jit_compile=True)
    assert model.jit_compile is False
    assert any("doesn't support `jit_compile=True`" in str(w.message) for w in caught)
    history = model.fit(
        np.ones((4, 5, 5, 2), "float32"), np.zeros((4, 27), "float32"), epochs=1, verbose=0
    )
    assert np.isfinite(history.history["loss"][0])
