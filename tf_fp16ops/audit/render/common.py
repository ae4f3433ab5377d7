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


def path_of(f: ConvFinding, width: int = 0, signatures: bool = False) -> str:
    """The function path of `f` ("(graph)" at top level), cut from the left to `width` with
    "…". `signatures`: prefixed with the signatures that reach it ("serve,serving_default: "),
    kept whole, so that rows of two signatures whose paths end alike stay apart."""
    p = " > ".join(f.function_path) if f.function_path else "(graph)"
    prefix = ",".join(f.signatures) + ": " if signatures and f.signatures else ""
    room = max(width - len(prefix), 8) if width else 0
    if room and len(p) > room:
        p = "…" + p[-(room - 1) :]
    return prefix + p


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


def of_flops(report: AuditReport) -> str:
    """What the FLOP shares are of: "FLOPs", or "known FLOPs" when some call site's are unknown
    (the fp16 shares are then of call sites, `share_basis`)."""
    s = report.summary
    return "FLOPs" if s.flops_known == s.call_sites else "known FLOPs"


def kind_lines(report: AuditReport) -> list[str]:
    """One line per kind (conv, matmul, all): call sites, share of the FLOPs, fp16 shares."""
    out = []
    for k in report.summary.by_kind:
        out.append(
            f"{k.kind:6s} {k.count:6d} sites  {share(k.flop_share):>7s} of {of_flops(report)}  "
            f"fp16 share ({k.share_basis}) {share(k.fp16_share)}, "
            f"fp16-accumulate {share(k.fp16_accumulate_share)}"
        )
    return out


def cpu_convs_possible(report: AuditReport) -> bool:
    """Whether any conv of the report may run on CPU: the context is not a GPU one, or a conv is
    placed on CPU. The CPU oneDNN fact is shown only then."""
    return report.context.device != "gpu" or any(f.target_device == "cpu" for f in report.findings)
