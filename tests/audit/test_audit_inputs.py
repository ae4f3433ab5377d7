"""Audit inputs and graph walking: formats, malformed files, nested functions, CLI and gates."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format
from tensorflow.core.framework import function_pb2, graph_pb2, types_pb2
from tensorflow.core.protobuf import saved_model_pb2

from support.audit_helpers import CPU, add_node, conv_graph
from tf_fp16ops.audit import SCHEMA_VERSION, AuditInputError, RuntimeContext, audit, gates
from tf_fp16ops.audit.cli import main

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
X = tf.TensorSpec([1, 8, 8, 8], tf.float16)
W = tf.TensorSpec([3, 3, 8, 8], tf.float16)


def _conv(x, w):
    return tf.nn.conv2d(x, w, 1, "SAME")


def test_if_while_case_branches_are_walked():
    @tf.function(input_signature=[X, W, tf.TensorSpec([], tf.bool), tf.TensorSpec([], tf.int32)])
    def f(x, w, p, k):
        a = tf.cond(p, lambda: _conv(x, w), lambda: _conv(x, w) * 2)
        b = tf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, _conv(y, w)), [0, x])[1]
        c = tf.switch_case(k, [lambda: _conv(x, w), lambda: x, lambda: _conv(x, w) + 1])
        return a + b + c

    r = audit(f, CPU)
    # The report names the function (it said the class path of TensorFlow's Function type).
    assert r.source == "tf.function 'f'", r.source
    assert audit(f.get_concrete_function(), CPU).source.startswith("ConcreteFunction __inference_f")
    paths = sorted(f.function_path[-1].split("_")[0] if f.function_path else "" for f in r.findings)
    assert r.summary.call_sites == 5  # two If branches, one While body, two Case branches
    assert all(f.function_path for f in r.findings)
    ops = {f.call_nodes[-1] for f in r.findings}
    assert len(ops) == 3, ops
    assert all(f.T == "half" and f.data.crossed for f in r.findings), paths


def _fn_with_placeholder_T(name="conv_T"):
    f = function_pb2.FunctionDef()
    f.signature.name = name
    a = f.signature.attr.add()
    a.name, a.type = "T", "type"
    for arg in ("x", "w"):
        ia = f.signature.input_arg.add()
        ia.name, ia.type_attr = arg, "T"
    oa = f.signature.output_arg.add()
    oa.name, oa.type_attr = "y", "T"
    add_node(f.node_def, "c", "Conv2D", ["x", "w"], T="T", strides=[1, 1, 1, 1], padding=b"VALID")
    f.ret["y"] = "c:output:0"
    return f


def test_attr_placeholders_resolved_per_call_site_and_direct_calls():
    gd = graph_pb2.GraphDef()
    gd.library.function.add().CopyFrom(_fn_with_placeholder_T())
    for dt in ("DT_HALF", "DT_FLOAT"):
        add_node(gd.node, f"x_{dt}", "Placeholder", dtype=dt)
        call = add_node(gd.node, f"call_{dt}", "PartitionedCall", [f"x_{dt}", f"x_{dt}"])
        call.attr["f"].func.name = "conv_T"
        call.attr["f"].func.attr["T"].type = getattr(types_pb2, dt)
    direct = add_node(gd.node, "direct", "conv_T", ["x_DT_HALF", "x_DT_HALF"])
    direct.attr["T"].type = types_pb2.DT_HALF
    r = audit(gd, CPU)
    got = sorted((f.call_nodes[0], f.T, f.data.source_node) for f in r.findings)
    assert got == [
        ("call_DT_FLOAT", "float", "x_DT_FLOAT"),
        ("call_DT_HALF", "half", "x_DT_HALF"),
        ("direct", "half", "x_DT_HALF"),
    ]
    assert r.summary.conv_nodes == 1 and r.summary.call_sites == 3


def test_recursion_is_cut_and_reported():
    gd = graph_pb2.GraphDef()
    f = _fn_with_placeholder_T("rec")
    rec = add_node(f.node_def, "again", "PartitionedCall", ["x", "w"])
    rec.attr["f"].func.name = "rec"
    rec.attr["f"].func.attr["T"].placeholder = "T"
    gd.library.function.add().CopyFrom(f)
    add_node(gd.node, "x", "Placeholder", dtype="DT_HALF")
    call = add_node(gd.node, "call", "StatefulPartitionedCall", ["x", "x"])
    call.attr["f"].func.name = "rec"
    call.attr["f"].func.attr["T"].type = types_pb2.DT_HALF
    r = audit(gd, CPU)
    assert r.summary.call_sites == 1 and r.findings[0].T == "half"
    assert any("recursive" in n and "rec" in n for n in r.notes)


def test_multiple_meta_graphs_and_pbtxt(tmp_path):
    sm = saved_model_pb2.SavedModel()
    for tags, dt in (("serve", "DT_HALF"), ("train", "DT_FLOAT")):
        mg = sm.meta_graphs.add()
        mg.meta_info_def.tags.append(tags)
        mg.graph_def.CopyFrom(conv_graph(T=dt))
    d = tmp_path / "two_mg"
    d.mkdir()
    (d / "saved_model.pbtxt").write_text(text_format.MessageToString(sm))
    r = audit(str(d), CPU)
    assert sorted((f.unit, f.T) for f in r.findings) == [
        ("meta_graph[0] tags=serve", "half"),
        ("meta_graph[1] tags=train", "float"),
    ]
    (tmp_path / "g.pbtxt").write_text(text_format.MessageToString(conv_graph()))
    assert audit(str(tmp_path / "g.pbtxt"), CPU).findings[0].T == "half"


def test_graph_def_binary_and_frozen_shapes(tmp_path):
    p = tmp_path / "g.pb"
    p.write_bytes(conv_graph().SerializeToString())
    (f,) = audit(str(p), CPU).findings
    # x [1,8,8,16], w [3,3,16,16] VALID -> [1,6,6,16]: 2 * 6*6*16 * 3*3*16 FLOPs.
    assert f.output_shape == (1, 6, 6, 16) and f.flops == 2 * 6 * 6 * 16 * 3 * 3 * 16
    assert f.flops_note == "for the graph's batch size"


def test_a_graph_def_without_shapes_says_how_to_record_them(tmp_path):
    # as_graph_def() without add_shapes=True: no _output_shapes, placeholders without shapes.
    gd = graph_pb2.GraphDef()
    add_node(gd.node, "x", "Placeholder", dtype="DT_FLOAT")
    add_node(gd.node, "w", "Placeholder", dtype="DT_FLOAT")
    add_node(
        gd.node, "c", "Conv2D", ["x", "w"], T="DT_FLOAT", strides=[1, 1, 1, 1], padding=b"SAME"
    )
    p = tmp_path / "noshapes.pb"
    p.write_bytes(gd.SerializeToString())
    r = audit(str(p), CPU)
    assert [f.flops for f in r.findings] == [None]
    assert any("as_graph_def(add_shapes=True)" in n for n in r.notes), r.notes
    # With shapes the note is not given.
    p.write_bytes(conv_graph().SerializeToString())
    assert not any("add_shapes" in n for n in audit(str(p), CPU).notes)


@pytest.mark.parametrize(
    "name,content,needle",
    [
        ("missing.pb", None, "no such file"),
        ("trunc.pb", "TRUNC", "truncated or malformed"),
        ("junk.pb", b"\xff\xfe\x00garbage\x13", "GraphDef"),
        ("empty.pb", b"", "GraphDef"),
        ("bad.pbtxt", b"node { name: 'x' op: ", "not a valid text GraphDef"),
        ("bad.keras", b"not a zip", "not a valid .keras (zip) archive"),
        ("dir_without_model", "DIR", "not a SavedModel"),
    ],
)
def test_bad_inputs_raise_clear_errors(tmp_path, name, content, needle):
    p = tmp_path / name
    if content == "TRUNC":
        p.write_bytes(conv_graph().SerializeToString()[:-7])
    elif content == "DIR":
        p.mkdir()
    elif content is not None:
        p.write_bytes(content)
    with pytest.raises(AuditInputError) as e:
        audit(str(p), CPU)
    assert needle in str(e.value) and str(p) in str(e.value)


def test_truncated_saved_model(tmp_path):
    d = tmp_path / "sm"
    d.mkdir()
    sm = saved_model_pb2.SavedModel()
    sm.meta_graphs.add().graph_def.CopyFrom(conv_graph())
    (d / "saved_model.pb").write_bytes(sm.SerializeToString()[:40])
    with pytest.raises(AuditInputError, match="truncated or malformed|no MetaGraph"):
        audit(str(d), CPU)


def test_cli_formats_output_and_gates(tmp_path, capsys):
    p = tmp_path / "g.pb"
    p.write_bytes(conv_graph().SerializeToString())
    out = tmp_path / "r.json"
    assert main([str(p), "--device", "cpu", "--format", "json", "--output", str(out)]) == 0
    d = json.loads(out.read_text())
    assert (
        d["schema_version"] == SCHEMA_VERSION and d["findings"][0]["audit_class"] == "fp16-storage"
    )
    assert main([str(p), "--device", "cpu", "--format", "markdown"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("# fp16 convolution and matmul audit") and "| fp16-storage | 1 |" in md
    # fp16 share is 1.0 (T=half) but nothing accumulates in fp16 on CPU by default.
    assert main([str(p), "--device", "cpu", "--fail-under", "1.0"]) == 0
    capsys.readouterr()
    assert main([str(p), "--device", "cpu", "--require", "fp16-accumulate"]) == 1
    # A failed gate names the call sites outside the required class.
    err = capsys.readouterr().err
    assert "gate failed: fp16-accumulate share by flops = 0.0000, required >= 1.0000" in err
    assert "; not fp16-accumulate: conv (fp16-storage)" in err, err
    # The switch selects fp16 on TensorFlow's Eigen kernel (a CPU where oneDNN does not take half).
    assert (
        main(
            [
                str(p),
                "--device",
                "cpu",
                "--cpu-onednn-fp16",
                "no",
                "--env",
                "TF_CONV2D_USE_FP16_ACCUMULATE=1",
                "--require",
                "fp16-accumulate",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                str(p),
                "--device",
                "gpu",
                "--env",
                "TF_FP16_CONV_USE_FP32_COMPUTE=false",
                "--require",
                "fp16-accumulate",
            ]
        )
        == 1
    )
    assert main([str(p), "--env", "NOEQUALS"]) == 2
    assert main([str(p), "--compute-capability", "eight"]) == 2
    err = capsys.readouterr().err
    assert "--env expects NAME=VALUE, got 'NOEQUALS'" in err and "'eight'" in err


def test_cli_bad_path_among_several_is_one_error_and_the_rest_are_audited(tmp_path, capsys):
    good = tmp_path / "g.pb"
    good.write_bytes(conv_graph().SerializeToString())
    trunc = tmp_path / "trunc.pb"
    trunc.write_bytes(conv_graph().SerializeToString()[:-7])
    missing = tmp_path / "nope.pb"
    paths = [str(good), str(missing), str(trunc), str(good)]
    assert main([*paths, "--device", "cpu", "--format", "json"]) == 2
    cap = capsys.readouterr()
    reports = json.loads(cap.out)
    assert [r["source"] for r in reports] == [str(good), str(good)]
    errors = cap.err.splitlines()
    assert len(errors) == 2 and all(e.startswith("tf-fp16-audit: error: ") for e in errors)
    assert str(missing) in errors[0] and str(trunc) in errors[1]
    # every path bad: no report at all, status 2
    assert main([str(missing), "--format", "json"]) == 2
    assert capsys.readouterr().out == ""
    # a failed gate is status 1, a bad path 2 (the worse wins)
    assert main([str(good), "--device", "cpu", "--require", "fp16-accumulate"]) == 1
    assert main([str(good), str(missing), "--device", "cpu", "--require", "fp16-accumulate"]) == 2
    assert "gate failed" in capsys.readouterr().err


def _exit_status(fn, argv) -> int:
    """What the CLI `fn` returns for `argv`, or the status argparse exits with."""
    try:
        return fn(argv)
    except SystemExit as e:
        return e.code


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--format", "yaml"], "argument --format: invalid choice: 'yaml'"),
        (["--max-rows", "-3"], "--max-rows"),
        (["--fail-under", "2"], "--fail-under must be a fraction in [0, 1], got 2.0"),
        (["--fail-on", "bogus"], "bogus"),
        (["--input-shape", "1,2"], "error: --input-shape needs --run\n"),
        (["--probe-switch", "X=1"], "error: --probe-switch needs --run\n"),
        (
            ["--probe-switch", "X=1", "--input-shape", "1,2"],
            "error: --input-shape and --probe-switch need --run\n",
        ),
    ],
)
def test_cli_flag_errors_are_one_line(tmp_path, capsys, args, needle):
    """argparse printed its 14-line usage block before the error line."""
    assert _exit_status(main, [str(tmp_path / "m.pb"), *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tf-fp16-audit: error: "), err
    assert needle in err, err


def test_cli_subprocess_errors_have_no_traceback(tmp_path):
    bad = tmp_path / "trunc.pb"
    bad.write_bytes(conv_graph().SerializeToString()[:-7])
    env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="3")
    for args in ([str(bad)], [str(tmp_path / "nope")]):
        p = subprocess.run(
            [sys.executable, "-m", "tf_fp16ops.audit", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert p.returncode == 2
        assert "Traceback" not in p.stderr and "tf-fp16-audit: error:" in p.stderr
    h = subprocess.run(
        [sys.executable, "-m", "tf_fp16ops.audit", "--help"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert (
        h.returncode == 0
        and "TF_FP16_CONV_USE_FP32_COMPUTE" in h.stdout
        and "--fail-under" in h.stdout
    )


def test_demo_example_is_generated_once_and_audited(tmp_path):
    from tf_fp16ops.audit import demo_example

    path = demo_example(str(tmp_path / "demo"))
    mtime = os.path.getmtime(os.path.join(path, "saved_model.pb"))
    assert (
        demo_example(path) == path
        and os.path.getmtime(os.path.join(path, "saved_model.pb")) == mtime
    )
    r = audit(path, CPU)
    by_sig = {f.signatures[0]: f.audit_class for f in r.findings}
    assert by_sig == {
        "conv16": "fp16-storage",
        "conv32": "fp32",
        "conv16_32": "fake-fp16",
        "ours_half": "fp16-accumulate",
        "ours_float": "fp16-storage",
    }


def test_a_failed_share_gate_never_prints_as_its_threshold():
    # 0.99998 (a float32 head of 160 FLOPs among fp16 convs) fails ">= 1": shown with the
    # decimals that tell it apart, where 4 would print "1.0000".
    assert gates._fraction(0.99998, 1.0) == "0.99998"
    assert gates._fraction(0.5, 1.0) == "0.5000"
    assert gates._fraction(1.0, 1.0) == "1.0000"
    assert gates._fraction(0.12345678, 0.1234568) == "0.12345678"


def test_an_unknown_signature_lists_the_signatures_only(tmp_path, capsys):
    # A tf.Module with a variable saves its initializer under "__saved_model_init_op" in the
    # SignatureDef map: not a signature anyone can ask for.
    module = tf.Module()
    module.w = tf.Variable(tf.ones([3, 3, 2, 2]))
    module.conv = tf.function(
        lambda x: tf.nn.conv2d(x, module.w, 1, "SAME"),
        input_signature=[tf.TensorSpec([1, 4, 4, 2])],
    )
    path = tmp_path / "sm"
    tf.saved_model.save(module, str(path), signatures={"conv": module.conv})
    assert main([str(path), "--signature", "nope"]) == 2
    assert capsys.readouterr().err == (
        f"tf-fp16-audit: error: {path}: no signature 'nope' (has: conv)\n"
    )
    assert main([str(path), "--signature", "__saved_model_init_op"]) == 2
    assert "(has: conv)" in capsys.readouterr().err


def test_a_signature_asked_of_a_graph_def_says_only_saved_models_have_them(tmp_path, capsys):
    p = tmp_path / "g.pb"
    p.write_bytes(conv_graph().SerializeToString())
    assert main([str(p), "--signature", "serve"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"tf-fp16-audit: error: {p}: no signature 'serve' (has: none: a GraphDef holds no "
        "signatures, a SavedModel does)\n"
    )


def test_a_signature_asked_of_a_keras_file_says_only_saved_models_have_them(tmp_path, capsys):
    import keras

    p = tmp_path / "m.keras"
    keras.Sequential([keras.Input((6, 6, 2)), keras.layers.Conv2D(3, 3)]).save(p)
    assert main([str(p), "--signature", "serve"]) == 2
    assert capsys.readouterr().err.endswith(
        "no signature 'serve' (has: none: a .keras file holds no signatures, a SavedModel does)\n"
    )


EVIL = "evil\x1b[31mRED\x1b[0m\nFAKE LINE\r\x07name"


def _conv_graph_file(tmp_path, conv_name=None, unknown_op=None):
    """conv_graph() written to a .pb, its conv node renamed `conv_name` and/or an op of type
    `unknown_op` added."""
    gd = conv_graph()
    if conv_name is not None:
        (conv,) = [n for n in gd.node if n.op == "Conv2D"]
        conv.name = conv_name
    if unknown_op is not None:
        add_node(gd.node, "u", unknown_op, ["x"])
    p = tmp_path / "g.pb"
    p.write_bytes(gd.SerializeToString())
    return p


def _parse_markdown(markdown: str):
    """markdown-it-py's tokens (CommonMark with GFM tables and strikethrough: an independent
    parser of the audit's Markdown)."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable(["table", "strikethrough"]).parse(markdown)


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_control_characters_in_node_names_are_escaped(tmp_path, capsys, fmt):
    # A node name carrying an escape sequence, a newline, a carriage return and a bell could
    # forge rows and drive the terminal; it is written with backslash escapes instead.
    p = _conv_graph_file(tmp_path, conv_name=EVIL)
    assert main([str(p), "--format", fmt]) == 0
    out = capsys.readouterr().out
    assert not any(c in out for c in "\x1b\r\x07") and "\nFAKE LINE" not in out
    assert "evil\\x1b[31mRED\\x1b[0m\\nFAKE LINE\\r\\x07name" in out
    # JSON keeps the name as it is (json escapes it).
    assert main([str(p), "--format", "json"]) == 0
    assert [f["node"] for f in json.loads(capsys.readouterr().out)["findings"]] == [EVIL]


