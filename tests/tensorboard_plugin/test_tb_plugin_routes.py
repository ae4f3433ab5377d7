"""fp16 audit TensorBoard plugin: summary data written by the audit renderer, backend routes served
through TensorBoard's own WSGI application (werkzeug test client), and the run comparison.

Expected classes come from how the graphs are built: on CPU, a Conv2D with T=half computes in
fp32 (TensorFlow's default; fp16-storage) and one with T=float is fp32.
"""

from __future__ import annotations

import json
import re
from importlib import resources

import pytest
from tensorboard.backend import application
from tensorboard.backend.event_processing import data_provider as mux_provider
from tensorboard.backend.event_processing import plugin_event_multiplexer
from tensorboard.compat.proto import summary_pb2
from tensorboard.plugins import base_plugin
from werkzeug import test as wtest

from support.audit_helpers import CPU, conv_graph
from tf_fp16ops.audit import CLASSES, SCHEMA_VERSION
from tf_fp16ops.audit.analyze import analyze
from tf_fp16ops.audit.loader import load_path
from tf_fp16ops.audit.render.tensorboard import write_tensorboard
from tf_fp16ops.tensorboard_plugin import metadata
from tf_fp16ops.tensorboard_plugin.compare import (
    compare_findings,
    layer_scope,
    match_key,
    normalize_function,
)
from tf_fp16ops.tensorboard_plugin.plugin import Fp16AuditPlugin

PREFIX = "/data/plugin/fp16_audit"


def _graph(conv_T: str, f32_T: str, extra: bool = False):
    """Two convs "conv" (dtype conv_T) and "f32_conv" (dtype f32_T); with `extra`, a third
    "x3_conv"."""
    from tensorflow.core.framework import graph_pb2

    gd = graph_pb2.GraphDef()
    gd.CopyFrom(conv_graph(T=conv_T))
    for prefix, T in (("f32_", f32_T),) + ((("x3_", "DT_FLOAT"),) if extra else ()):
        g = conv_graph(T=T)
        for n in g.node:
            n.name = prefix + n.name
            n.input[:] = [prefix + i for i in n.input]
        gd.node.extend(g.node)
    return gd


def _write_run(tmp, logdir, name, gd):
    path = tmp / f"{name}.pb"
    path.write_bytes(gd.SerializeToString())
    model = load_path(str(path))
    report = analyze(model, CPU)
    write_tensorboard(report, str(logdir / name), [(u.label, u.graph_def) for u in model.units])
    return report


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    """Runs "a/audit" (half + float conv) and "b/audit" (both float, plus a third float conv)."""
    tmp = tmp_path_factory.mktemp("tbplugin")
    logs = tmp / "logs"
    reports = {
        "a/audit": _write_run(tmp, logs, "a", _graph("DT_HALF", "DT_FLOAT")),
        "b/audit": _write_run(tmp, logs, "b", _graph("DT_FLOAT", "DT_FLOAT", extra=True)),
    }
    return logs, reports


def _client(logdir) -> wtest.Client:
    mux = plugin_event_multiplexer.EventMultiplexer()
    mux.AddRunsFromDirectory(str(logdir))
    mux.Reload()
    provider = mux_provider.MultiplexerDataProvider(mux, str(logdir))
    ctx = base_plugin.TBContext(logdir=str(logdir), data_provider=provider, multiplexer=mux)
    app = application.TensorBoardWSGI([Fp16AuditPlugin(ctx)], data_provider=provider)
    return wtest.Client(app)


@pytest.fixture(scope="module")
def client(logdir):
    return _client(logdir[0])


def _json(client, url, status=200):
    r = client.get(url)
    assert r.status_code == status, (url, r.status_code, r.get_data(as_text=True))
    return json.loads(r.get_data(as_text=True))


