"""Formatting helpers shared by renderers."""

from __future__ import annotations

from ..findings import AuditReport, ConvFinding


def fmt_flops(f: int | None) -> str:
    if f is None:
        return "?"
    for unit, div in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if f >= div:
            return f"{f / div:.2f}{unit}"
    return str(f)


def path_of(f: ConvFinding, width: int = 0) -> str:
    p = " > ".join(f.function_path) if f.function_path else "(graph)"
    if width and len(p) > width:
        p = "…" + p[-(width - 1) :]
    return p


def reason_legend(report: AuditReport) -> dict[str, int]:
    legend: dict[str, int] = {}
    for f in report.findings:
        legend.setdefault(f.accumulation_reason, len(legend) + 1)
    return legend


def share(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def onednn_context(report: AuditReport) -> str:
    """The context's oneDNN fact for T=half CPU convs, e.g. "yes (TF_ENABLE_ONEDNN_OPTS=...)"."""
    takes, why = report.context.onednn_half()
    return f"{ {True: 'yes', False: 'no', None: 'unknown'}[takes] } ({why})"


def kind_counts(report: AuditReport) -> tuple[int, int]:
    """(conv call sites, matmul call sites) of a report."""
    by = {k.kind: k.count for k in report.summary.by_kind}
    return by.get("conv", 0), by.get("matmul", 0)


def kind_lines(report: AuditReport) -> list[str]:
    """One line per kind (conv, matmul, all): call sites, share of the FLOPs, fp16 shares."""
    out = []
    for k in report.summary.by_kind:
        out.append(
            f"{k.kind:6s} {k.count:6d} sites  {share(k.flop_share):>7s} of FLOPs  "
            f"fp16 share ({k.share_basis}) {share(k.fp16_share)}, "
            f"fp16-accumulate {share(k.fp16_accumulate_share)}"
        )
    return out
