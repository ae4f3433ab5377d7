"""Per-call-site pass: runs the other passes on one conv call site and builds its finding."""
from __future__ import annotations

from ..context import RuntimeContext
from ..findings import ConvFinding
from ..graph import AuditGraph, CallSite
from ..model import KerasLayer
from ..opsets import CONV_OPS
from . import accumulation, amp, classify, policy, provenance, shapes
from .attrs import ints_attr, output_shape, str_attr, type_attr


def finding(ag: AuditGraph, site: CallSite, ctx: RuntimeContext, layers: dict[str, KerasLayer],
            model_name: str | None) -> ConvFinding:
    scope = ag.scopes[site.scope]
    nd = scope.index[site.node]
    info = CONV_OPS[nd.op]
    b = site.bindings
    T = type_attr(nd, "T", b)
    Tacc = type_attr(nd, "Tacc", b) if info.backend == "ours" else None
    data = provenance.trace(ag, site, info.data_input) if info.data_input is not None else None
    filt = provenance.trace(ag, site, info.filter_input) if info.filter_input is not None else None
    grad = provenance.trace(ag, site, info.grad_input) if info.grad_input is not None else None
    device = accumulation.target_device(nd.device, ctx)
    acc = accumulation.effective(info, T, Tacc, device, ctx)
    main_input = data if data is not None else grad
    cls = classify.audit_class(T, acc.accumulation, main_input, filt)
    sh = shapes.analyse(
        info, T, acc.accumulation,
        data.shape if data else None, filt.shape if filt else None, output_shape(nd, 0),
        grad.shape if grad else None, ints_attr(nd, "strides", b), ints_attr(nd, "dilations", b),
        str_attr(nd, "padding", b), str_attr(nd, "data_format", b), str_attr(nd, "filter_format", b))
    flags = list(classify.provenance_flags(T, main_input, filt)) + list(sh.flags)
    if acc.tf32:
        flags.append("tf32")
    prediction = amp.predict(nd.op, T, device, ctx)
    if prediction is not None and prediction.rewrite:
        flags.append("amp-predicted-rewrite")
    call_nodes = tuple(f.call_node for f in site.frames)
    layer = policy.owning_layer(list(call_nodes) + [site.node], layers, model_name)
    if scope.owner_layer is not None and scope.owner_layer in layers:
        layer = layers[scope.owner_layer]
    if layer is not None and layer.compute_dtype in ("float16", "bfloat16") and T == "float":
        flags.append(f"policy-mismatch(policy {layer.policy}, graph computes T=float)")
    function_path = tuple(ag.scopes[f.callee].function or "" for f in site.frames)
    root = ag.scopes[site.root]
    sigs = root.signatures.get(call_nodes[0], ()) if call_nodes else root.signatures.get(site.node, ())
    prefix = "" if root.function is None else root.function + ":"
    path = " > ".join(f"{c}->{fn}" for c, fn in zip(call_nodes, function_path))
    site_id = f"{scope.unit} | {prefix}{path} | {site.node}"
    return ConvFinding(
        site_id=site_id, unit=scope.unit,
        function_path=((root.function,) if root.function else ()) + function_path,
        call_nodes=call_nodes, signatures=tuple(sigs), node=site.node, op=nd.op, direction=info.direction,
        device=nd.device, target_device=device, T=T, Tacc=Tacc, data=main_input, filter=filt,
        keras_layer=layer.name if layer else None, keras_policy=layer.policy if layer else None,
        accumulation=acc.accumulation, accumulation_reason=acc.reason, audit_class=cls, amp=prediction,
        flops=sh.flops, flops_note=sh.note, input_shape=sh.input_shape, filter_shape=sh.filter_shape,
        output_shape=sh.output_shape, flags=tuple(flags))
