"""TensorBoard output: event files read back, and a real `tensorboard` server's HTTP data routes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
import tensorflow as tf
from tensorboard.backend.event_processing import event_accumulator

from support.audit_helpers import CPU, conv_graph
from tf_fp16ops.audit.analyze import analyze
from tf_fp16ops.audit.loader import load_path
from tf_fp16ops.audit.render.tensorboard import write_tensorboard


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    """Audits a two-conv GraphDef (one half, one fake fp16) and writes its event files."""
    from tensorflow.core.framework import graph_pb2

    gd = graph_pb2.GraphDef()
    gd.CopyFrom(conv_graph(T="DT_HALF"))
    f32 = conv_graph(T="DT_FLOAT")
    for n in f32.node:
        n.name = "f32_" + n.name
        n.input[:] = ["f32_" + i for i in n.input]
    gd.node.extend(f32.node)
    d = tmp_path_factory.mktemp("tb")
    (d / "g.pb").write_bytes(gd.SerializeToString())
    model = load_path(str(d / "g.pb"))
    report = analyze(model, CPU)
    runs = write_tensorboard(report, str(d / "logs"), [(u.label, u.graph_def) for u in model.units])
    return str(d / "logs"), runs, report


def _accumulator(run_dir):
    ea = event_accumulator.EventAccumulator(run_dir, size_guidance={event_accumulator.TENSORS: 0})
    ea.Reload()
    return ea


def test_event_files_hold_text_scalars_and_annotated_graph(logdir):
    root, runs, report = logdir
    assert runs == [os.path.join(root, "audit")]
    ea = _accumulator(runs[0])
    tags = set(ea.Tags()["tensors"])
    assert {
        "audit/report",
        "audit/fp16_share",
        "audit/count/fp16-storage",
        "audit/flop_share/fp32",
    } <= tags
    text = tf.make_ndarray(ea.Tensors("audit/report")[0].tensor_proto).item().decode()
    assert "# fp16 convolution and matmul audit" in text and "fp16-storage" in text
    val = lambda tag: float(tf.make_ndarray(ea.Tensors(tag)[0].tensor_proto))  # noqa: E731
    # Two convs of equal FLOPs: one T=half (fp16-storage on CPU), one T=float.
    assert val("audit/fp16_share") == pytest.approx(0.5)
    assert val("audit/count/fp16-storage") == 1 and val("audit/count/fp32") == 1
    assert val("audit/flop_share/fp32") == pytest.approx(0.5)
    # per kind: both sites are convs
    assert val("audit/kind/conv/count") == 2 and val("audit/kind/matmul/count") == 0
    assert val("audit/kind/conv/flop_share") == 1.0 and val("audit/kind/all/fp16_share") == 0.5
    assert val("audit/kind/matmul/fp16_share") == 0.0
    g = ea.Graph()
    marks = {n.name: n.attr["_audit_class"].s.decode() for n in g.node if "_audit_class" in n.attr}
    assert marks == {"conv": "fp16-storage", "f32_conv": "fp32"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get_json(url: str):
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read().decode())


def test_tensorboard_server_serves_text_and_scalars(logdir):
    root, _, _ = logdir
    port = _free_port()
    exe = os.path.join(os.path.dirname(sys.executable), "tensorboard")
    cmd = [exe] if os.path.exists(exe) else [sys.executable, "-m", "tensorboard.main"]
    proc = subprocess.Popen(
        cmd
        + [
            "--logdir",
            root,
            "--port",
            str(port),
            "--host",
            "127.0.0.1",
            "--load_fast",
            "false",
            "--reload_interval",
            "1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    q = lambda tag: urllib.parse.urlencode({"run": "audit", "tag": tag})  # noqa: E731
    try:
        deadline = time.monotonic() + 90
        scalars = None
        while time.monotonic() < deadline:
            assert proc.poll() is None, "tensorboard exited early"
            try:
                scalars = _get_json(f"{base}/data/plugin/scalars/scalars?{q('audit/fp16_share')}")
                if scalars:
                    break
            except (urllib.error.URLError, ConnectionError, json.JSONDecodeError):
                pass
            time.sleep(1)
        assert scalars, "tensorboard did not serve the scalar within 90 s"
        wall_time, step, value = scalars[0]
        assert step == 0 and value == pytest.approx(0.5)
        text = _get_json(f"{base}/data/plugin/text/text?{q('audit/report')}")
        assert (
            text
            and "fp16 convolution and matmul audit" in text[0]["text"]
            and "fp16-storage" in text[0]["text"]
        )
        counts = _get_json(f"{base}/data/plugin/scalars/scalars?{q('audit/count/fp32')}")
        assert counts[0][2] == 1
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_kind_scalars_of_a_conv_and_a_matmul(tmp_path):
    """One Conv2D T=half (FLOPs 2*6*6*16*3*3*16 on CPU: fp16-storage) and one MatMul T=float
    [4, 16] x [16, 8] (FLOPs 2*4*8*16: fp32): shares per kind by hand."""
    from support.audit_helpers import add_node

    gd = conv_graph(T="DT_HALF")
    for name, shape in (("a", (4, 16)), ("b", (16, 8))):
        n = add_node(gd.node, name, "Placeholder", dtype="DT_FLOAT")
        for d in shape:
            n.attr["shape"].shape.dim.add().size = d
    add_node(gd.node, "mm", "MatMul", ["a", "b"], T="DT_FLOAT")
    (tmp_path / "g.pb").write_bytes(gd.SerializeToString())
    model = load_path(str(tmp_path / "g.pb"))
    report = analyze(model, CPU)
    (run,) = write_tensorboard(report, str(tmp_path / "logs"), [])
    ea = _accumulator(run)
    val = lambda tag: float(tf.make_ndarray(ea.Tensors(tag)[0].tensor_proto))  # noqa: E731
    conv, mm = 2 * 6 * 6 * 16 * 3 * 3 * 16, 2 * 4 * 8 * 16
    assert val("audit/kind/conv/count") == 1 and val("audit/kind/matmul/count") == 1
    assert val("audit/kind/matmul/flop_share") == pytest.approx(mm / (conv + mm), rel=1e-6)
    assert val("audit/kind/conv/fp16_share") == 1.0 and val("audit/kind/matmul/fp16_share") == 0
    assert val("audit/kind/all/fp16_share") == pytest.approx(conv / (conv + mm), rel=1e-6)
