"""A .keras file with each of tf_fp16ops' registered layers besides Conv2D, audited statically.

The expected ops, T and Tacc of each layer are read from the graph TensorFlow traces for that
layer's `call` (tf.function), not from the audit's reconstruction; the expected class follows
from Tacc (half: fp16-accumulate, float: fp32 for a float32 layer). The static audit shows the op
library's ops, so the layers are traced with the hand-off of float32 gradient ops (the transposed
convolutions' forward) to TensorFlow's own switched off (tf_fp16ops/_platform/stock_conv.py: it
depends on the machine, and such a call accumulates in fp32 either way).
"""

import keras
import pytest
import tensorflow as tf

import tf_fp16ops
from tf_fp16ops._platform import stock_conv
from tf_fp16ops.audit import RuntimeContext, audit
from tf_fp16ops.audit.opsets import CONV_OPS

L = tf_fp16ops.layers
IN_2D, IN_1D = (8, 8, 4), (10, 4)
LAYERS_2D = {
    "DepthwiseConv2D": lambda acc, n: L.DepthwiseConv2D(
        3, depth_multiplier=2, accumulation=acc, name=n
    ),
    "SeparableConv2D": lambda acc, n: L.SeparableConv2D(
        6, 3, padding="same", accumulation=acc, name=n
    ),
    "Conv2DTranspose": lambda acc, n: L.Conv2DTranspose(3, 3, strides=2, accumulation=acc, name=n),
}
LAYERS_1D = {
    "Conv1D": lambda acc, n: L.Conv1D(5, 3, padding="causal", accumulation=acc, name=n),
    "DepthwiseConv1D": lambda acc, n: L.DepthwiseConv1D(3, accumulation=acc, name=n),
    "SeparableConv1D": lambda acc, n: L.SeparableConv1D(5, 3, accumulation=acc, name=n),
    "Conv1DTranspose": lambda acc, n: L.Conv1DTranspose(5, 3, strides=2, accumulation=acc, name=n),
    "Dense": lambda acc, n: L.Dense(7, accumulation=acc, name=n),  # on a rank-3 input
}
ACCS = {"float16": "half", "float32": "float"}  # accumulation / tf.DType name -> audit's dtype name


def _traced_convs(layer, shape):
    """(op, T, Tacc) of the conv ops in the graph TensorFlow traces for `layer` on [2, *shape]."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(stock_conv, "stock_wins", lambda *a: False)
        fn = tf.function(lambda x: layer(x)).get_concrete_function(tf.TensorSpec((2,) + shape))
    out = []
    for op in fn.graph.get_operations():
        if op.type in CONV_OPS:
            out.append((op.type, ACCS[op.get_attr("T").name], ACCS[op.get_attr("Tacc").name]))
    return sorted(out)


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    x2, x1 = keras.Input(IN_2D), keras.Input(IN_1D)
    outs, expected = [], {}
    for acc in ACCS:
        for group, x, shape in ((LAYERS_2D, x2, IN_2D), (LAYERS_1D, x1, IN_1D)):
            for cls, make in group.items():
                name = f"{cls.lower()}_{ACCS[acc]}"
                layer = make(acc, name)
                outs.append(layer(x))
                expected[name] = (cls, acc, _traced_convs(layer, shape))
    model = keras.Model([x2, x1], outs)
    path = tmp_path_factory.mktemp("ours_static") / "m.keras"
    model.save(path)
    report = audit(str(path), RuntimeContext(device="cpu"))
    return report, expected


def test_every_registered_layer_is_reported_with_the_ops_it_runs(audited):
    report, expected = audited
    assert report.source_format == "keras"
    found = {}
    for f in report.findings:
        d = f.to_dict()
        found.setdefault(d["node"].split("/")[0], []).append(d)
    assert set(found) == set(expected)
    for name, (_cls, acc, traced) in expected.items():
        # The reconstruction emits the conv ops the layer's call really runs, same T and Tacc.
        assert traced, (name, "no conv op traced")
        got = sorted((d["op"], d["T"], d["Tacc"]) for d in found[name])
        assert got == traced, name
        want_class = "fp16-accumulate" if acc == "float16" else "fp32"
        for d in found[name]:
            assert d["audit_class"] == want_class, (name, d["audit_class"])
            assert d["accumulation"] == ("fp16" if acc == "float16" else "fp32"), name
            assert d["accumulation_reason"].startswith(f"Tacc={ACCS[acc]}:"), name


def test_flops_of_dense_and_depthwise_from_their_shapes(audited):
    report, _ = audited
    flops = {f.to_dict()["node"].split("/")[0]: f.to_dict()["flops"] for f in report.findings}
    # Dense 4 -> 7 on [N, 10, 4]: 2 * 10 rows * 4 * 7 per example (batch unknown counts as 1).
    assert flops["dense_half"] == 2 * 10 * 4 * 7
    # DepthwiseConv2D 3x3, multiplier 2 on 8x8x4, valid: output 6x6x8, 9 taps each.
    assert flops["depthwiseconv2d_float"] == 2 * 6 * 6 * 8 * 9
