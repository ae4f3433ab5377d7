"""Whole models converted with every conv-like and Dense layer: EfficientNetB0, a small U-Net
with Conv2DTranspose, a Conv1D + Dense sequence model (MobileNetV2 and ResNet50 are in
test_convert.py).

Expected counts come from the architectures (Keras applications source, efficientnet.py):
EfficientNetB0 has the stem and top 1x1 Conv2D, 16 MBConv blocks with a depthwise conv, two SE
1x1 convs and a project conv each, and an expand conv in the 15 blocks whose expand ratio is not 1:
2 + 16 * 3 + 15 = 65 Conv2D, 16 DepthwiseConv2D, 1 Dense.
"Within fp32 rounding" is max_rel < 1e-5 as in test_convert.py (fp16 arithmetic gives > 1e-4).
"""

from __future__ import annotations

import keras
import numpy as np
import pytest

import tf_fp16ops

FP32_MATCH = 1e-5
FP16_DIFFERS = 1e-4


@pytest.fixture(scope="module")
def efficientnet():
    m = keras.applications.EfficientNetB0(weights=None, input_shape=(32, 32, 3), classes=10)
    names = [
        "stem_activation",
        "block2b_add",
        "block5a_project_bn",
        "top_activation",
        "predictions",
    ]
    return keras.Model(
        m.input, [m.get_layer(n).output for n in names], name="efficientnetb0_features"
    )


def _unet():
    inp = keras.Input((16, 16, 3))
    c1 = keras.layers.Conv2D(8, 3, padding="same", activation="relu", name="enc1")(inp)
    p1 = keras.layers.MaxPooling2D()(c1)
    c2 = keras.layers.Conv2D(16, 3, padding="same", activation="relu", name="enc2")(p1)
    p2 = keras.layers.MaxPooling2D()(c2)
    b = keras.layers.SeparableConv2D(16, 3, padding="same", activation="relu", name="bottleneck")(
        p2
    )
    u2 = keras.layers.Conv2DTranspose(16, 2, strides=2, name="up2")(b)
    d2 = keras.layers.Conv2D(16, 3, padding="same", activation="relu", name="dec2")(
        keras.layers.Concatenate()([u2, c2])
    )
    u1 = keras.layers.Conv2DTranspose(8, 3, strides=2, padding="same", name="up1")(d2)
    d1 = keras.layers.DepthwiseConv2D(3, padding="same", name="dec1_dw")(
        keras.layers.Concatenate()([u1, c1])
    )
    out = keras.layers.Conv2D(2, 1, name="head")(d1)
    return keras.Model(inp, out, name="unet")


def _sequence_model():
    inp = keras.Input((24, 6))
    x = keras.layers.Conv1D(16, 3, padding="causal", activation="relu", name="causal1")(inp)
    x = keras.layers.Conv1D(
        16, 3, padding="causal", dilation_rate=2, activation="relu", name="causal2"
    )(x)
    x = keras.layers.Conv1D(8, 5, strides=2, padding="same", name="strided")(x)
    x = keras.layers.Dense(12, activation="relu", name="per_step")(x)  # rank-3 input
    x = keras.layers.GlobalAveragePooling1D()(x)
    out = keras.layers.Dense(3, name="logits")(x)
    return keras.Model(inp, out, name="sequence")


def _count_ours(model):
    return sum(
        type(layer).__module__ == "tf_fp16ops.layers"
        for layer in model._flatten_layers(include_self=False, recursive=True)
    )


def test_efficientnet_every_conv_and_dense_converted(efficientnet):
    x = np.random.default_rng(0).uniform(0, 255, (2, 32, 32, 3)).astype("float32")
    conv32 = tf_fp16ops.convert_with_report(efficientnet, "float32")
    assert conv32.report.counts() == {"Conv2D": 65, "DepthwiseConv2D": 16, "Dense": 1}
    assert conv32.report.not_converted == ()
    assert _count_ours(conv32.model) == 82
    r32 = tf_fp16ops.compare(efficientnet, conv32.model, x)
    assert r32.max_rel < FP32_MATCH, r32.summary()
    r16 = tf_fp16ops.compare(efficientnet, tf_fp16ops.convert(efficientnet, "float16"), x)
    assert {o.name: o for o in r16.outputs}["block5a_project_bn"].max_rel > FP16_DIFFERS, (
        r16.summary()
    )


