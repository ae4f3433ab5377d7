"""Per-call-site pass: runs the other passes on one conv call site and builds its finding."""

from __future__ import annotations

import dataclasses

from ..codes import flag
from ..context import RuntimeContext
from ..findings import ConvFinding, make
from ..graph import AuditGraph, CallSite
from ..model import KerasLayer
from ..opsets import CAST_OPS, IDENTITY_LIKE, MATMUL_OPS, SITE_OPS
from . import accumulation, amp, classify, policy, provenance, shapes
from .attrs import NodeAttrs


class SiteMemo:
    """Results shared between the call sites of one audit (one graph, one runtime context).

    Each entry is a pure function of its key, so reusing it leaves every finding unchanged:
      provenance: see `provenance.trace`;
      conv: (T, Tacc, device, output shape) per conv node read without a placeholder;
      accumulation / amp: per (op, T, Tacc, device);
      shapes: per shape inputs, with the conv attrs the result was computed from (checked on reuse);
      path: the facts of the last call path (consecutive sites of one scope share it).
    """

    __slots__ = ("provenance", "conv", "accumulation", "amp", "shapes", "path")

    def __init__(self):
        self.provenance: dict = {}
        self.conv: dict = {}
        self.accumulation: dict = {}
        self.amp: dict = {}
        self.shapes: dict = {}
        self.path: tuple = (None, None, None)


class _Reads:
    """Records the attrs `shapes.analyse` reads, to check them when its result is reused."""

    __slots__ = ("na", "reads")

    def __init__(self, na: NodeAttrs):
        self.na = na
        self.reads: list = []

    def ints(self, key):
        v = self.na.ints(key)
        self.reads.append(("ints", key, v))
        return v

    def str(self, key):
        v = self.na.str(key)
        self.reads.append(("str", key, v))
        return v

    def kind(self, key):
        v = self.na.kind(key)
        self.reads.append(("kind", key, v))
        return v


def _shape_facts(
    memo: SiteMemo, info, T, acc, data_shape, filt_shape, out_shape, grad_shape, na: NodeAttrs
):
    key = (info.name, T, acc, data_shape, filt_shape, out_shape, grad_shape)
    hit = memo.shapes.get(key)
    if hit is not None and all(getattr(na, kind)(k) == v for kind, k, v in hit[0]):
        return hit[1]
    rec = _Reads(na)
    sh = shapes.analyse(info, T, acc, data_shape, filt_shape, out_shape, grad_shape, rec)
    memo.shapes[key] = (tuple(rec.reads), sh)
    return sh


_LOOPS = frozenset({"While", "StatelessWhile"})
_BRANCHES = frozenset({"If", "StatelessIf", "Case", "StatelessCase"})


def control_flow_note(frames) -> str:
    """How a call site's FLOPs count when its call path enters a loop body or a branch:
    "per iteration of While 'w'" (the trip count is a run-time value; a loop's cond function counts
    the same way), "per branch: then_branch of If 'c'" (one branch runs per call, the report adds
    every branch's FLOPs). "" when the path holds neither."""
    parts = []
    for f in frames:
        if f.call_op in _LOOPS:
            parts.append(f"per iteration of {f.call_op} {f.call_node!r}")
        elif f.call_op in _BRANCHES:
            parts.append(f"per branch: {f.attr} of {f.call_op} {f.call_node!r}")
    return "; ".join(parts)


def control_flow_flags(frames) -> tuple:
    """An `in-loop` flag per While and an `in-branch` flag per If/Case on the call path."""
    out = []
    for f in frames:
        if f.call_op in _LOOPS:
            out.append(flag("in-loop", op=f.call_op, node=f.call_node))
        elif f.call_op in _BRANCHES:
            out.append(flag("in-branch", op=f.call_op, node=f.call_node, branch=f.attr))
    return tuple(out)


def _true(attrs, key: str) -> bool:
    return key in attrs and attrs[key].b


