"""Malformed and hostile audit inputs: each one is a one-line AuditInputError naming the input and
the problem (CLI: "tf-fp16-audit: error: ...", exit status 2), never a traceback or a hang."""

from __future__ import annotations

import json
import os
import signal
import zipfile

import pytest
from tensorflow.core.framework import graph_pb2
from tensorflow.core.protobuf import saved_model_pb2

from support.audit_helpers import CPU, add_node, conv_graph
from tf_fp16ops.audit import AuditInputError, audit
from tf_fp16ops.audit.cli import main


def _write_graph(path, gd) -> str:
    path.write_bytes(gd.SerializeToString())
    return str(path)


def _saved_model_dir(d, gd) -> str:
    d.mkdir()
    sm = saved_model_pb2.SavedModel()
    sm.meta_graphs.add().graph_def.CopyFrom(gd)
    (d / "saved_model.pb").write_bytes(sm.SerializeToString())
    return str(d)


def _cli_error(capsys, argv) -> str:
    """Runs the CLI in-process (an exception would fail the test); returns its one error line."""
    assert main(argv) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith("tf-fp16-audit: error: "), err
    return err[0]


# ---- 1. Keras-2 keras_metadata.pb ----------------------------------------------------------------
def test_keras2_metadata_any_bytes_is_skipped_with_a_note(tmp_path):
    d = _saved_model_dir(tmp_path / "sm", conv_graph())
    with open(os.path.join(d, "keras_metadata.pb"), "wb") as f:
        f.write(bytes(range(256)) * 2)  # not a SavedMetadata
    r = audit(d, CPU)
    assert len(r.findings) == 1 and r.findings[0].audit_class == "fp16-storage"
    assert any(n.startswith("keras_metadata.pb not read") for n in r.notes), r.notes


def test_keras2_metadata_valid_saved_metadata_is_read(tmp_path):
    saved_metadata_pb2 = pytest.importorskip("tensorflow.python.keras.protobuf.saved_metadata_pb2")
    d = _saved_model_dir(tmp_path / "sm", conv_graph())
    (tmp_path / "sm" / "keras_metadata.pb").write_bytes(
        saved_metadata_pb2.SavedMetadata().SerializeToString()
    )
    r = audit(d, CPU)
    assert len(r.findings) == 1 and "layer policies read from keras_metadata.pb" in r.notes

    md = saved_metadata_pb2.SavedMetadata()
    md.nodes.add().metadata = json.dumps(
        {"name": "conv", "class_name": "Conv2D", "dtype": "mixed_float16"}
    )
    (tmp_path / "sm" / "keras_metadata.pb").write_bytes(md.SerializeToString())
    (f,) = audit(d, CPU).findings
    # The conv node is named "conv", so the name-scope match finds layer "conv" and its policy.
    assert (f.keras_layer, f.keras_policy) == ("conv", "mixed_float16")


# ---- 2. ':' in a Keras layer name (static .keras reading) ----------------------------------------
def test_colon_in_keras_layer_name(tmp_path):
    import keras

    p = str(tmp_path / "colon.keras")
    keras.Sequential(
        [keras.Input((8, 8, 4)), keras.layers.Conv2D(4, 3, name="blk:conv", dtype="mixed_float16")]
    ).save(p)
    (f,) = audit(p, CPU).findings
    assert f.node == "convolution" or f.node.endswith("/convolution")
    assert ":" not in f.node and f.keras_layer == "blk:conv" and f.keras_policy == "mixed_float16"
    # x [None,8,8,4], kernel 3x3x4x4, VALID -> [None,6,6,4]: 2 * 6*6*4 * 3*3*4 per example.
    assert f.T == "half" and f.flops == 2 * 6 * 6 * 4 * 3 * 3 * 4


