"""Runtime evidence (`tf-fp16-audit --run`, `verify()`): probes, executed graphs matched to call
sites, contradictions, CLI and renderers. CPU only; probes run real TensorFlow kernels.

Expected probe values come from a NumPy float64 reference with IEEE binary16 rounding (below),
expected accumulations per TF kernel from the 49-tap measurements recorded in opsets.py.
TensorFlow's own (Eigen) kernels are pinned in subprocesses with TF_ENABLE_ONEDNN_OPTS=0 (the
Eigen kernel on every CPU); the oneDNN kernels where the CPU has the features
(tests/support/cpu_features.py).
"""

from __future__ import annotations

import json
import os
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import tensorflow as tf

import tf_fp16ops
from support.audit_helpers import CPU
from support.cpu_features import ONEDNN_HALF_REASON, has_half_features, onednn_takes_half_here
from tf_fp16ops.audit import verify
from tf_fp16ops.audit.cli import main
from tf_fp16ops.audit.demo import demo_example
from tf_fp16ops.audit.findings import SCHEMA_VERSION, AmpPrediction, RuntimeEvidence
from tf_fp16ops.audit.render.runtime import runtime_lines
from tf_fp16ops.audit.runtime.executed import ExecutedNode, canonical_op
from tf_fp16ops.audit.runtime.inputs import parse_input_shapes, random_inputs
from tf_fp16ops.audit.runtime.match import observe
from tf_fp16ops.audit.runtime.probes import (
    PROBES,
    ProbeConfig,
    ProbeWorker,
    run_probes,
    run_probes_subprocess,
    verdict,
)


