"""FLOPs inside control flow and the tensor-core flag, on hand-built graphs.

Expected FLOPs are 2 * |Y| * R by hand: x [1,8,8,16], w [3,3,16,16], VALID -> y [1,6,6,16],
R = 3*3*16, so 2 * 576 * 144 = 165888 per execution of the conv.
"""

from __future__ import annotations

import json

import pytest

from support.audit_helpers import CPU, add_node
from tf_fp16ops.audit import audit, protos

CONV_FLOPS = 2 * (6 * 6 * 16) * (3 * 3 * 16)


def _conv_nodes(nodes, x: str, shape=(1, 8, 8, 16), filt=(3, 3, 16, 16), T="DT_HALF"):
    w = add_node(nodes, "w", "Const", dtype=T)
    w.attr["value"].tensor.dtype = protos.DataType.Value(T)
    for d in filt:
        w.attr["value"].tensor.tensor_shape.dim.add().size = d
    c = add_node(
        nodes,
        "conv",
        "Conv2D",
        [x, "w" if x == "x" else "w:output:0"],
        T=T,
        strides=[1, 1, 1, 1],
        padding=b"VALID",
    )
    out = c.attr["_output_shapes"].list.shape.add()
    for d in (shape[0], shape[1] - filt[0] + 1, shape[2] - filt[1] + 1, filt[3]):
        out.dim.add().size = d
    return c


def _function(gd, name: str, with_conv: bool):
    f = gd.library.function.add()
    f.signature.name = name
    a = f.signature.input_arg.add()
    a.name, a.type = "x", protos.DT_HALF
    o = f.signature.output_arg.add()
    o.name, o.type = "y", protos.DT_HALF
    if with_conv:
        _conv_nodes(f.node_def, "x")
        f.ret["y"] = "conv:output:0"
    else:
        f.ret["y"] = "x"
    return f


def _graph(call_op: str, attrs: dict[str, str], extra_inputs=()):
    gd = protos.GraphDef()
    x = add_node(gd.node, "x", "Placeholder", dtype="DT_HALF")
    for d in (1, 8, 8, 16):
        x.attr["shape"].shape.dim.add().size = d
    for fname in sorted(set(attrs.values())):
        _function(gd, fname, with_conv=fname.startswith("conv_"))
    n = add_node(gd.node, "cf", call_op, list(extra_inputs) + ["x"])
    for attr, fname in attrs.items():
        n.attr[attr].func.name = fname
    return gd


def _write(tmp_path, gd) -> str:
    p = tmp_path / "g.pb"
    p.write_bytes(gd.SerializeToString())
    return str(p)


def test_conv_in_while_body_is_labelled_per_iteration(tmp_path):
    r = audit(_write(tmp_path, _graph("While", {"cond": "cond_fn", "body": "conv_body"})), CPU)
    (f,) = r.findings
    assert f.flops == CONV_FLOPS
    assert "per iteration of While 'cf'" in f.flops_note, f.flops_note
    assert any("1 call site(s) in loop bodies are per iteration" in n for n in r.notes), r.notes
    assert not any("If/Case" in n for n in r.notes), r.notes  # no branch here: not mentioned


def test_convs_in_both_if_branches_are_labelled_per_branch(tmp_path):
    gd = _graph(
        "StatelessIf", {"then_branch": "conv_then", "else_branch": "conv_else"}, extra_inputs=["p"]
    )
    add_node(gd.node, "p", "Placeholder", dtype="DT_BOOL")
    r = audit(_write(tmp_path, gd), CPU)
    notes = sorted(f.flops_note for f in r.findings)
    assert [f.flops for f in r.findings] == [CONV_FLOPS, CONV_FLOPS]
    assert any("per branch: else_branch of StatelessIf 'cf'" in n for n in notes), notes
    assert any("per branch: then_branch of StatelessIf 'cf'" in n for n in notes), notes
    assert r.summary.total_flops == 2 * CONV_FLOPS  # both branches added, and the note says so
    assert any("of 2 call site(s) in If/Case branches per branch" in n for n in r.notes), r.notes
    assert not any("loop bodies" in n for n in r.notes), r.notes  # none here: not mentioned


