"""Findings as data: each flag is a code with a severity and fields (tf_fp16ops/audit/codes.py),
renderers produce the words, JSON schema 2.0 writes the objects, and `--fail-on` gates on codes.

Expected fields come from the graphs built here (channel counts, dtypes chosen by hand)."""

from __future__ import annotations

import json
import re

import pytest

from support.audit_helpers import CPU, add_node, conv_graph, gpu
from tf_fp16ops.audit import audit, codes
from tf_fp16ops.audit.cli import main
from tf_fp16ops.audit.findings import SCHEMA_VERSION
from tf_fp16ops.audit.render.jsonfmt import render_json
from tf_fp16ops.audit.render.markdown import render_markdown
from tf_fp16ops.audit.render.terminal import render_terminal


def _fake_fp16_graph():
    """x (half) -> Cast float -> Conv2D T=float with a 3-channel filter: fake-fp16 and a
    tensor-core-unfriendly input side (T=float convs are not checked for tensor cores)."""
    gd = conv_graph(T="DT_FLOAT")
    x = gd.node[0]
    x.attr["dtype"].type = 19  # DT_HALF
    c = add_node(gd.node, "x/Cast", "Cast", ["x"], SrcT="DT_HALF", DstT="DT_FLOAT")
    del c
    gd.node[2].input[0] = "x/Cast"
    return gd


def test_documented_table_lists_every_code():
    rows = re.findall(r"^\| ([a-z0-9-]+) \| (error|warning|info) \|", codes.__doc__, re.M)
    assert {c: s for c, s in rows} == {c: s for c, (s, _) in codes.CODES.items()}


def test_flags_are_codes_with_fields():
    (f,) = audit(_fake_fp16_graph(), CPU).findings
    fake = [fl for fl in f.flags if fl.code == "fake-fp16"]
    assert [(fl.severity, fl.get("side"), fl.get("how")) for fl in fake] == [
        ("warning", "input", "computed-in-fp32")
    ]
    assert fake[0].message == "fake-fp16-input(fp16 values computed in fp32)"
    gd = conv_graph()
    gd.node[0].attr["shape"].shape.dim[3].size = 3  # x [1, 8, 8, 3]
    w = gd.node[1].attr["value"].tensor.tensor_shape
    w.dim[2].size, w.dim[3].size = 3, 60
    (f,) = audit(gd, CPU).findings
    (tc,) = [fl for fl in f.flags if fl.code == "tensor-core-unfriendly"]
    assert tc.fields == (("input_channels", 3), ("output_channels", 60)) and tc.severity == "info"
    assert tc.message == (
        "tensor-core-unfriendly(input channels 3 and output channels 60 not multiples of 8)"
    )
    assert f.codes == tuple(fl.code for fl in f.flags)


def test_json_schema_2_writes_flag_objects():
    r = audit(_fake_fp16_graph(), gpu(compute_capability="8.0"))
    d = json.loads(render_json(r))
    assert d["schema_version"] == SCHEMA_VERSION == "2.0"
    flags = d["findings"][0]["flags"]
    assert {"code": "tf32", "severity": "info", "fields": {}, "message": "tf32"} in flags
    (fake,) = [x for x in flags if x["code"] == "fake-fp16"]
    assert fake["fields"] == {"side": "input", "how": "computed-in-fp32"}
    # renderers produce the words
    for text in (render_terminal(r), render_markdown(r)):
        assert "fake-fp16-input(fp16 values computed in fp32)" in text and "tf32" in text


def test_json_finding_has_every_field_in_declaration_order():
    # to_dict() lists the fields by hand (speed); a field added to ConvFinding must reach the JSON
    import dataclasses

    from tf_fp16ops.audit.findings import ConvFinding

    (f,) = audit(_fake_fp16_graph(), CPU).findings
    d = json.loads(render_json(audit(_fake_fp16_graph(), CPU)))["findings"][0]
    assert list(d) == [x.name for x in dataclasses.fields(ConvFinding)]
    assert d["filter_shape"] == list(f.filter_shape) and d["data"] == f.data.to_dict()


def test_invalid_attrs_fields_list_each_attr():
    gd = conv_graph()
    gd.node[2].attr["strides"].list.i[1] = -5
    (f,) = audit(gd, CPU).findings
    (inv,) = [fl for fl in f.flags if fl.code == "invalid-attrs"]
    assert inv.severity == "error" and inv.get("attrs") == ("strides=[1, -5, 1, 1]",)


def test_fail_on_gate(tmp_path, capsys):
    pb = tmp_path / "g.pb"
    pb.write_bytes(_fake_fp16_graph().SerializeToString())
    clean = tmp_path / "c.pb"
    clean.write_bytes(conv_graph().SerializeToString())
    args = ["--device", "cpu", "--format", "json"]
    assert main([str(pb), *args, "--fail-on", "fake-fp16"]) == 1
    err = capsys.readouterr().err
    assert "gate failed: --fail-on codes found: fake-fp16 (1 call site)" in err
    assert main([str(pb), *args, "--fail-on", "size-overflow,invalid-attrs"]) == 0
    assert "gate passed: no call site has size-overflow, invalid-attrs" in capsys.readouterr().err
    assert main([str(clean), *args, "--fail-on", "fake-fp16", "--fail-on", "tf32"]) == 0
    capsys.readouterr()
    # next to the share gate: either failing fails the run
    assert main([str(clean), *args, "--fail-on", "fake-fp16", "--require", "fp16-accumulate"]) == 1
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main([str(pb), "--fail-on", "fake16"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "unknown code 'fake16'" in err and "fake-fp16" in err
    for value in (",", "fake-fp16,", "fake-fp16,,tf32", ""):
        with pytest.raises(SystemExit):
            main([str(pb), "--fail-on", value])
        assert f"--fail-on expects CODE[,CODE...], got {value!r}" in capsys.readouterr().err
    assert main([str(clean), *args, "--fail-on", " fake-fp16 , tf32"]) == 0  # spaces are fine


def test_unknown_code_is_a_key_error():
    with pytest.raises(KeyError):
        codes.flag("no-such-code")


def test_help_names_every_code():
    from tf_fp16ops.audit.cli import EPILOG

    assert all(c in EPILOG for c in codes.CODES)


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"context": "cpu"}, "context must be a RuntimeContext or None, got str 'cpu'"),
        ({"limits": 5}, "limits must be a Limits, got int 5"),
        ({"signature": 3}, "signature must be a str or None, got int 3"),
        ({"build_keras_model": "yes"}, "build_keras_model must be a bool, got str 'yes'"),
    ],
)
def test_audit_arguments_of_the_wrong_type_are_type_errors(kwargs, needle):
    with pytest.raises(TypeError, match=re.escape(needle)):
        audit(_fake_fp16_graph(), **kwargs)
