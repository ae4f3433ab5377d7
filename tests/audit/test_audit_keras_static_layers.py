"""Layers of a .keras file reconstructed statically: causal Conv1D, nested models.

Conv1D with padding="causal":
keras.layers.Conv1D (and tf_fp16ops.layers.Conv1D) pads dilation * (K - 1) zeros on the left of
the width and runs a VALID convolution (Keras' TF backend, `conv`), so the conv op sees the
padded width and the output keeps the input's width. The static audit failed on the stock layer
("padding must be SAME, VALID or EXPLICIT, got 'CAUSAL'") and gave tf_fp16ops' layer the VALID
output of the unpadded input.

Hand values: width 20, K 3, dilation 2 -> padded width 20 + 2 * 2 = 24, output width
(24 - 2 * 2) = 20; FLOPs per example 2 * 20 (positions) * 8 (filters) * 3 * 4 (K * C) = 3840.
"""

import keras
import pytest

import tf_fp16ops
from tf_fp16ops.audit import RuntimeContext, audit

CPU = RuntimeContext(device="cpu")


@pytest.mark.parametrize(
    "layers,data_format,conv_in,conv_out",
    [
        (keras.layers, "channels_last", [-1, 1, 24, 4], [-1, 1, 20, 8]),
        (keras.layers, "channels_first", [-1, 4, 1, 24], [-1, 8, 1, 20]),
        (tf_fp16ops.layers, "channels_last", [-1, 1, 24, 4], [-1, 1, 20, 8]),
    ],
    ids=["keras-nwc", "keras-ncw", "tf_fp16ops-nwc"],
)
def test_causal_conv1d_sees_the_padded_width(tmp_path, layers, data_format, conv_in, conv_out):
    shape = (20, 4) if data_format == "channels_last" else (4, 20)
    conv = layers.Conv1D(8, 3, padding="causal", dilation_rate=2, data_format=data_format)
    model = keras.Sequential([keras.Input(shape), conv])
    assert model.output_shape[1:] == ((20, 8) if data_format == "channels_last" else (8, 20))
    path = str(tmp_path / "m.keras")
    model.save(path)
    (f,) = audit(path, CPU).findings
    d = f.to_dict()
    assert (d["input_shape"], d["output_shape"], d["flops"]) == (conv_in, conv_out, 3840)
    assert "padding" not in " ".join(f.flag_texts)  # no invalid-attrs flag


def test_causal_is_rejected_where_keras_rejects_it(tmp_path):
    """A tf_fp16ops SeparableConv1D config saying "causal" (Keras refuses it for separable
    convolutions) is a malformed file whose one-line error names the layer, the field and the
    value."""
    import json
    import zipfile

    layer = {
        "class_name": "SeparableConv1D",
        "registered_name": "tf_fp16ops>SeparableConv1D",
        "config": {"name": "s", "filters": 4, "kernel_size": [3], "padding": "causal"},
        "build_config": {"input_shape": [None, 20, 4]},
    }
    path = str(tmp_path / "m.keras")
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(
            "config.json",
            json.dumps({"class_name": "Sequential", "config": {"name": "m", "layers": [layer]}}),
        )
    with pytest.raises(Exception, match=r"layer 's' \(SeparableConv1D\): padding must be one of"):
        audit(path, CPU)


def test_nested_layers_of_the_same_name_keep_their_own_sites(tmp_path):
    """Two nested models each with a layer "c1": the second layer's nodes replaced the first's,
    so both sites showed the second layer's shapes (FLOPs 20480 twice). Hand values: a: Conv1D(8,
    3, causal) on (20, 4): 2 * 20 * 8 * 3 * 4 = 3840; b: Conv1D(16, 5, valid) on (20, 8): output
    width 16, 2 * 16 * 16 * 5 * 8 = 20480."""
    a = keras.Sequential(
        [keras.Input((20, 4)), keras.layers.Conv1D(8, 3, padding="causal", name="c1")], name="a"
    )
    b = keras.Sequential([keras.Input((20, 8)), keras.layers.Conv1D(16, 5, name="c1")], name="b")
    model = keras.Sequential([keras.Input((20, 4)), a, b])
    path = str(tmp_path / "m.keras")
    model.save(path)
    got = sorted((f.output_shape, f.flops) for f in audit(path, CPU).findings)
    assert got == [((-1, 1, 16, 16), 20480), ((-1, 1, 20, 8), 3840)], got


@pytest.mark.parametrize("cls", ["Conv2D", "DepthwiseConv2D", "Dense"])
def test_accumulation_keras_is_the_stock_layer(tmp_path, cls):
    """A tf_fp16ops layer with accumulation="keras" runs the Keras class's own computation (its
    traced graph has the stock op, no Fp16* op); the static audit reconstructed an Fp16 op."""
    import tensorflow as tf

    make = {
        "Conv2D": lambda: tf_fp16ops.layers.Conv2D(4, 3, accumulation="keras"),
        "DepthwiseConv2D": lambda: tf_fp16ops.layers.DepthwiseConv2D(3, accumulation="keras"),
        "Dense": lambda: tf_fp16ops.layers.Dense(4, accumulation="keras"),
    }[cls]
    shape = (3,) if cls == "Dense" else (8, 8, 3)
    layer = make()
    model = keras.Sequential([keras.Input(shape), layer])
    traced = tf.function(lambda x: layer(x)).get_concrete_function(tf.TensorSpec((1,) + shape))
    ops = {op.type for op in traced.graph.get_operations()}
    stock = {"Conv2D": "Conv2D", "DepthwiseConv2D": "DepthwiseConv2dNative", "Dense": "MatMul"}[cls]
    assert stock in ops and not any(o.startswith("Fp16") for o in ops), ops
    path = str(tmp_path / "m.keras")
    model.save(path)
    (f,) = audit(path, CPU).findings
    assert f.op == stock, f.op


def test_a_dilated_conv_behind_space_to_batch_is_not_counted_per_example():
    """Keras' TF backend runs a dilated Conv1D as SpaceToBatchND -> Conv2D -> BatchToSpaceND, so
    with an unknown batch the conv's batch entries are parts of examples: its FLOPs (here 1920,
    half of the 3840 one example takes: width 20, K 3, 4 -> 8 channels) were labelled "per
    example"."""
    import tensorflow as tf

    layer = keras.layers.Conv1D(8, 3, padding="causal", dilation_rate=2)
    model = keras.Sequential([keras.Input((20, 4)), layer])
    fn = tf.function(lambda x: model(x)).get_concrete_function(tf.TensorSpec((None, 20, 4)))
    assert "SpaceToBatchND" in {op.type for op in fn.graph.get_operations()}
    (f,) = audit(fn, CPU).findings
    assert f.flops == 1920 and not f.flops_note.startswith("per example"), f.flops_note
    assert "SpaceToBatchND" in f.flops_note
