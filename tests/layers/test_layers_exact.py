"""DepthwiseConv2D, SeparableConv2D, Conv2DTranspose, Conv1D and Dense of tf_fp16ops.layers.

float32 accumulation: each layer matches its keras.layers original (same weights) within fp32
rounding, asserted as |got - keras| <= 1e-5 * max|keras| (fp32 unit roundoff 2^-24 = 6e-8 times
at most a few hundred terms; fp16 arithmetic, u = 2^-11 = 4.9e-4, could not pass), forward and
gradients. float16 accumulation: bit-exact against the NumPy references of
tests/support/reference.py (binary16 fused steps in the documented order) on float16-representable
inputs, forward and gradients (input and kernel).
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import tf_fp16ops
from support import reference
from support.keras_reference import StockLayer
from tf_fp16ops import layers as L

FP32_MATCH = 1e-5


def _rng(seed):
    return np.random.default_rng(seed)


def _f16(a):
    """float32 array of float16-representable values."""
    return np.asarray(a).astype(np.float16).astype(np.float32)


def _pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


# (keras class, ours, constructor args, input shape)
CASES = [
    ("dw", keras.layers.DepthwiseConv2D, L.DepthwiseConv2D, dict(kernel_size=3), (2, 7, 8, 4)),
    (
        "dw_m3_s2_same",
        keras.layers.DepthwiseConv2D,
        L.DepthwiseConv2D,
        dict(kernel_size=(3, 2), strides=2, padding="same", depth_multiplier=3),
        (2, 7, 8, 4),
    ),
    (
        "dw_dil2",
        keras.layers.DepthwiseConv2D,
        L.DepthwiseConv2D,
        dict(kernel_size=3, dilation_rate=2, padding="same", depth_multiplier=2, activation="relu"),
        (1, 9, 9, 3),
    ),
    (
        "dw_nchw",
        keras.layers.DepthwiseConv2D,
        L.DepthwiseConv2D,
        dict(kernel_size=3, depth_multiplier=2, data_format="channels_first"),
        (2, 3, 6, 7),
    ),
    (
        "sep",
        keras.layers.SeparableConv2D,
        L.SeparableConv2D,
        dict(filters=5, kernel_size=3, depth_multiplier=2, padding="same"),
        (2, 6, 6, 3),
    ),
    (
        "sep_s2",
        keras.layers.SeparableConv2D,
        L.SeparableConv2D,
        dict(filters=4, kernel_size=3, strides=2),
        (1, 9, 8, 4),
    ),
    (
        "convT_s2_same",
        keras.layers.Conv2DTranspose,
        L.Conv2DTranspose,
        dict(filters=3, kernel_size=3, strides=2, padding="same"),
        (2, 4, 5, 4),
    ),
    (
        "convT_valid_outpad",
        keras.layers.Conv2DTranspose,
        L.Conv2DTranspose,
        dict(filters=2, kernel_size=3, strides=2, output_padding=1),
        (2, 4, 4, 3),
    ),
    (
        "convT_s3_k2",
        keras.layers.Conv2DTranspose,
        L.Conv2DTranspose,
        dict(filters=4, kernel_size=(2, 3), strides=(3, 2), padding="same", output_padding=(1, 0)),
        (1, 3, 4, 2),
    ),
    (
        "convT_dil2",
        keras.layers.Conv2DTranspose,
        L.Conv2DTranspose,
        dict(filters=3, kernel_size=3, dilation_rate=2),
        (1, 4, 4, 2),
    ),
    ("conv1d", keras.layers.Conv1D, L.Conv1D, dict(filters=4, kernel_size=3), (2, 10, 3)),
    (
        "conv1d_causal_dil",
        keras.layers.Conv1D,
        L.Conv1D,
        dict(filters=3, kernel_size=3, padding="causal", dilation_rate=2),
        (2, 11, 4),
    ),
    (
        "conv1d_same_s2_groups",
        keras.layers.Conv1D,
        L.Conv1D,
        dict(filters=6, kernel_size=4, strides=2, padding="same", groups=2),
        (2, 9, 4),
    ),
    (
        "conv1d_nchw",
        keras.layers.Conv1D,
        L.Conv1D,
        dict(filters=3, kernel_size=2, data_format="channels_first"),
        (2, 4, 7),
    ),
    (
        "dw1d_m2_same",
        keras.layers.DepthwiseConv1D,
        L.DepthwiseConv1D,
        dict(kernel_size=3, depth_multiplier=2, padding="same"),
        (2, 9, 4),
    ),
    (
        "dw1d_s2_dil_nchw",
        keras.layers.DepthwiseConv1D,
        L.DepthwiseConv1D,
        dict(kernel_size=2, strides=2, data_format="channels_first"),
        (2, 3, 9),
    ),
    (
        "sep1d",
        keras.layers.SeparableConv1D,
        L.SeparableConv1D,
        dict(filters=4, kernel_size=3, depth_multiplier=2),
        (2, 8, 3),
    ),
    (
        "convT1d_s2_outpad",
        keras.layers.Conv1DTranspose,
        L.Conv1DTranspose,
        dict(filters=3, kernel_size=3, strides=2, output_padding=1),
        (2, 6, 4),
    ),
    (
        "convT1d_same_nchw",
        keras.layers.Conv1DTranspose,
        L.Conv1DTranspose,
        dict(filters=2, kernel_size=3, strides=2, padding="same", data_format="channels_first"),
        (2, 3, 5),
    ),
    ("dense", keras.layers.Dense, L.Dense, dict(units=5), (6, 7)),
    ("dense_rank3", keras.layers.Dense, L.Dense, dict(units=4, activation="tanh"), (2, 3, 6)),
    ("dense_rank4_odd_rows", keras.layers.Dense, L.Dense, dict(units=3), (1, 3, 5, 4)),
]
IDS = [c[0] for c in CASES]


def _pair_of_layers(keras_cls, ours_cls, args, shape, accumulation, seed=0):
    x = _rng(seed).normal(size=shape).astype("float32")
    ref = StockLayer(keras_cls, args, shape)
    weights = [
        _rng(seed + 1 + i).normal(size=w.shape).astype("float32")
        for i, w in enumerate(ref.get_weights())
    ]
    ref.set_weights(weights)
    ours = ours_cls(accumulation=accumulation, **args)
    ours(x)
    ours.set_weights(weights)
    return x, ref, ours


def _close_fp32(got, expected):
    got, expected = np.asarray(got, np.float64), np.asarray(expected, np.float64)
    assert got.shape == expected.shape
    scale = max(float(np.abs(expected).max()), 1e-30)
    assert float(np.abs(got - expected).max()) <= FP32_MATCH * scale


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_float32_accumulation_matches_keras_forward_and_gradients(case):
    _, keras_cls, ours_cls, args, shape = case
    x, ref, ours = _pair_of_layers(keras_cls, ours_cls, args, shape, "float32")
    xt = tf.constant(x)
    results = []
    for layer in (ref, ours):
        with tf.GradientTape() as tape:
            tape.watch(xt)
            y = layer(xt)
            loss = tf.reduce_sum(y * y)
        grads = tape.gradient(loss, [xt] + layer.trainable_weights)
        grads = [g.numpy() for g in grads]
        if layer is ref:
            grads = grads[:1] + ref.weight_grads(grads[1:])
        results.append((y.numpy(), grads))
    (y_ref, g_ref), (y_ours, g_ours) = results
    assert y_ours.dtype == np.float32
    _close_fp32(y_ours, y_ref)
    assert len(g_ref) == len(g_ours)
    for a, b in zip(g_ours, g_ref, strict=True):
        _close_fp32(a, b)


# ---------------------------------------------------------------- float16: bit-exact references


def _layer16(ours_cls, args, shape, seed):
    """A float32-policy layer with float16 accumulation, float16-representable weights, no bias."""
    x = _f16(_rng(seed).normal(size=shape))
    layer = ours_cls(accumulation="float16", **{**args, "use_bias": False, "activation": None})
    layer(x)
    layer.set_weights(
        [_f16(_rng(seed + 1 + i).normal(size=w.shape)) for i, w in enumerate(layer.get_weights())]
    )
    return x, layer


def _forward_and_grads(layer, x, seed):
    xt = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        y = layer(xt)
    dy = _f16(_rng(seed + 7).normal(size=y.shape))
    grads = tape.gradient(y, [xt] + layer.trainable_weights, output_gradients=tf.constant(dy))
    return y.numpy(), dy, [g.numpy() for g in grads]


def _h(a):
    return np.asarray(a).astype(np.float16)


def _eq(got, expected):
    np.testing.assert_array_equal(
        np.asarray(got, np.float32), np.asarray(expected).astype(np.float32)
    )


DW_CASES = [c for c in CASES if c[2] is L.DepthwiseConv2D and "data_format" not in c[3]]


@pytest.mark.parametrize("case", DW_CASES, ids=[c[0] for c in DW_CASES])
def test_depthwise_float16_bit_exact(case):
    _, _, cls, args, shape = case
    x, layer = _layer16(cls, args, shape, 10)
    (w,) = layer.get_weights()
    s, d, pad = (
        _pair(args.get("strides", 1)),
        _pair(args.get("dilation_rate", 1)),
        args.get("padding", "valid").upper(),
    )
    y, dy, (dx, dw) = _forward_and_grads(layer, x, 10)
    _eq(y, reference.depthwise_conv2d(_h(x), _h(w), s, d, pad, "half"))
    KH, KW, C, M = w.shape
    wg = _h(w).reshape(KH, KW, 1, C * M)
    _eq(dx, reference.conv2d_backprop_input(x.shape, wg, _h(dy), s, d, pad, "half"))
    _eq(
        dw,
        reference.conv2d_backprop_filter(_h(x), wg.shape, _h(dy), s, d, pad, "half").reshape(
            w.shape
        ),
    )


def test_depthwise_reference_agrees_with_keras_in_float64():
    """The channel order c*M + m of the reference is keras.layers.DepthwiseConv2D's."""
    x = _rng(3).normal(size=(1, 5, 5, 3)).astype("float32")
    layer = keras.layers.DepthwiseConv2D(3, depth_multiplier=2, use_bias=False)
    y = layer(x).numpy()
    (w,) = layer.get_weights()
    _close_fp32(
        y,
        reference.depthwise_conv2d(
            x.astype(np.float64), w.astype(np.float64), accumulation="float64"
        ),
    )