def _markdown_cells(markdown: str) -> list[list[tuple[str, set[str]]]]:
    """The body rows of every table in `markdown` as parsed by markdown-it-py (CommonMark with
    GFM tables and strikethrough, an independent parser): per cell its text (code spans'
    content included) and the types of the other inline tokens it holds (emphasis, links,
    HTML...)."""
    tokens = _parse_markdown(markdown)
    rows, row, in_body = [], None, False
    for t in tokens:
        if t.type in ("tbody_open", "tbody_close"):
            in_body = t.type == "tbody_open"
        elif in_body and t.type == "tr_open":
            row = []
            rows.append(row)
        elif in_body and t.type == "inline" and row is not None:
            kids = t.children or []
            text = "".join(k.content for k in kids if k.type in ("text", "code_inline"))
            row.append((text, {k.type for k in kids} - {"text", "code_inline"}))
    return rows


@pytest.mark.parametrize(
    "name",
    [
        "a|b*c*_d_[e](http://x)<i>f</i>~~g~~&amp;",  # a code span: only "|" needs escaping
        "a\\|b`c`*d*[e](http://x)<i>~~g~~&amp;\\",  # backslash and backtick: escaped text
    ],
)
def test_markdown_shows_a_node_name_as_it_is(tmp_path, capsys, name):
    # A name can neither split the row, nor format the report (emphasis, links, HTML).
    p = _conv_graph_file(tmp_path, conv_name=name)
    assert main([str(p), "--format", "markdown"]) == 0
    tables = _markdown_cells(capsys.readouterr().out)
    (row,) = [r for r in tables if len(r) == 9 and r[3][0] == "Conv2D"]
    assert row[2] == (name, set()), row
    assert all(markup == set() for _, markup in row), row