# ---- 3. malformed node input strings -------------------------------------------------------------
@pytest.mark.parametrize("bad", ["x:abc", "", ":", "x:-5", "x:1:2", ":0"])
def test_malformed_graph_node_input(tmp_path, capsys, bad):
    gd = conv_graph()
    add_node(
        gd.node, "c2", "Conv2D", [bad, "w"], T="DT_HALF", strides=[1, 1, 1, 1], padding=b"SAME"
    )
    p = _write_graph(tmp_path / "g.pb", gd)
    with pytest.raises(AuditInputError) as e:
        audit(p, CPU)
    assert (
        str(e.value).startswith(p + ": ") and repr(bad) in str(e.value) and "'c2'" in str(e.value)
    )
    assert "malformed node input" in _cli_error(capsys, [p])


@pytest.mark.parametrize("bad", ["b:out:zz", "a:0:0:0", "b::0"])
def test_malformed_function_node_input(tmp_path, bad):
    gd = graph_pb2.GraphDef()
    f = gd.library.function.add()
    f.signature.name = "F"
    for a in ("a", "b"):
        f.signature.input_arg.add(name=a, type=19)  # DT_HALF
    add_node(
        f.node_def, "conv", "Conv2D", ["a", bad], T="DT_HALF", strides=[1, 1, 1, 1], padding=b"SAME"
    )
    call = add_node(gd.node, "top", "PartitionedCall")
    call.attr["f"].func.name = "F"
    p = _write_graph(tmp_path / "g.pb", gd)
    with pytest.raises(
        AuditInputError, match=r"function 'F': node 'conv' has a malformed node input"
    ) as e:
        audit(p, CPU)
    assert str(e.value).startswith(p + ": ") and repr(bad) in str(e.value)


# ---- 4b. attrs of the wrong type -----------------------------------------------------------------
def _set_string(a, v):
    a.s = v


def _set_floats(a, v):
    a.list.f.extend(v)


def _set_int(a, v):
    a.i = v


@pytest.mark.parametrize(
    "key,setter,value,flag",
    [
        ("strides", _set_string, b"1,2,2,1", "strides is string, not a list of ints"),
        (
            "dilations",
            _set_floats,
            [1.0, 2.0, 2.0, 1.0],
            "dilations is a list of floats [1.0, 2.0, 2.0, 1.0], not a list of ints",
        ),
        ("strides", _set_int, 2, "strides is an int 2, not a list of ints"),
        ("padding", _set_int, 1, "padding is an int 1, not a string"),
        ("data_format", _set_floats, [1.0], "data_format is a list of floats [1.0], not a string"),
        (
            "explicit_paddings",
            _set_string,
            b"0",
            "explicit_paddings is string, not a list of ints",
        ),
    ],
)
def test_wrong_typed_attrs_are_invalid_attrs(key, setter, value, flag):
    # Ignored before: FLOPs counted as if stride 1, no flag.
    gd = conv_graph()
    conv = gd.node[2]
    if key in conv.attr:
        del conv.attr[key]
    setter(conv.attr[key], value)
    (f,) = audit(gd, CPU).findings
    assert f.flops is None and f.output_shape is None
    assert f"invalid-attrs({flag})" in f.flag_texts, f.flag_texts
    assert f.flops_note == f"output shape undefined: {flag}"


def test_empty_explicit_paddings_is_tensorflows_default():
    gd = conv_graph()
    gd.node[2].attr["explicit_paddings"].list.SetInParent()
    (f,) = audit(gd, CPU).findings
    assert f.flops is not None and not any(fl.startswith("invalid-attrs") for fl in f.flags)


# ---- 4c. matmul-family sites: the conv sites' codes ------------------------------------------
def _product_graph(op, a_shape, b_shape, **attrs) -> graph_pb2.GraphDef:
    """Placeholders a, b (half) of the given shapes -> one matmul-family op."""
    gd = graph_pb2.GraphDef()
    for name, shape in (("a", a_shape), ("b", b_shape)):
        n = add_node(gd.node, name, "Placeholder", dtype="DT_HALF")
        for d in shape:
            n.attr["shape"].shape.dim.add().size = d
    add_node(gd.node, "mm", op, ["a", "b"], T="DT_HALF", **attrs)
    return gd