SEP_CASES = [c for c in CASES if c[2] is L.SeparableConv2D]


@pytest.mark.parametrize("case", SEP_CASES, ids=[c[0] for c in SEP_CASES])
def test_separable_float16_bit_exact(case):
    _, _, cls, args, shape = case
    x, layer = _layer16(cls, args, shape, 20)
    dwk, pwk = (_h(w) for w in layer.get_weights())
    s, pad = _pair(args.get("strides", 1)), args.get("padding", "valid").upper()
    y, dy, (dx, ddw, dpw) = _forward_and_grads(layer, x, 20)
    z = reference.depthwise_conv2d(_h(x), dwk, s, (1, 1), pad, "half")
    _eq(y, reference.conv2d(z, pwk, accumulation="half"))
    dz = reference.conv2d_backprop_input(z.shape, pwk, _h(dy), accumulation="half")
    KH, KW, C, M = dwk.shape
    wg = dwk.reshape(KH, KW, 1, C * M)
    _eq(dx, reference.conv2d_backprop_input(x.shape, wg, dz, s, (1, 1), pad, "half"))
    _eq(
        ddw,
        reference.conv2d_backprop_filter(_h(x), wg.shape, dz, s, (1, 1), pad, "half").reshape(
            dwk.shape
        ),
    )
    _eq(dpw, reference.conv2d_backprop_filter(z, pwk.shape, _h(dy), accumulation="half"))


