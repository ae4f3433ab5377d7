"""Terminal renderer: a fixed-width table, one row per call site (convolutions and the matmul
family), and a summary."""

from __future__ import annotations

from ..errors import printable
from ..findings import AuditReport
from .common import (
    cpu_convs_possible,
    fmt_flops,
    kind_counts,
    kind_lines,
    of_flops,
    onednn_context,
    path_of,
    reason_legend,
    share,
)
from .runtime import has_runtime, observed_cell, probe_rows, runtime_lines


def _context_line(ctx) -> str:
    """The report's context in one line; the GPU's compute capability and cuDNN version only where
    the audited device is a GPU (a CPU audit does not depend on them)."""
    gpu = (
        f"compute_capability={_v(ctx.compute_capability)} cudnn={_v(ctx.cudnn_version)} "
        if ctx.device != "cpu"
        else ""
    )
    return (
        f"context: device={ctx.device} amp={ctx.amp} {gpu}TF {ctx.tf_version or '?'} [{ctx.origin}]"
    )


def render_terminal(report: AuditReport, max_rows: int | None = None) -> str:
    legend = reason_legend(report)
    run = has_runtime(report)
    headers = (
        ("#", "function path", "node", "op", "T", "accumulation", "class", "FLOPs")
        + (("observed",) if run else ())
        + ("flags",)
    )
    rows = []
    findings = report.findings if max_rows is None else report.findings[:max_rows]
    for i, f in enumerate(findings, 1):
        acc = f"{f.accumulation} [{legend[f.accumulation_reason]}]"
        if f.Tacc:
            acc += f" Tacc={f.Tacc}"
        if f.xla is not None:
            acc += " (XLA)"
        if f.amp is not None and f.amp.rewrite:
            acc += " (amp→half, predicted)"
        rows.append(
            (
                str(i),
                path_of(f, 38, signatures=True),
                _cut(f.node, 40),
                f.op,
                f.T or "?",
                acc,
                f.audit_class,
                fmt_flops(f.flops),
            )
            + ((observed_cell(f),) if run else ())
            + (", ".join(f.flag_texts) or "-",)
        )
    rows = [tuple(printable(c) for c in r) for r in rows]
    widths = [
        max(len(h), *(len(r[c]) for r in rows)) if rows else len(h) for c, h in enumerate(headers)
    ]
    widths[-1] = len(headers[-1])
    line = lambda cells: "  ".join(  # noqa: E731
        c.ljust(w) for c, w in zip(cells, widths, strict=True)
    ).rstrip()
    out = [f"PARTIAL REPORT (over budget): {p}" for p in report.partial]
    out += [
        f"tf-fp16-audit: {report.source} ({report.source_format})",
        _context_line(report.context),
    ]
    if cpu_convs_possible(report):
        out.append(f"context: oneDNN takes T=half CPU convs: {onednn_context(report)}")
    out += [
        "",
    ]
    out.append(line(headers))
    out.append(line(tuple("-" * w for w in widths)))
    out.extend(line(r) for r in rows)
    if max_rows is not None and len(report.findings) > max_rows:
        out.append(
            f"... {len(report.findings) - max_rows} more call sites (use --format json for all)"
        )
    if not report.findings:
        out.append("(no convolution or matmul call sites found)")
    out.append("")
    out.append("accumulation reasons:")
    out.extend(f"  [{n}] {r}" for r, n in legend.items())
    s = report.summary
    out.append("")
    convs, mms = kind_counts(report)
    out.append(
        f"summary: {s.call_sites} call sites ({convs} conv call sites, {mms} matmul call sites; "
        f"{s.conv_nodes} nodes), FLOPs known for {s.flops_known}, total {fmt_flops(s.total_flops)}"
    )
    for c in s.classes:
        out.append(
            f"  {c.audit_class:16s} {c.count:6d} sites  {share(c.flop_share):>7s} "
            f"of {of_flops(report)}"
        )
    out.append(
        f"  fp16 share ({s.share_basis}): {share(s.fp16_share)}; fp16-accumulate share: "
        f"{share(s.fp16_accumulate_share)}"
    )
    out.append("  by kind:")
    out.extend(f"    {line}" for line in kind_lines(report))
    if report.context.amp:
        out.append(
            f"  auto mixed precision (prediction): {s.amp_predicted_rewrites} sites "
            "would be rewritten "
            "to half at run time"
        )
    if run:
        out.append("")
        out.append("runtime evidence (the model was executed):")
        out.extend(f"  {line}" for line in runtime_lines(report))
        out.append("  probes (observed accumulation per op, T, Tacc, device):")
        prow = probe_rows(report)
        ph = ("configuration", "process", "kernel", "rounding", "taps49", "overflow", "observed")
        pw = [max(len(h), *(len(r[c]) for r in prow)) if prow else len(h) for c, h in enumerate(ph)]
        out.append("    " + "  ".join(h.ljust(w) for h, w in zip(ph, pw, strict=True)).rstrip())
        out.extend(
            "    " + "  ".join(c.ljust(w) for c, w in zip(r, pw, strict=True)).rstrip()
            for r in prow
        )
    if report.switches:
        out.append("")
        out.append("switches:")
        for sw in report.switches:
            val = "unset" if sw.value is None else repr(sw.value)
            out.append(f"  {sw.name}={val}: {sw.effect}")
    if report.unknown_ops:
        out.append("")
        out.append("unknown ops:")
        for u in report.unknown_ops:
            out.append(
                f"  {u.op} x{u.count} ({', '.join(u.example_nodes)}): {u.verdict}; "
                f"attrs {', '.join(u.attrs)}"
            )
    if report.notes:
        out.append("")
        out.append("notes:")
        out.extend(f"  - {n}" for n in report.notes)
    # Every line once more: names from the model also reach the legend, notes and unknown ops.
    return "\n".join(printable(line) for line in out) + "\n"


def _cut(s: str, w: int) -> str:
    """`s` in `w` characters: the head (the model's and layer's name scopes, which tell sites
    apart), "…", then the tail (the op's own name, up to half the width)."""
    if len(s) <= w:
        return s
    tail = min(len(s.rsplit("/", 1)[-1]) + 1, w // 2)
    return s[: w - 1 - tail] + "…" + s[-tail:]


def _v(t) -> str:
    return ".".join(map(str, t)) if t else "?"
