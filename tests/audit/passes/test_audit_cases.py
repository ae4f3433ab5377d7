"""Audit behaviour on the real-world cases (docs/design.md "Cases and their public sources"): the
seed question, the precision switches, Keras mixed precision policies, wrapped SavedModels, auto
mixed precision, unknown ops, and this package's op."""

from __future__ import annotations

import keras
import pytest
import tensorflow as tf

from support.audit_helpers import CPU, add_node, class_counts, conv_graph, cpu, gpu
from tf_fp16ops.audit import audit
from tf_fp16ops.audit.limits import Limits

X16 = tf.TensorSpec([16, 32, 32, 16], tf.float16)
W16 = tf.TensorSpec([3, 3, 16, 16], tf.float16)


def test_seed_conv16_and_conv16_32_are_told_apart():
    @tf.function(input_signature=[X16, W16])
    def conv16(x, w):
        return tf.nn.conv2d(x, w, 1, "VALID")

    @tf.function(input_signature=[X16, W16])
    def conv16_32(x, w):
        return tf.cast(
            tf.nn.conv2d(tf.cast(x, tf.float32), tf.cast(w, tf.float32), 1, "VALID"), tf.float16
        )

    a, b = audit(conv16, CPU), audit(conv16_32, CPU)
    assert [f.audit_class for f in a.findings] == ["fp16-storage"]
    assert [f.audit_class for f in b.findings] == ["fake-fp16"]
    fb = b.findings[0]
    assert (
        fb.T == "float"
        and fb.data.dtypes == ("half", "float")
        and fb.filter.dtypes == ("half", "float")
    )
    assert any(fl.startswith("fake-fp16-input") for fl in fb.flag_texts)
    # 30x30x16 outputs per image, 3*3*16 MACs each, batch 16.
    assert a.findings[0].flops == fb.flops == 2 * 16 * 30 * 30 * 16 * 3 * 3 * 16


def test_float_half_float_round_trip_is_fake_fp16():
    @tf.function(
        input_signature=[
            tf.TensorSpec([1, 8, 8, 4], tf.float32),
            tf.TensorSpec([1, 1, 4, 8], tf.float32),
        ]
    )
    def f(x, w):
        x = tf.identity(tf.cast(tf.cast(x, tf.float16), tf.float32))
        return tf.nn.conv2d(x, w, 1, "VALID")

    (fd,) = audit(f, CPU).findings
    assert fd.audit_class == "fake-fp16"
    assert fd.data.dtypes == ("float", "half", "float")
    assert "fake-fp16-input(float->half->float round trip)" in fd.flag_texts


def test_half_float_half_round_trip_is_a_noop():
    @tf.function(input_signature=[X16, W16])
    def f(x, w):
        return tf.nn.conv2d(tf.cast(tf.cast(x, tf.float32), tf.float16), w, 1, "VALID")

    (fd,) = audit(f, CPU).findings
    assert fd.audit_class == "fp16-storage"
    assert "noop-round-trip-input(half->float->half)" in fd.flag_texts


@pytest.mark.parametrize(
    "value,expected",
    [(None, "fp32"), ("0", "fp16"), ("false", "fp32"), ("", "fp32"), ("1", "fp32"), (" 0", "fp32")],
)
def test_gpu_switch_exact_string(value, expected):
    env = {} if value is None else {"TF_FP16_CONV_USE_FP32_COMPUTE": value}
    (f,) = audit(conv_graph(), gpu(env)).findings
    assert f.accumulation == expected
    assert "TF_FP16_CONV_USE_FP32_COMPUTE" in f.accumulation_reason


@pytest.mark.parametrize(
    "value,expected", [(None, "fp32"), ("1", "fp16"), ("true", "fp32"), ("0", "fp32")]
)
def test_cpu_switch_exact_string(value, expected):
    env = {} if value is None else {"TF_CONV2D_USE_FP16_ACCUMULATE": value}
    (f,) = audit(conv_graph(), cpu(env)).findings
    assert f.accumulation == expected
    # The GPU switch does nothing on CPU, and the CPU switch nothing on GPU.
    (g,) = audit(conv_graph(), gpu(env)).findings
    assert g.accumulation == "fp32"


def test_auto_mixed_precision_env_is_reported_ignored():
    r = audit(
        conv_graph(T="DT_FLOAT"),
        gpu({"TF_ENABLE_AUTO_MIXED_PRECISION": "1"}, compute_capability="8.0"),
    )
    sw = {s.name: s for s in r.switches}
    assert "ignored in TF2" in sw["TF_ENABLE_AUTO_MIXED_PRECISION"].effect
    assert r.findings[0].amp is None and r.findings[0].T == "float"