T_CASES = [c for c in CASES if c[2] is L.Conv2DTranspose]


@pytest.mark.parametrize("case", T_CASES, ids=[c[0] for c in T_CASES])
def test_conv2d_transpose_float16_bit_exact(case):
    _, keras_cls, cls, args, shape = case
    x, layer = _layer16(cls, args, shape, 30)
    (w,) = layer.get_weights()  # [KH, KW, filters, C]
    s, d, pad = (
        _pair(args.get("strides", 1)),
        _pair(args.get("dilation_rate", 1)),
        args.get("padding", "valid").upper(),
    )
    y, dy, (dx, dw) = _forward_and_grads(layer, x, 30)
    assert y.shape == tuple(keras_cls(**args).compute_output_shape(shape))
    _eq(y, reference.conv2d_backprop_input(y.shape, _h(w), _h(x), s, d, pad, "half"))
    _eq(dx, reference.conv2d(_h(dy), _h(w), s, d, pad, "half"))
    _eq(dw, reference.conv2d_backprop_filter(_h(dy), w.shape, _h(x), s, d, pad, "half"))


C1_CASES = [c for c in CASES if c[2] is L.Conv1D and "data_format" not in c[3]]


@pytest.mark.parametrize("case", C1_CASES, ids=[c[0] for c in C1_CASES])
def test_conv1d_float16_bit_exact(case):
    _, _, cls, args, shape = case
    x, layer = _layer16(cls, args, shape, 40)
    (w,) = layer.get_weights()  # [K, C / groups, filters]
    s, d = (1, args.get("strides", 1)), (1, args.get("dilation_rate", 1))
    pad = args.get("padding", "valid")
    x4 = _h(x)[:, None]
    if pad == "causal":
        x4 = np.pad(x4, ((0, 0), (0, 0), (d[1] * (w.shape[0] - 1), 0), (0, 0)))
        pad = "valid"
    w4 = _h(w)[None]
    y, dy, (dx, dw) = _forward_and_grads(layer, x, 40)
    _eq(y, reference.conv2d(x4, w4, s, d, pad.upper(), "half")[:, 0])
    dx4 = reference.conv2d_backprop_input(x4.shape, w4, _h(dy)[:, None], s, d, pad.upper(), "half")
    _eq(dx, dx4[:, 0, x4.shape[2] - x.shape[1] :])
    _eq(
        dw,
        reference.conv2d_backprop_filter(x4, w4.shape, _h(dy)[:, None], s, d, pad.upper(), "half")[
            0
        ],
    )