def _seq_fp16(a, b) -> float:
    """One fp16 accumulator from +0, acc = fp16(a*b + acc) with the product exact (float64)."""
    acc = np.float16(0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        for x, y in zip(a, b, strict=True):
            acc = np.float16(np.float64(x) * np.float64(y) + np.float64(acc))
    return float(acc)


def _fp32_then_half(a, b) -> float:
    with np.errstate(over="ignore"):
        return float(np.float16(np.float32(np.sum(np.float64(a) * np.float64(b)))))


@pytest.mark.parametrize("name", sorted(PROBES))
def test_probe_constants_match_numpy_reference(name):
    a, b, fp32, fp16 = PROBES[name]
    assert all(float(np.float16(x)) == x for x in a + b), "probe inputs must be exact fp16 values"
    assert _fp32_then_half(a, b) == fp32
    if name == "overflow":
        assert not np.isfinite(_seq_fp16(a, b))
    else:
        assert _seq_fp16(a, b) == fp16 != fp32


def test_verdicts():
    assert verdict(1.015625, "half", "rounding") == "fp32"
    assert verdict(1.0, "half", "rounding") == "fp16"
    assert verdict(1.0009765625, "half", "rounding") == "other"
    assert verdict(float("nan"), "half", "overflow") == "fp16"
    assert verdict(0.0, "float", "overflow") == "fp32"
    # T=float holding an fp16 sum (the depthwise op's float operands with Tacc=half)
    assert verdict(1.0, "float", "rounding") == "fp16"
    assert verdict(1.015380859375, "float", "rounding") == "fp32"  # 1 + 63 * 2^-12, exact
    assert verdict(1.0009765625, "float", "rounding") == "other"
    assert verdict(0.98046875, "float", "taps49") == "fp16"
    assert verdict(float("inf"), "float", "overflow") == "fp16"


@pytest.mark.parametrize(
    "op,T,Tacc,expected",
    [
        ("Conv2D", "half", None, "fp32"),  # TF CPU Conv2D: fp32 (Eigen and oneDNN alike)
        ("Fp16Conv2D", "half", "half", "fp16"),  # this package's contract
        ("Fp16Conv2D", "half", "float", "fp32"),
        ("Fp16DepthwiseConv2D", "half", "half", "fp16"),
        ("Fp16DepthwiseConv2D", "half", "float", "fp32"),
        ("Fp16DepthwiseConv2D", "float", "float", "fp32"),
        ("Fp16DepthwiseConv2D", "float", "half", "fp16"),  # operands rounded, fp16 sum
        ("Fp16MatMul", "half", "half", "fp16"),
        ("Fp16MatMul", "half", "float", "fp32"),
        ("Fp16MatMul", "float", "float", "fp32"),
        ("Conv2D", "float", None, "fp32"),
    ],
)
def test_probes_on_this_process(op, T, Tacc, expected):
    r = run_probes(ProbeConfig(op, T, Tacc, "cpu"))
    assert r.observed == expected, r
    assert [o.probe for o in r.outcomes] == ["rounding", "taps49", "overflow"]
    assert r.kernel  # the executed kernel was read back from the partitioned graph
    if T == "half" or Tacc == "half":
        assert {o.verdict for o in r.outcomes} == {expected}


_KERNEL_OPS = ("Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "DepthwiseConv2dNative")


@pytest.fixture(scope="module")
def eigen_probes():
    """TensorFlow's own kernels: TF_ENABLE_ONEDNN_OPTS=0 gives them on every CPU (fresh process)."""
    configs = [ProbeConfig(op, "half", None, "cpu") for op in _KERNEL_OPS]
    return {r.config.op: r for r in run_probes_subprocess(configs, {"TF_ENABLE_ONEDNN_OPTS": "0"})}


@pytest.mark.parametrize(
    "op,expected",
    [
        ("Conv2D", "fp32"),  # unless TF_CONV2D_USE_FP16_ACCUMULATE is exactly "1"
        ("Conv2DBackpropInput", "fp16"),  # measured (opsets.CPU_HALF_FP16_ACCUMULATE_MEASURED)
        ("Conv2DBackpropFilter", "fp16"),
        ("DepthwiseConv2dNative", "fp16"),
    ],
)
def test_eigen_kernels_in_a_subprocess(eigen_probes, op, expected):
    r = eigen_probes[op]
    assert r.kernel == op and r.observed == expected, r
    _, _, fp32, fp16 = PROBES["taps49"]
    taps = {o.probe: float(o.value) for o in r.outcomes}["taps49"]
    assert taps == (fp32 if expected == "fp32" else fp16)
    assert dict(r.switches) == {"TF_ENABLE_ONEDNN_OPTS": "0"}
    assert "TF_ENABLE_ONEDNN_OPTS='0'" in r.process


@pytest.mark.skipif(not has_half_features(), reason=ONEDNN_HALF_REASON)
def test_onednn_kernels_accumulate_in_fp32_and_ignore_the_switch():
    env = {"TF_ENABLE_ONEDNN_OPTS": "1", "TF_CONV2D_USE_FP16_ACCUMULATE": "1"}
    configs = [ProbeConfig(op, "half", None, "cpu") for op in _KERNEL_OPS]
    results = run_probes_subprocess(configs, env)
    for r in results:
        assert r.kernel.startswith(f"_MklNative{r.config.op}"), r
        # every probe gives the fp32-accumulation value of the NumPy reference (PROBES constants)
        values = {o.probe: float(o.value) for o in r.outcomes}
        assert values == {k: v[2] for k, v in PROBES.items()}, r
        assert r.observed == "fp32" and dict(r.switches) == env


def test_static_onednn_rule_matches_the_kernel_that_runs_here():
    """The static audit's CPU rule (no TensorFlow) predicts the kernel TensorFlow picks here."""
    from tf_fp16ops.audit import RuntimeContext

    r = run_probes(ProbeConfig("Conv2DBackpropInput", "half", None, "cpu"))
    takes, why = RuntimeContext.from_process().onednn_half()
    assert takes is onednn_takes_half_here(), why
    assert r.kernel.startswith("_MklNative") is takes, (r.kernel, why)
    assert r.observed == ("fp32" if takes else "fp16")


def test_verify_reports_a_wrong_cpu_assumption_as_contradicted():
    from tf_fp16ops.audit import RuntimeContext

    w = tf.constant(np.full([3, 3, 4, 1], 0.5), tf.float16)

    @tf.function
    def f(x):
        return tf.nn.depthwise_conv2d(x, w, [1, 1, 1, 1], "VALID")

    x = tf.cast(tf.random.stateless_uniform([1, 8, 8, 4], seed=[3, 4]), tf.float16)
    here = onednn_takes_half_here()
    # The context derived from this process predicts what runs.
    (ok,) = verify(f, x, context=RuntimeContext.from_process()).findings
    assert ok.observed.status == "confirmed", ok.observed
    assert ok.accumulation == ("fp32" if here else "fp16")
    # The opposite assumption is reported as contradicted, naming the kernel that ran.
    wrong = CPU.with_overrides(cpu_onednn_fp16="no" if here else "yes")
    (bad,) = verify(f, x, context=wrong).findings
    assert bad.observed.status == "contradicted"
    hint = "oneDNN kernel _MklNativeDepthwiseConv2dNative ran" if here else "--cpu-onednn-fp16 no"
    assert any(hint in c for c in bad.observed.contradictions), bad.observed.contradictions


def test_probe_errors_and_unprobed_configs():
    assert run_probes(ProbeConfig("Conv2D", "bfloat16", None, "cpu")).observed == "not-probed"
    assert run_probes(ProbeConfig("FusedPadConv2D", "half", None, "cpu")).observed == "not-probed"
    assert (
        run_probes(ProbeConfig("Conv2D", "half", None, "gpu")).note
        == "no GPU visible in this process"
    )
    with pytest.raises(ValueError, match="OP:T:TACC:DEVICE"):
        ProbeConfig.parse("Conv2D:half")


def test_switch_flips_conv2d_only_in_a_subprocess():
    # TensorFlow's Eigen kernels (TF_ENABLE_ONEDNN_OPTS=0 on every CPU): the switch selects fp16.
    configs = [
        ProbeConfig("Conv2D", "half", None, "cpu"),
        ProbeConfig("Conv2DBackpropFilter", "half", None, "cpu"),
    ]
    env = {"TF_CONV2D_USE_FP16_ACCUMULATE": "1", "TF_ENABLE_ONEDNN_OPTS": "0"}
    flipped = run_probes_subprocess(configs, env)
    assert [r.observed for r in flipped] == ["fp16", "fp16"]
    assert dict(flipped[0].switches) == env  # the subprocess records both variables
    assert "subprocess" in flipped[0].process and "TF_ENABLE_ONEDNN_OPTS='0'" in flipped[0].process
    # This process (switch unset) still computes Conv2D in fp32: the switch is per process.
    assert run_probes(configs[0]).observed == "fp32"


def test_verify_tf_function_matches_fused_and_our_ops():
    w32 = tf.constant(np.random.default_rng(1).standard_normal([3, 3, 8, 8]), tf.float32)
    b32 = tf.constant(np.ones([8]), tf.float32)
    w16 = tf.cast(w32, tf.float16)

    @tf.function
    def f(x16, x32):
        a = tf.nn.conv2d(x16, w16, 1, "VALID")
        b = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x32, w32, 1, "SAME"), b32))
        c = tf_fp16ops.conv2d(x16, w16, [1, 1, 1, 1], "VALID", accumulation="float16")
        return a, b, c

    x32 = tf.random.stateless_normal([1, 8, 8, 8], seed=[1, 2])
    r = verify(f, tf.cast(x32, tf.float16), x32, context=CPU)
    by_op = {f.op: f for f in r.findings}
    assert set(by_op) == {"Conv2D", "Fp16Conv2D"} and len(r.findings) == 3
    assert all(f.observed is not None and f.observed.status == "confirmed" for f in r.findings), [
        f.observed for f in r.findings
    ]
    fused = [f for f in r.findings if f.T == "float"][0].observed
    assert fused.executed_op == "_FusedConv2D" and fused.fused_ops == ("BiasAdd", "Relu")
    assert any(c.startswith("fused into _FusedConv2D") for c in fused.changes)
    assert fused.observed_accumulation == "fp32"
    half = [f for f in r.findings if f.op == "Conv2D" and f.T == "half"][0].observed
    assert (half.executed_T, half.observed_accumulation, half.probe_key) == (
        "half",
        "fp32",
        "Conv2D:half:-:cpu",
    )
    ours = by_op["Fp16Conv2D"].observed
    assert (ours.executed_Tacc, ours.observed_accumulation) == ("half", "fp16")
    assert "CPU:0" in ours.device
    d = r.to_dict()
    assert d["schema_version"] == SCHEMA_VERSION and d["runtime"]["counts"] == {"confirmed": 3}
    assert d["findings"][0]["observed"]["status"] == "confirmed"
    json.dumps(d)


