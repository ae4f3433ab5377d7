"""Summary pass: counts and FLOP shares per audit class, and per kind (conv, matmul, all)."""

from __future__ import annotations

from ..findings import CLASSES, FP16_CLASSES, ClassShare, ConvFinding, KindShare, Summary


def _shares(findings) -> tuple[str, float, float, dict, dict, int, int]:
    counts = {c: 0 for c in CLASSES}
    flops = {c: 0 for c in CLASSES}
    known = 0
    for f in findings:
        counts[f.audit_class] += 1
        if f.flops is not None:
            flops[f.audit_class] += f.flops
            known += 1
    total = sum(flops.values())
    n = len(findings)
    if n and known == n and total:
        basis = "flops"
        fp16 = sum(flops[c] for c in FP16_CLASSES) / total
        acc16 = flops["fp16-accumulate"] / total
    else:
        basis = "count"
        fp16 = sum(counts[c] for c in FP16_CLASSES) / n if n else 0.0
        acc16 = counts["fp16-accumulate"] / n if n else 0.0
    return basis, fp16, acc16, counts, flops, total, known


def summarize(findings: tuple[ConvFinding, ...]) -> Summary:
    basis, fp16, acc16, counts, flops, total, known = _shares(findings)
    shares = tuple(
        ClassShare(c, counts[c], flops[c], (flops[c] / total) if total else None)
        for c in CLASSES
        if counts[c]
    )
    n = len(findings)
    nodes = len(
        {(f.unit, f.function_path[-1] if f.function_path else "", f.node) for f in findings}
    )
    amp = sum(1 for f in findings if f.amp is not None and f.amp.rewrite)
    by_kind = []
    for kind in ("conv", "matmul", "all"):
        sub = findings if kind == "all" else tuple(f for f in findings if f.kind == kind)
        b, s16, a16, _, fl, tot, _ = _shares(sub)
        by_kind.append(
            KindShare(kind, len(sub), tot, (tot / total) if total else None, b, s16, a16)
        )
    return Summary(n, nodes, shares, total, known, basis, fp16, acc16, amp, tuple(by_kind))