D_CASES = [c for c in CASES if c[2] is L.Dense]


@pytest.mark.parametrize("case", D_CASES, ids=[c[0] for c in D_CASES])
def test_dense_float16_bit_exact(case):
    _, _, cls, args, shape = case
    x, layer = _layer16(cls, args, shape, 50)
    (w,) = layer.get_weights()  # [Cin, units]
    y, dy, (dx, dw) = _forward_and_grads(layer, x, 50)
    x2, dy2 = _h(x).reshape(-1, shape[-1]), _h(dy).reshape(-1, w.shape[1])
    _eq(y, reference.matmul(x2, _h(w)).reshape(y.shape))
    _eq(dx, reference.matmul_backprop_input(_h(w), dy2).reshape(x.shape))
    _eq(dw, reference.matmul_backprop_filter(x2, dy2))


def test_dense_float16_traced_with_unknown_dims_is_bit_exact():
    """A Dense traced on [None, None, Cin] (its rows per example unknown: the product runs on
    [batch, rows, 1, Cin] built from the run-time shape) and on [None, 3, Cin] gives the
    reference's bits for every batch, empty batches and empty middle dimensions included."""
    layer = L.Dense(5, accumulation="float16", dtype="float16")
    rng = np.random.default_rng(51)
    layer(np.zeros((1, 2, 6), np.float16))
    layer.set_weights([rng.standard_normal((6, 5)).astype(np.float16), np.zeros(5, np.float16)])
    (w, _) = layer.get_weights()
    for spec in ((None, None, 6), (None, 3, 6)):
        f = tf.function(layer).get_concrete_function(tf.TensorSpec(spec, tf.float16))
        for shape in ((2, 3, 6), (0, 3, 6), (4, 3, 6)) + (
            ((2, 0, 6), (3, 7, 6)) if spec[1] is None else ()
        ):
            x = rng.standard_normal(shape).astype(np.float16)
            y = f(tf.constant(x)).numpy()
            assert y.shape == shape[:-1] + (5,)
            want = reference.matmul(x.reshape(-1, 6), w).astype(np.float16).reshape(y.shape)
            _eq(y, want)