def xla_of_path(ag: AuditGraph, site: CallSite) -> str | None:
    """How the call path of `site` enters an XLA-compiled function, or None: a function whose
    FunctionDef attr `_XlaMustCompile` is true (`tf.function(jit_compile=True)`, Keras
    `jit_compile`), or a call node with that attr set."""
    for f in site.frames:
        callee = ag.scopes[f.callee]
        if callee.fdef is not None and _true(callee.fdef.attr, "_XlaMustCompile"):
            return f"function {callee.function!r} has _XlaMustCompile=true (jit_compile=True)"
        nd = ag.scopes[f.caller].index.get(f.call_node)
        if nd is not None and _true(nd.attr, "_XlaMustCompile"):
            return f"call node {f.call_node!r} has _XlaMustCompile=true (jit_compile=True)"
    root = ag.scopes[site.root]
    if root.fdef is not None and _true(root.fdef.attr, "_XlaMustCompile"):
        return f"function {root.function!r} has _XlaMustCompile=true (jit_compile=True)"
    return None


def xla_of_node(nd) -> str | None:
    """Auto-clustering marks of a node (TF_XLA_FLAGS=--tf_xla_auto_jit): `_XlaCompile=true` or an
    `_XlaScope` / `_XlaCluster` attr; None when it has none."""
    a = nd.attr
    if _true(a, "_XlaCompile"):
        return "node has _XlaCompile=true (auto-jit cluster)"
    for key in ("_XlaCluster", "_XlaScope"):
        if key in a and a[key].s:
            return f"node has {key}={a[key].s.decode('utf-8', 'replace')!r} (auto-jit cluster)"
    return None


def _path_facts(ag: AuditGraph, site: CallSite, layers: dict, model_name: str | None):
    """Facts of a call path: call nodes, function path, signatures of the outermost call, site-id
    prefix, the layer named by a call node (or None), the control-flow note of the path and how
    it enters XLA (or None)."""
    call_nodes = tuple(f.call_node for f in site.frames)
    function_path = tuple(ag.scopes[f.callee].function or "" for f in site.frames)
    root = ag.scopes[site.root]
    sigs = tuple(root.signatures.get(call_nodes[0], ())) if call_nodes else None
    prefix = "" if root.function is None else root.function + ":"
    path = " > ".join(f"{c}->{fn}" for c, fn in zip(call_nodes, function_path, strict=True))
    full_path = ((root.function,) if root.function else ()) + function_path
    layer = policy.owning_layer(list(call_nodes), layers, model_name)
    cf_note = control_flow_note(site.frames)
    xla = xla_of_path(ag, site)
    cf = control_flow_flags(site.frames)
    return call_nodes, full_path, sigs, f"{prefix}{path} | ", layer, root, cf_note, xla, cf


def _path(ag, site, layers, model_name, memo):
    frames, root_key, pf = memo.path
    if frames is not site.frames or root_key != site.root:
        pf = _path_facts(ag, site, layers, model_name)
        memo.path = (site.frames, site.root, pf)
    return pf


