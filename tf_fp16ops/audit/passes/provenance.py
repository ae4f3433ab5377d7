"""Provenance pass: where a conv input comes from, through Identity/ReadVariableOp/Cast chains
(and the ops of opsets.RESHAPE_LIKE, which keep the values, not the shape) and across function
boundaries (argument -> caller's input; call output -> callee's return value)."""

from __future__ import annotations

from ..findings import Provenance
from ..graph import AuditGraph, CallSite, Frame, parse_ret, resolve_bindings
from ..opsets import (
    CALL_ATTRS,
    CAST_OPS,
    IDENTITY_LIKE,
    READ_VARIABLE,
    RESHAPE_LIKE,
    VARIABLE_OPS,
)
from .attrs import NodeAttrs, dtype_name, shape_of

_MAX_STEPS = 10_000
# Steps of all walks that share one memo (one audit graph): thousands of call sites hanging off
# one long chain would each walk the rest of it (a 730 KB GraphDef of 9,000 ExpandDims feeding
# 3,000 convs: 13.5 million steps, 78 s and 2 GB; 1 million steps take about 5 s). Past this
# total every walk ends at once, its source "(chain too long)" as for one walk past _MAX_STEPS,
# and the report is partial. Real models take far fewer (ResNet50: 53 sites of a few steps each).
MAX_TOTAL_STEPS = 1_000_000
_STEPS_LEFT = "steps left"  # memo key of the shared budget


def budget_spent(memo: dict) -> bool:
    """Whether the walks sharing `memo` used up their total step budget (`MAX_TOTAL_STEPS`)."""
    return memo.get(_STEPS_LEFT, 1) <= 0


_SINGLE_CALLEE = ("PartitionedCall", "StatefulPartitionedCall")
_WALK_THROUGH = IDENTITY_LIKE | CAST_OPS | READ_VARIABLE | RESHAPE_LIKE
# The shape of a walk that crossed a RESHAPE_LIKE op before it found one: unknown (None in the
# result), and no shape found further on is taken.
_RESHAPED = ("reshaped",)


def trace(
    ag: AuditGraph, site: CallSite, input_index: int, memo: dict | None = None
) -> Provenance | None:
    """Provenance of input `input_index` of the conv at `site`; None if the input does not exist.

    `memo` (optional, one per audit graph) keeps
      * the provenance of producers whose chain ends in their own scope without reaching a
        function argument or a call and without a function-attr placeholder: such a result does
        not depend on the call site, so every conv fed by the same producer (e.g. one weight
        feeding many convs, or one function called from many sites) reuses it;
      * per call-path frame and argument position, the trace of the caller's input beyond that
        argument: it depends only on the frames above, so the sites below one frame (the 2**d
        paths of a diamond, the convs of one function) walk each caller once.
    """
    p = ag.producer((site.scope, site.node), input_index)
    if p is None:
        return None
    if memo is None:
        return _result(*_walk(ag, site.frames, p, None)[:7])
    key = (p[0][0], p[0][1], p[1])
    hit = memo.get(key)
    if hit is None:
        raw = _walk(ag, site.frames, p, memo)
        hit = _result(*raw[:7])
        if raw[7]:
            memo[key] = hit
    return hit


def _trace(ag: AuditGraph, site_frames: tuple[Frame, ...], p) -> tuple[Provenance, bool]:
    """(provenance, whether it is independent of the call site), without memo."""
    raw = _walk(ag, site_frames, p, None)
    return _result(*raw[:7]), raw[7]


# raw walk result: (op, node, dtype, steps, variable, shape, crossed, local); steps and crossed
# conv-side first.