def test_dense_long_reduction_rounds_in_float16():
    """Cin = 4096 terms of 1.0 * 1.0: the binary16 accumulator stops at 2048 (2048 + 1 rounds to
    2048, ties to even), the float32 one reaches 4096 -- hand values, not only the reference."""
    x = np.ones((2, 4096), "float32")
    for acc, expected in (("float16", 2048.0), ("float32", 4096.0)):
        layer = L.Dense(3, use_bias=False, kernel_initializer="ones", accumulation=acc)
        np.testing.assert_array_equal(layer(x).numpy(), np.full((2, 3), expected, np.float32))


# ---------------------------------------------------------------- serialization, policies, errors


def _all_layers_model():
    inp = keras.Input((8, 8, 3))
    x = L.DepthwiseConv2D(3, depth_multiplier=2, padding="same", accumulation="float16", name="dw")(
        inp
    )
    x = L.SeparableConv2D(4, 3, padding="same", accumulation="float32", name="sep")(x)
    x = L.Conv2DTranspose(3, 3, strides=2, padding="same", accumulation="float16", name="up")(x)
    x = keras.layers.Reshape((16, 48))(x)
    x = L.Conv1D(5, 3, padding="causal", accumulation="float16", name="c1")(x)
    out = L.Dense(4, accumulation="float32", name="d")(x)
    return keras.Model(inp, out)


@pytest.fixture(scope="module")
def all_layers_model():
    return _all_layers_model(), _rng(60).normal(size=(2, 8, 8, 3)).astype("float32")


def test_keras_file_round_trip(all_layers_model, tmp_path):
    model, x = all_layers_model
    path = str(tmp_path / "m.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    kinds = [
        (type(layer).__name__, layer.accumulation)
        for layer in loaded.layers
        if hasattr(layer, "accumulation")
    ]
    assert kinds == [
        ("DepthwiseConv2D", "float16"),
        ("SeparableConv2D", "float32"),
        ("Conv2DTranspose", "float16"),
        ("Conv1D", "float16"),
        ("Dense", "float32"),
    ]
    assert all(
        type(layer).__module__ == "tf_fp16ops.layers"
        for layer in loaded.layers[1:]
        if hasattr(layer, "accumulation")
    )
    np.testing.assert_array_equal(model(x).numpy(), loaded(x).numpy())


def test_saved_model_round_trip(all_layers_model, tmp_path):
    model, x = all_layers_model
    path = str(tmp_path / "sm")
    model.export(path, verbose=False)
    loaded = tf_fp16ops.load_saved_model(path)
    np.testing.assert_array_equal(model(x).numpy(), loaded.serve(tf.constant(x)).numpy())


def test_training_step_changes_weights(all_layers_model):
    model, x = all_layers_model
    model = keras.models.clone_model(model)
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse", jit_compile=False)
    before = [w.copy() for w in model.get_weights()]
    model.fit(x, np.zeros((2, 16, 4), "float32"), epochs=1, verbose=0)
    changed = [not np.array_equal(a, b) for a, b in zip(before, model.get_weights(), strict=True)]
    assert all(changed)


@pytest.mark.parametrize("accumulation", ["float16", "float32"])
def test_mixed_float16_policy_runs_half(accumulation):
    layer = L.Dense(3, accumulation=accumulation, dtype="mixed_float16")
    x = _rng(61).normal(size=(4, 5)).astype("float32")
    y = layer(x)
    assert y.dtype == tf.float16 and [v.dtype for v in layer.weights] == ["float32", "float32"]
    graph = tf.function(layer).get_concrete_function(tf.TensorSpec([4, 5], tf.float32)).graph
    (op,) = [o for o in graph.get_operations() if o.type == "Fp16Conv2D"]
    assert op.get_attr("T") == tf.float16
    assert op.get_attr("Tacc") == (tf.float16 if accumulation == "float16" else tf.float32)