def finding(
    ag: AuditGraph,
    site: CallSite,
    ctx: RuntimeContext,
    layers: dict[str, KerasLayer],
    model_name: str | None,
    memo: SiteMemo | None = None,
) -> ConvFinding:
    """The finding of one call site. `memo`: share results between the sites of one audit."""
    if memo is None:
        memo = SiteMemo()
    scope = ag.scopes[site.scope]
    nd = scope.index[site.node]
    op = scope.op_of(site.node)
    info = SITE_OPS[op]
    if op in MATMUL_OPS:
        return _matmul_finding(ag, site, ctx, layers, model_name, memo, scope, nd, op, info)
    b = site.bindings
    na = NodeAttrs(nd, b)
    ckey = (site.scope, site.node)
    facts = memo.conv.get(ckey)
    if facts is None:
        T = na.type("T")
        Tacc = na.type("Tacc") if info.backend == "ours" else None
        facts = (T, Tacc, nd.device, na.output_shape(op, 0))
        if not na.placeholder:
            memo.conv[ckey] = facts
    T, Tacc, device_field, out_shape = facts
    pm = memo.provenance
    data = provenance.trace(ag, site, info.data_input, pm) if info.data_input is not None else None
    filt = (
        provenance.trace(ag, site, info.filter_input, pm) if info.filter_input is not None else None
    )
    grad = provenance.trace(ag, site, info.grad_input, pm) if info.grad_input is not None else None
    device = accumulation.target_device(device_field, ctx)
    pf = _path(ag, site, layers, model_name, memo)
    xla = pf[7] or xla_of_node(nd)
    akey = (op, T, Tacc, device, xla is not None)
    acc = memo.accumulation.get(akey)
    if acc is None:
        acc = memo.accumulation[akey] = accumulation.effective(
            info, T, Tacc, device, ctx, xla is not None
        )
    main_input = data if data is not None else grad
    cls = classify.audit_class(T, acc.accumulation, main_input, filt)
    sh = _shape_facts(
        memo,
        info,
        T,
        acc.accumulation,
        data.shape if data else None,
        filt.shape if filt else None,
        out_shape,
        grad.shape if grad else None,
        na,
    )
    flags = list(classify.provenance_flags(T, main_input, filt)) + list(sh.flags)
    if (
        sh.note.startswith("per example")
        and main_input is not None
        and any(c.startswith("SpaceToBatchND(") for c in main_input.chain)
    ):
        # A dilated convolution as Keras' and tf.nn's TF backend run it: SpaceToBatchND folds
        # the dilation blocks into the batch, so one of the conv's batch entries is a part of one
        # example, not a whole one.
        sh = dataclasses.replace(
            sh,
            note="per batch entry of the conv, which SpaceToBatchND made a part of one example "
            "(batch size unknown; multiply by the block size for one example)",
        )
    return _record(
        site,
        scope,
        info,
        op,
        ctx,
        layers,
        model_name,
        memo,
        pf,
        akey,
        flags,
        kind="conv",
        T=T,
        Tacc=Tacc,
        device=device,
        device_field=device_field,
        acc=acc,
        cls=cls,
        data=main_input,
        filt=filt,
        sh=sh,
        xla=xla,
    )


# Ops between a Reshape and the matmul that keep the shape (a cast keeps it too).
_SHAPE_KEEPING = (IDENTITY_LIKE - {"IdentityN"}) | CAST_OPS
_MAX_HOPS = 16


def reshaped_batch(ag: AuditGraph, site: CallSite, input_index: int) -> tuple[int, ...] | None:
    """The shape input `input_index` of the matmul at `site` was reshaped from, through identities
    and casts in the site's own function, when that shape's only unknown dimension is its first
    (the batch); None otherwise (no Reshape, a function argument, other unknown sizes).
    `shapes.analyse_matmul` (`a_batch`) relates the operand's unknown size to the batch with it:
    e.g. a Tensordot's or `tf_fp16ops.einsum`'s rows [B*T, C] from [B, T, C], or its batch
    [B*H, T, D] from [B, H, T, D]."""
    scope = ag.scopes.get(site.scope)
    p = ag.producer((site.scope, site.node), input_index)
    for _ in range(_MAX_HOPS):
        if scope is None or p is None or scope.index.get(p[0][1]) is None:
            return None
        op = scope.op_of(p[0][1])
        if op == "Reshape":
            break
        if op not in _SHAPE_KEEPING:
            return None
        p = ag.producer(p[0], 0)
    else:
        return None
    src = ag.producer(p[0], 0)
    if src is None or scope.index.get(src[0][1]) is None:
        return None
    pre = NodeAttrs(scope.index[src[0][1]], site.bindings).output_shape(
        scope.op_of(src[0][1]), src[1]
    )
    if pre is None or [d < 0 for d in pre] != [True] + [False] * (len(pre) - 1):
        return None
    return pre


