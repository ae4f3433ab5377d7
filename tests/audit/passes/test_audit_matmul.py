"""The matmul family as call sites: MatMul, BatchMatMul*, Einsum, _FusedMatMul and this package's
Fp16MatMul, with T, FLOPs, class, accumulation and reason, the Keras layer and the share gates.

Expected counts come from an independent walk of the exported SavedModel protos written here
(TensorFlow's own `saved_model_pb2`, not the audit's loader or call graph); FLOPs are worked out by
hand from the layer sizes; accumulations from the rules in passes/accumulation.py with their
sources (GPU: TF_FP16_MATMUL_USE_FP32_COMPUTE, read from TensorFlow's source) and the CPU
measurements in opsets.py, which `test_cpu_probes_match_the_static_table` re-measures on the
machine that runs the tests.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import graph_pb2
from tensorflow.core.protobuf import saved_model_pb2

from support.audit_helpers import CPU, add_node, class_counts, gpu, node_counts
from support.cpu_features import onednn_takes_half_here
from tf_fp16ops.audit import RuntimeContext, audit
from tf_fp16ops.audit.analyze import select_kind

MATMUL_FAMILY = {"MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Einsum"}
S, D, HEADS, KEY_DIM, FF = 16, 32, 4, 8, 64  # sequence, model width, heads, head size, FFN width


def _encoder_block(policy: str) -> keras.Model:
    """A Transformer encoder block: self-attention, residual + LayerNorm, a two-layer FFN."""
    prev = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(policy)
    try:
        keras.utils.set_random_seed(0)
        inp = keras.Input((S, D))
        att = keras.layers.MultiHeadAttention(num_heads=HEADS, key_dim=KEY_DIM, name="mha")(
            inp, inp
        )
        x = keras.layers.LayerNormalization(name="ln1")(keras.layers.Add()([inp, att]))
        f = keras.layers.Dense(FF, activation="relu", name="ffn1")(x)
        f = keras.layers.Dense(D, name="ffn2")(f)
        out = keras.layers.LayerNormalization(name="ln2")(keras.layers.Add()([x, f]))
        return keras.Model(inp, out, name="encoder")
    finally:
        keras.mixed_precision.set_global_policy(prev)


@pytest.fixture(scope="module")
def encoders(tmp_path_factory):
    root = tmp_path_factory.mktemp("encoders")
    out = {}
    for policy in ("float32", "mixed_float16"):
        path = str(root / policy)
        _encoder_block(policy).export(path, verbose=False)
        out[policy] = path
    return out


def _walk_matmuls(saved_model_dir: str, signature: str) -> collections.Counter:
    """Independent count of (op, T) over the distinct matmul-family nodes reachable from one
    signature: its output nodes and their inputs in the top-level graph, then every function named
    by any func attr, transitively."""
    sm = saved_model_pb2.SavedModel()
    with open(os.path.join(saved_model_dir, "saved_model.pb"), "rb") as f:
        sm.ParseFromString(f.read())
    (mg,) = [m for m in sm.meta_graphs if signature in m.signature_def]
    gd = mg.graph_def
    top = {n.name: n for n in gd.node}
    funcs = {f.signature.name: f for f in gd.library.function}
    todo = [t.name.split(":")[0] for t in mg.signature_def[signature].outputs.values()]
    seen_nodes, nodes = set(), []
    while todo:
        name = todo.pop().lstrip("^")
        if name in seen_nodes or name not in top:
            continue
        seen_nodes.add(name)
        nodes.append(top[name])
        todo.extend(i.split(":")[0] for i in top[name].input)

    def callees(node):
        for v in node.attr.values():
            if v.func.name:
                yield v.func.name
            for fn in v.list.func:
                yield fn.name
        if node.op in funcs:
            yield node.op

    count: collections.Counter = collections.Counter()
    stack = [c for n in nodes for c in callees(n)]
    done = set()
    while stack:
        fname = stack.pop()
        if fname in done or fname not in funcs:
            continue
        done.add(fname)
        for n in funcs[fname].node_def:
            if n.op in MATMUL_FAMILY:
                count[(n.op, tf.dtypes.as_dtype(n.attr["T"].type).name)] += 1
            stack.extend(callees(n))
    return count


@pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
def test_transformer_block_counts_equal_an_independent_walk(encoders, policy):
    walk = _walk_matmuls(encoders[policy], "serve")
    r = audit(encoders[policy], CPU, signature="serve")
    got = collections.Counter()
    for f in r.findings:
        got[(f.op, {"half": "float16", "float": "float32"}[f.T])] += 1
    assert got == walk
    assert sum(walk.values()) >= 7  # Q, K, V, output projections, two einsums, the FFN
    assert dict(node_counts(r)) == dict(collections.Counter(op for op, _ in walk.elements()))
    assert {f.kind for f in r.findings} == {"matmul"}
    want_t = "float" if policy == "float32" else "half"
    assert {f.T for f in r.findings} == {want_t}
    # a SavedModel carries no layer table: the layer is the node's name scope
    scopes = collections.Counter(f.node.split("/")[1] for f in r.findings)
    assert scopes == {"mha_1": 6, "ffn1_1": 1, "ffn2_1": 1}


def test_keras_archive_dense_is_a_matmul_with_its_layer(tmp_path):
    """A .keras read statically: a Dense on rank-2 inputs is its TF backend's MatMul, with the
    layer and its policy; EinsumDense / MultiHeadAttention are named in a note."""
    prev = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        inp = keras.Input((48,))
        x = keras.layers.Dense(24, name="head")(inp)
        y = keras.layers.Reshape((4, 6))(x)
        y = keras.layers.MultiHeadAttention(num_heads=2, key_dim=3, name="att")(y, y)
        m = keras.Model(inp, [x, y])
    finally:
        keras.mixed_precision.set_global_policy(prev)
    path = str(tmp_path / "m.keras")
    m.save(path)
    r = audit(path, CPU)
    (f,) = r.findings
    assert (f.op, f.kind, f.T, f.keras_layer, f.keras_policy) == (
        "MatMul",
        "matmul",
        "half",
        "head",
        "mixed_float16",
    )
    assert f.flops == 2 * 48 * 24 and f.audit_class == "fp16-storage"
    assert any(fl.startswith("variable-cast(float variable cast to half)") for fl in f.flag_texts)
    assert any("'att' (MultiHeadAttention)" in n for n in r.notes)


def test_transformer_block_flops_by_hand(encoders):
    r = audit(encoders["mixed_float16"], CPU, signature="serve")
    # per example: Q, K, V and output projections 2*S*D*(HEADS*KEY_DIM) each, scores and context
    # 2*HEADS*S*S*KEY_DIM each; the FFN's Tensordot MatMuls run on rows [B*S, D] reshaped from
    # [B, S, D], so S rows per example: 2*S*D*FF each.
    proj = 2 * S * D * HEADS * KEY_DIM
    att = 2 * HEADS * S * S * KEY_DIM
    ffn = 2 * S * D * FF
    assert sorted(f.flops for f in r.findings) == sorted([proj] * 4 + [att] * 2 + [ffn] * 2)
    assert r.summary.total_flops == 4 * proj + 2 * att + 2 * ffn
    assert {f.flops_note for f in r.findings} == {"per example (batch size unknown)"}


def test_rows_of_unknown_count_per_example_stay_per_row(tmp_path):
    # A sequence of unknown length: the Tensordot's rows [B*T, D] come from [B, T, D] with two
    # unknown sizes, so the rows per example are a run-time value: 2*D*FF per row.
    inp = keras.Input((None, D))
    keras.Model(inp, keras.layers.Dense(FF, name="ffn")(inp)).export(
        str(tmp_path / "sm"), verbose=False
    )
    r = audit(str(tmp_path / "sm"), CPU, signature="serve")
    assert [(f.flops, f.flops_note) for f in r.findings] == [
        (2 * D * FF, "per row (M unknown: the row count is a run-time value)")
    ]


def _reshaped_matmul_graph(x_shape, rows_shape, w_shape, via=(), op="MatMul") -> graph_pb2.GraphDef:
    """x (Placeholder x_shape) -> Reshape (recorded output shape rows_shape) -> `via` ops
    (Identity, Cast) -> `op` with w (Placeholder w_shape), float32, built by hand."""
    gd = graph_pb2.GraphDef()
    for name, shape in (("x", x_shape), ("w", w_shape)):
        n = add_node(gd.node, name, "Placeholder", dtype="DT_FLOAT")
        for d in shape:
            n.attr["shape"].shape.dim.add().size = d
    add_node(gd.node, "to", "Const", dtype="DT_INT32")
    r = add_node(gd.node, "r", "Reshape", ["x", "to"], T="DT_FLOAT")
    recorded = r.attr["_output_shapes"].list.shape.add()
    for d in rows_shape:
        recorded.dim.add().size = d
    prev = "r"
    for i, step in enumerate(via):
        extra = {"SrcT": "DT_FLOAT", "DstT": "DT_FLOAT"} if step == "Cast" else {"T": "DT_FLOAT"}
        add_node(gd.node, f"v{i}", step, [prev], **extra)
        prev = f"v{i}"
    add_node(gd.node, "mm", op, [prev, "w"], T="DT_FLOAT")
    return gd


PER_EXAMPLE = "per example (batch size unknown)"
PER_ROW = "per row (M unknown: the row count is a run-time value)"


@pytest.mark.parametrize(
    "x_shape, rows_shape, w_shape, via, want",
    [
        # [B, 6, 4] -> [B*6, 4]: 6 rows per example, by hand 2*6*4*3.
        ((-1, 6, 4), (-1, 4), (4, 3), (), (2 * 6 * 4 * 3, PER_EXAMPLE)),
        # The Reshape's output records no size at all: K comes from w.
        ((-1, 6, 4), (-1, -1), (4, 3), ("Identity", "Cast"), (2 * 6 * 4 * 3, PER_EXAMPLE)),
        # Two unknown sizes before the Reshape: rows per example unknown.
        ((-1, -1, 4), (-1, 4), (4, 3), (), (2 * 4 * 3, PER_ROW)),
        # Sizes that do not divide (20 elements per example in rows of 8): left per row.
        ((-1, 5, 4), (-1, 8), (8, 3), (), (2 * 8 * 3, PER_ROW)),
        # An example of no elements ([B, 0, 4]) gives no rows: 0 FLOPs per example.
        ((-1, 0, 4), (-1, 4), (4, 3), (), (0, PER_EXAMPLE)),
    ],
)
def test_rows_reshaped_from_a_batch_count_per_example(x_shape, rows_shape, w_shape, via, want):
    (f,) = audit(_reshaped_matmul_graph(x_shape, rows_shape, w_shape, via), CPU).findings
    assert (f.flops, f.flops_note) == want


def test_rows_are_not_scaled_when_the_output_has_other_unknown_sizes():
    # BatchMatMulV2 of the rows [B*6, 4] with w [?, 4, 3]: the output [?, B*6, 3] has two
    # unknown sizes, so the rows are not scaled (each unknown size counts 1, as before).
    gd = _reshaped_matmul_graph((-1, 6, 4), (-1, 4), (-1, 4, 3), op="BatchMatMulV2")
    (f,) = audit(gd, CPU).findings
    assert (f.flops, f.flops_note) == (2 * 4 * 3, PER_EXAMPLE)


@pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
def test_fp16_einsum_flops_per_example_as_the_keras_block(tmp_path, policy):
    """tf_fp16ops.einsum flattens labels into one Fp16MatMul ([B*S, D] rows, [B*HEADS, S, KEY_DIM]
    batches): its FLOPs per example are the block's, by hand as above."""
    import tf_fp16ops

    converted = tf_fp16ops.convert(_encoder_block(policy), accumulation="float16")
    converted.export(str(tmp_path / "sm"), verbose=False)
    r = audit(str(tmp_path / "sm"), CPU, signature="serve")
    proj = 2 * S * D * HEADS * KEY_DIM
    att = 2 * HEADS * S * S * KEY_DIM
    ffn = 2 * S * D * FF
    assert {f.op for f in r.findings} == {"Fp16MatMul", "Fp16Conv2D"}
    assert sorted(f.flops for f in r.findings) == sorted([proj] * 4 + [att] * 2 + [ffn] * 2)
    assert {f.flops_note for f in r.findings} == {"per example (batch size unknown)"}


