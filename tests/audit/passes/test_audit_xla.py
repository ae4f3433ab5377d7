"""Call sites inside XLA-compiled functions: recognised from `_XlaMustCompile` (jit_compile=True)
and auto-jit marks, their accumulation decided by XLA's rules (CPU: measured under
jit_compile=True, opsets.XLA_CPU_HALF_MEASURED; GPU: read from XLA's source and labelled so), and
found by `--run` through the compiled call node.

The SavedModel is the one of the XLA case: a jit_compile=True signature around one half Conv2D
(plus a jit-compiled half MatMul and a plain twin of the conv), audited with
TF_CONV2D_USE_FP16_ACCUMULATE=1, which XLA's CPU conv ignores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import graph_pb2

from support.audit_helpers import add_node, conv_graph, cpu, gpu
from tf_fp16ops.audit import audit

SWITCH = {"TF_CONV2D_USE_FP16_ACCUMULATE": "1"}


class _Model(tf.Module):
    def __init__(self):
        rng = np.random.default_rng(0)
        self.w = tf.Variable(rng.uniform(0, 1, (3, 3, 16, 16)).astype(np.float16))
        self.m = tf.Variable(rng.uniform(0, 1, (16, 8)).astype(np.float16))

    @tf.function(jit_compile=True, input_signature=[tf.TensorSpec([2, 8, 8, 16], tf.float16)])
    def conv16_xla(self, x):
        return tf.nn.conv2d(x, self.w, 1, "VALID")

    @tf.function(input_signature=[tf.TensorSpec([2, 8, 8, 16], tf.float16)])
    def conv16(self, x):
        return tf.nn.conv2d(x, self.w, 1, "VALID")

    @tf.function(jit_compile=True, input_signature=[tf.TensorSpec([4, 16], tf.float16)])
    def matmul16_xla(self, a):
        return tf.matmul(a, self.m)

    @tf.function(jit_compile=True, input_signature=[tf.TensorSpec([2, 8, 8, 16], tf.float16)])
    def fake16_xla(self, x):
        x32 = tf.cast(x, tf.float32)
        return tf.nn.conv2d(x32, tf.cast(self.w, tf.float32), 1, "VALID")


@pytest.fixture(scope="module")
def xla_saved_model(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("xla") / "sm")
    m = _Model()
    sigs = {n: getattr(m, n) for n in ("conv16_xla", "conv16", "matmul16_xla", "fake16_xla")}
    tf.saved_model.save(m, path, signatures=sigs)
    return path


def _one(report, signature):
    (f,) = [f for f in report.findings if signature in f.signatures]
    return f


def test_xla_cpu_conv_is_not_fp16_accumulate(xla_saved_model):
    r = audit(xla_saved_model, cpu(SWITCH))
    jit, plain = _one(r, "conv16_xla"), _one(r, "conv16")
    # The plain conv runs TensorFlow's Eigen kernel, which obeys the switch.
    assert plain.xla is None and plain.audit_class == "fp16-accumulate"
    assert jit.xla is not None and "_XlaMustCompile=true" in jit.xla
    assert (jit.accumulation, jit.audit_class) == ("fp32", "fp16-storage")
    assert jit.accumulation_reason.startswith("XLA CPU Conv2D")
    assert "measured under jit_compile=True" in jit.accumulation_reason
    assert any("XLA-compiled" in n for n in r.notes)
    mm = _one(r, "matmul16_xla")
    assert (mm.kind, mm.accumulation, mm.xla is not None) == ("matmul", "fp32", True)
    from tf_fp16ops.audit.render.markdown import render_markdown
    from tf_fp16ops.audit.render.terminal import render_terminal

    for text in (render_terminal(r), render_markdown(r)):
        assert text.count("(XLA)") == 3  # the two jit-compiled convs and the matmul


def test_xla_gpu_rules_are_labelled_as_read_from_source(xla_saved_model):
    r = audit(xla_saved_model, gpu({"TF_FP16_CONV_USE_FP32_COMPUTE": "0"}))
    jit = _one(r, "conv16_xla")
    assert jit.accumulation == "fp16"  # XLA's GPU conv reads the same stream-executor switch
    assert "XLA GPU conv" in jit.accumulation_reason
    assert "read from source, not measured on a GPU" in jit.accumulation_reason
    r = audit(xla_saved_model, gpu({"TF_FP16_MATMUL_USE_FP32_COMPUTE": "0"}))
    mm = _one(r, "matmul16_xla")
    # XLA's GPU dot ignores TensorFlow's matmul switch: F16 accumulates in F32
    assert mm.accumulation == "fp32" and "ALG_DOT_F16_F16_F16" in mm.accumulation_reason
    assert "read from source" in mm.accumulation_reason


def test_fake_fp16_under_xla_may_lose_its_round_trip(xla_saved_model):
    f = _one(audit(xla_saved_model, cpu()), "fake16_xla")
    assert f.audit_class == "fake-fp16" and "xla-may-drop-round-trip" in f.flag_texts
    g = audit(conv_graph(T="DT_FLOAT"), cpu())
    assert "xla-may-drop-round-trip" not in g.findings[0].flag_texts


@pytest.mark.parametrize(
    "attr,value", [("_XlaCompile", True), ("_XlaScope", b"jit_scope_0"), ("_XlaCluster", b"c0")]
)
def test_auto_jit_marks(attr, value):
    gd = conv_graph()
    n = gd.node[-1]
    if isinstance(value, bool):
        n.attr[attr].b = value
    else:
        n.attr[attr].s = value
    (f,) = audit(gd, cpu(SWITCH)).findings
    assert f.xla is not None and attr in f.xla and f.accumulation == "fp32"
    (plain,) = audit(conv_graph(), cpu(SWITCH)).findings
    assert plain.xla is None and plain.accumulation == "fp16"


def test_auto_jit_flag_is_reported():
    r = audit(conv_graph(), cpu({"TF_XLA_FLAGS": "--tf_xla_auto_jit=2"}))
    (sw,) = [s for s in r.switches if s.name == "TF_XLA_FLAGS"]
    assert "auto-jit" in sw.effect


def test_call_node_must_compile_attr():
    """A function called through a node carrying _XlaMustCompile (the FunctionDef without it)."""
    gd = graph_pb2.GraphDef()
    f = gd.library.function.add()
    f.signature.name = "body"
    for name in ("x", "w"):
        a = f.signature.input_arg.add()
        a.name, a.type = name, 19  # DT_HALF
    add_node(f.node_def, "c", "Conv2D", ["x", "w"], T="DT_HALF", strides=[1] * 4, padding=b"SAME")
    out = f.signature.output_arg.add()
    out.name, out.type = "y", 19
    f.ret["y"] = "c:output:0"
    for name in ("x", "w"):
        add_node(gd.node, name, "Placeholder", dtype="DT_HALF")
    call = add_node(gd.node, "call", "PartitionedCall", ["x", "w"])
    call.attr["f"].func.name = "body"
    call.attr["_XlaMustCompile"].b = True
    (site,) = audit(gd, cpu(SWITCH)).findings
    assert site.xla == "call node 'call' has _XlaMustCompile=true (jit_compile=True)"


def test_run_finds_the_conv_inside_the_xla_cluster(xla_saved_model):
    """--run with TF_CONV2D_USE_FP16_ACCUMULATE=1 and TensorFlow's Eigen kernels (the switch's
    home): the jit-compiled conv is found (not "not found"), its probes run under
    jit_compile=True and observe fp32, and the probe-switches line names the switch."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TF_ENABLE_ONEDNN_OPTS="0", **SWITCH)
    cmd = [sys.executable, "-m", "tf_fp16ops.audit", xla_saved_model, "--run"]
    p = subprocess.run(
        cmd + ["--signature", "conv16_xla", "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    (f,) = d["findings"]
    o = f["observed"]
    assert o["status"] == "confirmed" and o["observed_accumulation"] == "fp32"
    assert o["probe_key"] == "Conv2D:half:-:cpu:xla"
    assert o["kernel_op"].startswith("XLA cluster")
    assert d["runtime"]["switches"] == {
        "TF_CONV2D_USE_FP16_ACCUMULATE": "1",
        "TF_ENABLE_ONEDNN_OPTS": "0",
    }
    (probe,) = d["runtime"]["probes"]
    values = {o["probe"]: o["value"] for o in probe["outcomes"]}
    assert values == {"rounding": "1.015625", "taps49": "0.9794921875", "overflow": "0.0"}
    table = subprocess.run(
        cmd + ["--signature", "conv16_xla"], capture_output=True, text=True, env=env, timeout=300
    ).stdout
    assert "fp32 confirmed" in table and "not found" not in table
    assert "probe switches (this process): TF_CONV2D_USE_FP16_ACCUMULATE='1'" in table