def test_plugin_listed_enabled_with_es_module_and_tab_name(client):
    listing = _json(client, "/data/plugins_listing")["fp16_audit"]
    assert listing["enabled"] is True
    assert listing["tab_name"] == "fp16 audit"
    assert listing["loading_mechanism"] == {"type": "IFRAME", "module_path": f"{PREFIX}/index.js"}
    entry = client.get("/data/plugin_entry.html?name=fp16_audit")
    assert entry.status_code == 200 and 'import("./index.js")' in entry.get_data(as_text=True)


def test_plugin_disabled_without_its_data(tmp_path):
    import tensorflow as tf

    w = tf.summary.create_file_writer(str(tmp_path / "other"))
    with w.as_default():
        tf.summary.scalar("loss", 1.0, step=0)
    w.close()
    c = _client(tmp_path)
    assert _json(c, "/data/plugins_listing")["fp16_audit"]["enabled"] is False
    assert _json(c, f"{PREFIX}/runs")["runs"] == []


def test_static_frontend_served_from_package_without_network(client):
    for name, mime, marker in (
        ("index.js", "text/javascript", "export async function render()"),
        ("view.html", "text/html", 'id="findings"'),
        ("style.css", "text/css", ".cls-fake-fp16"),
    ):
        r = client.get(f"{PREFIX}/{name}")
        assert r.status_code == 200 and r.mimetype == mime, name
        assert marker in r.get_data(as_text=True), name
    # No CDN or other network address anywhere in the shipped frontend.
    static = resources.files("tf_fp16ops.tensorboard_plugin").joinpath("static")
    for f in static.iterdir():
        text = f.read_text(encoding="utf-8")
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", text, re.I), f.name
    # Plain JS without dependencies: the module imports nothing.
    assert not re.search(r"^\s*import\b|\bimport\(", static.joinpath("index.js").read_text(), re.M)


def test_runs_route_lists_both_runs_and_the_audit_classes(client, logdir):
    _, reports = logdir
    body = _json(client, f"{PREFIX}/runs")
    runs = {r["run"]: r for r in body["runs"]}
    assert set(runs) == {"a/audit", "b/audit"}
    assert runs["a/audit"]["call_sites"] == 2 and runs["b/audit"]["call_sites"] == 3
    assert (
        runs["a/audit"]["source"].endswith("a.pb")
        and runs["a/audit"]["source_format"] == reports["a/audit"].source_format
    )
    assert {r["audit_schema_version"] for r in runs.values()} == {SCHEMA_VERSION}
    # The legend uses exactly the audit's class names, in the audit's order.
    assert tuple(c["name"] for c in body["classes"]) == CLASSES


def test_findings_route_returns_one_record_per_call_site(client, logdir):
    _, reports = logdir
    body = _json(client, f"{PREFIX}/findings?run=a/audit")
    assert body["step"] == 0 and body["report"]["schema_version"] == SCHEMA_VERSION
    assert {f["node"]: f["audit_class"] for f in body["findings"]} == {
        "conv": "fp16-storage",
        "f32_conv": "fp32",
    }
    # Records are the audit's own dicts, unchanged by the round trip through the event file.
    assert body["findings"] == json.loads(
        json.dumps([f.to_dict() for f in reports["a/audit"].findings])
    )
    shares = {c["audit_class"]: c["flop_share"] for c in body["report"]["summary"]["classes"]}
    assert shares == {
        "fp16-storage": pytest.approx(0.5),
        "fp32": pytest.approx(0.5),
    }  # two equal convs


def test_compare_route_lists_the_conv_whose_class_changed(client):
    body = _json(client, f"{PREFIX}/compare?run_a=a/audit&run_b=b/audit")
    assert [
        (c["a"]["node"], c["a"]["audit_class"], c["b"]["audit_class"]) for c in body["changed"]
    ] == [("conv", "fp16-storage", "fp32")]
    assert body["unchanged"] == 1  # f32_conv is fp32 in both
    assert body["only_a"] == [] and [s.split(" | ")[-1] for s in body["only_b"]] == ["x3_conv"]


