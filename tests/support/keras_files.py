"""The `.keras` files of tests/data/keras_files/: one small model per layer type of
tf_fp16ops.layers, each with the layer twice (accumulation float16 and float32), their input and
the outputs the code that wrote them computed (tests/layers/test_layers_saved_files.py loads them).

Written once, by the tf_fp16ops of before the package layout change (tests/data/keras_files/
NOTE.md says which), with `python -m support.keras_files tests/data/keras_files` run in tests/.
Rewriting them with later code would test nothing: keep them as written.
"""

from __future__ import annotations

import os
import sys

import numpy as np

# name -> (layer class name in tf_fp16ops.layers, its arguments, input shape). Sizes: a few
# hundred weights each; 1-D layers take [N, L, C], 2-D ones [N, H, W, C].
CASES = {
    "conv2d": ("Conv2D", dict(filters=3, kernel_size=3, padding="same"), (2, 6, 6, 4)),
    "depthwise_conv2d": (
        "DepthwiseConv2D",
        dict(kernel_size=3, depth_multiplier=2, strides=2),
        (2, 7, 7, 3),
    ),
    "separable_conv2d": (
        "SeparableConv2D",
        dict(filters=4, kernel_size=3, depth_multiplier=2),
        (2, 6, 6, 3),
    ),
    "conv2d_transpose": (
        "Conv2DTranspose",
        dict(filters=3, kernel_size=3, strides=2, padding="same"),
        (2, 4, 4, 4),
    ),
    "conv1d": ("Conv1D", dict(filters=3, kernel_size=3, padding="causal"), (2, 9, 4)),
    "depthwise_conv1d": ("DepthwiseConv1D", dict(kernel_size=3, depth_multiplier=2), (2, 9, 3)),
    "separable_conv1d": ("SeparableConv1D", dict(filters=4, kernel_size=3), (2, 9, 3)),
    "conv1d_transpose": ("Conv1DTranspose", dict(filters=3, kernel_size=3, strides=2), (2, 5, 4)),
    "dense": ("Dense", dict(units=5), (2, 3, 6)),
    "einsum_dense": (
        "EinsumDense",
        dict(equation="abc,cd->abd", output_shape=(None, 5), bias_axes="d"),
        (2, 3, 6),
    ),
    "multi_head_attention": ("MultiHeadAttention", dict(num_heads=2, key_dim=4), (2, 5, 6)),
}
ACCUMULATIONS = ("float16", "float32")


def layer(name: str, accumulation: str):
    """A new tf_fp16ops layer of case `name` with `accumulation`, named `<name>_<accumulation>`."""
    import tf_fp16ops

    cls_name, args, _ = CASES[name]
    cls = getattr(tf_fp16ops.layers, cls_name)
    return cls(**args, accumulation=accumulation, name=f"{name}_{accumulation}")


def apply(name: str, layer_, x):
    """Case `name`'s layer on x (MultiHeadAttention: self-attention, query = value = x)."""
    return layer_(x, x) if CASES[name][0] == "MultiHeadAttention" else layer_(x)


def inputs(name: str) -> np.ndarray:
    """The case's input: small integers times powers of two (float32), seeded by the name."""
    rng = np.random.default_rng(sum(name.encode()))
    shape = CASES[name][2]
    return (rng.integers(-8, 8, shape) * 2.0 ** rng.integers(-4, 1, shape)).astype(np.float32)


def model(name: str):
    """A functional model: the input, then the case's layer with each accumulation, two outputs."""
    import keras

    x = keras.Input(CASES[name][2][1:])
    return keras.Model(x, [apply(name, layer(name, acc), x) for acc in ACCUMULATIONS], name=name)


def write(folder: str) -> None:
    """Writes <name>.keras for every case and expected.npz (inputs and both outputs)."""
    import keras

    keras.utils.set_random_seed(0)
    os.makedirs(folder, exist_ok=True)
    arrays = {}
    for name in CASES:
        m = model(name)
        # Weights rounded to binary16 values, so both accumulations see exact operands.
        m.set_weights([w.astype(np.float16).astype(np.float32) for w in m.get_weights()])
        m.save(os.path.join(folder, f"{name}.keras"))
        x = inputs(name)
        arrays[f"{name}/x"] = x
        for acc, y in zip(ACCUMULATIONS, m(x), strict=True):
            arrays[f"{name}/{acc}"] = np.asarray(y)
    np.savez(os.path.join(folder, "expected.npz"), **arrays)


if __name__ == "__main__":
    write(sys.argv[1])
