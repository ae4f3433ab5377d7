"""Provenance pass: where a conv input comes from, through Identity/ReadVariableOp/Cast chains and
across function boundaries (argument -> caller's input; call output -> callee's return value)."""

from __future__ import annotations

from ..findings import Provenance
from ..graph import AuditGraph, CallSite, Frame, parse_ret, resolve_bindings
from ..opsets import CALL_ATTRS, CAST_OPS, IDENTITY_LIKE, READ_VARIABLE, VARIABLE_OPS
from .attrs import NodeAttrs, dtype_name, shape_of

_MAX_STEPS = 10_000
_SINGLE_CALLEE = ("PartitionedCall", "StatefulPartitionedCall")
_WALK_THROUGH = IDENTITY_LIKE | CAST_OPS | READ_VARIABLE


def trace(
    ag: AuditGraph, site: CallSite, input_index: int, memo: dict | None = None
) -> Provenance | None:
    """Provenance of input `input_index` of the conv at `site`; None if the input does not exist.

    `memo` (optional, one per audit graph) keeps the provenance of producers whose chain ends in
    their own scope without reaching a function argument or a call and without a function-attr
    placeholder: such a result does not depend on the call site, so every conv fed by the same
    producer (e.g. one weight feeding many convs, or one function called from many sites) reuses it.
    """
    p = ag.producer((site.scope, site.node), input_index)
    if p is None:
        return None
    if memo is None:
        return _trace(ag, site.frames, p)[0]
    key = (p[0][0], p[0][1], p[1])
    hit = memo.get(key)
    if hit is None:
        hit, local = _trace(ag, site.frames, p)
        if local:
            memo[key] = hit
    return hit


def _trace(ag: AuditGraph, site_frames: tuple[Frame, ...], p) -> tuple[Provenance, bool]:
    """(provenance, whether it is independent of the call site)."""
    frames = list(site_frames)
    src, out = p
    steps: list[tuple[str, str, str | None]] = []  # conv-side first
    crossed: list[str] = []
    shape = None
    variable = None
    local = True
    scopes = ag.scopes
    for _ in range(_MAX_STEPS):
        bindings = frames[-1].bindings if frames else {}
        scope = scopes[src[0]]
        name = src[1]
        nd = scope.index.get(name)
        if nd is None:  # function argument
            local = False
            pos, argdef = scope.args[name]
            dtype = dtype_name(argdef.type) or (
                type_attr_value(bindings.get(argdef.type_attr)) if argdef.type_attr else None
            )
            if shape is None:
                aa = scope.arg_attrs.get(pos, {})
                if "_output_shapes" in aa and len(aa["_output_shapes"].list.shape):
                    shape = shape_of(aa["_output_shapes"].list.shape[0])
            if frames and frames[-1].callee == scope.key:
                fr = frames.pop()
                offset = CALL_ATTRS.get(fr.call_op, ((), 0))[1]
                crossed.append(f"{scope.function}:{name}<-{fr.call_node}")
                nxt = ag.producer((fr.caller, fr.call_node), pos + offset)
                if nxt is None:
                    return _result("_Arg", name, dtype, steps, variable, shape, crossed), local
                src, out = nxt
                continue
            return _result("_Arg", name, dtype, steps, variable, shape, crossed), local
        op = scope.op_of(name)
        na = NodeAttrs(nd, bindings)
        if shape is None:
            shape = na.output_shape(op, out)
        if op in _WALK_THROUGH:
            dtype = na.output_dtype(op, out)
            steps.append((op, name, dtype))
            nxt = ag.producer(src, out if op == "IdentityN" else 0)
            local = local and not na.placeholder
            if nxt is None:
                return _result(op, name, dtype, steps[:-1], variable, shape, crossed), local
            src, out = nxt
            continue
        if op in VARIABLE_OPS:
            a = na.attr_map
            variable = (
                a["shared_name"].s.decode() if "shared_name" in a and a["shared_name"].s else name
            )
            dtype = na.type("dtype")
            return _result(
                op, name, dtype, steps, variable, shape, crossed
            ), local and not na.placeholder
        if op in _SINGLE_CALLEE or (op not in CALL_ATTRS and ag.callees(scope.key, name)):
            local = False
            callees = ag.callees(scope.key, name)
            if len(callees) == 1 and not any(f.callee == callees[0][0] for f in frames):
                ckey, attr, raw = callees[0]
                callee = scopes[ckey]
                if out < len(callee.rets):
                    ref = parse_ret(callee, callee.rets[out])
                    if ref is not None:
                        frames.append(
                            Frame(scope.key, name, op, attr, ckey, resolve_bindings(raw, bindings))
                        )
                        crossed.append(f"{name}->{callee.function}")
                        src, out = (ckey, ref[0]), ref[1]
                        continue
        dtype = na.output_dtype(op, out)
        return _result(
            op, name, dtype, steps, variable, shape, crossed
        ), local and not na.placeholder
    return _result("?", "(chain too long)", None, steps, variable, shape, crossed), False


def type_attr_value(a) -> str | None:
    return dtype_name(a.type) if a is not None and a.type else None


def _result(op, node, dtype, steps, variable, shape, crossed) -> Provenance:
    if variable is None and dtype == "resource" and op in ("Placeholder", "_Arg"):
        variable = node  # a captured variable handle
    chain = [f"{op}({dtype or '?'})"]
    dtypes: list[str] = [dtype] if dtype and dtype != "resource" else []
    for s in reversed(steps):
        d = s[2]
        chain.append(f"{s[0]}({d or '?'})")
        if d and d != "resource" and (not dtypes or dtypes[-1] != d):
            dtypes.append(d)
    return Provenance(op, node, dtype, tuple(chain), tuple(dtypes), variable, shape, tuple(crossed))