@pytest.mark.parametrize(
    "policy,switch,weights,acc,T",
    [
        ("float32", None, ("float",), "fp32", "float"),
        ("float32", "0", ("float",), "fp32", "float"),
        ("float16", None, ("half",), "fp32", "half"),
        ("float16", "1", ("half",), "fp32", "half"),
        ("float16", "0", ("half",), "fp16", "half"),
        ("mixed_float16", None, ("float", "half"), "fp32", "half"),
        ("mixed_float16", "1", ("float", "half"), "fp32", "half"),
        ("mixed_float16", "0", ("float", "half"), "fp16", "half"),
    ],
)
def test_mixed_policy_rows(policy, switch, weights, acc, T):
    inp = keras.Input((8, 8, 3))
    layer = keras.layers.Conv2D(8, 3, dtype=policy, name="c")
    model = keras.Model(inp, layer(inp))
    env = {} if switch is None else {"TF_FP16_CONV_USE_FP32_COMPUTE": switch}
    (f,) = audit(model, gpu(env)).findings
    assert (f.T, f.accumulation, f.filter.dtypes) == (T, acc, weights)
    assert f.keras_layer == "c" and f.keras_policy == policy


def test_policy_mixed_but_wrapped_savedmodel_computes_fp32(tmp_path):
    # The wrapped SavedModel was built in fp32: its conv layer has policy float32. It accepts the
    # float16 activations a mixed_float16 model hands it (Keras autocasts a TFSMLayer's inputs to
    # the policy's compute dtype) and casts them back to float32 before its conv.
    inner_in = keras.Input((8, 8, 3), dtype="float16")
    inner = keras.Model(
        inner_in, keras.layers.Conv2D(4, 3, dtype="float32", name="inner_conv")(inner_in)
    )
    inner.export(str(tmp_path / "fp32_sm"), verbose=False)
    prev = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        x = keras.Input((8, 8, 3))
        y = keras.layers.TFSMLayer(
            str(tmp_path / "fp32_sm"), call_endpoint="serve", name="wrapped"
        )(x)
        z = keras.layers.Conv2D(4, 1, name="outer_conv")(x)
        model = keras.Model(x, [y, z])
    finally:
        keras.mixed_precision.set_global_policy(prev)
    model.save(str(tmp_path / "c7.keras"))
    # The static audit reads the wrapped SavedModel only where allowed to read outside the file.
    allowed = Limits(external_dirs=(str(tmp_path),))
    for r in (audit(str(tmp_path / "c7.keras"), CPU, limits=allowed), audit(model, CPU)):
        wrapped = [f for f in r.findings if f.keras_layer == "wrapped"]
        outer = [f for f in r.findings if f.keras_layer == "outer_conv"]
        assert wrapped, r.findings
        for f in wrapped:
            # fp32 compute despite the policy; its fp16-rounded input makes it "fake fp16".
            assert (f.T, f.accumulation, f.audit_class) == ("float", "fp32", "fake-fp16")
            assert f.keras_policy == "mixed_float16"
            assert any(fl.startswith("policy-mismatch") for fl in f.flag_texts)
        assert [(f.T, f.audit_class) for f in outer] == [("half", "fp16-storage")]
    # By default the TFSMLayer is an external reference: reported, not read.
    r = audit(str(tmp_path / "c7.keras"), CPU)
    assert [f.keras_layer for f in r.findings] == ["outer_conv"]
    sm = str(tmp_path / "fp32_sm")
    assert (
        f"layer 'wrapped' (TFSMLayer) is an external reference to {sm}: not read (the audit "
        "reads only the model file; --allow-external-dir DIR lets it read SavedModels under DIR)"
    ) in r.notes


@pytest.mark.parametrize(
    "op,cudnn,expected",
    [
        ("Conv2D", None, True),
        ("Conv3D", "7.6.1", False),
        ("Conv3D", "7.6.2", True),
        ("DepthwiseConv2dNative", "7.6.5", False),
        ("DepthwiseConv2dNative", "8.0", True),
        ("Fp16Conv2D", "9.0", False),
    ],
)
def test_amp_allow_list(op, cudnn, expected):
    extra = {"Tacc": "DT_FLOAT"} if op == "Fp16Conv2D" else {}
    gd = conv_graph(op=op, T="DT_FLOAT", **extra)
    (f,) = audit(gd, gpu(amp=True, compute_capability="7.0", cudnn_version=cudnn or "8.0")).findings
    assert f.amp.rewrite is expected and f.T == "float" and f.audit_class == "fp32"
    assert f.amp.label.startswith("prediction")


def test_amp_custom_op_added_to_allow_list():
    gd = conv_graph(op="Fp16Conv2D", T="DT_FLOAT", Tacc="DT_FLOAT")
    ctx = gpu(
        {"TF_AUTO_MIXED_PRECISION_GRAPH_REWRITE_ALLOWLIST_ADD": "Fp16Conv2D"},
        amp=True,
        compute_capability="8.0",
    )
    (f,) = audit(gd, ctx).findings
    assert f.amp.rewrite and f.amp.predicted_T == "half"
    (g,) = audit(gd, gpu(amp=False, compute_capability="8.0")).findings
    assert g.amp is None


