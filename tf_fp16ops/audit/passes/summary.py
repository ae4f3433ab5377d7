"""Summary pass: counts and FLOP shares per audit class."""

from __future__ import annotations

from ..findings import CLASSES, FP16_CLASSES, ClassShare, ConvFinding, Summary


def summarize(findings: tuple[ConvFinding, ...]) -> Summary:
    counts = {c: 0 for c in CLASSES}
    flops = {c: 0 for c in CLASSES}
    known = 0
    for f in findings:
        counts[f.audit_class] += 1
        if f.flops is not None:
            flops[f.audit_class] += f.flops
            known += 1
    total = sum(flops.values())
    shares = tuple(
        ClassShare(c, counts[c], flops[c], (flops[c] / total) if total else None)
        for c in CLASSES
        if counts[c]
    )
    n = len(findings)
    if n and known == n and total:
        basis = "flops"
        fp16 = sum(flops[c] for c in FP16_CLASSES) / total
        acc16 = flops["fp16-accumulate"] / total
    else:
        basis = "count"
        fp16 = sum(counts[c] for c in FP16_CLASSES) / n if n else 0.0
        acc16 = counts["fp16-accumulate"] / n if n else 0.0
    nodes = len(
        {(f.unit, f.function_path[-1] if f.function_path else "", f.node) for f in findings}
    )
    amp = sum(1 for f in findings if f.amp is not None and f.amp.rewrite)
    return Summary(n, nodes, shares, total, known, basis, fp16, acc16, amp)