def _einsum_graph(a_shape=(2, 3), b_shape=(3, 4)):
    return _product_graph("Einsum", a_shape, b_shape, N=2)


def _set_bytes(a, v):
    a.s = v


def _set_strings(a, v):
    a.list.s.extend(v)


@pytest.mark.parametrize(
    "setter,value,words",
    [
        (None, None, "equation missing"),
        (_set_int, 3, "equation is an int 3, not a string"),
        (
            _set_strings,
            [b"mk,kn->mn"],
            "equation is a list of strings [b'mk,kn->mn'], not a string",
        ),
        (_set_bytes, b"mk,kn->\xff\xfe", r"equation b'mk,kn->\xff\xfe' is not UTF-8"),
    ],
)
def test_einsum_equation_of_no_kernel_is_invalid_attrs(setter, value, words):
    # Reported with FLOPs '?' and no flag before.
    gd = _einsum_graph()
    if setter is not None:
        setter(gd.node[2].attr["equation"], value)
    (f,) = audit(gd, CPU).findings
    assert f.flops is None
    assert f"invalid-attrs({words})" in f.flag_texts, f.flag_texts
    gd.node[2].attr["equation"].Clear()
    gd.node[2].attr["equation"].s = b"mk,kn->mn"  # the well-formed twin
    (f,) = audit(gd, CPU).findings
    assert f.flops == 2 * 2 * 3 * 4 and not any(t.startswith("invalid-attrs") for t in f.flag_texts)


@pytest.mark.parametrize(
    "op,attrs",
    [("MatMul", {}), ("BatchMatMulV2", {}), ("Fp16MatMul", {"Tacc": "DT_FLOAT"}), ("Einsum", {})],
)
def test_dimensions_below_minus_one_are_invalid_attrs(op, attrs):
    gd = _product_graph(op, (2, -5), (3, 4), **attrs)
    if op == "Einsum":
        gd.node[2].attr["N"].i = 2
        gd.node[2].attr["equation"].s = b"mk,kn->mn"
    (f,) = audit(gd, CPU).findings
    assert f.flops is None
    assert "invalid-attrs(a shape [2, -5] has a dimension below -1)" in f.flag_texts, f.flag_texts


@pytest.mark.parametrize("op", ["MatMul", "Einsum"])
@pytest.mark.parametrize("recorded", [False, True])
def test_product_beyond_int64_is_size_overflow(op, recorded):
    # [2^62, K] x [K, 2^62] with K unknown: 2^124 output elements; also when the node records an
    # output shape of unknown sizes.
    gd = _product_graph(op, (2**62, -1), (-1, 2**62))
    if op == "Einsum":
        gd.node[2].attr["N"].i = 2
        gd.node[2].attr["equation"].s = b"mk,kn->mn"
    if recorded:
        out = gd.node[2].attr["_output_shapes"].list.shape.add()
        out.dim.add().size = -1
        out.dim.add().size = -1
    (f,) = audit(gd, CPU).findings
    assert f.flops is None and "size-overflow" in f.flag_texts, f.flag_texts


def test_fp16_matmul_adj_x_of_another_type_is_invalid_attrs():
    gd = _product_graph("Fp16MatMul", (4, 3), (3, 5), Tacc="DT_FLOAT", adj_x=b"yes")
    (f,) = audit(gd, CPU).findings
    assert f.flops is None
    assert "invalid-attrs(adj_x is string, not a bool)" in f.flag_texts, f.flag_texts