def test_transformer_block_classes_per_context(encoders):
    sm = encoders["mixed_float16"]
    # CPU with TensorFlow's Eigen kernels: MatMul and BatchMatMulV2 T=half compute in fp32,
    # Einsum T=half sums in fp16 (measured, opsets.CPU_EIGEN_HALF_MATMUL).
    eigen = audit(sm, CPU, signature="serve")
    by_op = {(f.op, f.audit_class) for f in eigen.findings}
    assert by_op == {
        ("BatchMatMulV2", "fp16-storage"),
        ("MatMul", "fp16-storage"),
        ("Einsum", "fp16-accumulate"),
    }
    einsum = next(f for f in eigen.findings if f.op == "Einsum")
    assert "Eigen" in einsum.accumulation_reason and "measured" in einsum.accumulation_reason
    # oneDNN taking T=half: every one fp32 (measured).
    onednn = audit(sm, RuntimeContext(device="cpu", tf_version="t", cpu_onednn_fp16=True))
    assert {f.audit_class for f in onednn.findings} == {"fp16-storage"}
    assert all("oneDNN" in f.accumulation_reason for f in onednn.findings)
    # GPU: TF_FP16_MATMUL_USE_FP32_COMPUTE is a boolean; "0"/"false" (any case) select fp16.
    n = len(eigen.findings)
    for value, cls in (
        (None, "fp16-storage"),
        ("1", "fp16-storage"),
        ("true", "fp16-storage"),
        ("yes", "fp16-storage"),  # not a boolean TensorFlow parses: its default (fp32) holds
        ("0", "fp16-accumulate"),
        ("false", "fp16-accumulate"),
        ("FALSE", "fp16-accumulate"),
    ):
        env = {} if value is None else {"TF_FP16_MATMUL_USE_FP32_COMPUTE": value}
        r = audit(sm, gpu(env), signature="serve")
        assert dict(class_counts(r)) == {cls: n}, value
    # The conv switch does not touch matmuls.
    r = audit(sm, gpu({"TF_FP16_CONV_USE_FP32_COMPUTE": "0"}), signature="serve")
    assert dict(class_counts(r)) == {"fp16-storage": n}


