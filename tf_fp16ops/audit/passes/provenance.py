"""Provenance pass: where a conv input comes from, through Identity/ReadVariableOp/Cast chains and
across function boundaries (argument -> caller's input; call output -> callee's return value)."""
from __future__ import annotations

from ..findings import Provenance
from ..graph import AuditGraph, CallSite, Frame, parse_input, resolve_bindings
from ..opsets import CALL_ATTRS, CAST_OPS, IDENTITY_LIKE, READ_VARIABLE, VARIABLE_OPS
from .attrs import dtype_name, output_dtype, output_shape, shape_of, type_attr

_MAX_STEPS = 10_000
_SINGLE_CALLEE = ("PartitionedCall", "StatefulPartitionedCall")


def trace(ag: AuditGraph, site: CallSite, input_index: int) -> Provenance | None:
    """Provenance of input `input_index` of the conv at `site`; None if the input does not exist."""
    frames = list(site.frames)
    p = ag.producer((site.scope, site.node), input_index)
    if p is None:
        return None
    src, out = p
    steps: list[tuple[str, str, str | None]] = []  # conv-side first
    crossed: list[str] = []
    shape = None
    variable = None
    for _ in range(_MAX_STEPS):
        bindings = frames[-1].bindings if frames else {}
        scope = ag.scopes[src[0]]
        name = src[1]
        nd = scope.index.get(name)
        if nd is None:  # function argument
            pos, argdef = scope.args[name]
            dtype = dtype_name(argdef.type) or (
                type_attr_value(bindings.get(argdef.type_attr)) if argdef.type_attr else None)
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
                    return _result("_Arg", name, dtype, steps, variable, shape, crossed)
                src, out = nxt
                continue
            return _result("_Arg", name, dtype, steps, variable, shape, crossed)
        op = nd.op
        if shape is None:
            shape = output_shape(nd, out)
        if op in IDENTITY_LIKE or op in CAST_OPS or op in READ_VARIABLE:
            steps.append((op, name, output_dtype(nd, out, bindings)))
            nxt = ag.producer(src, out if op == "IdentityN" else 0)
            if nxt is None:
                return _result(op, name, output_dtype(nd, out, bindings), steps[:-1], variable, shape, crossed)
            src, out = nxt
            continue
        if op in VARIABLE_OPS:
            variable = nd.attr["shared_name"].s.decode() if "shared_name" in nd.attr and nd.attr["shared_name"].s else name
            return _result(op, name, type_attr(nd, "dtype", bindings), steps, variable, shape, crossed)
        if op in _SINGLE_CALLEE or (op not in CALL_ATTRS and ag.callees(scope.key, name)):
            callees = ag.callees(scope.key, name)
            if len(callees) == 1 and not any(f.callee == callees[0][0] for f in frames):
                ckey, attr, raw = callees[0]
                callee = ag.scopes[ckey]
                if out < len(callee.rets):
                    ref = parse_input(callee.rets[out], True)
                    if ref is not None:
                        frames.append(Frame(scope.key, name, op, attr, ckey, resolve_bindings(raw, bindings)))
                        crossed.append(f"{name}->{callee.function}")
                        src, out = (ckey, ref[0]), ref[1]
                        continue
        return _result(op, name, output_dtype(nd, out, bindings), steps, variable, shape, crossed)
    return _result("?", "(chain too long)", None, steps, variable, shape, crossed)


def type_attr_value(a) -> str | None:
    return dtype_name(a.type) if a is not None and a.type else None


def _result(op, node, dtype, steps, variable, shape, crossed) -> Provenance:
    if variable is None and dtype == "resource" and op in ("Placeholder", "_Arg"):
        variable = node  # a captured variable handle
    chain = [f"{op}({dtype or '?'})"] + [f"{s[0]}({s[2] or '?'})" for s in reversed(steps)]
    dtypes: list[str] = []
    for d in [dtype] + [s[2] for s in reversed(steps)]:
        if d and d != "resource" and (not dtypes or dtypes[-1] != d):
            dtypes.append(d)
    return Provenance(op, node, dtype, tuple(chain), tuple(dtypes), variable, shape, tuple(crossed))