# ---- 4d. a filter larger than its VALID input ---------------------------------------------------
def test_filter_larger_than_valid_input_is_invalid_attrs(tmp_path):
    """TensorFlow's shape function rejects the conv (negative output size); the audit reported
    FLOPs 0 and no flag for a static .keras Conv2D with a 1000x1000 kernel on a 6x6 input."""
    p = str(tmp_path / "m.keras")
    layer = _conv_layer(kernel_size=[1000, 1000], build_config={"input_shape": [None, 6, 6, 4]})
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("config.json", json.dumps(_model(layer)))
    (f,) = audit(p, CPU).findings
    words = "padding='VALID': filter 1000 (dilation 1, stride 1) on input size 6 gives a negative"
    assert f.flops is None and any(words in t for t in f.flag_texts), f.flag_texts
    # A traced graph the same way; the edge TensorFlow still accepts (output size 0) is no flag.
    for k, flagged in ((1000, True), (10, True), (9, False)):
        gd = conv_graph()
        gd.node[1].attr["value"].tensor.tensor_shape.dim[0].size = k
        (f,) = audit(gd, CPU).findings
        assert any(t.startswith("invalid-attrs(padding='VALID'") for t in f.flag_texts) is flagged


# ---- 4. stride 0 / negative without _output_shapes -----------------------------------------------
@pytest.mark.parametrize(
    "strides,padding",
    [([1, 0, 0, 1], b"SAME"), ([1, 0, 0, 1], b"VALID"), ([1, -1, -1, 1], b"VALID")],
)
def test_non_positive_strides_give_unknown_flops_and_a_flag(tmp_path, strides, padding):
    gd = conv_graph()
    conv = gd.node[2]
    conv.attr["strides"].list.i[:] = strides
    conv.attr["padding"].s = padding
    p = _write_graph(tmp_path / "g.pb", gd)
    (f,) = audit(p, CPU).findings
    assert f.flops is None and f.output_shape is None
    assert (
        f"invalid-attrs(strides={strides})" in f.flag_texts and f"strides={strides}" in f.flops_note
    )


# ---- 5. exponentially many call paths ------------------------------------------------------------
def _doubling_chain(depth: int, conv_at_bottom: bool) -> graph_pb2.GraphDef:
    """Functions L0..L{depth-1}; each calls the next twice, so L0 has 2**(depth-1) call paths to
    the last."""
    gd = graph_pb2.GraphDef()
    for i in range(depth):
        f = gd.library.function.add()
        f.signature.name = f"L{i}"
        for a in ("a", "b"):
            f.signature.input_arg.add(name=a, type=19)
        if i + 1 < depth:
            for c in ("c1", "c2"):
                add_node(f.node_def, c, "PartitionedCall", ["a", "b"]).attr[
                    "f"
                ].func.name = f"L{i + 1}"
        elif conv_at_bottom:
            add_node(
                f.node_def,
                "conv",
                "Conv2D",
                ["a", "b"],
                T="DT_HALF",
                strides=[1, 1, 1, 1],
                padding=b"SAME",
            )
    add_node(gd.node, "top", "PartitionedCall").attr["f"].func.name = "L0"
    return gd


@pytest.fixture
def deadline():
    """Fails (TimeoutError) instead of hanging when the test body runs past `seconds`."""

    def arm(seconds):
        def expired(*_):
            raise TimeoutError(f"audit did not finish within {seconds} s")

        signal.signal(signal.SIGALRM, expired)
        signal.setitimer(signal.ITIMER_REAL, seconds)

    yield arm
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)


def test_call_paths_without_convolutions_are_not_walked(tmp_path, deadline):
    p = _write_graph(tmp_path / "g.pb", _doubling_chain(60, conv_at_bottom=False))  # 2**59 paths
    deadline(5)
    r = audit(p, CPU)
    assert r.findings == () and r.summary.call_sites == 0


def test_call_paths_to_convolutions_are_all_listed(tmp_path):
    # The pruning must not drop real call sites: depth 11 -> 2**10 paths from L0 to the conv.
    (tmp_path / "g.pb").write_bytes(_doubling_chain(11, conv_at_bottom=True).SerializeToString())
    r = audit(str(tmp_path / "g.pb"), CPU)
    assert len(r.findings) == 2**10 and len({f.site_id for f in r.findings}) == 2**10