def test_float32_block_mixed_policy_and_amp(encoders):
    r = audit(encoders["float32"], gpu(amp=True, compute_capability="8.0"), signature="serve")
    assert {f.audit_class for f in r.findings} == {"fp32"}
    # MatMul, BatchMatMulV2 and Einsum are on grappler's fp16 allow list
    assert r.summary.amp_predicted_rewrites == len(r.findings)
    assert all("tf32" in f.flag_texts for f in r.findings)


def test_summary_shares_by_kind_and_ops_selection():
    """A graph with one Conv2D (T=half) and one MatMul (T=float): shares per kind and together."""
    gd = graph_pb2.GraphDef()
    x = add_node(gd.node, "x", "Placeholder", dtype="DT_HALF")
    for d in (1, 8, 8, 16):
        x.attr["shape"].shape.dim.add().size = d
    w = add_node(gd.node, "w", "Placeholder", dtype="DT_HALF")
    for d in (3, 3, 16, 16):
        w.attr["shape"].shape.dim.add().size = d
    add_node(gd.node, "conv", "Conv2D", ["x", "w"], T="DT_HALF", strides=[1] * 4, padding=b"SAME")
    a = add_node(gd.node, "a", "Placeholder", dtype="DT_FLOAT")
    for d in (8, 24):
        a.attr["shape"].shape.dim.add().size = d
    b = add_node(gd.node, "b", "Placeholder", dtype="DT_FLOAT")
    for d in (24, 40):
        b.attr["shape"].shape.dim.add().size = d
    add_node(gd.node, "mm", "MatMul", ["a", "b"], T="DT_FLOAT")
    r = audit(gd, CPU)
    conv_flops = 2 * 8 * 8 * 16 * 3 * 3 * 16
    mm_flops = 2 * 8 * 40 * 24
    assert {f.node: f.flops for f in r.findings} == {"conv": conv_flops, "mm": mm_flops}
    by = {k.kind: k for k in r.summary.by_kind}
    total = conv_flops + mm_flops
    assert (by["conv"].count, by["matmul"].count, by["all"].count) == (1, 1, 2)
    assert by["conv"].flop_share == pytest.approx(conv_flops / total)
    assert by["matmul"].flop_share == pytest.approx(mm_flops / total)
    assert by["conv"].fp16_share == 1.0 and by["matmul"].fp16_share == 0.0
    assert by["all"].fp16_share == pytest.approx(conv_flops / total) == r.summary.fp16_share
    only = select_kind(r, "matmul")
    assert [f.node for f in only.findings] == ["mm"] and only.summary.total_flops == mm_flops
    assert [f.node for f in select_kind(r, "conv").findings] == ["conv"]
    with pytest.raises(ValueError, match="kind must be"):
        select_kind(r, "dense")