@pytest.mark.parametrize(
    "build,shape,counts",
    [
        (
            _unet,
            (2, 16, 16, 3),
            {"Conv2D": 4, "SeparableConv2D": 1, "Conv2DTranspose": 2, "DepthwiseConv2D": 1},
        ),
        (_sequence_model, (3, 24, 6), {"Conv1D": 3, "Dense": 2}),
    ],
    ids=["unet", "sequence"],
)
def test_small_models_match_in_float32_and_differ_in_float16(build, shape, counts):
    model = build()
    x = np.random.default_rng(1).normal(size=shape).astype("float32")
    conv32 = tf_fp16ops.convert_with_report(model, "float32")
    assert conv32.report.counts() == counts and conv32.report.not_converted == ()
    r32 = tf_fp16ops.compare(model, conv32.model, x)
    assert r32.max_rel < FP32_MATCH, r32.summary()
    r16 = tf_fp16ops.compare(model, tf_fp16ops.convert(model, "float16"), x)
    assert FP16_DIFFERS < r16.max_rel < 0.05, r16.summary()


def test_layers_convert_cannot_take_are_listed_with_reasons():
    inp = keras.Input((6, 6, 6, 2))
    x = keras.layers.Conv3D(2, 3, name="c3d")(inp)
    x = keras.layers.Conv3DTranspose(2, 3, name="c3dT")(x)
    x = keras.layers.Reshape((6 * 6, 6 * 2))(x)
    x = keras.layers.Conv1DTranspose(2, 3, name="c1dT")(x)
    x = keras.layers.EinsumDense("abc,cd->abd", output_shape=(None, 3), name="einsum")(x)
    out = keras.layers.Dense(2, name="d")(x)
    conv = tf_fp16ops.convert_with_report(keras.Model(inp, out), "float16")
    assert conv.report.converted == ("c1dT", "einsum", "d")  # EinsumDense: tf_fp16ops.einsum
    reasons = {n.name: (n.class_name, n.reason) for n in conv.report.not_converted}
    assert sorted(reasons) == ["c3d", "c3dT"]
    assert reasons["c3d"][0] == "Conv3D" and "no 3-D variant" in reasons["c3d"][1]


def test_quantized_dense_is_left_unchanged():
    inp = keras.Input((4,))
    model = keras.Model(inp, keras.layers.Dense(3, name="q")(inp))
    model.quantize("int8")
    conv = tf_fp16ops.convert_with_report(model, "float16")
    assert conv.report.converted == ()
    assert [(n.name, n.class_name) for n in conv.report.not_converted] == [("q", "Dense")]
    assert "quantized (int8)" in conv.report.not_converted[0].reason


