"""Stand-ins for the Keras layers when the op library cannot be loaded.

`keras.models.load_model` of a converted model finds its layers by their registered names
("tf_fp16ops>Conv2D", ...); without the op library `tf_fp16ops.layers` cannot be imported, and
Keras would answer "Could not locate class 'Conv2D'" followed by the whole layer config. Each
stand-in registered here under a layer's name raises the `OpLibraryError` instead, whose one line
says what to build or install."""

from __future__ import annotations

# The names tf_fp16ops.layers registers its classes under (package "tf_fp16ops");
# tests/package/test_library.py checks the two lists are equal.
LAYER_NAMES = (
    "Conv2D",
    "DepthwiseConv2D",
    "SeparableConv2D",
    "Conv2DTranspose",
    "Conv1D",
    "DepthwiseConv1D",
    "SeparableConv1D",
    "Conv1DTranspose",
    "Dense",
    "EinsumDense",
    "MultiHeadAttention",
)


def register_stand_ins(error: ImportError) -> None:
    """Registers, under each layer's name, a class whose `from_config` raises `error` again (the
    same type and message, naming the layer). Imports Keras."""
    import keras

    reason = str(error).removeprefix("tf_fp16ops: ")

    def from_config(cls, config):
        raise type(error)(
            f"tf_fp16ops: cannot load the layer 'tf_fp16ops>{cls.__name__}': {reason}"
        ) from None

    def get_config(self):  # pragma: no cover - never instantiated
        return {}

    for name in LAYER_NAMES:
        stand_in = type(
            name,
            (),
            {
                "__doc__": "Raises the OpLibraryError when a model holding this layer is loaded.",
                "__module__": __name__,
                "from_config": classmethod(from_config),
                "get_config": get_config,
            },
        )
        keras.saving.register_keras_serializable(package="tf_fp16ops", name=name)(stand_in)