def test_cli_ops_flag(tmp_path):
    gd = graph_pb2.GraphDef()
    for name, shape in (("a", (4, 8)), ("b", (8, 16))):
        n = add_node(gd.node, name, "Placeholder", dtype="DT_HALF")
        for d in shape:
            n.attr["shape"].shape.dim.add().size = d
    add_node(gd.node, "mm", "MatMul", ["a", "b"], T="DT_HALF")
    path = tmp_path / "g.pb"
    path.write_bytes(gd.SerializeToString())
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    cmd = [sys.executable, "-m", "tf_fp16ops.audit", str(path), "--format", "json", "--device"]
    out = {}
    for ops in ("all", "matmul", "conv"):
        p = subprocess.run(cmd + ["gpu", "--ops", ops], capture_output=True, text=True, env=env)
        assert p.returncode == 0, p.stderr
        assert p.stderr == ""
        out[ops] = json.loads(p.stdout)
    assert [f["op"] for f in out["all"]["findings"]] == ["MatMul"]
    assert out["all"]["findings"] == out["matmul"]["findings"]
    assert out["conv"]["findings"] == [] and out["conv"]["summary"]["call_sites"] == 0
    f = out["all"]["findings"][0]
    assert (f["kind"], f["T"], f["flops"], f["audit_class"]) == (
        "matmul",
        "half",
        2 * 4 * 16 * 8,
        "fp16-storage",
    )
    assert "TF_FP16_MATMUL_USE_FP32_COMPUTE" in f["accumulation_reason"]
    p = subprocess.run(cmd + ["gpu", "--ops", "dense"], capture_output=True, text=True, env=env)
    assert p.returncode == 2 and "--ops" in p.stderr and "dense" in p.stderr