def test_conv_outside_control_flow_has_no_loop_or_branch_label(tmp_path):
    r = audit(_write(tmp_path, _graph("PartitionedCall", {"f": "conv_f"})), CPU)
    (f,) = r.findings
    assert f.flops == CONV_FLOPS and f.flops_note == "for the graph's batch size"
    assert not any("per iteration" in n or "per branch" in n for n in r.notes)


def _flags(tmp_path, cin: int, cout: int) -> list[str]:
    gd = protos.GraphDef()
    x = add_node(gd.node, "x", "Placeholder", dtype="DT_HALF")
    for d in (1, 8, 8, cin):
        x.attr["shape"].shape.dim.add().size = d
    _conv_nodes(gd.node, "x", shape=(1, 8, 8, cin), filt=(3, 3, cin, cout))
    (f,) = audit(_write(tmp_path, gd), CPU).findings
    return [fl for fl in f.flag_texts if fl.startswith("tensor-core")]


def test_tensor_core_flag_names_only_the_offending_side(tmp_path):
    assert _flags(tmp_path, 3, 64) == [
        "tensor-core-unfriendly(input channels 3 not a multiple of 8)"
    ]
    assert _flags(tmp_path, 16, 60) == [
        "tensor-core-unfriendly(output channels 60 not a multiple of 8)"
    ]
    assert _flags(tmp_path, 3, 60) == [
        "tensor-core-unfriendly(input channels 3 and output channels 60 not multiples of 8)"
    ]
    assert _flags(tmp_path, 16, 64) == []


@pytest.mark.parametrize(
    "channels,multiplier,flag",
    [
        # It said "output channels 1 not a multiple of 8; groups=2" for every depthwise conv.
        (32, 1, "tensor-core-unfriendly(depthwise: groups=32, one per input channel)"),
        (
            3,
            2,
            "tensor-core-unfriendly(input channels 3 and output channels 6 not multiples of 8; "
            "depthwise: groups=3, one per input channel)",
        ),
    ],
)
def test_depthwise_tensor_core_flag_counts_its_channels(tmp_path, channels, multiplier, flag):
    gd = protos.GraphDef()
    x = add_node(gd.node, "x", "Placeholder", dtype="DT_HALF")
    for d in (1, 8, 8, channels):
        x.attr["shape"].shape.dim.add().size = d
    c = _conv_nodes(gd.node, "x", shape=(1, 8, 8, channels), filt=(3, 3, channels, multiplier))
    c.op = "DepthwiseConv2dNative"
    (f,) = audit(_write(tmp_path, gd), CPU).findings
    assert [fl for fl in f.flag_texts if fl.startswith("tensor-core")] == [flag]


def test_case_listing_one_function_twice_gives_two_call_sites_per_branch(tmp_path):
    gd = protos.GraphDef()
    x = add_node(gd.node, "x", "Placeholder", dtype="DT_HALF")
    for d in (1, 8, 8, 16):
        x.attr["shape"].shape.dim.add().size = d
    add_node(gd.node, "i", "Placeholder", dtype="DT_INT32")
    _function(gd, "conv_b", with_conv=True)
    n = add_node(gd.node, "case", "Case", ["i", "x"])
    n.attr["branches"].list.func.add().name = "conv_b"
    n.attr["branches"].list.func.add().name = "conv_b"
    r = audit(_write(tmp_path, gd), CPU)
    assert len(r.findings) == 2
    assert all("per branch: branches of Case 'case'" in f.flops_note for f in r.findings)


# ---- impossible attrs and sizes beyond int64 ---------------------------------------------------
def _static_conv(tmp_path, shape=(1, 8, 8, 16), filt=(3, 3, 16, 16), **attrs) -> str:
    """Placeholder x `shape` and Const w `filt` (half) -> Conv2D with `attrs` (no
    _output_shapes, so the audit infers the output), built with TensorBoard's protos."""
    from tensorboard.compat.proto import graph_pb2

    gd = graph_pb2.GraphDef()
    x = add_node(gd.node, "x", "Placeholder", dtype="DT_HALF")
    for d in shape:
        x.attr["shape"].shape.dim.add().size = d
    w = add_node(gd.node, "w", "Const", dtype="DT_HALF")
    w.attr["value"].tensor.dtype = protos.DT_HALF
    for d in filt:
        w.attr["value"].tensor.tensor_shape.dim.add().size = d
    a = dict(strides=[1, 1, 1, 1], padding=b"VALID")
    a.update(attrs)
    add_node(gd.node, "conv", "Conv2D", ["x", "w"], T="DT_HALF", **a)
    return _write(tmp_path, gd)


