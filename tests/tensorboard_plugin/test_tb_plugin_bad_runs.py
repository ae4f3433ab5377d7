"""The dashboard degrades per run: a logdir with one good audit run beside runs whose plugin data
cannot be read (a newer plugin-data version, malformed metadata, bytes that are not UTF-8, an
empty tensor, JSON nested 100,000 deep, a report over the size limit, findings that are not
objects). `/runs` lists the good run and names each bad one with its reason; the data routes
answer 400/404 with a JSON error, never 500. Event files are written with TensorBoard's own
writer and protos (no TensorFlow)."""

from __future__ import annotations

import json

import pytest
from tensorboard.backend import application
from tensorboard.backend.event_processing import data_provider as mux_provider
from tensorboard.backend.event_processing import plugin_event_multiplexer
from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, types_pb2
from tensorboard.plugins import base_plugin
from tensorboard.summary.writer.event_file_writer import EventFileWriter
from werkzeug import test as wtest

from tf_fp16ops.tensorboard_plugin import metadata
from tf_fp16ops.tensorboard_plugin.plugin import (
    SENSITIVITY_TAG,
    TEXT_PLUGIN,
    Fp16AuditPlugin,
)

PREFIX = "/data/plugin/fp16_audit"
MAX_JSON_BYTES = 300_000  # the plugin's limit in these tests (32 MiB by default)
GOOD_FINDING = {
    "site_id": "graph | conv",
    "node": "conv",
    "op": "Conv2D",
    "audit_class": "fp16-storage",
    "function_path": [],
    "signatures": [],
    "direction": "fprop",
}
GOOD_REPORT = {"source": "g.pb", "source_format": "graph_def", "summary": {"call_sites": 1}}


def _strings(values, shape):
    t = tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING)
    t.string_val.extend(values)
    for d in shape:
        t.tensor_shape.dim.add().size = d
    return t


def _meta(kind: str, content: bytes | None = None, plugin: str = metadata.PLUGIN_NAME):
    md = summary_pb2.SummaryMetadata()
    md.plugin_data.plugin_name = plugin
    md.plugin_data.content = (
        content
        if content is not None
        else json.dumps({"version": 1, "audit_schema_version": "1.3", "kind": kind}).encode()
    )
    md.data_class = summary_pb2.DATA_CLASS_TENSOR
    return md


def _write(logdir, run, report: bytes, findings: list[bytes], report_meta=None, find_meta=None):
    w = EventFileWriter(str(logdir / run))
    s = summary_pb2.Summary()
    s.value.add(
        tag=metadata.FINDINGS_TAG,
        tensor=_strings(findings, [len(findings)]),
        metadata=find_meta or _meta("findings"),
    )
    s.value.add(
        tag=metadata.REPORT_TAG,
        tensor=_strings([report], []),
        metadata=report_meta or _meta("report"),
    )
    w.add_event(event_pb2.Event(step=0, wall_time=1.0, summary=s))
    w.close()


def _good(logdir, run="good"):
    _write(logdir, run, json.dumps(GOOD_REPORT).encode(), [json.dumps(GOOD_FINDING).encode()])