@pytest.mark.parametrize(
    "cls,args",
    [
        (L.DepthwiseConv2D, (3,)),
        (L.SeparableConv2D, (2, 3)),
        (L.Conv2DTranspose, (2, 3)),
        (L.Conv1D, (2, 3)),
        (L.DepthwiseConv1D, (3,)),
        (L.SeparableConv1D, (2, 3)),
        (L.Conv1DTranspose, (2, 3)),
        (L.Dense, (2,)),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_bad_arguments(cls, args):
    with pytest.raises(ValueError, match="accumulation must be .* got 'int8'"):
        cls(*args, accumulation="int8")
    with pytest.raises(
        ValueError, match=f"{cls.__name__} .*dtype policy 'bfloat16' has compute dtype bfloat16"
    ):
        cls(*args, dtype="bfloat16")
    with pytest.raises(ValueError, match="accumulation must be .* got 'half'"):
        cls(*args, accumulation="half")
    # The message lists every state the layer takes, 'keras' included.
    with pytest.raises(ValueError, match=r"float32'.* or 'keras' .*, got 'Keras'$"):
        cls(*args, accumulation="Keras")
    config = cls(*args, accumulation=np.float16).get_config()
    assert config["accumulation"] == "float16"
    assert (
        type(
            keras.saving.deserialize_keras_object(
                keras.saving.serialize_keras_object(cls.from_config(config))
            )
        )
        is cls
    )


@pytest.mark.parametrize("case", CASES[::3], ids=IDS[::3])
@pytest.mark.parametrize("accumulation", ["float16", "float32"])
def test_empty_batch_gives_empty_output_of_the_keras_shape(case, accumulation):
    _, keras_cls, ours_cls, args, shape = case
    x = np.ones((0,) + shape[1:], "float32")
    # Keras's shape rule (running the Keras layers on 0 samples is not reliable: TF's depthwise
    # kernel returns the input's spatial size for an empty batch).
    expected = (0,) + tuple(keras_cls(**args).compute_output_shape(shape))[1:]
    assert tuple(ours_cls(accumulation=accumulation, **args)(x).shape) == expected


@pytest.mark.parametrize("case", CASES[1::2], ids=IDS[1::2])
@pytest.mark.parametrize("accumulation", ["float16", "float32"])
def test_mixed_float16_policy_close_to_keras(case, accumulation):
    """Under mixed_float16 both run in float16 tensors; they differ by float16 rounding only
    (bounded here by 2^-7 of the output's magnitude: a few binary16 roundings, u = 2^-11,
    accumulated over at most ~50 terms)."""
    _, keras_cls, ours_cls, args, shape = case
    x = _rng(70).normal(size=shape).astype("float32")
    ref = StockLayer(keras_cls, args, shape, dtype="mixed_float16")
    ref.set_weights(ref.get_weights())
    ours = ours_cls(accumulation=accumulation, **args, dtype="mixed_float16")
    ours(x)
    ours.set_weights(ref.get_weights())
    y_ref, y = ref(x).numpy(), ours(x).numpy()
    assert y.dtype == np.float16 and [v.dtype for v in ours.weights] == ["float32"] * len(
        ours.weights
    )
    err = np.abs(y.astype(np.float64) - y_ref.astype(np.float64)).max()
    assert err <= 2.0**-7 * np.abs(y_ref.astype(np.float64)).max()


_KERAS_PATH_CASES = CASES[::2] + [
    ("conv2d", keras.layers.Conv2D, L.Conv2D, dict(filters=4, kernel_size=3), (2, 6, 6, 3))
]


@pytest.mark.parametrize("case", _KERAS_PATH_CASES, ids=[c[0] for c in _KERAS_PATH_CASES])
def test_keras_path_switch_runs_the_keras_kernel(case):
    """The accumulation state "keras" (set by tf_fp16ops.sensitivity for others='original') runs
    the Keras layer's own call: no Fp16 op in the graph, the Keras layer's bits (or, where this
    CPU's stock kernel refuses the layer, the original's error)."""
    _, keras_cls, ours_cls, args, shape = case
    x, ref, ours = _pair_of_layers(keras_cls, ours_cls, args, shape, "float16")
    ours.accumulation = "keras"
    if ref.runner is None:
        np.testing.assert_array_equal(ours(x).numpy(), ref(x).numpy())
    else:  # this CPU's stock kernel refuses the layer: the Keras path fails as the original does
        for layer in (ref.layer, ours):
            with pytest.raises(tf.errors.InvalidArgumentError):
                layer(x)
    graph = tf.function(ours).get_concrete_function(tf.TensorSpec(shape, tf.float32)).graph
    assert not [o.type for o in graph.get_operations() if o.type.startswith("Fp16")]
    ours.accumulation = "float16"
    graph = tf.function(ours).get_concrete_function(tf.TensorSpec(shape, tf.float32)).graph
    assert [o.type for o in graph.get_operations() if o.type.startswith("Fp16")]


# 1-D layers: the 2-D references with height 1 (x [N, L, C] -> [N, 1, L, C], kernel -> [1, ...]).
ONE_D = [
    c
    for c in CASES
    if c[2] in (L.DepthwiseConv1D, L.SeparableConv1D, L.Conv1DTranspose)
    and "data_format" not in c[3]
]


@pytest.mark.parametrize("case", ONE_D, ids=[c[0] for c in ONE_D])
def test_one_d_layers_float16_bit_exact(case):
    _, keras_cls, cls, args, shape = case
    x, layer = _layer16(cls, args, shape, 80)
    weights = [_h(w)[None] for w in layer.get_weights()]
    s, d = (1, args.get("strides", 1)), (1, args.get("dilation_rate", 1))
    pad = args.get("padding", "valid").upper()
    y, dy, grads = _forward_and_grads(layer, x, 80)
    x4, dy4 = _h(x)[:, None], _h(dy)[:, None]
    if cls is L.Conv1DTranspose:
        (w4,) = weights  # [1, K, filters, C]
        _eq(y, reference.conv2d_backprop_input(dy4.shape, w4, x4, s, d, pad, "half")[:, 0])
        _eq(grads[0], reference.conv2d(dy4, w4, s, d, pad, "half")[:, 0])
        _eq(grads[1], reference.conv2d_backprop_filter(dy4, w4.shape, x4, s, d, pad, "half")[0])
        return
    dwk = weights[0]  # [1, K, C, M]
    KH, KW, C, M = dwk.shape
    wg = dwk.reshape(KH, KW, 1, C * M)
    z = reference.depthwise_conv2d(x4, dwk, s, d, pad, "half")
    if cls is L.DepthwiseConv1D:
        _eq(y, z[:, 0])
        dz = dy4
    else:
        pwk = weights[1]  # [1, 1, C*M, filters]
        _eq(y, reference.conv2d(z, pwk, accumulation="half")[:, 0])
        dz = reference.conv2d_backprop_input(z.shape, pwk, dy4, accumulation="half")
        _eq(grads[2], reference.conv2d_backprop_filter(z, pwk.shape, dy4, accumulation="half")[0])
    _eq(grads[0], reference.conv2d_backprop_input(x4.shape, wg, dz, s, d, pad, "half")[:, 0])
    dw = reference.conv2d_backprop_filter(x4, wg.shape, dz, s, d, pad, "half")
    _eq(grads[1], dw.reshape(dwk.shape)[0])


@pytest.mark.parametrize("accumulation", ["float16", "float32"])
@pytest.mark.parametrize("lead", [(2,), (2, 3)])
def test_dense_with_no_input_features_matches_keras(accumulation, lead):
    # Cin = 0: each output is a sum of no terms, +0, then the bias (README "Numerics").
    x = tf.zeros((*lead, 0))
    ours = L.Dense(3, accumulation=accumulation, bias_initializer="ones")
    theirs = keras.layers.Dense(3, bias_initializer="ones")
    got, want = ours(x).numpy(), theirs(x).numpy()
    assert got.shape == want.shape == (*lead, 3)
    np.testing.assert_array_equal(got, np.ones((*lead, 3), np.float32))
    np.testing.assert_array_equal(got, want)
    nobias = L.Dense(2, accumulation=accumulation, use_bias=False)(x).numpy()
    assert nobias.shape == (*lead, 2) and not np.signbit(nobias).any() and not nobias.any()