def _fp16_matmul_graph(tacc: str) -> graph_pb2.GraphDef:
    """This package's Fp16MatMul (attrs T, Tacc, adj_x, adj_y; batch dims broadcast as
    BatchMatMulV2), built by hand: x [4, 16, 32] (half), y [32, 24] (adjoint off)."""
    gd = graph_pb2.GraphDef()
    for name, shape in (("x", (4, 16, 32)), ("y", (24, 32))):
        n = add_node(gd.node, name, "Placeholder", dtype="DT_HALF")
        for d in shape:
            n.attr["shape"].shape.dim.add().size = d
    add_node(
        gd.node, "mm", "Fp16MatMul", ["x", "y"], T="DT_HALF", Tacc=tacc, adj_x=False, adj_y=True
    )
    return gd


@pytest.mark.parametrize(
    "tacc,acc,cls", [("DT_HALF", "fp16", "fp16-accumulate"), ("DT_FLOAT", "fp32", "fp16-storage")]
)
def test_fp16_matmul_classified_by_tacc(tacc, acc, cls):
    for ctx in (CPU, gpu({"TF_FP16_MATMUL_USE_FP32_COMPUTE": "0"})):
        r = audit(_fp16_matmul_graph(tacc), ctx)
        (f,) = r.findings
        assert (f.op, f.kind, f.Tacc, f.accumulation, f.audit_class) == (
            "Fp16MatMul",
            "matmul",
            tacc[3:].lower(),
            acc,
            cls,
        )
        assert f.accumulation_reason.startswith(f"Tacc={tacc[3:].lower()}")
        # adj_y: y [24, 32] is used as [32, 24]; batch 4 broadcast: 2 * 4 * 16 * 24 * 32
        assert f.output_shape == (4, 16, 24) and f.flops == 2 * 4 * 16 * 24 * 32
    assert not audit(_fp16_matmul_graph(tacc), CPU).unknown_ops