NEWER = json.dumps({"version": 99, "kind": "report"}).encode()
BAD_RUNS = {
    # run: (report bytes, findings, report metadata content or None, expected reason)
    "newer": (
        json.dumps(GOOD_REPORT).encode(),
        [json.dumps(GOOD_FINDING).encode()],
        NEWER,
        "fp16_audit plugin_data version 99 is newer than this reader (1); upgrade tf_fp16ops",
    ),
    "malformed_meta": (
        json.dumps(GOOD_REPORT).encode(),
        [],
        b"\x08\x01",
        "fp16_audit plugin_data content is not UTF-8 JSON",
    ),
    "not_utf8": (b"\xff\xfe{}", [], None, "fp16_audit/report is not UTF-8 (invalid start byte"),
    "deep": (b"[" * 100_000 + b"]" * 100_000, [], None, "is JSON nested too deeply to read"),
    "too_big": (
        b'{"x": "' + b"a" * MAX_JSON_BYTES + b'"}',
        [],
        None,
        f"bytes, larger than the {MAX_JSON_BYTES} bytes this dashboard reads",
    ),
    "not_json": (b"{oops", [], None, "fp16_audit/report is not JSON"),
    "list_report": (b"[1, 2]", [], None, "fp16_audit/report is not a JSON object (got list)"),
}


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("badruns")
    _good(logdir)
    _good(logdir, "good2")
    for run, (report, findings, meta, _) in BAD_RUNS.items():
        _write(logdir, run, report, findings, report_meta=_meta("report", meta) if meta else None)
    # findings that are not objects, beside a good report: /findings and /compare answer 400
    _write(logdir, "scalar_finding", json.dumps(GOOD_REPORT).encode(), [b"5"])
    _write(logdir, "keyless_finding", json.dumps(GOOD_REPORT).encode(), [b'{"node": "c"}'])
    # sensitivity text that is not UTF-8
    w = EventFileWriter(str(logdir / "sens_bad"))
    s = summary_pb2.Summary()
    s.value.add(
        tag=SENSITIVITY_TAG, tensor=_strings([b"\xff"], []), metadata=_meta("", b"", TEXT_PLUGIN)
    )
    w.add_event(event_pb2.Event(step=0, wall_time=1.0, summary=s))
    w.close()
    mux = plugin_event_multiplexer.EventMultiplexer()
    mux.AddRunsFromDirectory(str(logdir))
    mux.Reload()
    provider = mux_provider.MultiplexerDataProvider(mux, str(logdir))
    ctx = base_plugin.TBContext(logdir=str(logdir), data_provider=provider, multiplexer=mux)
    plugin = Fp16AuditPlugin(ctx, max_json_bytes=MAX_JSON_BYTES)
    app = application.TensorBoardWSGI([plugin], data_provider=provider)
    return wtest.Client(app)


def _get(client, url):
    r = client.get(url)
    assert r.headers["Content-Type"].startswith("application/json"), r.headers
    return r.status_code, json.loads(r.get_data(as_text=True))


def test_runs_lists_the_good_runs_and_names_each_bad_one(client):
    status, body = _get(client, f"{PREFIX}/runs")
    assert status == 200
    assert [r["run"] for r in body["runs"]] == [
        "good",
        "good2",
        "keyless_finding",
        "scalar_finding",
    ]
    errors = {e["run"]: e["error"] for e in body["errors"]}
    assert sorted(errors) == sorted(BAD_RUNS)
    for run, (*_, reason) in BAD_RUNS.items():
        assert errors[run].startswith(f"run={run!r}: ") and reason in errors[run], errors[run]


@pytest.mark.parametrize("run", sorted(BAD_RUNS))
def test_findings_of_a_bad_run_is_400_naming_the_reason(client, run):
    status, body = _get(client, f"{PREFIX}/findings?run={run}")
    assert status == 400 and BAD_RUNS[run][3] in body["error"], body


def test_findings_that_are_not_objects_are_400(client):
    status, body = _get(client, f"{PREFIX}/findings?run=scalar_finding")
    assert status == 400
    assert body["error"] == (
        "Invalid argument: run='scalar_finding': fp16_audit/findings[0] is not a JSON object "
        "(got int)"
    )
    status, body = _get(client, f"{PREFIX}/compare?run_a=good&run_b=scalar_finding")
    assert status == 400 and "fp16_audit/findings[0] is not a JSON object" in body["error"]
    status, body = _get(client, f"{PREFIX}/compare?run_a=good&run_b=keyless_finding")
    assert status == 400 and body["error"].startswith(
        "Invalid argument: run_a='good', run_b='keyless_finding': findings cannot be compared"
    )


def test_good_runs_still_served_and_compared(client):
    status, body = _get(client, f"{PREFIX}/findings?run=good")
    assert status == 200 and body["findings"] == [GOOD_FINDING]
    status, body = _get(client, f"{PREFIX}/compare?run_a=good&run_b=good2")
    assert status == 200 and body["unchanged"] == 1 and body["changed"] == []


def test_missing_argument_and_unknown_run_are_json_errors(client):
    assert _get(client, f"{PREFIX}/findings") == (
        400,
        {"error": "Invalid argument: query argument 'run' is required (got None)"},
    )
    status, body = _get(client, f"{PREFIX}/findings?run=nope")
    assert status == 404 and "run='nope'" in body["error"]


def test_sensitivity_text_that_is_not_utf8(client):
    status, body = _get(client, f"{PREFIX}/sensitivity_runs")
    assert status == 200 and body["runs"] == []
    (err,) = body["errors"]
    assert err["run"] == "sens_bad" and f"{SENSITIVITY_TAG} is not UTF-8" in err["error"]
    status, body = _get(client, f"{PREFIX}/sensitivity?run=sens_bad")
    assert status == 400 and f"{SENSITIVITY_TAG} is not UTF-8" in body["error"]