def test_audit_reports_every_converted_layer_type_as_fp16_accumulate(tmp_path):
    from tf_fp16ops.audit import RuntimeContext, audit

    inp = keras.Input((8, 8, 3))
    x = keras.layers.Conv2D(3, 3, padding="same", name="conv")(inp)
    x = keras.layers.DepthwiseConv2D(3, padding="same", depth_multiplier=2, name="dw")(x)
    x = keras.layers.SeparableConv2D(4, 3, padding="same", name="sep")(x)
    x = keras.layers.Conv2DTranspose(3, 3, strides=2, padding="same", name="up")(x)
    x = keras.layers.Reshape((16, 48))(x)
    x = keras.layers.Conv1D(5, 3, padding="causal", name="c1")(x)
    out = keras.layers.Dense(4, name="d")(x)
    converted = tf_fp16ops.convert(keras.Model(inp, out), "float16")
    converted.export(str(tmp_path / "sm"), verbose=False)
    report = audit(str(tmp_path / "sm"), RuntimeContext(device="cpu"))
    by_layer = {}
    for f in report.findings:
        d = f.to_dict()
        layer = d["node"].split("/")[1].rsplit("_", 1)[0]
        by_layer.setdefault(layer, set()).add((d["op"], d["accumulation"], d["audit_class"]))
    assert by_layer == {
        "conv": {("Fp16Conv2D", "fp16", "fp16-accumulate")},
        "dw": {("Fp16DepthwiseConv2D", "fp16", "fp16-accumulate")},
        "sep": {
            ("Fp16DepthwiseConv2D", "fp16", "fp16-accumulate"),
            ("Fp16Conv2D", "fp16", "fp16-accumulate"),
        },
        "up": {("Fp16Conv2DBackpropInput", "fp16", "fp16-accumulate")},
        "c1": {("Fp16Conv2D", "fp16", "fp16-accumulate")},
        "d": {("Fp16Conv2D", "fp16", "fp16-accumulate")},
    }
    assert all(f.to_dict()["accumulation_reason"].startswith("Tacc=half") for f in report.findings)
    # The Dense product (Conv1D's 5 channels to 4 units on 16 positions) as images of one column
    # [batch, 16, 1, 5]: the FLOPs of one example of the unknown batch, 2 * 16 * 5 * 4, as a
    # Conv2D's.
    dense = [d for d in map(lambda f: f.to_dict(), report.findings) if "/d_" in d["node"]]
    assert dense and all(d["flops"] == 2 * 16 * 5 * 4 for d in dense), [d["flops"] for d in dense]
    assert all(f.to_dict()["flops"] is not None for f in report.findings)


def _residual_model(kind):
    """A residual block whose last layer's bias add and the residual add form a chain of adds
    (`h + (y + bias)`), the tree Grappler's AddOpsRewrite regroups when both are AddV2."""
    keras.utils.set_random_seed(4)
    bias = {"bias_initializer": "random_normal"}
    if kind == "dense":
        inp = keras.Input((24, 32))
        h = keras.layers.LayerNormalization()(inp)
        f = keras.layers.Dense(48, **bias)(h)
        f = keras.layers.Dense(32, **bias)(f)
    elif kind == "einsum_dense_bias_on_rows":  # bias [24, 1]: a BiasAdd on axis 1 (as Keras's)
        inp = keras.Input((24, 32))
        h = keras.layers.LayerNormalization()(inp)
        f = keras.layers.EinsumDense("abc,cd->abd", (24, 32), bias_axes="b", **bias)(h)
    else:
        channels_first = kind == "conv1d_channels_first"
        inp = keras.Input((8, 20) if channels_first else (12, 12, 8))
        h = keras.layers.LayerNormalization(axis=1 if channels_first else -1)(inp)
        layer = keras.layers.Conv1D if channels_first else keras.layers.Conv2D
        fmt = "channels_first" if channels_first else "channels_last"
        f = layer(8, 3, padding="same", data_format=fmt, **bias)(h)
    return keras.Model(inp, keras.layers.LayerNormalization()(h + f))


@pytest.mark.parametrize(
    "kind", ["dense", "einsum_dense_bias_on_rows", "conv2d", "conv1d_channels_first"]
)
@pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
def test_a_converted_model_gives_the_same_bits_eagerly_and_in_a_tf_function(kind, policy):
    import tensorflow as tf

    keras.mixed_precision.set_global_policy(policy)
    try:
        model = tf_fp16ops.convert(_residual_model(kind), "float16")
    finally:
        keras.mixed_precision.set_global_policy("float32")
    x = np.random.default_rng(5).standard_normal((6, *model.input_shape[1:])).astype("float32")
    eager = model(x, training=False).numpy()
    graph = tf.function(lambda t: model(t, training=False))(tf.constant(x)).numpy()
    assert eager.dtype == graph.dtype
    np.testing.assert_array_equal(graph, eager)
    np.testing.assert_array_equal(model.predict(x, verbose=0), eager)