def _check_reports(report, flag: str):
    from tf_fp16ops.audit.render.jsonfmt import render_json
    from tf_fp16ops.audit.render.markdown import render_markdown
    from tf_fp16ops.audit.render.terminal import render_terminal

    (f,) = report.findings
    assert f.flops is None
    assert f.audit_class == "fp16-storage"  # the dtype analysis decides the class
    j = json.loads(render_json(report))
    assert j["findings"][0]["flops"] is None and j["summary"]["total_flops"] == 0
    assert flag.replace("[", "\\[") in render_markdown(report)  # "[" escaped: no link
    assert flag[:12] in render_terminal(report)
    return f


def test_impossible_attrs_get_a_flag_and_unknown_flops(tmp_path):
    p = _static_conv(tmp_path, strides=[1, -5, 2**62, 1], padding=b"WEIRD", dilations=[0, 0])
    report = audit(p, CPU)
    flag = f"invalid-attrs(strides=[1, -5, {2**62}, 1]; dilations=[0, 0]; padding='WEIRD')"
    f = _check_reports(report, flag)
    assert flag in f.flag_texts and f.output_shape is None


@pytest.mark.parametrize(
    "attrs,bad",
    [
        (dict(padding=b"EXPLICIT"), "explicit_paddings=[]"),
        (
            dict(padding=b"EXPLICIT", explicit_paddings=[0, 0, 1, 1, 1, -1, 0, 0]),
            "explicit_paddings=[0, 0, 1, 1, 1, -1, 0, 0]",
        ),
        (
            dict(padding=b"EXPLICIT", explicit_paddings=[1, 0, 1, 1, 1, 1, 0, 0]),
            "explicit_paddings=[1, 0, 1, 1, 1, 1, 0, 0]",
        ),
        (dict(explicit_paddings=[0, 0, 1, 1, 1, 1, 0, 0]), "explicit_paddings=[0, 0, 1, 1,"),
        (dict(strides=[1, 2, 2]), "strides=[1, 2, 2]"),
        (dict(dilations=[1, 2**31, 1, 1]), f"dilations=[1, {2**31}, 1, 1]"),
    ],
)
def test_malformed_attr_is_named(tmp_path, attrs, bad):
    (f,) = audit(_static_conv(tmp_path, **attrs), CPU).findings
    assert f.flops is None
    assert any(fl.startswith("invalid-attrs(") and bad in fl for fl in f.flag_texts), f.flag_texts


def test_flop_shares_say_known_flops_when_some_are_unknown(tmp_path):
    """With a call site of unknown FLOPs the fp16 shares are of call sites, and the per-class
    FLOP shares are of the known FLOPs only: the label says so."""
    from tf_fp16ops.audit.render.markdown import render_markdown
    from tf_fp16ops.audit.render.terminal import render_terminal

    (tmp_path / "u").mkdir()
    (tmp_path / "k").mkdir()
    unknown = audit(_static_conv(tmp_path / "u", padding=b"WEIRD"), CPU)
    known = audit(_static_conv(tmp_path / "k"), CPU)
    assert unknown.summary.share_basis == "count" and known.summary.share_basis == "flops"
    assert "of known FLOPs" in render_terminal(unknown)
    assert "share of known FLOPs" in render_markdown(unknown)
    for text in (render_terminal(known), render_markdown(known)):
        assert "of FLOPs" in text and "known FLOPs" not in text


def test_well_formed_explicit_padding_has_no_flag(tmp_path):
    # pads 1 on each side: 10x10 padded, 3x3 VALID window -> 8x8; FLOPs 2 * 64*16 * 3*3*16
    p = _static_conv(tmp_path, padding=b"EXPLICIT", explicit_paddings=[0, 0, 1, 1, 1, 1, 0, 0])
    (f,) = audit(p, CPU).findings
    assert not [fl for fl in f.flag_texts if fl.startswith(("invalid", "size"))], f.flag_texts
    assert f.output_shape == (1, 8, 8, 16) and f.flops == 2 * 64 * 16 * 144