def _walk(ag: AuditGraph, site_frames: tuple[Frame, ...], p, memo: dict | None) -> tuple:
    k = len(site_frames)  # frames of the call path still above the walk: site_frames[:k]
    pushed: list[Frame] = []  # frames entered through call outputs, innermost last
    src, out = p
    steps: list[tuple[str, str, str | None]] = []  # conv-side first
    crossed: list[str] = []
    shape = None
    variable = None
    local = True
    scopes = ag.scopes
    # Crossings out of a call-path frame whose caller-side trace is not memoised yet:
    # (memo key, frame, len(steps), len(crossed), shape index) -- filled in when the walk ends.
    checkpoints: list = []
    shapes_seen: list = []  # (len(steps) when found, shape) of every shape found, in walk order

    def finish(op, node, dtype, too_long=False):
        if memo is not None and checkpoints and not too_long:
            for key, fr, ns, nc, nshape in checkpoints:
                sh = next((s for at, s in shapes_seen[nshape:] if at >= ns), None)
                memo[key] = (
                    fr,
                    (op, node, dtype, tuple(steps[ns:]), variable, sh, tuple(crossed[nc:]), False),
                )
        return (op, node, dtype, steps, variable, shape, crossed, local)

    left = MAX_TOTAL_STEPS if memo is None else memo.get(_STEPS_LEFT, MAX_TOTAL_STEPS)
    used = 0
    try:
        for _ in range(min(_MAX_STEPS, left)):
            used += 1
            top = pushed[-1] if pushed else (site_frames[k - 1] if k else None)
            bindings = top.bindings if top is not None else {}
            scope = scopes[src[0]]
            name = src[1]
            nd = scope.index.get(name)
            if nd is None:  # function argument
                local = False
                pos, argdef = scope.args[name]
                dtype = dtype_name(argdef.type) or (
                    type_attr_value(bindings.get(argdef.type_attr)) if argdef.type_attr else None
                )
                aa = scope.arg_attrs.get(pos, {})
                if "_output_shapes" in aa and len(aa["_output_shapes"].list.shape):
                    found = shape_of(aa["_output_shapes"].list.shape[0])
                    if found is not None:
                        shapes_seen.append((len(steps), found))
                        if shape is None:
                            shape = found
                if top is not None and top.callee == scope.key:
                    fr = top
                    from_site = not pushed  # a frame of the site's call path, not one entered here
                    if from_site:
                        k -= 1
                    else:
                        pushed.pop()
                    crossed.append(f"{scope.function}:{name}<-{fr.call_node}")
                    if memo is not None and from_site:
                        mkey = ("arg", id(fr), pos)
                        hit = memo.get(mkey)
                        if hit is not None and hit[0] is fr:
                            return _compose(
                                steps, shape, crossed, hit[1], checkpoints, memo, shapes_seen
                            )
                        checkpoints.append((mkey, fr, len(steps), len(crossed), len(shapes_seen)))
                    offset = CALL_ATTRS.get(fr.call_op, ((), 0))[1]
                    nxt = ag.producer((fr.caller, fr.call_node), pos + offset)
                    if nxt is None:
                        return finish("_Arg", name, dtype)
                    src, out = nxt
                    continue
                return finish("_Arg", name, dtype)
            op = scope.op_of(name)
            na = NodeAttrs(nd, bindings)
            if shape is None or checkpoints:
                found = na.output_shape(op, out)
                if found is not None:
                    shapes_seen.append((len(steps), found))
                    if shape is None:
                        shape = found
            if op in RESHAPE_LIKE:
                shapes_seen.append((len(steps), _RESHAPED))
                if shape is None:
                    shape = _RESHAPED
            if op in _WALK_THROUGH:
                dtype = na.output_dtype(op, out)
                steps.append((op, name, dtype))
                nxt = ag.producer(src, out if op == "IdentityN" else 0)
                local = local and not na.placeholder
                if nxt is None:
                    steps.pop()
                    return finish(op, name, dtype)
                src, out = nxt
                continue
            if op in VARIABLE_OPS:
                a = na.attr_map
                variable = (
                    a["shared_name"].s.decode()
                    if "shared_name" in a and a["shared_name"].s
                    else name
                )
                dtype = na.type("dtype")
                local = local and not na.placeholder
                return finish(op, name, dtype)
            if op in _SINGLE_CALLEE or (op not in CALL_ATTRS and ag.callees(scope.key, name)):
                local = False
                callees = ag.callees(scope.key, name)
                if len(callees) == 1 and not any(
                    f.callee == callees[0][0] for f in (*site_frames[:k], *pushed)
                ):
                    ckey, attr, raw = callees[0]
                    callee = scopes[ckey]
                    if out < len(callee.rets):
                        ref = parse_ret(callee, callee.rets[out])
                        if ref is not None:
                            pushed.append(
                                Frame(
                                    scope.key, name, op, attr, ckey, resolve_bindings(raw, bindings)
                                )
                            )
                            crossed.append(f"{name}->{callee.function}")
                            src, out = (ckey, ref[0]), ref[1]
                            continue
            dtype = na.output_dtype(op, out)
            local = local and not na.placeholder
            return finish(op, name, dtype)
        return finish("?", "(chain too long)", None, too_long=True)[:7] + (False,)
    finally:
        if memo is not None:  # the steps this walk took come off the shared budget
            memo[_STEPS_LEFT] = left - used


def _compose(steps, shape, crossed, outer, checkpoints, memo, shapes_seen) -> tuple:
    """The walk so far (conv side) followed by a memoised caller-side walk `outer`."""
    op, node, dtype, o_steps, variable, o_shape, o_crossed, _ = outer
    full_steps = steps + list(o_steps)
    full_crossed = crossed + list(o_crossed)
    for key, fr, ns, nc, nshape in checkpoints:
        sh = next((s for at, s in shapes_seen[nshape:] if at >= ns), None)
        memo[key] = (
            fr,
            (
                op,
                node,
                dtype,
                tuple(full_steps[ns:]),
                variable,
                sh if sh is not None else o_shape,
                tuple(full_crossed[nc:]),
                False,
            ),
        )
    return (
        op,
        node,
        dtype,
        full_steps,
        variable,
        shape if shape is not None else o_shape,
        full_crossed,
        False,
    )


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
    if shape is _RESHAPED:
        shape = None
    return Provenance(op, node, dtype, tuple(chain), tuple(dtypes), variable, shape, tuple(crossed))
