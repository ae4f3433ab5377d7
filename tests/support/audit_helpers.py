"""Model builders and small helpers for the audit tests (no fixtures: plain functions)."""

from __future__ import annotations

import collections

from tensorflow.core.framework import graph_pb2, types_pb2

from tf_fp16ops.audit import RuntimeContext

# A CPU where TensorFlow's own (Eigen) kernels run T=half convs (no avx512_fp16, e.g. AMD EPYC).
CPU = RuntimeContext(device="cpu", tf_version="test", cpu_onednn_fp16=False)


def gpu(env=None, **kw) -> RuntimeContext:
    return RuntimeContext(device="gpu", tf_version="test").with_overrides(env=env or {}, **kw)


def cpu(env=None) -> RuntimeContext:
    return CPU.with_overrides(env=env or {})


def node_counts(report) -> collections.Counter:
    """Distinct conv nodes per op type (a node called from several paths counts once)."""
    seen = {
        (f.unit, f.function_path[-1] if f.function_path else "", f.node, f.op)
        for f in report.findings
    }
    return collections.Counter(op for *_, op in seen)


def class_counts(report) -> collections.Counter:
    return collections.Counter(f.audit_class for f in report.findings)


def add_node(gd_or_fdef_nodes, name, op, inputs=(), **attrs):
    n = gd_or_fdef_nodes.add()
    n.name, n.op = name, op
    n.input.extend(inputs)
    for k, v in attrs.items():
        if k in ("T", "dtype", "Tacc", "SrcT", "DstT"):
            if isinstance(v, str) and not v.startswith("DT_"):
                n.attr[k].placeholder = v
            else:
                n.attr[k].type = getattr(types_pb2, v)
        elif isinstance(v, bytes):
            n.attr[k].s = v
        elif isinstance(v, bool):
            n.attr[k].b = v
        elif isinstance(v, float):
            n.attr[k].f = v
        elif isinstance(v, int):
            n.attr[k].i = v
        elif isinstance(v, (list, tuple)):
            n.attr[k].list.i.extend(v)
    return n


def conv_graph(op="Conv2D", T="DT_HALF", device="", **extra) -> graph_pb2.GraphDef:
    """Placeholder x[1,8,8,16] and Const w[3,3,16,16] of dtype T -> one conv op."""
    gd = graph_pb2.GraphDef()
    add_node(gd.node, "x", "Placeholder", dtype=T)
    w = add_node(gd.node, "w", "Const", dtype=T)
    w.attr["value"].tensor.dtype = getattr(types_pb2, T)
    for d in (3, 3, 16, 16):
        w.attr["value"].tensor.tensor_shape.dim.add().size = d
    x = gd.node[0]
    for d in (1, 8, 8, 16):
        x.attr["shape"].shape.dim.add().size = d
    c = add_node(
        gd.node, "conv", op, ["x", "w"], T=T, strides=[1, 1, 1, 1], padding=b"VALID", **extra
    )
    c.device = device
    return gd