def test_sizes_beyond_int64_get_size_overflow(tmp_path):
    p = _static_conv(tmp_path, shape=(2**40,) * 4, filt=(3, 3, 2**40, 16))
    report = audit(p, CPU)
    f = _check_reports(report, "size-overflow")
    assert "size-overflow" in f.flag_texts


def test_flops_beyond_int64_get_size_overflow(tmp_path):
    # every element count fits int64 (2^60), FLOPs 2 * 2^60 * 3*3*16 do not
    p = _static_conv(tmp_path, shape=(1, 2**29, 2**27 + 2, 16), filt=(3, 3, 16, 16))
    (f,) = audit(p, CPU).findings
    assert "size-overflow" in f.flag_texts and f.flops is None


def test_terminal_rows_of_two_signatures_name_their_signature(tmp_path):
    # Paths cut from the left made the rows of two signatures look the same ("…___15486").
    from tf_fp16ops.audit.render.terminal import render_terminal

    gd = protos.GraphDef()
    x = add_node(gd.node, "x", "Placeholder", dtype="DT_HALF")
    for d in (1, 8, 8, 16):
        x.attr["shape"].shape.dim.add().size = d
    fn = "__inference_signature_wrapper_with_a_long_name_"
    _function(gd, "__inference_body_with_a_long_name_7", with_conv=True)
    for sig, n in (("serve", "15486"), ("serving_default", "15507")):
        outer = gd.library.function.add()
        outer.signature.name = fn + n
        a = outer.signature.input_arg.add()
        a.name, a.type = "x", protos.DT_HALF
        add_node(outer.node_def, "inner", "PartitionedCall", ["x"]).attr[
            "f"
        ].func.name = "__inference_body_with_a_long_name_7"
        add_node(gd.node, f"call_{sig}", "StatefulPartitionedCall", ["x"]).attr["f"].func.name = (
            fn + n
        )
    sm = protos.SavedModel()
    mg = sm.meta_graphs.add()
    mg.graph_def.CopyFrom(gd)
    for sig in ("serve", "serving_default"):
        mg.signature_def[sig].outputs["y"].name = f"call_{sig}:0"
    (tmp_path / "sm").mkdir()
    (tmp_path / "sm" / "saved_model.pb").write_bytes(sm.SerializeToString())
    rows = [
        ln
        for ln in render_terminal(audit(str(tmp_path / "sm"), CPU)).splitlines()
        if ln[:1].isdigit()
    ]
    assert len(rows) == 2
    assert rows[0].split()[1] == "serve:" and rows[1].split()[1] == "serving_default:"


def test_gpu_context_leaves_out_the_cpu_onednn_line():
    from support.audit_helpers import conv_graph, gpu
    from tf_fp16ops.audit.render.markdown import render_markdown
    from tf_fp16ops.audit.render.terminal import render_terminal

    on_gpu = audit(conv_graph(), gpu())
    assert "oneDNN" not in render_terminal(on_gpu) and "oneDNN" not in render_markdown(on_gpu)
    # a conv pinned to the CPU in a GPU context still runs there: the line stays
    pinned = audit(conv_graph(device="/device:CPU:0"), gpu())
    assert "context: oneDNN takes T=half CPU convs:" in render_terminal(pinned)
    on_cpu = audit(conv_graph(), CPU)
    assert "context: oneDNN takes T=half CPU convs:" in render_terminal(on_cpu)
    assert "oneDNN takes T=half CPU convs:" in render_markdown(on_cpu)