def test_verify_probes_and_confirms_the_depthwise_op():
    w16 = tf.cast(tf.random.stateless_normal([3, 3, 4, 1], seed=[3, 4]), tf.float16)

    @tf.function
    def f(x):
        return tf_fp16ops.ops.depthwise_conv2d(x, w16, 1, "VALID", accumulation="float16")

    x16 = tf.cast(tf.random.stateless_normal([1, 6, 6, 4], seed=[1, 2]), tf.float16)
    (finding,) = verify(f, x16, context=CPU).findings
    assert finding.op == "Fp16DepthwiseConv2D"
    assert finding.observed.status == "confirmed", finding.observed
    assert finding.observed.observed_accumulation == "fp16"
    assert finding.observed.probe_key == "Fp16DepthwiseConv2D:half:half:cpu"


def test_verify_confirms_the_depthwise_layer_of_a_float32_model():
    # The layer hands its float32 operands to the op with Tacc=half (no casts around it).
    layer = tf_fp16ops.layers.DepthwiseConv2D(3, accumulation="float16")
    x = tf.random.stateless_normal([1, 6, 6, 4], seed=[1, 2])
    layer(x)
    (finding,) = verify(tf.function(layer), x, context=CPU).findings
    assert (finding.op, finding.T) == ("Fp16DepthwiseConv2D", "float")
    assert finding.observed.status == "confirmed", finding.observed
    assert finding.observed.observed_accumulation == "fp16"
    assert finding.observed.probe_key == "Fp16DepthwiseConv2D:float:half:cpu"


