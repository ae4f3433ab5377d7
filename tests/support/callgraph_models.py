"""Deterministic call-graph models for the audit's call-site tests and benchmark (protos only).

Each builder returns a `protos.GraphDef` (TensorBoard's copy of TensorFlow's protos, no
TensorFlow import), so the same bytes come out in every process and release.
"""

from __future__ import annotations

from tf_fp16ops.audit import protos

HALF = protos.DT_HALF


def _node(nodes, name, op, inputs=(), **attrs):
    n = nodes.add()
    n.name, n.op = name, op
    n.input.extend(inputs)
    for k, v in attrs.items():
        if k in ("T", "dtype", "SrcT", "DstT"):
            if isinstance(v, str):
                n.attr[k].placeholder = v
            else:
                n.attr[k].type = v
        elif isinstance(v, bytes):
            n.attr[k].s = v
        elif isinstance(v, list):
            n.attr[k].list.i.extend(v)
    return n


def _conv(nodes, name, x, w, T=HALF):
    c = _node(nodes, name, "Conv2D", [x, w], T=T, strides=[1, 1, 1, 1], padding=b"SAME")
    s = c.attr["_output_shapes"].list.shape.add()
    for d in (1, 8, 8, 16):
        s.dim.add().size = d
    return c


def _function(gd, name, args=("a", "b"), outputs=()):
    f = gd.library.function.add()
    f.signature.name = name
    for a in args:
        f.signature.input_arg.add(name=a, type=HALF)
    for o in outputs:
        f.signature.output_arg.add(name=o, type=HALF)
    return f


def _call(nodes, name, callee, inputs=("a", "b"), op="PartitionedCall"):
    n = _node(nodes, name, op, list(inputs))
    n.attr["f"].func.name = callee
    return n


def _roots(gd, first):
    """Top-level x, w (Placeholder, Const, T=half) and one StatefulPartitionedCall of `first`."""
    _node(gd.node, "x", "Placeholder", dtype=HALF)
    _node(gd.node, "w", "Const", dtype=HALF)
    _call(gd.node, "top", first, ("x", "w"), op="StatefulPartitionedCall")


def chain(depth: int, direct: bool = False) -> protos.GraphDef:
    """L0 -> L1 -> ... -> L{depth-1}, each passing its two arguments on; a conv at the bottom.

    `direct`: the calls are function-op calls (node op = function name) instead of
    PartitionedCall."""
    gd = protos.GraphDef()
    for i in range(depth):
        f = _function(gd, f"L{i}")
        if i + 1 < depth:
            if direct:
                _node(f.node_def, "c", f"L{i + 1}", ["a", "b"])
            else:
                _call(f.node_def, "c", f"L{i + 1}")
        else:
            _conv(f.node_def, "conv", "a", "b")
    _roots(gd, "L0")
    return gd


def diamond(depth: int) -> protos.GraphDef:
    """L0 .. L{depth-1}: each level calls the next twice (two call nodes) passing its arguments;
    a conv at the bottom: 2**(depth-1) call paths to it."""
    gd = protos.GraphDef()
    for i in range(depth):
        f = _function(gd, f"L{i}")
        if i + 1 < depth:
            _call(f.node_def, "c1", f"L{i + 1}")
            _call(f.node_def, "c2", f"L{i + 1}")
        else:
            _conv(f.node_def, "conv", "a", "b")
    _roots(gd, "L0")
    return gd


def mixed() -> protos.GraphDef:
    """Recursion, direct function-op calls, While/If bodies, a Cast on the way in, and a
    function-attr placeholder T bound at its call sites."""
    gd = protos.GraphDef()
    a = _function(gd, "A")  # A -> B -> A (cut), B holds a conv
    _call(a.node_def, "toB", "B")
    _conv(a.node_def, "convA", "a", "b")
    b = _function(gd, "B")
    _call(b.node_def, "toA", "A")
    _node(b.node_def, "cast", "Cast", ["a"], SrcT=HALF, DstT=protos.DT_FLOAT)
    _conv(b.node_def, "convB", "cast:y:0", "b", T=protos.DT_FLOAT)
    body = _function(gd, "body")
    _node(body.node_def, "direct", "B", ["a", "b"])  # function-op call
    _function(gd, "cond")
    then = _function(gd, "then")
    _conv(then.node_def, "convT", "a", "b")
    poly = _function(gd, "poly")
    poly.signature.attr.add(name="T", type="type")
    _conv(poly.node_def, "convP", "a", "b", T="T")
    _node(gd.node, "x", "Placeholder", dtype=HALF)
    _node(gd.node, "w", "Const", dtype=HALF)
    _call(gd.node, "callA", "A", ("x", "w"), op="StatefulPartitionedCall")
    wl = _node(gd.node, "loop", "While", ["x", "w"])
    wl.attr["cond"].func.name = "cond"
    wl.attr["body"].func.name = "body"
    br = _node(gd.node, "branch", "If", ["x", "x", "w"])
    br.attr["then_branch"].func.name = "then"
    br.attr["else_branch"].func.name = "A"
    for i, t in enumerate((HALF, protos.DT_FLOAT)):
        c = _call(gd.node, f"poly{i}", "poly", ("x", "w"))
        c.attr["f"].func.attr["T"].type = t
    return gd


def scale() -> protos.GraphDef:
    """The scale benchmark's graph (tools/audit_scale_bench.py) at 1/40 size: 100 convs in 20
    functions, call chains 5 deep."""
    import importlib.util
    import os

    spec = importlib.util.spec_from_file_location(
        "audit_scale_bench",
        os.path.join(os.path.dirname(__file__), "..", "..", "tools", "audit_scale_bench.py"),
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.make_graph(20, 31, 5, 5)


GOLDEN_MODELS = {
    "chain_30": lambda: chain(30),
    "chain_direct_30": lambda: chain(30, direct=True),
    "diamond_7": lambda: diamond(7),
    "mixed": mixed,
    "scale": scale,
}