def test_einsum_flops_and_flags():
    from tf_fp16ops.audit.passes.shapes import parse_einsum

    assert parse_einsum("bij,bjk->bik", [3, 3]) == (["bij", "bjk"], "bik")
    assert parse_einsum("ij,jk", [2, 2]) == (["ij", "jk"], "ik")  # implicit output
    assert parse_einsum("...ij,jk->...ik", [4, 2]) == ([".ij", "jk"], ".ik")
    assert parse_einsum("ij,jk->ik", [3, 2]) is None  # rank does not fit
    assert parse_einsum("ij,jk->iq", [2, 2]) == (["ij", "jk"], "iq")
    gd = graph_pb2.GraphDef()
    for name, shape in (("a", (2, 5, 3000)), ("b", (3000, 7))):
        n = add_node(gd.node, name, "Placeholder", dtype="DT_HALF")
        for d in shape:
            n.attr["shape"].shape.dim.add().size = d
    e = add_node(gd.node, "e", "Einsum", ["a", "b"], T="DT_HALF", N=2)
    e.attr["equation"].s = b"...k,kn->...n"
    r = audit(gd, CPU)  # Eigen CPU: Einsum half sums in fp16 (measured)
    (f,) = r.findings
    assert f.flops == 2 * 2 * 5 * 3000 * 7 and f.output_shape == (2, 5, 7)
    assert "fp16-acc-long-reduction(3000>2048)" in f.flag_texts
    assert "tensor-core-unfriendly(N 7 not a multiple of 8)" in f.flag_texts
    e.attr["equation"].s = b"ij,jq->iq"  # the equation does not fit the operand ranks
    assert audit(gd, CPU).findings[0].flops is None


def test_seed_matmul_twin():
    """The seed question for matmuls: tf.matmul on half vs the fp32 product cast to half. The
    audit calls the first fp16-storage (fp32 accumulation, measured on CPU) and the second
    fake-fp16; on this CPU the two differ by at most one binary16 rounding of fp32 sums taken
    in different orders, unlike a product summed in fp16 (the Einsum kernel of Eigen), which
    changes most outputs."""

    @tf.function
    def twin(a, b):
        m16 = tf.matmul(a, b)
        m32 = tf.cast(tf.matmul(tf.cast(a, tf.float32), tf.cast(b, tf.float32)), tf.float16)
        return m16, m32

    spec = tf.TensorSpec([64, 512], tf.float16), tf.TensorSpec([512, 64], tf.float16)
    r = audit(twin.get_concrete_function(*spec), CPU)
    cls = sorted((f.T, f.audit_class) for f in r.findings)
    assert cls == [("float", "fake-fp16"), ("half", "fp16-storage")]
    fake = next(f for f in r.findings if f.T == "float")
    assert any(fl.startswith("fake-fp16-a") for fl in fake.flag_texts)
    rng = np.random.default_rng(0)
    a = rng.uniform(0, 1, (64, 512)).astype(np.float16)
    b = rng.uniform(0, 1, (512, 64)).astype(np.float16)
    m16, m32 = (x.numpy().astype(np.float64) for x in twin(a, b))
    ref = a.astype(np.float64) @ b.astype(np.float64)  # exact: 512 products of 11-bit numbers
    # outputs near 128: one binary16 ulp is 0.125; fp32 sums in any order stay within 2^-10 rel.
    assert np.max(np.abs(m16 - ref) / ref) < 2**-10 and np.max(np.abs(m32 - ref) / ref) < 2**-10
    assert np.mean(m16 != m32) < 0.01
    e16 = tf.function(lambda a, b: tf.einsum("ij,jk->ik", a, b))(a, b).numpy().astype(np.float64)
    differ = np.mean(e16 != m32)
    if onednn_takes_half_here():
        assert differ < 0.01  # _MklEinsum: fp32 accumulation (measured)
    else:
        assert differ > 0.5  # Eigen's Einsum sums in fp16: most outputs change (78.9% measured)


def test_cpu_probes_match_the_static_table():
    """The matmul probes on this machine agree with what the audit predicts for it."""
    from tf_fp16ops.audit.context import RuntimeContext as Ctx
    from tf_fp16ops.audit.runtime.probes import ProbeConfig, run_probes

    ctx = Ctx.from_process().with_overrides(device="cpu")
    for op in ("MatMul", "BatchMatMulV2", "Einsum"):
        res = run_probes(ProbeConfig(op, "half", None, "cpu"))
        gd = graph_pb2.GraphDef()
        for name in ("a", "b"):
            add_node(gd.node, name, "Placeholder", dtype="DT_HALF")
        n = add_node(gd.node, "m", op, ["a", "b"], T="DT_HALF", N=2)
        if op == "Einsum":
            n.attr["equation"].s = b"ij,jk->ik"
        (f,) = audit(gd, ctx).findings
        assert res.observed == f.accumulation, (op, res, f.accumulation_reason)
