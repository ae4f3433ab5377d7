"""Where and how the layers add their bias: on the bias's own axis (channels_first included, where
Keras 3.15's keras.ops.add guesses the last axis when the width equals the channel count), and
with Keras's op, so the bias gradient has the bits of the Keras layer's (BiasAddGrad in the
layout of the layer, AddV2's reduction for one channel), whether the depthwise op adds the bias
itself (channels_last, more than one channel) or the layer adds it after the op."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from tf_fp16ops import layers as L

BIAS = np.array([1.0, 2.0, 3.0, 4.0], np.float32)


@pytest.mark.parametrize("accumulation", ["float16", "float32"])
@pytest.mark.parametrize(
    "make, shape",
    [
        (lambda acc: L.Conv2D(4, 1, data_format="channels_first", accumulation=acc), (1, 4, 3, 4)),
        (
            lambda acc: L.DepthwiseConv2D(1, data_format="channels_first", accumulation=acc),
            (1, 4, 3, 4),
        ),
        (lambda acc: L.Conv1D(4, 1, data_format="channels_first", accumulation=acc), (1, 4, 4)),
        (
            lambda acc: L.Conv2DTranspose(4, 1, data_format="channels_first", accumulation=acc),
            (1, 4, 3, 4),
        ),
    ],
    ids=["conv2d", "depthwise", "conv1d", "transpose"],
)
def test_channels_first_bias_lands_on_the_channel_axis(make, shape, accumulation):
    # Zero input: every output is its channel's bias (hand calculation), also where the last
    # dimension (4) equals the number of channels.
    layer = make(accumulation)
    x = tf.zeros(shape)
    layer(x)
    layer.bias.assign(BIAS)
    y = layer(x).numpy()
    want = np.broadcast_to(BIAS.reshape((1, 4) + (1,) * (len(shape) - 2)), y.shape)
    np.testing.assert_array_equal(y, want)


def _bias_gradient(layer, x, dy):
    with tf.GradientTape() as tape:
        y = layer(x)
    return tape.gradient(y, layer.bias.value, output_gradients=tf.cast(dy, y.dtype)).numpy()


@pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
@pytest.mark.parametrize(
    "data_format, shape",
    [
        ("channels_last", (2, 9, 7, 5)),
        ("channels_first", (2, 9, 5, 7)),
        ("channels_last", (3, 20, 24, 1)),
    ],
    ids=["last", "first", "one_channel"],
)
def test_depthwise_bias_gradient_has_the_bits_of_the_keras_layer(policy, data_format, shape):
    rng = np.random.default_rng(0)
    keras.mixed_precision.set_global_policy(policy)
    try:
        layer = L.DepthwiseConv2D(
            3, padding="same", data_format=data_format, bias_initializer="random_normal"
        )
    finally:
        keras.mixed_precision.set_global_policy("float32")
    x = tf.constant(rng.standard_normal(shape).astype(np.float32))
    dy = tf.constant(rng.standard_normal(layer.compute_output_shape(shape)).astype(np.float32))
    layer(x)
    ours = _bias_gradient(layer, x, dy)
    layer.accumulation = "keras"  # keras.layers.DepthwiseConv2D.call: the reference
    want = _bias_gradient(layer, x, dy)
    np.testing.assert_array_equal(ours.view(np.uint32), want.view(np.uint32))
