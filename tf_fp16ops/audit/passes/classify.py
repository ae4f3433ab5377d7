"""Classification pass: one audit class per call site (see findings.CLASSES)."""

from __future__ import annotations

from ..codes import Flag, flag
from ..findings import Provenance


def audit_class(
    T: str | None, accumulation: str, data: Provenance | None, filt: Provenance | None
) -> str:
    if accumulation == "fp16":
        return "fp16-accumulate"
    if T == "half":
        return "fp16-storage" if accumulation == "fp32" else "unknown"
    if T == "float":
        if any(p is not None and "half" in p.dtypes for p in (data, filt)):
            return "fake-fp16"
        return "fp32"
    if T == "bfloat16":
        return "bf16"
    if T == "double":
        return "fp64"
    return "unknown"


def provenance_flags(
    T: str | None,
    data: Provenance | None,
    filt: Provenance | None,
    labels: tuple[str, str] = ("input", "filter"),
) -> tuple[Flag, ...]:
    """Flags from the provenance of the two operands, named by `labels` (convs: input and
    filter; matmuls: a and b)."""
    flags = []
    for label, p in zip(labels, (data, filt), strict=True):
        if p is None:
            continue
        d = p.dtypes
        if T == "float" and "half" in d:
            how = "round-trip" if d[0] != "half" and len(d) >= 3 else "computed-in-fp32"
            flags.append(flag("fake-fp16", side=label, how=how))
        for i in range(len(d) - 2):
            if d[i] == "half" and d[i + 1] in ("float", "double") and d[i + 2] == "half":
                flags.append(flag("noop-round-trip", side=label, via=d[i + 1]))
        if T and p.dtypes and p.dtypes[-1] != T:
            flags.append(flag("dtype-mismatch", side=label, dtype=p.dtypes[-1], T=T))
        if label in ("filter", "b", "a") and p.variable and len(d) >= 2 and d[0] != d[-1]:
            flags.append(flag("variable-cast", **{"from": d[0], "to": d[-1]}))
    return tuple(flags)