@pytest.mark.parametrize(
    "op",
    [
        "# Heading\\",
        "> quote\\",
        "    code\\",
        "1. one\\",
        "- item\\",
        "+ x",
        "=== x",
        " both ",
        "a|b",
    ],
)
def test_markdown_lists_show_an_unknown_op_type_as_it_is(tmp_path, capsys, op):
    # An op type starts a list item of "Unknown ops": it must not open a heading, quote, code
    # block or list, and a name with spaces at both ends keeps them.
    p = _conv_graph_file(tmp_path, unknown_op=op)
    assert main([str(p), "--format", "markdown"]) == 0
    tokens = _parse_markdown(capsys.readouterr().out)
    kinds = {t.type for t in tokens}
    assert not kinds & {"blockquote_open", "code_block", "fence", "hr"}, kinds
    # the report's own lists only: the accumulation reasons (ordered), the unknown ops
    assert [t.type for t in tokens if t.type.endswith("list_open")] == [
        "ordered_list_open",
        "bullet_list_open",
    ]
    assert [t.tag for t in tokens if t.type == "heading_open"] == ["h1"] + ["h2"] * 3
    (item,) = [
        t
        for i, t in enumerate(tokens)
        if t.type == "inline" and tokens[i - 2].type == "list_item_open" and "×1" in t.content
    ]
    text = "".join(k.content for k in item.children if k.type in ("text", "code_inline"))
    assert text.startswith(op + " ×1: "), text