def _matmul_finding(ag, site, ctx, layers, model_name, memo, scope, nd, op, info) -> ConvFinding:
    """The finding of one matmul-family call site: operand a as `data`, b as `filter`."""
    na = NodeAttrs(nd, site.bindings)
    T = na.type(info.dtype_attr)
    Tacc = na.type("Tacc") if info.backend == "ours" else None
    pm = memo.provenance
    n_inputs = len(scope.input_refs(site.node) or ())
    a = provenance.trace(ag, site, info.a_input, pm)
    b = provenance.trace(ag, site, info.b_input, pm) if n_inputs > 1 else None
    device = accumulation.target_device(nd.device, ctx)
    pf = _path(ag, site, layers, model_name, memo)
    xla = pf[7] or xla_of_node(nd)
    akey = (op, T, Tacc, device, xla is not None)
    acc = memo.accumulation.get(akey)
    if acc is None:
        acc = memo.accumulation[akey] = accumulation.effective_matmul(
            info, T, Tacc, device, ctx, xla is not None
        )
    cls = classify.audit_class(T, acc.accumulation, a, b)
    sh = shapes.analyse_matmul(
        info,
        T,
        acc.accumulation,
        a.shape if a else None,
        b.shape if b else None,
        na.output_shape(op, 0),
        na,
        a_batch=reshaped_batch(ag, site, info.a_input) if info.family != "einsum" else None,
    )
    flags = list(classify.provenance_flags(T, a, b, ("a", "b"))) + list(sh.flags)
    return _record(
        site,
        scope,
        info,
        op,
        ctx,
        layers,
        model_name,
        memo,
        pf,
        akey,
        flags,
        kind="matmul",
        T=T,
        Tacc=Tacc,
        device=device,
        device_field=nd.device,
        acc=acc,
        cls=cls,
        data=a,
        filt=b,
        sh=sh,
        xla=xla,
    )


def _record(
    site,
    scope,
    info,
    op,
    ctx,
    layers,
    model_name,
    memo,
    pf,
    akey,
    flags,
    *,
    kind,
    T,
    Tacc,
    device,
    device_field,
    acc,
    cls,
    data,
    filt,
    sh,
    xla,
) -> ConvFinding:
    """What both kinds of site add to their flags (TF32, AMP's prediction, XLA's round trip, the
    Keras layer's policy) and the finding itself."""
    if acc.tf32:
        flags.append(flag("tf32"))
    if akey in memo.amp:
        prediction = memo.amp[akey]
    else:
        prediction = memo.amp[akey] = amp.predict(op, T, device, ctx)
    if prediction is not None and prediction.rewrite:
        flags.append(flag("amp-predicted-rewrite"))
    if xla is not None and cls == "fake-fp16":
        flags.append(flag("xla-may-drop-round-trip"))
    call_nodes, function_path, sigs, path_id, layer, root, cf_note, _, cf = pf
    if layer is None:
        layer = policy.owning_layer([site.node], layers, model_name)
    if scope.owner_layer is not None and scope.owner_layer in layers:
        layer = layers[scope.owner_layer]
    if layer is not None and layer.compute_dtype in ("float16", "bfloat16") and T == "float":
        flags.append(flag("policy-mismatch", policy=layer.policy, T=T))
    if sigs is None:
        sigs = tuple(root.signatures.get(site.node, ()))
    return make(
        ConvFinding,
        site_id=f"{scope.unit} | {path_id}{site.node}",
        unit=scope.unit,
        function_path=function_path,
        call_nodes=call_nodes,
        signatures=sigs,
        node=site.node,
        op=op,
        direction=info.direction,
        device=device_field,
        target_device=device,
        T=T,
        Tacc=Tacc,
        data=data,
        filter=filt,
        keras_layer=layer.name if layer else None,
        keras_policy=layer.policy if layer else None,
        accumulation=acc.accumulation,
        accumulation_reason=acc.reason,
        audit_class=cls,
        amp=prediction,
        flops=sh.flops,
        flops_note=f"{sh.note}; {cf_note}" if cf_note and sh.flops is not None else sh.note,
        input_shape=sh.input_shape,
        filter_shape=sh.filter_shape,
        output_shape=sh.output_shape,
        flags=tuple(flags) + cf,
        observed=None,
        kind=kind,
        xla=xla,
    )
