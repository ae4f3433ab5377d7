"""EinsumDense and MultiHeadAttention twins and `convert` on a Keras Transformer encoder: float32
accumulation matches the Keras model within fp32 rounding, every matrix product of a
float16-accumulation layer is bit-exact against tests/support/reference.py (einsum_half), and the
converted model round-trips through .keras and SavedModel."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import tf_fp16ops
from support import reference as R
from support.transformer import DIM, FF, HEADS, KEY_DIM, SEQ, encoder, inputs
from tf_fp16ops import layers as L
from tf_fp16ops import matmul_ops
from tf_fp16ops._platform import stock_conv


def bits_equal(a, b):
    a, b = np.asarray(a, np.float16), np.asarray(b, np.float16)
    return a.shape == b.shape and bool(
        np.all((a.view(np.uint16) == b.view(np.uint16)) | (np.isnan(a) & np.isnan(b)))
    )


@pytest.fixture(scope="module")
def model():
    return encoder()


def test_encoder_converts_completely_and_float32_matches(model):
    x = inputs()
    conv = tf_fp16ops.convert_with_report(model, "float32")
    assert conv.report.not_converted == ()
    assert conv.report.counts() == {"MultiHeadAttention": 2, "Dense": 2, "EinsumDense": 2}
    # Every matrix product of the converted model is an Fp16MatMul, but the Dense layers': their
    # Fp16Conv2D, or TensorFlow's MatMul where their float32 product goes to TensorFlow
    # (layers.dense_matmul, as stock_conv decides for the 1x1 forward it stands for).
    graph = (
        tf.function(lambda t: conv.model(t))
        .get_concrete_function(tf.TensorSpec(x.shape, tf.float32))
        .graph
    )
    types = {op.type for op in graph.get_operations()}
    assert "Fp16MatMul" in types
    assert not types & {"Einsum", "BatchMatMulV2", "BatchMatMulV3"}
    dense = [layer.name for layer in conv.model.layers if isinstance(layer, L.Dense)]
    attrs = tf_fp16ops.ops._conv_attrs(1, "VALID", "NHWC", 1, "float32")
    handed = stock_conv.stock_wins(
        "fprop", tf.float32, [None, 1, 1, DIM], [1, 1, DIM, FF], None, attrs
    )
    matmuls = [op.name for op in graph.get_operations() if op.type == "MatMul"]
    if handed:
        assert len(matmuls) == len(dense) == 2
        assert all(any(f"/{d}" in n for d in dense) for n in matmuls), (matmuls, dense)
    else:
        assert matmuls == []
    r32 = tf_fp16ops.compare(model, conv.model, x)
    assert r32.max_rel < 1e-5, r32.summary()
    r16 = tf_fp16ops.compare(model, tf_fp16ops.convert(model, "float16"), x)
    assert 1e-4 < r16.max_rel < 0.1, r16.summary()


def test_mha_float32_matches_keras_with_masks_and_scores():
    keras.utils.set_random_seed(1)
    ours = L.MultiHeadAttention(HEADS, KEY_DIM, accumulation="float32")
    theirs = keras.layers.MultiHeadAttention(HEADS, KEY_DIM)
    q, v = inputs(2, 1), inputs(2, 2)[:, :7]
    ours(q, v)
    theirs(q, v)
    ours.set_weights(theirs.get_weights())
    mask = np.random.default_rng(3).random((2, SEQ, 7)) < 0.7
    for kw in ({}, {"attention_mask": mask}, {"use_causal_mask": True}):
        a, sa = ours(q, v, return_attention_scores=True, **kw)
        b, sb = theirs(q, v, return_attention_scores=True, **kw)
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(sa.numpy(), sb.numpy(), rtol=1e-5, atol=1e-7)
        c = ours(q, v, **kw)  # Keras's fused dot_product_attention path for the original
        np.testing.assert_allclose(c.numpy(), theirs(q, v, **kw).numpy(), rtol=1e-5, atol=1e-6)


def record_einsums(monkeypatch):
    calls = []
    real = matmul_ops.einsum

    def spy(equation, a, b, accumulation="float16", name=None):
        out = real(equation, a, b, accumulation=accumulation, name=name)
        calls.append((equation, a.numpy(), b.numpy(), out.numpy(), accumulation))
        return out

    monkeypatch.setattr(matmul_ops, "einsum", spy)
    return calls


def test_mha_float16_every_product_is_bit_exact(monkeypatch):
    # A float16 model: every product (3 projections, scores, combine, output projection) is
    # checked against the reference on the operands the layer really passed.
    keras.utils.set_random_seed(2)
    layer = L.MultiHeadAttention(HEADS, KEY_DIM, dtype="float16")
    q = inputs(2, 4).astype(np.float16)
    layer(q, q)
    calls = record_einsums(monkeypatch)
    out, scores = layer(q, q, return_attention_scores=True)
    equations = [c[0] for c in calls]
    assert equations == [
        "abc,cde->abde",
        "abc,cde->abde",
        "abc,cde->abde",
        "aecd,abcd->acbe",
        "acbe,aecd->abcd",
        "abcd,cde->abe",
    ]
    for equation, a, b, got, acc in calls:
        assert acc == "float16" and a.dtype == np.float16 and b.dtype == np.float16
        assert bits_equal(got, R.einsum_half(equation, a, b)), equation
    # The combine's left operand is Keras's softmax of the raw scores (no dropout here).
    np.testing.assert_array_equal(calls[4][1], scores.numpy())
    assert out.dtype == "float16"


def test_einsum_dense_float16_is_bit_exact_in_a_float32_model():
    keras.utils.set_random_seed(5)
    layer = L.EinsumDense("abc,cde->abde", (SEQ, HEADS, KEY_DIM), bias_axes="de")
    x = inputs(2, 6)
    y = layer(x).numpy()
    x16 = x.astype(np.float16)
    w16 = layer.kernel.numpy().astype(np.float16)
    prod = R.einsum_half("abc,cde->abde", x16, w16).astype(np.float32)
    np.testing.assert_array_equal(y, prod + layer.bias.numpy())


def test_einsum_dense_kernel_gradient_is_the_reference_chain():
    keras.utils.set_random_seed(6)
    layer = L.EinsumDense("abc,cd->abd", (SEQ, 5), dtype="float16")  # no bias_axes: no bias
    x = tf.constant(inputs(2, 7).astype(np.float16))
    with tf.GradientTape() as tape:
        y = layer(x)
    g = np.random.default_rng(8).standard_normal(y.shape).astype(np.float16)
    dw = tape.gradient(y, layer.kernel, output_gradients=tf.constant(g))
    ref = R.batch_matmul(x.numpy().reshape(-1, DIM), g.reshape(-1, 5), adj_x=True)
    assert bits_equal(tf.cast(dw, tf.float16).numpy(), ref)


def test_converted_encoder_round_trips(model, tmp_path):
    x = inputs(2, 9)
    conv = tf_fp16ops.convert(model, "float16")
    want = conv(x).numpy()
    path = tmp_path / "enc.keras"
    conv.save(path)
    loaded = keras.models.load_model(path)
    assert type(loaded.get_layer("mha_0")) is L.MultiHeadAttention
    assert type(loaded.get_layer("mha_0")._query_dense) is L.EinsumDense
    assert loaded.get_layer("ff2_1").accumulation == "float16"
    np.testing.assert_array_equal(loaded(x).numpy(), want)
    export = tmp_path / "enc_savedmodel"
    conv.export(str(export), verbose=False)
    served = tf.saved_model.load(str(export))
    np.testing.assert_array_equal(served.serve(tf.constant(x)).numpy(), want)


def test_equations_convert_takes():
    # convert leaves an EinsumDense whose equation einsum does not take, with this reason.
    assert matmul_ops.equation_problem("abc,cd->abd") is None
    assert matmul_ops.equation_problem("...b,bc->...c") is None
    assert matmul_ops.equation_problem("abcd,cde->abe") is None
    assert "summed within one operand only" in matmul_ops.equation_problem("abc,cd->ad")
    assert "a label repeats" in matmul_ops.equation_problem("aac,cd->acd")


def test_convert_reports_the_equation_of_an_einsum_dense_it_leaves():
    """The report names the equation's problem (it used to give a dtype reason for a float32
    layer whose dtype is fine)."""
    inp = keras.Input((4, 6))
    out = keras.layers.EinsumDense("abc,cd->ad", output_shape=(3,), name="sum_b")(inp)
    report = tf_fp16ops.convert_with_report(keras.Model(inp, out)).report
    text = report.summary()
    assert "sum_b" in text and "summed within one operand only" in text
    assert "dtype policy" not in text


# ---- fully masked query rows: the softmax of the path Keras takes ----------------------------
def _mha_pair(dropout):
    keras.utils.set_random_seed(1)
    ours = L.MultiHeadAttention(HEADS, KEY_DIM, dropout=dropout, accumulation="float32")
    theirs = keras.layers.MultiHeadAttention(HEADS, KEY_DIM, dropout=dropout)
    q, v = inputs(2, 1), inputs(2, 2)[:, :7]
    ours(q, v)
    theirs(q, v)
    ours.set_weights(theirs.get_weights())
    return ours, theirs, q, v


@pytest.mark.parametrize("dropout", [0.0, 0.25])
def test_mha_float32_matches_keras_on_fully_masked_rows(dropout):
    """Keras's fused path (no dropout, no scores) gives a query row whose every key is masked
    uniform weights, its explicit path (dropout > 0, or scores returned) zeros; ours gave zeros
    on both, 1.75 away from Keras on a padded encoder. Inference (training=False): dropout is the
    identity, but Keras still takes its explicit path."""
    ours, theirs, q, v = _mha_pair(dropout)
    partial = np.random.default_rng(3).random((2, SEQ, 7)) < 0.7
    partial[0, 3] = False  # one fully masked query row
    partial[1, 5:] = False
    for mask in (partial, np.zeros((2, SEQ, 7), bool)):
        for scores in (False, True):
            a = ours(q, v, attention_mask=mask, return_attention_scores=scores, training=False)
            b = theirs(q, v, attention_mask=mask, return_attention_scores=scores, training=False)
            if scores:
                (a, sa), (b, sb) = a, b
                np.testing.assert_allclose(sa.numpy(), sb.numpy(), rtol=1e-5, atol=1e-7)
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


def test_padded_encoder_float32_matches_keras():
    """Embedding(mask_zero=True) before a 2-block encoder: the padded positions are fully masked
    query rows of both MultiHeadAttention layers."""
    keras.utils.set_random_seed(5)
    tokens = keras.Input((SEQ,), dtype="int32")
    x = keras.layers.Embedding(50, DIM, mask_zero=True)(tokens)
    for b in range(2):
        att = keras.layers.MultiHeadAttention(HEADS, KEY_DIM, name=f"mha_{b}")(x, x)
        x = keras.layers.LayerNormalization(epsilon=1e-6, name=f"ln_{b}")(x + att)
    model = keras.Model(tokens, x)
    ids = np.random.default_rng(7).integers(1, 50, (3, SEQ)).astype("int32")
    ids[0, 8:] = 0
    ids[1, 3:] = 0
    converted = tf_fp16ops.convert(model, "float32")
    assert sum(isinstance(layer, L.MultiHeadAttention) for layer in converted.layers) == 2
    np.testing.assert_allclose(converted(ids).numpy(), model(ids).numpy(), rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize(
    "make, op",
    [
        (lambda: L.EinsumDense("abc,cd->abd", (None, 4), dtype="bfloat16"), "Fp16MatMul"),
        (lambda: L.MultiHeadAttention(2, 4, dtype="bfloat16"), "Fp16MatMul"),
        (lambda: L.Conv2D(4, 3, dtype="bfloat16"), "Fp16Conv2D"),
    ],
)
def test_policy_error_names_the_op_of_the_layer(make, op):
    # EinsumDense and MultiHeadAttention said "the Fp16Conv2D op".
    with pytest.raises(ValueError, match=f"compute dtype bfloat16; the {op} op computes") as e:
        make()
    other = "Fp16Conv2D" if op == "Fp16MatMul" else "Fp16MatMul"
    assert other not in str(e.value)


def test_converted_float32_encoder_has_no_cast_round_trip(model):
    # In a float32 model the combine einsum's float16 result goes straight into the output
    # projection, which rounds its inputs to float16 anyway: no float16 -> float32 -> float16
    # pair for the audit to flag, and the same values as Keras's autocast path would give.
    from tf_fp16ops.audit import RuntimeContext, audit

    conv = tf_fp16ops.convert(model, "float16")
    fn = tf.function(lambda t: conv(t)).get_concrete_function(tf.TensorSpec((2, SEQ, DIM)))
    report = audit(fn, RuntimeContext(device="cpu", tf_version="test"))
    flagged = [(f.node, f.flag_texts) for f in report.findings if "noop-round-trip" in f.codes]
    assert report.findings and flagged == [], flagged
    # The output projection's operand is the combine's float16 result itself.
    mha = conv.get_layer("mha_0")
    x = inputs(2, 3)
    q, v = tf.constant(x), tf.constant(x)
    a, scores = mha(q, v, return_attention_scores=True)
    combine = R.einsum_half(
        mha._combine_equation,
        scores.numpy().astype(np.float16),
        mha._value_dense(v).numpy().astype(np.float16),
    )
    proj = mha._output_dense
    want = (
        R.einsum_half(proj.equation, combine, proj.kernel.numpy().astype(np.float16)).astype(
            np.float32
        )
        + proj.bias.numpy()
    )
    np.testing.assert_array_equal(a.numpy(), want)