def test_verify_matches_a_handed_over_conv_fused_past_its_reshape():
    """tf_fp16ops.conv2d hands a float32 1x1 forward (accumulation='float32') with an unknown
    batch to TensorFlow's Conv2D followed by a Reshape (both oneDNN and Eigen sides); at run time
    grappler drops the Reshape and fuses Conv2D + BiasAdd + Relu into a _FusedConv2D named like
    the Relu: the static Conv2D must still find it."""
    w32 = tf.constant(np.random.default_rng(1).standard_normal([1, 1, 8, 8]), tf.float32)
    b32 = tf.constant(np.ones([8]), tf.float32)

    @tf.function(input_signature=[tf.TensorSpec([None, 8, 8, 8])])
    def g(x):
        y = tf_fp16ops.conv2d(x, w32, 1, "SAME", accumulation="float32")
        return tf.nn.relu(tf.nn.bias_add(y, b32))

    ops_built = g.get_concrete_function().graph.get_operations()
    assert [op.type for op in ops_built if op.type in ("Conv2D", "Reshape")] == [
        "Conv2D",
        "Reshape",
    ]
    r = verify(g, tf.random.stateless_normal([2, 8, 8, 8], seed=[1, 2]), context=CPU)
    (f,) = r.findings
    assert (f.op, f.node) == ("Conv2D", "Fp16Conv2D/Conv2D")
    assert f.observed.status == "confirmed", f.observed
    assert f.observed.executed_op == "_FusedConv2D"
    assert f.observed.fused_ops == ("BiasAdd", "Relu")
    assert f.observed.observed_accumulation == "fp32"


def _finding(**kw):
    from support.audit_helpers import conv_graph
    from tf_fp16ops.audit import audit

    f = audit(conv_graph(T="DT_FLOAT"), CPU).findings[0]
    from dataclasses import replace

    return replace(f, **kw)


def _node(**kw):
    base = dict(
        name="StatefulPartitionedCall/conv",
        op="Conv2D",
        kernel_op="Conv2D",
        T="float",
        Tacc=None,
        device="/job:localhost/replica:0/task:0/device:CPU:0",
        fused_ops=(),
        inputs=("x", "w"),
        graph_index=0,
    )
    base.update(kw)
    return ExecutedNode(**base)