def test_unknown_custom_op_is_reported_not_fatal():
    from tensorflow.core.framework import graph_pb2

    gd = graph_pb2.GraphDef()
    add_node(gd.node, "x", "Placeholder", dtype="DT_FLOAT")
    add_node(gd.node, "custom", "new_custom_op", ["x"], T="DT_FLOAT", s=b"text", f=0.5, i=3, b=True)
    add_node(gd.node, "relu", "Relu", ["custom"], T="DT_FLOAT")
    r = audit(gd, CPU)
    assert r.findings == ()
    (u,) = r.unknown_ops
    assert u.op == "new_custom_op" and u.verdict == "unknown op, not a convolution" and u.count == 1
    assert {"T=float", "s='text'", "f=0.5", "i=3", "b=True"} <= set(u.attrs)


def test_layer_called_twice_shares_one_variable(tmp_path):
    x = keras.Input((8, 8, 1))
    conv = keras.layers.Conv2D(32, 3, use_bias=False, name="shared")
    model = keras.Model(x, [conv(x), conv(x)])
    model.export(str(tmp_path / "twice"), verbose=False)
    r = audit(str(tmp_path / "twice"), CPU, signature="serving_default")
    assert r.summary.call_sites == 2 and r.summary.conv_nodes == 2
    assert all(f.function_path for f in r.findings)  # behind StatefulPartitionedCall
    assert len({f.filter.variable for f in r.findings}) == 1
    assert {f.filter.shape for f in r.findings} == {(3, 3, 1, 32)}
    assert dict(class_counts(r)) == {"fp32": 2}


def test_our_op_half_and_float_accumulation():
    import tf_fp16ops

    @tf.function(input_signature=[X16, W16])
    def f(x, w):
        a = tf_fp16ops.conv2d(x, w, [1, 1, 1, 1], "VALID", accumulation="float16")
        b = tf_fp16ops.conv2d(x, w, [1, 1, 1, 1], "VALID", accumulation="float32")
        return a + b

    r = audit(f, CPU)
    fprop = {f.Tacc: f for f in r.findings}
    assert len(r.findings) == 2 and all(f.op == "Fp16Conv2D" for f in r.findings)
    assert fprop["half"].audit_class == "fp16-accumulate" and fprop["half"].accumulation == "fp16"
    assert fprop["float"].audit_class == "fp16-storage" and fprop["float"].accumulation == "fp32"
    # The switches of TensorFlow's own kernels do not touch our op.
    r0 = audit(f, gpu({"TF_FP16_CONV_USE_FP32_COMPUTE": "0"}))
    assert {f.Tacc: f.accumulation for f in r0.findings} == {"half": "fp16", "float": "fp32"}
    # 144 = 3*3*16 terms: no long-reduction flag; 16->16 channels are tensor-core friendly.
    assert not any(
        fl.startswith(("fp16-acc-long", "tensor-core")) for fl in fprop["half"].flag_texts
    )


@pytest.mark.parametrize("op", ["Fp16Conv2DBackpropInput", "Fp16Conv2DBackpropFilter"])
@pytest.mark.parametrize("tacc,cls", [("DT_HALF", "fp16-accumulate"), ("DT_FLOAT", "fp16-storage")])
def test_our_backprop_ops_read_tacc(op, tacc, cls):
    from tensorflow.core.framework import graph_pb2

    gd = graph_pb2.GraphDef()
    for name in ("a", "b", "c"):
        add_node(gd.node, name, "Placeholder", dtype="DT_HALF")
    add_node(gd.node, "sizes", "Const", dtype="DT_INT32")
    inputs = ["sizes", "b", "c"] if op.endswith("Input") else ["a", "sizes", "c"]
    add_node(
        gd.node, "grad", op, inputs, T="DT_HALF", Tacc=tacc, strides=[1, 1, 1, 1], padding=b"SAME"
    )
    (f,) = audit(gd, CPU).findings
    assert f.audit_class == cls and f.Tacc == {"DT_HALF": "half", "DT_FLOAT": "float"}[tacc]
    assert f.direction == ("dgrad" if op.endswith("Input") else "wgrad")


def test_long_fp16_reduction_is_flagged():
    gd = conv_graph(T="DT_HALF")
    w = gd.node[1].attr["value"].tensor.tensor_shape
    w.dim[2].size = 256  # 3*3*256 = 2304 > 2048 terms
    gd.node[0].attr["shape"].shape.dim[3].size = 256
    (f,) = audit(gd, cpu({"TF_CONV2D_USE_FP16_ACCUMULATE": "1"})).findings
    assert "fp16-acc-long-reduction(2304>2048)" in f.flag_texts
    (g,) = audit(gd, CPU).findings
    assert not any(fl.startswith("fp16-acc-long") for fl in g.flag_texts)
