""".keras files written by an earlier tf_fp16ops (tests/data/keras_files/NOTE.md) load with the
current code: every layer type of tf_fp16ops.layers comes back as its class with its
accumulation and config, gives the outputs the writing code computed, and computes what a layer
built now with the same arguments and weights computes."""

import os

import keras
import numpy as np
import pytest

import tf_fp16ops
from support import keras_files

DATA = os.path.join(os.path.dirname(__file__), "..", "data", "keras_files")


@pytest.fixture(scope="module")
def expected():
    with np.load(os.path.join(DATA, "expected.npz")) as f:
        return dict(f)


def _same(got, want, name):
    """Bit-exact, except MultiHeadAttention: its softmax is TensorFlow's stock kernel (oneDNN's
    or Eigen's, which may differ in the last float32 bit), so there the outputs agree within
    2^-8 of their largest magnitude (one binary16 rounding of the probabilities)."""
    if keras_files.CASES[name][0] == "MultiHeadAttention":
        assert np.abs(got - want).max() <= 2.0**-8 * np.abs(want).max()
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", list(keras_files.CASES))
def test_old_keras_file_loads_and_computes_as_before_and_as_a_new_layer(name, expected):
    model = keras.saving.load_model(os.path.join(DATA, f"{name}.keras"))
    x = expected[f"{name}/x"]
    outputs = [np.asarray(y) for y in model(x)]
    cls = getattr(tf_fp16ops.layers, keras_files.CASES[name][0])
    for acc, got in zip(keras_files.ACCUMULATIONS, outputs, strict=True):
        old = model.get_layer(f"{name}_{acc}")
        assert type(old) is cls and old.accumulation == acc
        assert got.dtype == np.float32 and np.isfinite(got).all() and np.abs(got).max() > 0
        _same(got, expected[f"{name}/{acc}"], name)
        new = keras_files.layer(name, acc)
        keras_files.apply(name, new, x)  # builds it
        new.set_weights(old.get_weights())
        assert new.get_config() == old.get_config()
        np.testing.assert_array_equal(np.asarray(keras_files.apply(name, new, x)), got)