def test_exponentially_many_call_sites_are_capped_and_marked_partial(tmp_path, deadline):
    from tf_fp16ops.audit.limits import Limits

    p = _write_graph(
        tmp_path / "g.pb", _doubling_chain(40, conv_at_bottom=True)
    )  # 2**39 paths to the conv
    deadline(20)
    r = audit(p, CPU, limits=Limits(max_sites=500))
    assert len(r.findings) == 500
    assert r.partial == (
        "call sites: the first 500 (call path, op) pairs are reported (ops: "
        "convolutions and the matmul family); the call graph has more (--max-sites)",
    )
    assert r.to_dict()["partial"] == list(r.partial)


def test_no_truncation_note_below_the_cap(tmp_path):
    r = audit(_write_graph(tmp_path / "g.pb", _doubling_chain(5, conv_at_bottom=True)), CPU)
    assert len(r.findings) == 16 and r.partial == ()


# ---- 6. malformed .keras config.json -------------------------------------------------------------
def _conv_layer(build_config=None, **cfg):
    c = {
        "name": "c",
        "filters": 8,
        "kernel_size": [3, 3],
        "strides": [1, 1],
        "padding": "valid",
        "dtype": "mixed_float16",
    }
    c.update(cfg)
    return {
        "class_name": "Conv2D",
        "config": c,
        "build_config": {"input_shape": [None, 8, 8, 4]} if build_config is None else build_config,
    }


def _model(*layers):
    return {"class_name": "Sequential", "config": {"name": "m", "layers": list(layers)}}


def _nested(depth) -> str:
    """JSON of `depth` Sequential models nested in each other around one Conv2D (3 JSON levels
    each)."""
    return (
        '{"class_name": "Sequential", "config": {"name": "m", "layers": [' * depth
        + json.dumps(_conv_layer())
        + "]}}" * depth
    )


@pytest.mark.parametrize(
    "config,needle",
    [
        ({"config": 5}, '"config" must be an object'),
        ({"config": "layers"}, '"config" must be an object'),
        (_model(_conv_layer(build_config=[1, 2])), "build_config must be an object"),
        (
            _model(_conv_layer(build_config={"input_shape": "abc"})),
            "build_config.input_shape must be",
        ),
        (_model(_conv_layer(build_config={"input_shape": 5})), "build_config.input_shape must be"),
        (
            _model(_conv_layer(build_config={"input_shape": [None, "x", 8, 4]})),
            "build_config.input_shape must be",
        ),
        (
            _model(_conv_layer(build_config={"input_shape": [4]})),
            "build_config.input_shape must be",
        ),
        (
            _model(_conv_layer(build_config={"input_shape": {"a": [1, 2]}})),
            "build_config.input_shape must be",
        ),
        (_model(_conv_layer(kernel_size=None)), "kernel_size must be"),
        (_model(_conv_layer(kernel_size="abc")), "kernel_size must be"),
        (_model(_conv_layer(kernel_size=[[1], 2])), "kernel_size must be"),
        (_model(_conv_layer(strides=[0, 0])), "strides must be"),
        (_model(_conv_layer(filters="many")), "filters must be"),
        (_model(_conv_layer(filters=8.5)), "filters must be"),
        (_model(_conv_layer(filters=2**80)), "filters must be"),
        (_model(_conv_layer(groups="two")), "groups must be"),
        (_model(_conv_layer(groups=-3)), "groups must be"),
        # groups 0 was read as 1; groups that do not divide the channels passed without a note
        (_model(_conv_layer(groups=0)), "groups must be a positive integer (at most"),
        (_model(_conv_layer(groups=3)), "groups must be a divisor of the input channels 4, got 3"),
        (
            _model(_conv_layer(groups=2, filters=7)),
            "groups must be a divisor of filters 7, got 2",
        ),
        (_model(_conv_layer(padding=[[1, 1], [1, 1]])), "padding must be"),
        # Keras allows "causal" only on Conv1D; an unknown string was a ValueError of the
        # shape pass ("config.json is malformed (ValueError: ...)").
        (_model(_conv_layer(padding="causal")), 'padding must be one of "valid", "same", got'),
        # data_format other than Keras' two values (any case) was read as channels_last.
        (
            _model(_conv_layer(data_format=7)),
            'data_format must be "channels_last" or "channels_first", got 7',
        ),
        (
            _model(_conv_layer(padding="full")),
            'padding must be one of "valid", "same", got \'full\'',
        ),
        (
            _model(dict(_conv_layer(depth_multiplier=None), class_name="DepthwiseConv2D")),
            "depth_multiplier must be",
        ),
        (_model(_conv_layer(name={"a": 1})), "config.name must be a string"),
        # A conv layer whose config is a list was skipped silently (0 call sites, exit status 0).
        (
            _model({"class_name": "Conv2D", "name": "stem", "config": [8, [3, 3]]}),
            "layer 'stem' (Conv2D): its config must be an object, got list",
        ),
        (
            _model(_conv_layer(), {"class_name": "DepthwiseConv2D", "config": ["dw"]}),
            "layer '#1 (unnamed)' (DepthwiseConv2D): its config must be an object",
        ),
        pytest.param(_nested(600), "nested too deeply", id="json-nested-1800-levels"),
    ],
)
def test_malformed_keras_config(tmp_path, capsys, config, needle):
    p = str(tmp_path / "m.keras")
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("config.json", config if isinstance(config, str) else json.dumps(config))
    with pytest.raises(AuditInputError) as e:
        audit(p, CPU)
    assert str(e.value).startswith(p + ": ") and needle in str(e.value), str(e.value)
    assert needle in _cli_error(capsys, [p])