@pytest.mark.parametrize(
    "url, status, needle",
    [
        (f"{PREFIX}/findings", 400, "'run'"),
        (f"{PREFIX}/findings?run=", 400, "'run'"),
        (f"{PREFIX}/findings?run=nope", 404, "run='nope'"),
        (f"{PREFIX}/compare?run_a=a/audit", 400, "'run_b'"),
        (f"{PREFIX}/compare?run_a=a/audit&run_b=nope", 404, "run='nope'"),
    ],
)
def test_bad_queries_name_the_argument_and_value(client, url, status, needle):
    r = client.get(url)
    assert r.status_code == status and needle in r.get_data(as_text=True)


def test_latest_step_wins(tmp_path):
    """Two audits written to one run at steps 0 and 1: the routes serve step 1."""
    import tensorflow as tf

    from tf_fp16ops.tensorboard_plugin.summary import write_audit_summary

    reports = []
    for T in ("DT_HALF", "DT_FLOAT"):
        p = tmp_path / f"{T}.pb"
        p.write_bytes(conv_graph(T=T).SerializeToString())
        reports.append(analyze(load_path(str(p)), CPU))
    w = tf.summary.create_file_writer(str(tmp_path / "logs" / "run"))
    with w.as_default():
        for step, rep in enumerate(reports):
            assert write_audit_summary(rep, step=step) is True
    w.close()
    c = _client(tmp_path / "logs")
    body = _json(c, f"{PREFIX}/findings?run=run")
    assert body["step"] == 1 and [f["audit_class"] for f in body["findings"]] == ["fp32"]


def test_write_audit_summary_without_default_writer_returns_false(tmp_path):
    p = tmp_path / "g.pb"
    p.write_bytes(conv_graph().SerializeToString())
    from tf_fp16ops.tensorboard_plugin.summary import write_audit_summary

    assert write_audit_summary(analyze(load_path(str(p)), CPU)) is False


def test_metadata_round_trip_and_rejections():
    md = metadata.create_summary_metadata("findings", "1.0")
    assert (
        md.plugin_data.plugin_name == "fp16_audit"
        and md.data_class == summary_pb2.DATA_CLASS_TENSOR
    )
    assert metadata.parse_plugin_metadata(md.plugin_data.content) == {
        "version": metadata.PLUGIN_DATA_VERSION,
        "audit_schema_version": "1.0",
        "kind": "findings",
    }
    with pytest.raises(ValueError, match="kind must be one of"):
        metadata.create_summary_metadata("graph", "1.0")
    with pytest.raises(ValueError, match="not UTF-8 JSON"):
        metadata.parse_plugin_metadata(b"\x08\x01")
    with pytest.raises(ValueError, match="newer than this reader"):
        metadata.parse_plugin_metadata(json.dumps({"version": 99, "kind": "report"}).encode())


def _f(node, cls, fpath=("__inference_f_12",), op="Conv2D", sig=("serving_default",)):
    return {
        "site_id": f"u | {' > '.join(fpath)} | {node}",
        "node": node,
        "op": op,
        "direction": "fprop",
        "function_path": list(fpath),
        "signatures": list(sig),
        "audit_class": cls,
    }


