"""A small Keras Transformer encoder and its inputs, shared by
tests/layers/test_layers_transformer.py and tests/models/test_layer_sensitivity.py."""

from __future__ import annotations

import keras
import numpy as np

SEQ, DIM, HEADS, KEY_DIM, FF = 12, 32, 4, 8, 64


def encoder(blocks=2, seed=0):
    """A post-norm Transformer encoder (Vaswani et al. 2017, as the Keras example
    'Text classification with Transformer' builds it): MultiHeadAttention, residual,
    LayerNormalization, a Dense feed-forward network, residual, LayerNormalization."""
    keras.utils.set_random_seed(seed)
    inp = keras.Input((SEQ, DIM))
    x = inp
    for b in range(blocks):
        att = keras.layers.MultiHeadAttention(HEADS, KEY_DIM, name=f"mha_{b}")(x, x)
        x = keras.layers.LayerNormalization(epsilon=1e-6, name=f"ln1_{b}")(x + att)
        ff = keras.layers.Dense(FF, activation="relu", name=f"ff1_{b}")(x)
        ff = keras.layers.EinsumDense("abc,cd->abd", (None, DIM), bias_axes="d", name=f"ff2_{b}")(
            ff
        )
        x = keras.layers.LayerNormalization(epsilon=1e-6, name=f"ln2_{b}")(x + ff)
    return keras.Model(inp, x)


def inputs(n=3, seed=0):
    return np.random.default_rng(seed).standard_normal((n, SEQ, DIM)).astype("float32")