def test_control_characters_in_an_error_line_are_escaped(tmp_path, capsys):
    gd = graph_pb2.GraphDef()
    gd.node.add().name = EVIL  # no op: a malformed GraphDef naming the node
    p = tmp_path / "evil.pb"
    p.write_bytes(gd.SerializeToString())
    assert main([str(p)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and not any(c in err for c in "\x1b\r\x07"), err
    assert "evil\\x1b[31mRED" in err


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        (dict(device="tpu"), ValueError, "device must be 'cpu' or 'gpu', got 'tpu'"),
        (
            dict(compute_capability=(8,)),
            ValueError,
            "compute_capability must be (major, minor), two ints in 0..99, got (8,)",
        ),
        (dict(compute_capability="8.0"), ValueError, "got '8.0'"),
        (dict(cudnn_version=(9, -1)), ValueError, "cudnn_version must be a tuple of ints"),
        (
            dict(env={"TF_FP16_CONV_USE_FP32_COMPUTE": 0}),
            TypeError,
            "env must map names to strings (environment values), got "
            "'TF_FP16_CONV_USE_FP32_COMPUTE': 0",
        ),
        (dict(cpu_onednn_fp16="false"), TypeError, "cpu_onednn_fp16 must be None or a bool"),
        (dict(amp="no"), TypeError, "amp must be a bool, got 'no'"),
        (dict(tf_version=2), TypeError, "tf_version must be a string, got 2"),
        (dict(cpu_flags="avx2 fma"), TypeError, "cpu_flags must be None or a tuple of flag names"),
        (dict(env={1: "a", "b": "c"}), TypeError, "env must map names to strings"),
    ],
)
def test_runtime_context_checks_what_it_is_given(kwargs, error, words):
    with pytest.raises(error) as e:
        RuntimeContext(**kwargs)
    assert words in str(e.value)


