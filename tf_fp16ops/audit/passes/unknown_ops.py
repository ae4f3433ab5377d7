"""Unknown-op pass: op types no registry knows are reported, never fatal.

Known ops: TensorFlow's registry as recorded in `optable` (and, when TensorFlow is imported in
this process, its live registry). See docs/design.md "Cases and their public sources".
"""

from __future__ import annotations

from ..findings import UnknownOp
from ..graph import AuditGraph
from ..opsets import SITE_OPS
from ..optable import is_known
from .attrs import dtype_name


def _attr_summary(nd) -> tuple[str, ...]:
    out = []
    for k in sorted(nd.attr):
        v = nd.attr[k]
        kind = v.WhichOneof("value")
        if kind == "type":
            out.append(f"{k}={dtype_name(v.type)}")
        elif kind == "s":
            out.append(f"{k}={v.s.decode('utf-8', 'replace')!r}")
        elif kind in ("i", "f", "b"):
            out.append(f"{k}={getattr(v, kind)!r}")
        else:
            out.append(f"{k}:{kind}")
    return tuple(out)


def unknown_ops(ag: AuditGraph) -> tuple[UnknownOp, ...]:
    fnames = {s.function for s in ag.scopes.values() if s.function}
    found: dict[str, list] = {}
    for s in ag.scopes.values():
        for op, (count, example) in s.op_counts.items():
            if op in SITE_OPS or op in fnames:
                continue
            if is_known(op):
                continue
            entry = found.setdefault(op, [0, [], None])
            entry[0] += count
            if len(entry[1]) < 3:
                entry[1].append(f"{s.function + ':' if s.function else ''}{example}")
            if entry[2] is None:
                entry[2] = s.index[example]
    return tuple(
        UnknownOp(op, c, tuple(ex), _attr_summary(nd)) for op, (c, ex, nd) in sorted(found.items())
    )
