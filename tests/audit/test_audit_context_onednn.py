"""The static audit's oneDNN rule for T=half convolutions on CPU (no TensorFlow execution).

TensorFlow hands T=half convs to oneDNN when oneDNN is on (TF_ENABLE_ONEDNN_OPTS, default on for
CPUs with avx512_vnni/avx512_bf16/avx_vnni/amx_tile/amx_int8/amx_bf16: tensorflow/core/util/port.cc)
and the CPU supports DT_HALF for oneDNN ((avx512bw and (avx512_fp16 or amx_fp16)) or avx_ne_convert:
tensorflow/core/util/util.cc IsDataTypeSupportedByOneDNNOnThisCPU). The flag sets below are written
by hand after the CPUs' published feature lists.
"""

from __future__ import annotations

import json

import pytest

from support.audit_helpers import conv_graph
from tf_fp16ops.audit import SCHEMA_VERSION, RuntimeContext, audit
from tf_fp16ops.audit.cli import main
from tf_fp16ops.audit.context import onednn_takes_half, read_cpu_flags
from tf_fp16ops.audit.render.markdown import render_markdown
from tf_fp16ops.audit.render.terminal import render_terminal

SAPPHIRE_RAPIDS = {
    "avx2",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    "avx_vnni",
}
GRANITE_RAPIDS_NO_AVX512FP16 = {
    "avx512bw",
    "avx512_vnni",
    "amx_tile",
    "amx_fp16",
}  # hypothetical mask
EPYC_GENOA = {"avx2", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16"}  # Zen 4
EPYC_MILAN = {"avx", "avx2", "fma", "sse4_2"}  # Zen 3: none of oneDNN's default-on flags
ARROW_LAKE = {"avx2", "avx_vnni", "avx_ne_convert"}  # no AVX-512


@pytest.mark.parametrize(
    "flags,env,takes,why",
    [
        (SAPPHIRE_RAPIDS, None, True, "CPU has avx512bw+avx512_fp16"),
        (SAPPHIRE_RAPIDS, "0", False, "TF_ENABLE_ONEDNN_OPTS='0' turns oneDNN off"),
        (SAPPHIRE_RAPIDS, "FALSE", False, "turns oneDNN off"),  # ReadBoolFromEnvVar lower-cases
        (SAPPHIRE_RAPIDS, "yes", True, "on by default"),  # not a boolean: the default stays
        (GRANITE_RAPIDS_NO_AVX512FP16, None, True, "avx512bw+amx_fp16"),
        (ARROW_LAKE, None, True, "avx_ne_convert"),
        (EPYC_GENOA, None, False, "lacks avx512_fp16"),
        (EPYC_GENOA, "1", False, "lacks"),
        (EPYC_MILAN, None, False, "oneDNN off by default"),
        (
            EPYC_MILAN | {"avx_ne_convert"},
            "true",
            True,
            "TF_ENABLE_ONEDNN_OPTS='true' turns oneDNN on; CPU has avx_ne_convert",
        ),
        ({"avx512_fp16", "avx512_bf16"}, None, False, "lacks"),  # avx512_fp16 without avx512bw
    ],
)
def test_rule_over_hand_written_flag_sets(flags, env, takes, why):
    got, reason = onednn_takes_half(flags, env)
    assert got is takes and why in reason, reason


def test_cpu_flags_are_read_from_cpuinfo(tmp_path):
    f = tmp_path / "cpuinfo"
    f.write_text(
        "processor\t: 0\nflags\t\t: fpu avx512bw avx512_fp16 avx512_bf16 sse2\n"
        "processor\t: 1\nflags\t\t: fpu\n"
    )
    assert read_cpu_flags(str(f)) == ("avx512_bf16", "avx512_fp16", "avx512bw")
    (tmp_path / "arm").write_text("processor\t: 0\nFeatures\t: fp asimd\n")
    assert read_cpu_flags(str(tmp_path / "arm")) is None
    assert read_cpu_flags(str(tmp_path / "missing")) is None


def test_from_process_reads_the_env_switch_without_tensorflow():
    on = RuntimeContext.from_process({})
    off = RuntimeContext.from_process({"TF_ENABLE_ONEDNN_OPTS": "0"})
    assert off.onednn_half()[0] is False and off.getenv("TF_ENABLE_ONEDNN_OPTS") == "0"
    if on.cpu_flags is not None:
        assert on.onednn_half() == onednn_takes_half(on.cpu_flags, None)


ONEDNN = RuntimeContext(device="cpu", tf_version="test", cpu_flags=tuple(sorted(SAPPHIRE_RAPIDS)))
EIGEN = RuntimeContext(device="cpu", tf_version="test", cpu_flags=tuple(sorted(EPYC_GENOA)))
UNKNOWN = RuntimeContext(device="cpu", tf_version="test")  # told "cpu", no CPU facts


def _one(ctx, op="Conv2D", env=None):
    (f,) = audit(conv_graph(op=op), ctx.with_overrides(env=env or {})).findings
    return f


@pytest.mark.parametrize("op", ["Conv2D", "DepthwiseConv2dNative"])
def test_onednn_cpu_half_convs_are_fp32_and_the_switch_is_ignored(op):
    f = _one(ONEDNN, op, {"TF_CONV2D_USE_FP16_ACCUMULATE": "1"})
    assert f.accumulation == "fp32" and f.audit_class == "fp16-storage"
    for part in (
        f"_MklNative{op}",
        "avx512bw+avx512_fp16",
        "TF_ENABLE_ONEDNN_OPTS=0",
        "TF_CONV2D_USE_FP16_ACCUMULATE ignored",
    ):
        assert part in f.accumulation_reason
    r = audit(conv_graph(), ONEDNN.with_overrides(env={"TF_CONV2D_USE_FP16_ACCUMULATE": "1"}))
    sw = {s.name: s.effect for s in r.switches}
    assert sw["TF_CONV2D_USE_FP16_ACCUMULATE"].startswith("ignored: oneDNN takes T=half")
    assert sw["TF_ENABLE_ONEDNN_OPTS"].startswith("CPU: oneDNN takes T=half convs")


def test_eigen_cpu_keeps_the_eigen_rules():
    assert _one(EIGEN, "Conv2D", {"TF_CONV2D_USE_FP16_ACCUMULATE": "1"}).accumulation == "fp16"
    assert _one(EIGEN, "Conv2D").accumulation == "fp32"
    assert _one(EIGEN, "DepthwiseConv2dNative").accumulation == "fp16"
    # TF_ENABLE_ONEDNN_OPTS=0 on the oneDNN CPU is the way back to the Eigen kernels.
    back = _one(ONEDNN, "DepthwiseConv2dNative", {"TF_ENABLE_ONEDNN_OPTS": "0"})
    assert back.accumulation == "fp16" and "(Eigen)" in back.accumulation_reason
    # FusedPadConv2D is not among the ops the oneDNN pass rewrites: its rule is the Eigen one.
    assert _one(ONEDNN, "FusedPadConv2D").accumulation == "unknown"


def test_unknown_cpu_says_so_rather_than_guess():
    # Conv2D with the switch unset is fp32 with either kernel; the others depend on the kernel.
    assert _one(UNKNOWN, "Conv2D").accumulation == "fp32"
    for f in (
        _one(UNKNOWN, "Conv2D", {"TF_CONV2D_USE_FP16_ACCUMULATE": "1"}),
        _one(UNKNOWN, "DepthwiseConv2dNative"),
    ):
        assert f.accumulation == "unknown", f.accumulation_reason
        assert "fp32 if oneDNN takes T=half" in f.accumulation_reason
        assert "not determined: CPU flags unknown" in f.accumulation_reason
    r = audit(conv_graph(), UNKNOWN)
    assert (
        "not determined" in {s.name: s.effect for s in r.switches}["TF_CONV2D_USE_FP16_ACCUMULATE"]
    )
    assert "oneDNN takes T=half CPU convs: unknown (CPU flags unknown" in render_terminal(r)
    assert "oneDNN takes T=half CPU convs: unknown" in render_markdown(r)
    assert r.to_dict()["context"]["cpu_onednn_fp16"] is None


def test_override_on_the_command_line_and_every_report_format(tmp_path, capsys):
    pb = tmp_path / "g.pb"
    pb.write_bytes(conv_graph(op="DepthwiseConv2dNative").SerializeToString())
    assert main([str(pb), "--device", "cpu", "--cpu-onednn-fp16", "yes", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["schema_version"] == SCHEMA_VERSION == "2.0"
    assert d["context"]["cpu_onednn_fp16"] is True
    assert d["context"]["cpu_onednn_fp16_reason"] == "--cpu-onednn-fp16 yes"
    assert "cpu_onednn_fp16=yes" in d["context"]["origin"]
    assert d["findings"][0]["accumulation"] == "fp32"
    assert main([str(pb), "--device", "cpu", "--cpu-onednn-fp16", "no"]) == 0
    table = capsys.readouterr().out
    assert "oneDNN takes T=half CPU convs: no (--cpu-onednn-fp16 no)" in table
    assert (
        main(
            [
                str(pb),
                "--cpu-onednn-fp16",
                "no",
                "--format",
                "markdown",
                "--logdir",
                str(tmp_path / "tb"),
            ]
        )
        == 0
    )
    md = capsys.readouterr().out
    assert "oneDNN takes T=half CPU convs: no (--cpu-onednn-fp16 no)" in md
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util import tensor_util

    texts = [
        tensor_util.make_ndarray(v.tensor).item().decode()
        for path in (tmp_path / "tb" / "audit").glob("events.out.tfevents.*")
        for ev in EventFileLoader(str(path)).Load()
        for v in ev.summary.value
        if v.tag == "audit/report"
    ]
    assert texts and "oneDNN takes T=half CPU convs: no (--cpu-onednn-fp16 no)" in texts[0]
    with pytest.raises(SystemExit):
        main([str(pb), "--cpu-onednn-fp16", "maybe"])
    assert "invalid choice: 'maybe'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="--cpu-onednn-fp16 must be 'yes' or 'no', got 'maybe'"):
        UNKNOWN.with_overrides(cpu_onednn_fp16="maybe")


def test_context_line_names_gpu_facts_only_for_a_gpu():
    """A CPU audit printed the process's cuDNN build version (cudnn=9) and an unknown compute
    capability; an explicit context without a TensorFlow version printed "TF  [explicit]"."""
    ctx = dict(compute_capability="8.0", cudnn_version="9.3.0")
    cpu_line = render_terminal(audit(conv_graph(), RuntimeContext(device="cpu"))).splitlines()[1]
    assert cpu_line == "context: device=cpu amp=False TF ? [explicit]", cpu_line
    gpu_line = render_terminal(
        audit(conv_graph(), RuntimeContext(device="gpu", tf_version="2.21.0").with_overrides(**ctx))
    ).splitlines()[1]
    assert "compute_capability=8.0 cudnn=9.3.0 TF 2.21.0" in gpu_line, gpu_line