def test_runtime_context_takes_a_mapping_and_any_case_of_the_device():
    # device="GPU" was audited as a CPU without a word.
    ctx = RuntimeContext(
        device="GPU", compute_capability=[np.int64(8), 0], env={"B": "1", "A": "0"}
    )
    assert (ctx.device, ctx.compute_capability, ctx.env) == (
        "gpu",
        (8, 0),
        (("A", "0"), ("B", "1")),
    )
    (f,) = audit(conv_graph(), ctx).findings
    assert f.accumulation_reason.startswith("GPU (cuDNN) T=half: fp32 compute")


def test_a_path_with_a_nul_character_is_an_input_error():
    with pytest.raises(AuditInputError, match=r"^a\\x00b: a path cannot hold a NUL character$"):
        audit("a\x00b")


def test_markdown_summary_tables_keep_their_lines(tmp_path, capsys):
    # The escaping of control characters once turned the summary's own line breaks into "\n".
    p = tmp_path / "g.pb"
    p.write_bytes(conv_graph().SerializeToString())
    assert main([str(p), "--format", "markdown"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "| class | call sites | FLOPs | share of FLOPs |" in lines
    assert not any("\\n" in line for line in lines)


def test_a_path_with_control_characters_is_escaped_in_gate_lines(tmp_path, capsys):
    p = tmp_path / "p\x1b[31mRED\nfake.pb"
    p.write_bytes(conv_graph().SerializeToString())
    assert main([str(p), "--require", "fp16-accumulate"]) == 1
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\nfake.pb" not in err and "p\\x1b[31mRED\\nfake.pb" in err