@pytest.mark.parametrize("shape_op", ["ExpandDims", "Reshape", "Squeeze", "Pad", "SpaceToBatchND"])
def test_variable_cast_is_found_through_shape_ops(shape_op):
    """Keras' Conv1D reaches its Conv2D through ExpandDims of the cast kernel (a depthwise kernel
    through Reshape): the walk stopped there and the site had no variable-cast flag, while the
    static .keras audit of the same layer had it."""
    gd = protos.GraphDef()
    x = add_node(gd.node, "x", "Placeholder", dtype="DT_HALF")
    for d in (1, 1, 8, 4):
        x.attr["shape"].shape.dim.add().size = d
    add_node(gd.node, "k", "VarHandleOp", dtype="DT_FLOAT")
    add_node(gd.node, "k/Read", "ReadVariableOp", ["k"], dtype="DT_FLOAT")
    add_node(gd.node, "k/Cast", "Cast", ["k/Read"], SrcT="DT_FLOAT", DstT="DT_HALF")
    add_node(gd.node, "axis", "Const", dtype="DT_INT32")
    add_node(gd.node, "k/shaped", shape_op, ["k/Cast", "axis"], T="DT_HALF")
    add_node(
        gd.node,
        "conv",
        "Conv2D",
        ["x", "k/shaped"],
        T="DT_HALF",
        strides=[1, 1, 1, 1],
        padding=b"VALID",
    )
    (f,) = audit(gd, CPU).findings
    assert "variable-cast(float variable cast to half)" in f.flag_texts, f.flag_texts
    # Another op in between (not value-preserving) still ends the walk.
    gd.node[5].op = "Mul"
    (f,) = audit(gd, CPU).findings
    assert not any(t.startswith("variable-cast") for t in f.flag_texts), f.flag_texts


@pytest.mark.parametrize("shape_op", ["Reshape", "ExpandDims", "Pad"])
def test_a_shape_beyond_a_shape_op_is_not_the_convs(shape_op):
    """x [1, 2, 2, 100] reshaped (no recorded output shape) to [1, 20, 20, 1] before a 3x3 VALID
    conv: the walk through the reshape took x's shape as the conv's input and reported output
    [1, 0, 0, 8] and FLOPs 0 (the real output is [1, 18, 18, 8]); for half inputs, a false
    invalid-attrs flag. Unknown is right: the shape after the op is not recorded."""
    gd = protos.GraphDef()
    x = add_node(gd.node, "x", "Placeholder", dtype="DT_HALF")
    for d in (1, 2, 2, 100):
        x.attr["shape"].shape.dim.add().size = d
    add_node(gd.node, "s", "Const", dtype="DT_INT32")
    add_node(gd.node, "r", shape_op, ["x", "s"], T="DT_HALF")
    w = add_node(gd.node, "w", "Const", dtype="DT_HALF")
    for d in (3, 3, 1, 8):
        w.attr["value"].tensor.tensor_shape.dim.add().size = d
    add_node(
        gd.node, "conv", "Conv2D", ["r", "w"], T="DT_HALF", strides=[1, 1, 1, 1], padding=b"VALID"
    )
    (f,) = audit(gd, CPU).findings
    assert f.input_shape is None and f.output_shape is None and f.flops is None, f.to_dict()
    assert not any(t.startswith("invalid-attrs") for t in f.flag_texts), f.flag_texts
    # With the op's own output shape recorded, that shape is the conv's.
    shp = gd.node[2].attr["_output_shapes"].list.shape.add()
    for d in (1, 20, 20, 1):
        shp.dim.add().size = d
    (f,) = audit(gd, CPU).findings
    assert (f.output_shape, f.flops) == ((1, 18, 18, 8), 2 * 18 * 18 * 8 * 3 * 3 * 1), f.to_dict()


def test_long_node_names_keep_the_scopes_that_tell_sites_apart():
    # Two depthwise layers' nodes differ only in their layer scope; cut from the left, both
    # read "…Fp16DepthwiseConv2D/Fp16DepthwiseConv2D" in the 40-column node cell.
    from tf_fp16ops.audit.render.terminal import render_terminal

    gd = protos.GraphDef()
    for name in ("x", "w"):
        n = add_node(gd.node, name, "Placeholder", dtype="DT_FLOAT")
        n.attr["shape"].shape.dim.add().size = 2
    names = [
        f"model_1/{layer}_1/Fp16DepthwiseConv2D/Fp16DepthwiseConv2D" for layer in ("dw", "sep")
    ]
    for name in names:
        add_node(gd.node, name, "MatMul", ["x", "w"], T="DT_FLOAT")
    cells = [
        c
        for line in render_terminal(audit(gd, CPU)).splitlines()
        for c in line.split("  ")
        if "Fp16DepthwiseConv2D" in c
    ]
    # 40 columns: 19 of the head, "…", the op's name with its "/" (20, at most half).
    assert cells == [
        "model_1/dw_1/Fp16De…/Fp16DepthwiseConv2D",
        "model_1/sep_1/Fp16D…/Fp16DepthwiseConv2D",
    ]
