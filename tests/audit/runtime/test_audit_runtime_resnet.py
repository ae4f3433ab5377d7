"""`tf-fp16-audit --run` on a mixed_float16 ResNet50 SavedModel (keras.applications, weights=None,
32x32 input, batch 1): static vs observed accumulation for each of its 53 Conv2D layers.

Expected: the architecture has 53 Conv2D layers; under mixed_float16 each runs Conv2D with T=half,
which TensorFlow's CPU kernel computes in fp32 unless TF_CONV2D_USE_FP16_ACCUMULATE is "1"
(the 49-tap probe), so every call site is confirmed fp32 on this CPU-only process.
"""

from __future__ import annotations

import json

import keras
import pytest

from tf_fp16ops.audit.cli import main


@pytest.fixture(scope="module")
def resnet_mixed(tmp_path_factory):
    prev = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        m = keras.applications.ResNet50(weights=None, input_shape=(32, 32, 3), classes=10)
    finally:
        keras.mixed_precision.set_global_policy(prev)
    path = str(tmp_path_factory.mktemp("r50") / "resnet50_mixed")
    m.export(path, verbose=False)
    return path


def test_run_resnet50_mixed_float16(resnet_mixed, capsys):
    assert main([resnet_mixed, "--run", "--signature", "serve", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    # 53 Conv2D and the classifier's MatMul (a matmul call site, T=half, fp32 on CPU: measured)
    assert len(d["findings"]) == 54
    assert [f["op"] for f in d["findings"]].count("MatMul") == 1
    assert d["runtime"]["executed_convs"] == 54 and d["runtime"]["counts"] == {"confirmed": 54}
    nodes = set()
    for f in d["findings"]:
        o = f["observed"]
        assert (f["T"], f["accumulation"]) == ("half", "fp32")
        assert (o["status"], o["executed_T"], o["observed_accumulation"]) == (
            "confirmed",
            "half",
            "fp32",
        ), o
        if o["fused_ops"]:  # a fused node takes the name of its last op (e.g. .../BiasAdd)
            assert o["executed_node"].rsplit("/", 1)[0].endswith(f["node"].rsplit("/", 1)[0])
        else:
            assert o["executed_node"].endswith(f["node"])
        assert "CPU:0" in o["device"]
        nodes.add(o["executed_node"])
    assert len(nodes) == 54  # one executed node per call site
    # One probe per executed configuration: Conv2D, or _FusedConv2D where the CPU's kernel
    # library fuses convs with their BiasAdd (oneDNN on CPUs that take half); MatMul likewise.
    probes = {p["key"]: p for p in d["runtime"]["probes"]}
    convs = {"Conv2D:half:-:cpu", "_FusedConv2D:half:-:cpu"}
    assert set(probes) <= convs | {"MatMul:half:-:cpu", "_FusedMatMul:half:-:cpu"}, probes.keys()
    assert set(probes) & convs and set(probes) - convs
    assert all(p["observed"] == "fp32" for p in probes.values())
    probe = probes.get("Conv2D:half:-:cpu") or probes["_FusedConv2D:half:-:cpu"]
    assert [o["value"] for o in probe["outcomes"]] == ["1.015625", "0.9794921875", "0.0"]
    (inp,) = d["runtime"]["inputs"]  # Keras numbers input names per process: keras_tensor[_N]
    assert inp["name"].startswith("keras_tensor") and (inp["dtype"], inp["shape"]) == (
        "float32",
        [1, 32, 32, 3],
    )


def test_run_resnet50_table(resnet_mixed, capsys):
    assert main([resnet_mixed, "--run", "--signature", "serving_default", "--max-rows", "3"]) == 0
    out = capsys.readouterr().out
    assert out.count("fp32 confirmed") == 3
    assert "call sites: confirmed 54" in out
    assert "Conv2D:half:-:cpu  subprocess (same environment)" in out
