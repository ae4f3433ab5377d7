"""fp16 audit TensorBoard plugin: the sensitivity routes, on a logdir written by a real
`tf_fp16ops.sensitivity(..., logdir=)` run and the audit CLI's `--logdir` (the same directory, as
the README shows), served through TensorBoard's WSGI application.

Model built here: Input 8x8x1 -> Conv2D "c1" 3x3x4 -> Conv2D "c2" 3x3x4 -> Flatten -> Dense "fc"
3: three layers convert can switch, with the classes Conv2D, Conv2D, Dense.
"""

from __future__ import annotations

import json

import keras
import numpy as np
import pytest
from tensorboard.backend import application
from tensorboard.backend.event_processing import data_provider as mux_provider
from tensorboard.backend.event_processing import plugin_event_multiplexer
from tensorboard.plugins import base_plugin
from werkzeug import test as wtest

import tf_fp16ops
from tf_fp16ops.layers import _use_fixed_order
from tf_fp16ops.tensorboard_plugin.plugin import SENSITIVITY_TAG, Fp16AuditPlugin

PREFIX = "/data/plugin/fp16_audit"
BUILT = {"c1": "Conv2D", "c2": "Conv2D", "fc": "Dense"}
TOLERANCE = 7e-4  # between the layers' errors of this model: the set is neither empty nor all


def _model():
    keras.utils.set_random_seed(0)
    return keras.Sequential(
        [
            keras.Input((8, 8, 1)),
            keras.layers.Conv2D(4, 3, activation="relu", name="c1"),
            keras.layers.Conv2D(4, 3, activation="relu", name="c2"),
            keras.layers.Flatten(),
            keras.layers.Dense(3, name="fc"),
        ],
        name="tiny",
    )


def _client(logdir) -> wtest.Client:
    mux = plugin_event_multiplexer.EventMultiplexer()
    mux.AddRunsFromDirectory(str(logdir))
    mux.Reload()
    provider = mux_provider.MultiplexerDataProvider(mux, str(logdir))
    ctx = base_plugin.TBContext(logdir=str(logdir), data_provider=provider, multiplexer=mux)
    return wtest.Client(application.TensorBoardWSGI([Fp16AuditPlugin(ctx)], data_provider=provider))


def _json(client, url, status=200):
    r = client.get(url)
    assert r.status_code == status, (url, r.status_code, r.get_data(as_text=True))
    return json.loads(r.get_data(as_text=True))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """(logdir, model, x, y, result): sensitivity into `logdir` (run "."), its fp16-set model
    audited into `logdir/audit`."""
    from tf_fp16ops.audit.cli import main

    tmp = tmp_path_factory.mktemp("tb_sensitivity")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((12, 8, 8, 1)).astype(np.float32)
    y = rng.integers(0, 3, 12)
    model = _model()
    result = tf_fp16ops.sensitivity(
        model,
        x,
        y,
        tolerance=TOLERANCE,
        metric_tolerance=1.0,
        progress=False,
        logdir=str(tmp / "logs"),
    )
    result.model.save(tmp / "fp16_set.keras")
    assert (
        main(
            [
                str(tmp / "fp16_set.keras"),
                "--device",
                "cpu",
                "--logdir",
                str(tmp / "logs"),
                "--format",
                "json",
                "--output",
                str(tmp / "audit.json"),
            ]
        )
        == 0
    )
    return tmp / "logs", model, x, y, result


@pytest.fixture(scope="module")
def client(run):
    return _client(run[0])


def test_sensitivity_route_returns_the_result_json(client, run):
    _, _, _, _, result = run
    body = _json(client, f"{PREFIX}/sensitivity?run=.")
    assert body["run"] == "." and body["step"] == 0
    # The result's own fields, unchanged by the round trip through the event file.
    assert body["result"] == json.loads(result.to_json())
    assert body["result"]["tolerance"] == TOLERANCE