def test_deeply_nested_keras_config_within_json_limits_is_read(tmp_path):
    p = str(tmp_path / "m.keras")
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("config.json", _nested(250))  # 750 JSON levels: readable
    (f,) = audit(p, CPU).findings
    assert f.keras_layer == "c" and f.flops == 2 * 6 * 6 * 8 * 3 * 3 * 4


# ---- 7. deeply nested .pbtxt ---------------------------------------------------------------------
def test_deeply_nested_pbtxt(tmp_path, capsys):
    p = tmp_path / "deep.pbtxt"
    p.write_text(
        "library { function { signature { name: 'f' } attr { key: 'a' value { "
        + "list { func { name: 'x' attr { key: 'k' value { " * 3000
        + "} } } }" * 3000
        + " } } } }"
    )
    with pytest.raises(AuditInputError, match="nested too deeply") as e:
        audit(str(p), CPU)
    assert str(e.value).startswith(str(p) + ": not a valid text GraphDef")
    _cli_error(capsys, [str(p)])


# ---- 8. --logdir that is not a directory ---------------------------------------------------------
@pytest.mark.parametrize("logdir", ["/dev/null", "FILE", "FILE/sub"])
def test_logdir_not_a_directory(tmp_path, capsys, logdir):
    g = _write_graph(tmp_path / "g.pb", conv_graph())
    (tmp_path / "file").write_text("x")
    logdir = logdir.replace("FILE", str(tmp_path / "file"))
    assert "--logdir" in _cli_error(capsys, [g, "--logdir", logdir])


# ---- 9. numeric CLI options ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "args,needle",
    [
        (
            ["--compute-capability", "99999999999999999999.5"],
            "--compute-capability must look like 8.0",
        ),
        (["--compute-capability", "0.5"], "--compute-capability must look like 8.0"),
        (["--compute-capability", "8.100"], "--compute-capability must look like 8.0"),
        (["--cudnn-version", "99999999999999999999.5"], "--cudnn-version must look like 8.9.7"),
        (["--cudnn-version", "0"], "--cudnn-version must look like 8.9.7"),
        (["--cudnn-version", "8.9.7.1"], "--cudnn-version must look like 8.9.7"),
    ],
)
def test_absurd_versions_rejected(tmp_path, capsys, args, needle):
    g = _write_graph(tmp_path / "g.pb", conv_graph())
    assert needle in _cli_error(capsys, [g, *args])


def test_versions_in_range_accepted(tmp_path, capsys):
    g = _write_graph(tmp_path / "g.pb", conv_graph())
    assert (
        main([g, "--device", "gpu", "--compute-capability", "12.0", "--cudnn-version", "9.3.0"])
        == 0
    )
    assert main([g, "--cudnn-version", "8907"]) == 0