def test_observe_dtype_rewrite_placement_and_amp():
    from tf_fp16ops.audit.runtime.probes import ProbeResult

    f = _finding()
    probe16 = ProbeResult(ProbeConfig("Conv2D", "half", None, "gpu"), "fp16")
    # grappler rewrote T=float to half, inserted a cast, ran on a GPU with fp16 accumulation
    o = observe(
        f,
        _node(
            T="half",
            device="/device:GPU:0",
            input_casts=("x-0-CastToFp16-AutoMixedPrecision (float->half)",),
        ),
        probe16,
    )
    assert o.status == "contradicted"
    assert "static T=float, executed T=half" in o.contradictions
    assert any("placed on GPU:0" in c for c in o.contradictions)
    assert any("observed fp16" in c for c in o.contradictions)
    assert any(c.startswith("cast inserted by grappler") for c in o.changes)
    # the same rewrite, predicted by the static AMP pass, is a confirmed prediction (T and device)
    g = _finding(target_device="gpu", amp=AmpPrediction(True, "half", "allow list"))
    o2 = observe(g, _node(T="half", device="/device:GPU:0"), probe16)
    assert (
        o2.status == "confirmed"
        and "auto mixed precision rewrite predicted and observed" in o2.changes
    )
    assert observe(f, None, None).status == "not-found"
    assert observe(f, _node(), None).status == "unverified"
    assert (
        canonical_op("_MklNativeFusedConv2D") == "_FusedConv2D"
        and canonical_op("_MklNativeConv2D") == "Conv2D"
    )


def test_runtime_lines_spell_each_status_as_the_table_does():
    """The counts line names a status as the table's cells do ("not found"); JSON keeps the token
    ("not-found")."""
    rt = RuntimeEvidence(
        executed="tf.function f",
        inputs=(),
        seed=None,
        function_graphs=1,
        executed_convs=2,
        counts=(("confirmed", 1), ("not-found", 1)),
    )
    lines = runtime_lines(SimpleNamespace(runtime=rt, findings=()))
    assert "call sites: confirmed 1, not found 1" in lines[1]
    assert rt.to_dict()["counts"] == {"confirmed": 1, "not-found": 1}


def test_input_shapes_and_random_inputs():
    assert parse_input_shapes(["x=1,32,32,3"]) == {"x": (1, 32, 32, 3)}
    for bad in ("x", "=1,2", "x=1,a", "x=-1"):
        with pytest.raises(ValueError, match="--input-shape"):
            parse_input_shapes([bad])
    spec = tf.TensorSpec([None, None, 4], tf.float16)
    with pytest.raises(ValueError, match="unknown dimensions"):
        random_inputs([("x", spec)], {})
    ((name, t),) = random_inputs([("x", spec)], {"x": (2, 3, 4)}, seed=0)
    assert t.dtype == tf.float16 and t.shape == (2, 3, 4)
    ((_, t2),) = random_inputs([("x", spec)], {"x": (2, 3, 4)}, seed=0)
    assert np.array_equal(t.numpy(), t2.numpy())  # fixed seed
    with pytest.raises(ValueError, match="does not fit"):
        random_inputs([("x", spec)], {"x": (2, 3, 5)})
    with pytest.raises(ValueError, match="unknown input"):
        random_inputs([("x", spec)], {"y": (1,)})


def test_random_inputs_in_the_signature_dtype_and_bounded():
    # Drawn in float32 for half (not float64, which needed 8 bytes per element), integers in
    # their own dtype; over MAX_INPUT_BYTES refused before anything is allocated.
    spec = tf.TensorSpec([None, 8, 8, 3], tf.float16)
    with pytest.raises(ValueError) as e:
        random_inputs([("x", spec)], {"x": (1_000_000_000, 8, 8, 3)})
    assert str(e.value) == (
        "input 'x' of shape [1000000000, 8, 8, 3] and dtype float16 needs 768000000000 bytes "
        f"(drawn in float32), over the limit of {2**30} bytes per --run input"
    )
    ((_, t),) = random_inputs([("i", tf.TensorSpec([4, 5], tf.int32))], {}, seed=1)
    assert t.dtype == tf.int32 and 0 <= t.numpy().min() and t.numpy().max() < 10
    ((_, b),) = random_inputs([("b", tf.TensorSpec([7], tf.bool))], {}, seed=1)
    assert b.dtype == tf.bool
    ((_, d),) = random_inputs([("d", tf.TensorSpec([3], tf.float64))], {}, seed=1)
    assert d.dtype == tf.float64


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return demo_example(str(tmp_path_factory.mktemp("demo") / "example"))