@pytest.mark.parametrize(
    "stock, ours",
    [
        # (node, op) of a Keras model and of its `convert`ed copy, as the audit reports them
        # (TF 2.21, Keras 3.15): Dense on rank 2 and 3, EinsumDense, MultiHeadAttention.
        (("f/d2_1/MatMul", "MatMul"), ("f/d2_1/Fp16Conv2D/Fp16Conv2D", "Fp16Conv2D")),
        (("f/d3_1/Tensordot/MatMul", "MatMul"), ("f/d3_1/Fp16Conv2D/Fp16Conv2D", "Fp16Conv2D")),
        (
            ("f/ed_1/MatMul", "BatchMatMulV2"),
            ("f/ed_1/Fp16Einsum/Fp16MatMul/Fp16MatMul", "Fp16MatMul"),
        ),
        (
            ("f/mha_1/query_1/MatMul", "BatchMatMulV2"),
            ("f/mha_1/query_1/Fp16Einsum/Fp16MatMul/Fp16MatMul", "Fp16MatMul"),
        ),
        (
            ("f/mha_1/einsum_1/Einsum", "Einsum"),
            ("f/mha_1/Fp16Einsum_1/Fp16MatMul/Fp16MatMul", "Fp16MatMul"),
        ),
    ],
)
def test_a_converted_matmul_matches_its_original(stock, ours):
    a = _f(stock[0], "fp16-storage", ("__inference_call_12",), op=stock[1])
    b = _f(ours[0], "fp16-accumulate", ("__inference_call_99",), op=ours[1])
    assert match_key(a) == match_key(b)


def test_match_key_survives_retracing_and_conversion_to_our_op():
    assert (
        normalize_function("__inference_signature_wrapper___call___236")
        == "signature_wrapper___call__"
    )
    assert layer_scope("tiny/block1/convolution", "Conv2D") == "tiny/block1"
    assert layer_scope("tiny/block1/Fp16Conv2D/Fp16Conv2D", "Fp16Conv2D") == "tiny/block1"
    assert layer_scope("stem", "Conv2D") == "stem"  # a top-level node keeps its name
    # a layer Keras auto-named conv2d_1 stays a layer scope (only einsum scopes are numbered)
    assert layer_scope("m/conv2d_1/convolution", "Conv2D") == "m/conv2d_1"
    assert layer_scope("m/mha/einsum_1/Einsum", "Einsum") == "m/mha"
    a = _f("m/block1/convolution", "fp32", ("__inference_call_12",))
    b = _f(
        "m/block1/Fp16Conv2D/Fp16Conv2D",
        "fp16-accumulate",
        ("__inference_call_99",),
        op="Fp16Conv2D",
    )
    assert match_key(a) == match_key(b)
    assert match_key(a) != match_key(_f("m/block2/convolution", "fp32", ("__inference_call_99",)))
    assert match_key(a) != match_key(
        _f("m/block1/convolution", "fp32", ("__inference_call_12",), sig=("serve",))
    )


def test_compare_findings_changed_unchanged_and_unmatched():
    a = [
        _f("m/c1/convolution", "fp32"),
        _f("m/c2/convolution", "fp32"),
        _f("m/c3/convolution", "fp32"),
        _f("m/shared/convolution", "fp32"),
        _f("m/shared/convolution", "fp32"),
    ]
    b = [
        _f("m/c1/Fp16Conv2D/Fp16Conv2D", "fp16-accumulate", op="Fp16Conv2D"),
        _f("m/c2/convolution", "fp32"),
        _f("m/c4/convolution", "fake-fp16"),
        _f("m/shared/convolution", "fp32"),
        _f("m/shared/convolution", "fp16-storage"),
    ]
    cmp = compare_findings(a, b)
    # Repeated keys pair up in order: the second "shared" call site changed, the first did not.
    assert [(c.a["node"], c.a["audit_class"], c.b["audit_class"]) for c in cmp.changed] == [
        ("m/c1/convolution", "fp32", "fp16-accumulate"),
        ("m/shared/convolution", "fp32", "fp16-storage"),
    ]
    assert cmp.changed[1].key.endswith(" #2")
    assert cmp.unchanged == 2
    assert [s.split(" | ")[-1] for s in cmp.only_a] == ["m/c3/convolution"]
    assert [s.split(" | ")[-1] for s in cmp.only_b] == ["m/c4/convolution"]
    d = cmp.to_dict()
    assert d["changed"][0]["b"]["audit_class"] == "fp16-accumulate" and d["unchanged"] == 2