@pytest.mark.parametrize("value", ["-1", "x"])
def test_max_rows_must_be_non_negative(tmp_path, capsys, value):
    g = _write_graph(tmp_path / "g.pb", conv_graph())
    with pytest.raises(SystemExit) as e:
        main([g, "--max-rows", value])
    assert e.value.code == 2 and "--max-rows: expected an integer >= 0" in capsys.readouterr().err
    assert main([g, "--max-rows", "0"]) == 0


# ---- 10. permission denied -----------------------------------------------------------------------
def test_saved_model_under_unsearchable_directory(tmp_path, monkeypatch):
    locked = tmp_path / "locked"
    locked.mkdir()
    sm = _saved_model_dir(locked / "sm", conv_graph())
    os.chmod(locked, 0)
    try:
        if os.geteuid() == 0:  # root bypasses the permission bits: make stat answer as for a user
            real_stat = os.stat

            def stat(path, *a, **kw):
                if os.fspath(path).startswith(str(locked) + os.sep):
                    raise PermissionError(13, "Permission denied", os.fspath(path))
                return real_stat(path, *a, **kw)

            monkeypatch.setattr(os, "stat", stat)
        for path in (sm, os.path.join(sm, "saved_model.pb")):
            with pytest.raises(AuditInputError) as e:
                audit(path, CPU)
            assert str(e.value) == f"{path}: permission denied"
    finally:
        monkeypatch.undo()
        os.chmod(locked, 0o700)


# ---- 11. subclassed Keras models -----------------------------------------------------------------
def _subclassed():
    import keras

    class Net(keras.Model):
        def __init__(self):
            super().__init__()
            self.conv = keras.layers.Conv2D(8, 3, dtype="mixed_float16")

        def call(self, x):
            return self.conv(x)

    return Net()


def test_unbuilt_subclassed_keras_model():
    with pytest.raises(AuditInputError, match="the model is not built.*call it once on data"):
        audit(_subclassed(), CPU)


def test_called_subclassed_keras_model_is_traced():
    import numpy as np

    m = _subclassed()
    m(np.zeros((2, 8, 8, 4), "float32"))
    (f,) = audit(m, CPU).findings
    # Traced on [None, 8, 8, 4]: VALID 3x3, 8 filters -> [None, 6, 6, 8], fp16 compute per the
    # policy.
    assert (
        f.T == "half"
        and f.flops == 2 * 6 * 6 * 8 * 3 * 3 * 4
        and f.flops_note.startswith("per example")
    )


# ---- last-resort guard ---------------------------------------------------------------------------
def test_unexpected_exception_becomes_internal_error(tmp_path, capsys, monkeypatch):
    import tf_fp16ops.audit.analyze as analyze_mod

    def boom(*a, **kw):
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(analyze_mod, "analyze", boom)
    g = _write_graph(tmp_path / "g.pb", conv_graph())
    assert (
        _cli_error(capsys, [g]) == "tf-fp16-audit: error: internal error while auditing "
        f"{g}: RuntimeError: boom second line"
    )


def test_an_invalid_attr_of_millions_of_values_is_quoted_in_short():
    # strides of a million ones (a hostile file): the flag quoted the whole list, one line of
    # megabytes in the table and hundreds of MB of JSON.
    gd = conv_graph()
    (conv,) = [n for n in gd.node if n.op == "Conv2D"]
    del conv.attr["strides"].list.i[:]
    conv.attr["strides"].list.i.extend([1] * 1_000_000)
    conv.attr["padding"].s = b"P" * 100_000
    (f,) = audit(gd, CPU).findings
    (text,) = [t for t in f.flag_texts if t.startswith("invalid-attrs")]
    assert "strides=[1, 1, 1, 1, 1, 1, 1, 1, ... (1,000,000 values)]" in text
    assert f"padding={'P' * 60!r}... (100,000 characters)" in text
    assert len(text) < 400
