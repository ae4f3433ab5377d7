"""convert / compare on keras.applications models and small hand-built models.

Expected counts come from the architectures (Keras applications source):
  ResNet50: conv1 + 16 bottleneck blocks x 3 convs + 4 projection shortcuts = 53 Conv2D.
  MobileNetV2: Conv1 + 17 project convs + 16 expand convs (block 0 has none) + Conv_1 = 35
  Conv2D, and one DepthwiseConv2D per block = 17.
Tolerances: fp32 unit roundoff u32 = 2^-24; a K-term fp32 dot product in another order differs by
at most gamma_K = K*u32/(1-K*u32) of sum|x*w| (Higham 2002, §3.1), ~2.7e-4 for ResNet50's largest
K = 3*3*512, typically ~sqrt(K)*u32. "Within fp32 rounding" is asserted as max_rel < 1e-5, which
is still 50x below fp16's unit roundoff 2^-11 = 4.9e-4, so the check tells fp32 from fp16
arithmetic; float16 accumulation (inputs rounded to binary16, u = 2^-11) must exceed 1e-4.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest

import tf_fp16ops
from tf_fp16ops.comparison import difference
from tf_fp16ops.layers import Conv2D as Fp16Conv2D

FP32_MATCH = 1e-5
FP16_DIFFERS = 1e-4


def _count(model, cls, exact=True):
    layers = model._flatten_layers(include_self=False, recursive=True)
    return sum((type(layer) is cls) if exact else isinstance(layer, cls) for layer in layers)


@pytest.fixture(scope="session")
def inputs32():
    return np.random.default_rng(0).uniform(-1, 1, (2, 32, 32, 3)).astype("float32")


@pytest.fixture(scope="session")
def resnet50():
    return keras.applications.ResNet50(weights=None, input_shape=(32, 32, 3))


@pytest.fixture(scope="session")
def resnet50_converted(resnet50):
    return {acc: tf_fp16ops.convert_with_report(resnet50, acc) for acc in ("float32", "float16")}


@pytest.fixture(scope="session")
def mobilenet_features():
    # Random-init MobileNetV2 shrinks activations towards 0 with depth (its softmax is then flat),
    # so the comparison also looks at intermediate outputs.
    m = keras.applications.MobileNetV2(weights=None, input_shape=(32, 32, 3))
    names = ["Conv1", "block_1_project_BN", "block_6_project_BN", "predictions"]
    return keras.Model(m.input, [m.get_layer(n).output for n in names], name="mobilenetv2_features")


def test_resnet50_counts(resnet50, resnet50_converted):
    assert _count(resnet50, keras.layers.Conv2D) == 53
    for acc, conv in resnet50_converted.items():
        assert conv.report.counts() == {"Conv2D": 53, "Dense": 1}  # + the classifier
        assert conv.report.not_converted == ()
        assert conv.report.accumulation == acc
        assert _count(conv.model, Fp16Conv2D) == 53
        assert _count(conv.model, keras.layers.Conv2D) == 0
        assert {
            layer.accumulation for layer in conv.model.layers if isinstance(layer, Fp16Conv2D)
        } == {acc}
    # The original model is untouched.
    assert _count(resnet50, Fp16Conv2D) == 0


def test_resnet50_same_weights_not_shared(resnet50, resnet50_converted):
    new = resnet50_converted["float32"].model
    old_w, new_w = resnet50.get_weights(), new.get_weights()
    assert len(old_w) == len(new_w) > 0
    assert all(np.array_equal(a, b) for a, b in zip(old_w, new_w, strict=True))
    assert not {id(v) for v in resnet50.weights} & {id(v) for v in new.weights}
    assert [layer.name for layer in new.layers[1:]] == [
        layer.name for layer in resnet50.layers[1:]
    ]  # the Input is renamed


def test_resnet50_float32_matches_float16_differs(resnet50, resnet50_converted, inputs32):
    r32 = tf_fp16ops.compare(resnet50, resnet50_converted["float32"].model, inputs32)
    r16 = tf_fp16ops.compare(resnet50, resnet50_converted["float16"].model, inputs32)
    assert r32.outputs[0].shape == r16.outputs[0].shape == (2, 1000)
    assert r32.max_rel < FP32_MATCH, r32.summary()
    assert r16.max_rel > FP16_DIFFERS, r16.summary()
    assert r16.outputs[0].nonfinite_b == 0
    assert r16.outputs[0].num_unequal > 0


def test_resnet50_conv_trunk_differences(resnet50, inputs32):
    """The feature map before pooling shows the fp16 effect more directly than the softmax."""
    trunk = keras.Model(resnet50.input, resnet50.get_layer("conv5_block3_out").output)
    r32 = tf_fp16ops.compare(trunk, tf_fp16ops.convert(trunk, "float32"), inputs32)
    r16 = tf_fp16ops.compare(trunk, tf_fp16ops.convert(trunk, "float16"), inputs32)
    assert r32.max_rel < FP32_MATCH, r32.summary()
    assert r16.max_rel > FP16_DIFFERS, r16.summary()


def test_mobilenetv2_every_conv_and_dense_converted(mobilenet_features, inputs32):
    m = mobilenet_features
    assert _count(m, keras.layers.Conv2D) == 35
    assert _count(m, keras.layers.DepthwiseConv2D) == 17
    assert _count(m, keras.layers.Dense) == 1
    conv16 = tf_fp16ops.convert_with_report(m, "float16")
    assert conv16.report.counts() == {"Conv2D": 35, "DepthwiseConv2D": 17, "Dense": 1}
    assert conv16.report.not_converted == ()
    assert _count(conv16.model, keras.layers.DepthwiseConv2D) == 0
    assert _count(conv16.model, tf_fp16ops.layers.DepthwiseConv2D) == 17
    assert "0 convolution/Dense layer(s) not converted" in conv16.report.summary()

    r16 = tf_fp16ops.compare(m, conv16.model, inputs32)
    r32 = tf_fp16ops.compare(m, tf_fp16ops.convert(m, "float32"), inputs32)
    assert [o.name for o in r16.outputs] == [
        "Conv1",
        "block_1_project_BN",
        "block_6_project_BN",
        "predictions",
    ]
    assert r32.max_rel < FP32_MATCH, r32.summary()
    by_name = {o.name: o for o in r16.outputs}
    assert by_name["block_1_project_BN"].max_rel > FP16_DIFFERS, r16.summary()
    assert by_name["block_6_project_BN"].max_rel > FP16_DIFFERS, r16.summary()


def _nested_model():
    inner_seq = keras.Sequential(
        [
            keras.Input((8, 8, 4)),
            keras.layers.Conv2D(4, 3, padding="same", name="inner_conv"),
            keras.layers.ReLU(),
        ],
        name="inner_seq",
    )
    x_in = keras.Input((4, 4, 4))
    y = keras.layers.Conv2D(6, 1, name="inner_fn_conv")(x_in)
    inner_fn = keras.Model(x_in, y, name="inner_fn")

    inp = keras.Input((8, 8, 3), name="image")
    x = keras.layers.Conv2D(4, 3, padding="same", name="stem")(inp)
    x = inner_seq(x)
    x = keras.layers.Conv2DTranspose(4, 2, name="up")(x)
    x = keras.layers.MaxPooling2D(name="pool")(x)
    x = inner_fn(x)
    shared = keras.layers.Conv2D(6, 3, padding="same", name="shared")
    x = shared(shared(x))
    out = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(inp, out, name="nested")


@pytest.fixture(scope="module")
def nested():
    return _nested_model()


def test_nested_models_converted(nested):
    x = np.random.default_rng(1).normal(size=(2, 8, 8, 3)).astype("float32")
    conv = tf_fp16ops.convert_with_report(nested, "float32")
    assert sorted(conv.report.converted) == ["inner_conv", "inner_fn_conv", "shared", "stem", "up"]
    assert conv.report.not_converted == ()
    assert _count(conv.model, Fp16Conv2D) == 4
    assert _count(conv.model, keras.layers.Conv2D) == 0
    assert type(conv.model.get_layer("up")) is tf_fp16ops.layers.Conv2DTranspose
    r = tf_fp16ops.compare(nested, conv.model, x)
    assert r.max_rel < FP32_MATCH, r.summary()


def test_sequential_model():
    m = keras.Sequential(
        [
            keras.Input((6, 6, 2)),
            keras.layers.Conv2D(3, 3, name="c1"),
            keras.layers.Conv2D(2, 1, name="c2"),
            keras.layers.Flatten(),
        ]
    )
    new = tf_fp16ops.convert(m, "float32")
    assert isinstance(new, keras.Sequential)
    assert [type(layer) for layer in new.layers[:2]] == [Fp16Conv2D, Fp16Conv2D]
    x = np.random.default_rng(2).normal(size=(2, 6, 6, 2)).astype("float32")
    assert tf_fp16ops.compare(m, new, x).max_rel < FP32_MATCH


def test_a_compiled_model_comes_back_compiled_with_a_fresh_optimizer():
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    m.compile(optimizer=keras.optimizers.Adam(learning_rate=0.125), loss="mse")
    c = tf_fp16ops.convert(m)
    assert c.compiled and c.loss == "mse"
    assert type(c.optimizer) is keras.optimizers.Adam and c.optimizer is not m.optimizer
    assert float(c.optimizer.learning_rate) == 0.125
    bare = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    assert not tf_fp16ops.convert(bare).compiled


def test_a_small_selection_of_a_large_model_has_a_short_summary():
    inp = keras.Input((8, 8, 2))
    x = inp
    for i in range(12):
        x = keras.layers.Conv2D(2, 1, name=f"c{i}")(x)
    r = tf_fp16ops.convert_with_report(keras.Model(inp, x), "float16", layers=["c0"]).report
    assert len(r.not_converted) == 11
    assert r.summary().splitlines()[1:] == [
        "  not converted (not selected by `layers`): 11 layer(s): c1, c2, c3, c4, c5, c6, c7, c8 "
        "and 3 more (report.not_converted lists them)"
    ]


def test_an_attention_layer_left_out_is_listed_once_not_as_a_custom_layer():
    # MultiHeadAttention left out by `layers`: one entry, "not selected"; its four projections
    # are its own (converted with it when it is selected), not layers of a custom layer.
    inp = keras.Input((4, 8))
    x = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4, name="mha")(inp, inp)
    m = keras.Model(inp, keras.layers.Dense(3, name="head")(x))
    r = tf_fp16ops.convert_with_report(m, "float16", layers=["head"]).report
    assert r.converted == ("head",)
    assert [(n.name, n.class_name, n.reason) for n in r.not_converted] == [
        ("mha", "MultiHeadAttention", "not selected by `layers`")
    ]


def test_subset_by_name_and_predicate(nested):
    by_name = tf_fp16ops.convert_with_report(nested, "float16", layers=["stem", "inner_conv"])
    assert sorted(by_name.report.converted) == ["inner_conv", "stem"]
    not_selected = {
        n.name for n in by_name.report.not_converted if n.reason == "not selected by `layers`"
    }
    assert not_selected == {"inner_fn_conv", "shared", "up"}
    assert type(by_name.model.get_layer("stem")) is Fp16Conv2D
    assert (
        type(by_name.model.get_layer("inner_fn").get_layer("inner_fn_conv")) is keras.layers.Conv2D
    )

    single = tf_fp16ops.convert_with_report(nested, "float16", layers="shared")
    assert single.report.converted == ("shared",)
    # the summary gives the layers left out by `layers` one line, whatever their number
    summary = by_name.report.summary().splitlines()
    assert [ln for ln in summary if "not selected" in ln] == [
        "  not converted (not selected by `layers`): 3 layer(s): "
        + ", ".join(n.name for n in by_name.report.not_converted if "not selected" in n.reason)
    ]

    by_pred = tf_fp16ops.convert_with_report(
        nested, "float16", layers=lambda layer: layer.kernel_size == (3, 3)
    )
    assert sorted(by_pred.report.converted) == ["inner_conv", "shared", "stem"]


def test_reconvert_changes_accumulation(nested):
    once = tf_fp16ops.convert(nested, "float16")
    twice = tf_fp16ops.convert_with_report(once, "float32")
    assert len(twice.report.converted) == 5
    accs = {
        layer.accumulation
        for layer in twice.model._flatten_layers()
        if hasattr(layer, "accumulation")
    }
    assert accs == {"float32"}


def test_conv_inside_custom_layer_is_listed():
    @keras.saving.register_keras_serializable(package="tf_fp16ops_tests")
    class Block(keras.layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.conv = keras.layers.Conv2D(2, 3, padding="same", name="hidden_conv")

        def call(self, x):
            return self.conv(x)

    inp = keras.Input((5, 5, 2))
    m = keras.Model(inp, Block(name="block")(keras.layers.Conv2D(2, 1, name="outer")(inp)))
    conv = tf_fp16ops.convert_with_report(m, "float32")
    assert conv.report.converted == ("outer",)
    assert [(n.name, n.class_name) for n in conv.report.not_converted] == [
        ("hidden_conv", "Conv2D")
    ]
    assert "inside custom layer 'block'" in conv.report.not_converted[0].reason


def test_no_convertible_layer_gives_copy_and_zero_converted():
    m = keras.Sequential(
        [
            keras.Input((4,)),
            keras.layers.BatchNormalization(name="bn"),
            keras.layers.Activation("tanh"),
        ]
    )
    conv = tf_fp16ops.convert_with_report(m, "float16")
    assert conv.report.converted == () and conv.report.not_converted == ()
    assert conv.report.summary().startswith("0 layer(s) converted")
    assert conv.model is not m
    x = np.ones((2, 4), "float32")
    assert tf_fp16ops.compare(m, conv.model, x).max_abs == 0.0
    assert conv.model.get_layer("bn").gamma is not m.get_layer("bn").gamma


def test_bad_arguments(nested):
    with pytest.raises(ValueError, match="accumulation.*'int8'"):
        tf_fp16ops.convert(nested, "int8")
    with pytest.raises(ValueError, match=r"^layers: no layer named \['nope'\] in model 'nested'$"):
        tf_fp16ops.convert(nested, layers=["nope"])
    with pytest.raises(ValueError, match="'pool' is a MaxPooling2D"):
        tf_fp16ops.convert(nested, layers=["pool"])
    conv3d = keras.Sequential([keras.Input((4, 4, 4, 1)), keras.layers.Conv3D(2, 3, name="c3")])
    with pytest.raises(ValueError, match="'c3' is a Conv3D"):
        tf_fp16ops.convert(conv3d, layers="c3")
    with pytest.raises(ValueError, match="layers must be None"):
        tf_fp16ops.convert(nested, layers=[3])
    with pytest.raises(TypeError, match="model must be a keras.Model"):
        tf_fp16ops.convert(keras.layers.Conv2D(2, 3))

    class Sub(keras.Model):
        def __init__(self):
            super().__init__()
            self.c = keras.layers.Conv2D(2, 3)

        def call(self, x):
            return self.c(x)

    with pytest.raises(ValueError, match="subclassed Sub"):
        tf_fp16ops.convert(Sub())


def test_compare_mismatches():
    a = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    b = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    x = np.ones((1, 4), "float32")
    with pytest.raises(ValueError, match=r"shape \(1, 3\) in model_a and \(1, 2\)"):
        tf_fp16ops.compare(a, b, x)
    inp = keras.Input((4,))
    two = keras.Model(inp, [keras.layers.Dense(3)(inp), keras.layers.Dense(3)(inp)])
    with pytest.raises(ValueError, match="model_a returns 1 outputs and model_b 2"):
        tf_fp16ops.compare(a, two, x)


def test_difference_hand_values():
    d = difference("y", [1.0, 2.0, -4.0], [1.0, 2.5, -4.0])
    assert (d.max_abs, d.max_rel, d.num_unequal, d.num_elements) == (0.5, 0.125, 1, 3)
    assert d.mean_abs == pytest.approx(0.5 / 3)
    same = difference("y", [np.nan, np.inf, 0.0], [np.nan, np.inf, 0.0])
    assert (same.max_abs, same.max_rel, same.num_unequal, same.nonfinite_a) == (0.0, 0.0, 0, 2)
    overflow = difference("y", [1.0, 2.0], [1.0, np.inf])
    assert overflow.max_abs == np.inf and overflow.nonfinite_b == 1 and overflow.nonfinite_a == 0
    zero_ref = difference("y", [0.0, 0.0], [0.0, 1e-3])
    assert zero_ref.max_rel == np.inf and zero_ref.max_abs_a == 0.0
    assert (d.max_abs_a, same.max_abs_a) == (4.0, 0.0)


def test_compare_says_when_the_reference_output_is_all_zero():
    # Both all zero: max_rel reads 0, which measures nothing; the summary says so.
    zeros = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, kernel_initializer="zeros")])
    r = tf_fp16ops.compare(zeros, zeros, np.ones((2, 3), "float32"))
    assert r.max_rel == 0.0
    assert r.summary().endswith(
        "0/4 elements differ; model_a's output is all zero: the relative difference measures "
        "nothing"
    ), r.summary()
    ones = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, kernel_initializer="ones")])
    assert "all zero" not in tf_fp16ops.compare(ones, ones, np.ones((2, 3), "float32")).summary()


def test_empty_sequential_is_a_clear_error():
    with pytest.raises(ValueError, match="has no layers; there is nothing to convert"):
        tf_fp16ops.convert(keras.Sequential())


def test_float64_layer_left_unconverted_with_the_reason():
    model = keras.Sequential(
        [
            keras.Input((6, 6, 2), dtype="float64"),
            keras.layers.Conv2D(2, 3, dtype="float64", name="c64"),
            keras.layers.Conv2D(2, 3, name="c32"),
        ]
    )
    conv = tf_fp16ops.convert_with_report(model, "float16")
    assert conv.report.converted == ("c32",)
    [skipped] = conv.report.not_converted
    assert (skipped.name, skipped.class_name) == ("c64", "Conv2D")
    assert skipped.reason.startswith("dtype policy float64: the op family takes float16/float32")
    assert type(conv.model.get_layer("c64")) is keras.layers.Conv2D
    assert "not converted: c64 (Conv2D): dtype policy float64" in conv.report.summary()
    x = np.ones((1, 6, 6, 2))
    np.testing.assert_array_equal(
        conv.model.get_layer("c64")(x).numpy(), model.get_layer("c64")(x).numpy()
    )


def test_a_float32_output_layer_of_a_mixed_model_is_named_in_the_report():
    # The mixed-precision recipe keeps the last layer in float32; converting it with float16
    # accumulation rounds its inputs and weights to float16, which the report says.
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        inp = keras.Input((6, 6, 2))
        x = keras.layers.Conv2D(4, 3, name="body")(inp)
        x = keras.layers.Flatten()(x)
        out = keras.layers.Dense(3, dtype="float32", name="logits")(x)
        model = keras.Model(inp, out)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    r16 = tf_fp16ops.convert_with_report(model, "float16").report
    assert r16.float32_layers == ("logits",)
    assert r16.summary().splitlines()[-1] == (
        "  float32 layer(s) of a float16 model, now on float16-rounded inputs and weights: "
        "logits (`layers=` can leave them out)"
    )
    # float32 accumulation changes nothing there; a float32 model has no such layer to name.
    assert (
        "float32 layer(s)" not in tf_fp16ops.convert_with_report(model, "float32").report.summary()
    )
    plain = keras.Sequential([keras.Input((6, 6, 2)), keras.layers.Conv2D(2, 3)])
    assert tf_fp16ops.convert_with_report(plain, "float16").report.float32_layers == ()
    left = tf_fp16ops.convert_with_report(model, "float16", layers=["body"]).report
    assert left.float32_layers == () and "float32 layer(s)" not in left.summary()


@pytest.mark.parametrize("which", ["model_a", "model_b"])
def test_compare_rejects_a_model_that_is_not_callable(which):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    args = {"model_a": model, "model_b": model, which: "model.keras"}
    with pytest.raises(TypeError, match=f"{which} must be a keras.Model .* got str"):
        tf_fp16ops.compare(args["model_a"], args["model_b"], np.ones((1, 3), "float32"))