def test_cli_run_on_bundled_example(demo, capsys):
    assert main([demo, "--run", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    rows = {f["signatures"][0]: f for f in d["findings"]}
    assert set(rows) == {"conv16", "conv32", "conv16_32", "ours_half", "ours_float"}
    for sig, f in rows.items():
        o = f["observed"]
        assert o["status"] == "confirmed", (sig, o)
        assert o["observed_accumulation"] == f["accumulation"]
    assert rows["ours_half"]["observed"]["observed_accumulation"] == "fp16"
    assert rows["conv16"]["observed"]["observed_accumulation"] == "fp32"
    keys = {p["key"] for p in d["runtime"]["probes"]}
    assert keys == {
        "Conv2D:half:-:cpu",
        "Conv2D:float:-:cpu",
        "Fp16Conv2D:half:half:cpu",
        "Fp16Conv2D:half:float:cpu",
    }
    assert d["runtime"]["seed"] == 0 and d["runtime"]["counts"] == {"confirmed": 5}


def test_cli_run_shows_contradictions_in_table_markdown_and_tensorboard(demo, capsys, tmp_path):
    # Static context says GPU with fp16 compute; the run places the conv on the CPU, fp32
    # accumulation.
    args = [
        demo,
        "--run",
        "--signature",
        "conv16",
        "--device",
        "gpu",
        "--env",
        "TF_FP16_CONV_USE_FP32_COMPUTE=0",
    ]
    assert main(args) == 0
    table = capsys.readouterr().out
    assert "fp32 CONTRADICTED" in table and "runtime evidence (the model was executed)" in table
    assert "static accumulation fp16, probes of Conv2D:half:-:cpu observed fp32" in table
    assert "static analysis assumed gpu, placed on CPU:0" in table
    assert main(args + ["--format", "markdown", "--logdir", str(tmp_path)]) == 0
    md = capsys.readouterr().out
    assert "## Runtime evidence (the model was executed)" in md and "CONTRADICTION #1" in md
    texts = []
    for path in (tmp_path / "audit").glob("events.out.tfevents.*"):
        for ev in tf.compat.v1.train.summary_iterator(str(path)):
            for v in ev.summary.value:
                if v.tag == "audit/report":
                    texts.append(tf.make_ndarray(v.tensor).item().decode())
    assert texts and "CONTRADICTION #1" in texts[0]


def test_cli_run_probe_switch_and_help(demo, capsys):
    switch = "TF_CONV2D_USE_FP16_ACCUMULATE=1,TF_ENABLE_ONEDNN_OPTS=0"  # one subprocess, Eigen
    args = [demo, "--run", "--signature", "conv16", "--probe-switch", switch, "--format", "json"]
    assert main(args) == 0
    d = json.loads(capsys.readouterr().out)
    (sp,) = d["runtime"]["switch_probes"]
    assert (sp["key"], sp["observed"], sp["kernel"]) == ("Conv2D:half:-:cpu", "fp16", "Conv2D")
    assert sp["switches"] == {"TF_CONV2D_USE_FP16_ACCUMULATE": "1", "TF_ENABLE_ONEDNN_OPTS": "0"}
    assert d["runtime"]["probes"][0]["observed"] == "fp32"
    assert d["context"]["cpu_onednn_fp16"] is onednn_takes_half_here()
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "EXECUTE" in out and "--cpu-onednn-fp16 {yes,no}" in out
    assert "TF_ENABLE_ONEDNN_OPTS" in out


@pytest.mark.skipif(not has_half_features(), reason=ONEDNN_HALF_REASON)
@pytest.mark.parametrize("signature", ["conv16", "conv32"])
def test_cli_run_probe_switch_notes_that_onednn_ignores_it(demo, capsys, monkeypatch, signature):
    # The switch matters to T=half convs only: for the T=float signature no note (oneDNN runs
    # that conv too, and the switch changes nothing on any kernel there).
    monkeypatch.delenv("TF_ENABLE_ONEDNN_OPTS", raising=False)
    assert (
        main(
            [
                demo,
                "--run",
                "--signature",
                signature,
                "--probe-switch",
                "TF_CONV2D_USE_FP16_ACCUMULATE=1,TF_ENABLE_ONEDNN_OPTS=1",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    note = "ran oneDNN's _MklNativeConv2D in the subprocess, which ignores "
    assert (note in out) == (signature == "conv16"), out
    assert "ran oneDNN's" in out or signature == "conv32"
    assert ("ignores TF_CONV2D_USE_FP16_ACCUMULATE" in out) == (signature == "conv16")


def test_cli_run_errors(demo, tmp_path, capsys):
    assert main([demo, "--run", "--signature", "nope"]) == 2
    assert "no signature 'nope'" in capsys.readouterr().err
    assert main([demo, "--run", "--input-shape", "x=1,2"]) == 2
    assert "does not fit" in capsys.readouterr().err
    pb = tmp_path / "g.pbtxt"
    pb.write_text('node { name: "x" op: "Placeholder" }')
    assert main([str(pb), "--run"]) == 2
    assert "statically" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([demo, "--input-shape", "x=1"])
    assert main([demo, "--run", "--probe-switch", "NOVALUE"]) == 2


def test_collect_traces_new_functions_without_retracing_warnings():
    """`collect` traces one new function per call by design (a probe per configuration): the
    "triggered tf.function retracing" warning TensorFlow gives for that is not shown, while the
    TensorFlow logger still passes other warnings."""
    import logging

    from tf_fp16ops.audit.runtime.executed import collect

    seen = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())
    logger = tf.get_logger()
    logger.addHandler(handler)
    try:
        x = tf.ones([2, 2])
        for i in range(8):
            run = collect(lambda t, i=i: t * float(i), [x])
            np.testing.assert_array_equal(run.outputs[0], np.full((2, 2), float(i), np.float32))
        logger.warning("a real TensorFlow warning")
    finally:
        logger.removeHandler(handler)
    assert not [m for m in seen if "retracing" in m]
    assert "a real TensorFlow warning" in seen


# A stand-in for the probe process (ProbeWorker's protocol: "ready", then one JSON line per
# configuration key): Conv3D grows without bound, MatMul never answers, Einsum dies, anything
# else answers at once with its pid as the kernel. Each start appends its pid to argv[1].
_FAKE_PROBE_PROCESS = r"""
import json, os, sys, time
with open(sys.argv[1], "a") as f:
    f.write(f"{os.getpid()}\n")
print("ready", flush=True)
for line in sys.stdin:
    op, t, tacc, dev = line.strip().split(":")
    if op == "Conv3D":
        hog = []
        while True:
            hog.append(b"\x01" * (16 << 20))
            time.sleep(0.01)
    elif op == "MatMul":
        time.sleep(3600)
    elif op == "Einsum":
        sys.stderr.write("first line\nfake kernel failure\n")
        sys.exit(3)
    config = {"op": op, "T": t, "Tacc": None, "device": dev, "xla": False}
    print(json.dumps({"config": config, "key": line.strip(), "observed": "fp32", "outcomes": [],
                      "kernel": f"pid {os.getpid()}", "switches": {}, "process": "", "note": ""}),
          flush=True)
"""


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_probe_worker_stops_a_probe_past_its_memory_or_time_limit(tmp_path):
    """One pathological configuration (memory without bound, no answer, a crash) is reported and
    stopped; the next configuration gets a fresh process, and no stopped process is left."""
    script, pids = tmp_path / "fake_probe.py", tmp_path / "pids"
    script.write_text(_FAKE_PROBE_PROCESS)
    worker = ProbeWorker(
        memory_mib=300, timeout_s=2, command=[sys.executable, str(script), str(pids)]
    )
    try:
        first = worker.run(ProbeConfig("Conv2D", "half", None, "cpu"))
        assert (first.observed, first.process) == ("fp32", "subprocess (same environment)")
        again = worker.run(ProbeConfig("Conv2DBackpropInput", "half", None, "cpu"))
        assert again.kernel == first.kernel  # the same process serves later configurations

        hog = worker.run(ProbeConfig("Conv3D", "half", None, "cpu"))
        assert hog.observed == "not-probed", hog
        assert hog.note.startswith(f"not probed on TensorFlow {tf.__version__} on ")
        assert hog.note.endswith(": its process passed 300 MiB resident memory (stopped)")

        after = worker.run(ProbeConfig("Conv2D", "half", None, "cpu"))
        assert after.observed == "fp32" and after.kernel != first.kernel  # a fresh process

        hang = worker.run(ProbeConfig("MatMul", "half", None, "cpu"))
        assert hang.observed == "not-probed", hang
        assert hang.note.endswith(": it did not finish within 2 s (stopped)")

        crash = worker.run(ProbeConfig("Einsum", "half", None, "cpu"))
        assert crash.observed == "error", crash
        assert crash.note == "the probe process exited with status 3: fake kernel failure"
    finally:
        worker.close()
    started = [int(p) for p in pids.read_text().split()]
    assert len(started) == 3 and all(_gone(p) for p in started)  # hog, hang, crash: 3 processes


def test_probe_worker_limits_and_the_real_probe_process():
    for name, kwargs in (
        ("memory_mib", {"memory_mib": 0}),
        ("timeout_s", {"timeout_s": -1.0}),
        ("start_timeout_s", {"start_timeout_s": "60"}),
    ):
        with pytest.raises(ValueError, match=f"^{name} must be a positive number, got "):
            ProbeWorker(**kwargs)
    from tf_fp16ops.audit.cli import EPILOG
    from tf_fp16ops.audit.runtime.probes import PROBE_MEMORY_MIB, PROBE_TIMEOUT_S

    # --help states the default limits.
    assert f"past {PROBE_MEMORY_MIB} MiB resident or {PROBE_TIMEOUT_S:g} s" in " ".join(
        EPILOG.split()
    )
    # The package's own probe process, with a limit no tf.function trace can meet.
    worker = ProbeWorker(timeout_s=0.001)
    try:
        r = worker.run(ProbeConfig("Conv2D", "half", None, "cpu"))
    finally:
        worker.close()
    assert r.observed == "not-probed" and not r.outcomes, r
    assert f"TensorFlow {tf.__version__} on " in r.note
    assert r.note.endswith("it did not finish within 0.001 s (stopped)")


def test_verify_probes_a_fused_depthwise_conv():
    """Keras' DepthwiseConv2D with its bias: where oneDNN takes T=half, grappler's remapper fuses
    DepthwiseConv2dNative + BiasAdd + Relu into _FusedDepthwiseConv2dNative (oneDNN's
    _MklNativeFusedDepthwiseConv2dNative kernel), which is probed as such (fp32, like every
    oneDNN T=half conv); elsewhere the depthwise op runs unfused. Either way the site is
    confirmed (this process's context, so that the prediction is this CPU's)."""
    w16 = tf.cast(tf.random.stateless_normal([3, 3, 4, 1], seed=[3, 4]), tf.float16)
    b16 = tf.ones([4], tf.float16)

    @tf.function
    def f(x):
        y = tf.nn.depthwise_conv2d(x, w16, [1, 1, 1, 1], "VALID")
        return tf.nn.relu(tf.nn.bias_add(y, b16))

    x16 = tf.cast(tf.random.stateless_normal([1, 6, 6, 4], seed=[1, 2]), tf.float16)
    (finding,) = verify(f, x16).findings
    seen = finding.observed
    assert finding.op == "DepthwiseConv2dNative"
    assert seen.status == "confirmed", seen
    if seen.executed_op == "_FusedDepthwiseConv2dNative":
        assert seen.probe_key == "_FusedDepthwiseConv2dNative:half:-:cpu"
        assert seen.observed_accumulation == "fp32"
    if onednn_takes_half_here():
        assert seen.executed_op == "_FusedDepthwiseConv2dNative"


def test_cli_run_on_inputs_the_model_refuses_is_one_line(tmp_path, capsys):
    # A 3x3 VALID conv run on a 2x2 input: the model's own ValueError, which reached the user
    # as "internal error" with TensorFlow's flattened "in user code" traceback.
    module = tf.Module()
    module.w = tf.Variable(tf.ones((3, 3, 3, 4)))
    module.f = tf.function(
        lambda x: tf.nn.conv2d(x, module.w, 1, "VALID"),
        input_signature=[tf.TensorSpec([None, None, None, 3], tf.float32, name="x")],
    )
    path = str(tmp_path / "sm")
    tf.saved_model.save(module, path, signatures={"serve": module.f})
    assert main([path, "--run", "--input-shape", "x=1,2,2,3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error" not in err, err
    assert err.startswith(
        f"tf-fp16-audit: error: {path}: running the model on inputs of shape [1, 2, 2, 3] failed: "
    ), err