def test_sensitivity_layers_match_the_model_built(client, run):
    _, model, x, _, _ = run
    res = _json(client, f"{PREFIX}/sensitivity?run=.")["result"]
    layers = res["layers"]
    # One entry per convertible layer built, with its Keras class.
    assert {e["name"]: e["class_name"] for e in layers} == BUILT
    # Ranks are a permutation of 1..L, rank 1 the largest max_rel.
    assert sorted(e["rank"] for e in layers) == list(range(1, len(BUILT) + 1))
    by_rank = sorted(layers, key=lambda e: e["rank"])
    assert [e["max_rel"] for e in by_rank] == sorted((e["max_rel"] for e in layers), reverse=True)
    # The set found: within the tolerance together (set_max_rel) and, for this model, each
    # member alone (greedy adds the least sensitive first; errors need not add, so this is a
    # fact of this model, not of the search).
    members = {e["name"] for e in layers if e["in_fp16_set"]}
    assert members == set(res["fp16_set"])
    assert 0 < len(members) < len(BUILT)  # TOLERANCE is chosen so (see its comment)
    assert res["set_max_rel"] <= TOLERANCE
    assert all(e["max_rel"] <= TOLERANCE for e in layers if e["in_fp16_set"])
    for e in layers:
        assert e["metric_change"] == pytest.approx(e["metric"] - res["baseline_metric"])
    # max_rel of the most sensitive layer, recomputed with NumPy from two converted models
    # (that layer alone at float16 vs every layer at float32), as max|a - b| / max|a|, both on
    # the op library's fixed-order kernels as the sweep runs them (`_fixed_order`; float32
    # layers would otherwise run TensorFlow's op, README "Numerics").
    top = by_rank[0]["name"]
    full = tf_fp16ops.convert(model, accumulation="float32")
    half = tf_fp16ops.convert(
        tf_fp16ops.convert(model, accumulation="float32"), accumulation="float16", layers=[top]
    )
    for converted in (full, half):
        _use_fixed_order(converted)
    base = np.asarray(full(x), np.float64)
    out = np.asarray(half(x), np.float64)
    assert by_rank[0]["max_rel"] == pytest.approx(
        np.abs(out - base).max() / np.abs(base).max(), rel=1e-6
    )


def test_sensitivity_runs_route_and_the_audit_run_beside_it(client, run):
    _, _, _, _, result = run
    runs = _json(client, f"{PREFIX}/sensitivity_runs")["runs"]
    assert runs == [
        {
            "run": ".",
            "step": 0,
            "layers": 3,
            "set_size": len(result.fp16_set),
            "tolerance": TOLERANCE,
        }
    ]
    # The audit run of the fp16-set model: its call sites carry the sensitivity's layer names
    # (the dashboard matches them by name), fp16-accumulate exactly for the set's layers.
    assert [r["run"] for r in _json(client, f"{PREFIX}/runs")["runs"]] == ["audit"]
    findings = _json(client, f"{PREFIX}/findings?run=audit")["findings"]
    classes = {f["node"].split("/")[0]: f["audit_class"] for f in findings}
    assert set(classes) == set(BUILT)
    assert {n for n, c in classes.items() if c == "fp16-accumulate"} == set(result.fp16_set)


def _error(client, url, status) -> str:
    r = client.get(url)
    assert r.status_code == status, (url, r.status_code)
    return r.get_data(as_text=True)


def test_sensitivity_route_errors(client):
    assert "'run'" in _error(client, f"{PREFIX}/sensitivity", 400)
    body = _error(client, f"{PREFIX}/sensitivity?run=nope", 404)
    assert "run='nope'" in body and SENSITIVITY_TAG in body


def test_plugin_active_with_sensitivity_data_alone(tmp_path):
    import tensorflow as tf

    c = _client(tmp_path)
    assert _json(c, "/data/plugins_listing")["fp16_audit"]["enabled"] is False
    w = tf.summary.create_file_writer(str(tmp_path / "sens"))
    with w.as_default():
        tf.summary.text(SENSITIVITY_TAG, json.dumps({"layers": [], "fp16_set": []}), step=0)
        tf.summary.text("other/text", "not ours", step=0)
    w.close()
    c = _client(tmp_path)
    assert _json(c, "/data/plugins_listing")["fp16_audit"]["enabled"] is True
    assert _json(c, f"{PREFIX}/runs")["runs"] == []
    assert [r["run"] for r in _json(c, f"{PREFIX}/sensitivity_runs")["runs"]] == ["sens"]


def test_plugin_inactive_with_other_text_only(tmp_path):
    import tensorflow as tf

    w = tf.summary.create_file_writer(str(tmp_path / "other"))
    with w.as_default():
        tf.summary.text("notes", "hello", step=0)
    w.close()
    assert _json(_client(tmp_path), "/data/plugins_listing")["fp16_audit"]["enabled"] is False


def test_result_json_that_is_not_a_result_is_a_400_and_listed_apart(tmp_path):
    import tensorflow as tf

    for run, text in (("bad", "{not json"), ("list", "[1, 2]"), ("good", '{"layers": []}')):
        w = tf.summary.create_file_writer(str(tmp_path / run))
        with w.as_default():
            tf.summary.text(SENSITIVITY_TAG, text, step=0)
        w.close()
    c = _client(tmp_path)
    body = _error(c, f"{PREFIX}/sensitivity?run=bad", 400)
    assert "run='bad'" in body and "not JSON" in body
    assert "no 'layers' list" in _error(c, f"{PREFIX}/sensitivity?run=list", 400)
    # One unreadable run does not hide the others from the listing; it is named apart.
    listing = _json(c, f"{PREFIX}/sensitivity_runs")
    assert [r["run"] for r in listing["runs"]] == ["good"]
    assert [e["run"] for e in listing["errors"]] == ["bad", "list"]
    assert all(f"run={e['run']!r}" in e["error"] for e in listing["errors"])
