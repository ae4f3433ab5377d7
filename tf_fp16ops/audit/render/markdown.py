"""Markdown renderer: summary table, switches, and one row per conv call site."""

from __future__ import annotations

import re

from ..errors import printable
from ..findings import AuditReport
from .common import (
    cpu_convs_possible,
    fmt_flops,
    kind_counts,
    of_flops,
    onednn_context,
    path_of,
    reason_legend,
    share,
)
from .runtime import has_runtime, observed_cell, probe_rows, runtime_lines

# CommonMark's backslash escapes (spec 0.31, section 2.4) for the characters that can start
# inline markup (emphasis, code, links, HTML, entities, GFM strikethrough) or end a GFM table cell
# (a `]` without its `[` is literal).
_SPECIAL = re.compile(r"([\\`*_\[<&~|])")


def _esc(s: str) -> str:
    """`s` as literal Markdown text: every markup character backslash-escaped, so that a name
    from the model can neither format the report nor split a table cell (a backslash before `|`
    included: both are escaped)."""
    return _SPECIAL.sub(r"\\\1", s)


def _code(s: str, cell: bool = True) -> str:
    """`s` as a code span, `|` written `\\|` in a table cell (GFM reads it as part of the cell;
    elsewhere it would show its backslash). Inside a code span a backslash is literal, so a name
    with a backslash (which could pair with that `|` escape) or a backtick (which could end the
    span), and the empty name, are written as escaped text; a name with a space at both ends gets
    one more on each side (CommonMark strips one)."""
    if not s or "\\" in s or "`" in s:
        return _esc(s)
    if cell:
        s = s.replace("|", "\\|")
    if s[0] == " " and s[-1] == " " and s.strip(" "):
        s = f" {s} "
    return f"`{s}`"


_BLOCK_START = re.compile(r"[#>+=-]|\d{1,9}(?=[.)])")


def _item(text: str) -> str:
    """Escaped `text` made safe at the start of a list item: leading spaces or tabs as character
    references (four would start a code block), and a leading `#`, `>`, `+`, `-`, `=` or an
    ordered-list number's `.`/`)` backslash-escaped (a heading, quote, list or rule otherwise)."""
    body = text.lstrip(" \t")
    if len(body) < len(text):
        lead = text[: len(text) - len(body)]
        return "".join("&#9;" if c == "\t" else "&#32;" for c in lead) + body
    m = _BLOCK_START.match(body)
    if m is None:
        return body
    if m.group().isdigit():
        return body[: m.end()] + "\\" + body[m.end() :]
    return "\\" + body


def render_markdown_summary(report: AuditReport) -> str:
    s = report.summary
    convs, mms = kind_counts(report)
    out = [
        line
        for p in report.partial
        for line in (f"**Partial report (over budget):** {_esc(p)}", "")
    ]
    out += [
        f"**{s.call_sites} call sites** ({convs} conv, {mms} matmul; {s.conv_nodes} nodes) "
        f"in {_code(report.source, cell=False)} "
        f"({report.source_format}); context: device={report.context.device}, "
        f"amp={report.context.amp}"
        + (
            f", oneDNN takes T=half CPU convs: {_esc(onednn_context(report))}."
            if cpu_convs_possible(report)
            else "."
        ),
        "",
        f"| class | call sites | FLOPs | share of {of_flops(report)} |",
        "|---|---:|---:|---:|",
    ]
    for c in s.classes:
        out.append(
            f"| {c.audit_class} | {c.count} | {fmt_flops(c.flops)} | {share(c.flop_share)} |"
        )
    out.append("")
    out.append(
        f"fp16 share ({s.share_basis}): **{share(s.fp16_share)}**; "
        f"fp16-accumulate share: **{share(s.fp16_accumulate_share)}**."
    )
    out += [
        "",
        f"| kind | call sites | FLOPs | share of {of_flops(report)} | fp16 share "
        "| fp16-accumulate share |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for k in s.by_kind:
        out.append(
            f"| {k.kind} | {k.count} | {fmt_flops(k.flops)} | {share(k.flop_share)} | "
            f"{share(k.fp16_share)} ({k.share_basis}) | {share(k.fp16_accumulate_share)} |"
        )
    if report.context.amp:
        out.append(
            f"Auto mixed precision (prediction): {s.amp_predicted_rewrites} call sites would be "
            "rewritten to half at run time."
        )
    # One line per item, each with control characters escaped (as render_markdown's).
    return "\n".join(printable(line) for line in out) + "\n"


def render_markdown(report: AuditReport) -> str:
    legend = reason_legend(report)
    # The summary's lines (escaped already, so none holds a line break of a name's).
    out = ["# fp16 convolution and matmul audit", "", *render_markdown_summary(report).split("\n")]
    if report.switches:
        out += ["## Switches", "", "| variable | value | effect |", "|---|---|---|"]
        for sw in report.switches:
            out.append(
                f"| `{sw.name}` | {'unset' if sw.value is None else _code(sw.value)} | "
                f"{_esc(sw.effect)} |"
            )
        out.append("")
    run = has_runtime(report)
    out += [
        "## Call sites",
        "",
        "| # | function path | node | op | T | accumulation | class | FLOPs |"
        + (" observed |" if run else "")
        + " flags |",
        "|---:|---|---|---|---|---|---|---:|" + ("---|" if run else "") + "---|",
    ]
    for i, f in enumerate(report.findings, 1):
        acc = f"{f.accumulation} [{legend[f.accumulation_reason]}]" + (
            f" Tacc={f.Tacc}" if f.Tacc else ""
        )
        if f.xla is not None:
            acc += " (XLA)"
        if f.amp is not None and f.amp.rewrite:
            acc += " (amp→half, predicted)"
        obs = f" {_esc(observed_cell(f))} |" if run else ""
        out.append(
            f"| {i} | {_code(path_of(f))} | {_code(f.node)} | {_code(f.op)} | {f.T} | {acc} | "
            f"{f.audit_class} | {fmt_flops(f.flops)} |{obs} "
            f"{_esc(', '.join(f.flag_texts)) or '-'} |"
        )
    out += ["", "Accumulation reasons:", ""]
    out += [f"{n}. {_item(_esc(r))}" for r, n in legend.items()]
    if run:
        out += ["", "## Runtime evidence (the model was executed)", ""]
        out += [f"- {_item(_esc(line))}" for line in runtime_lines(report)]
        out += [
            "",
            "| probe configuration | process | kernel | rounding | taps49 | overflow | observed |",
            "|---|---|---|---|---|---|---|",
        ]
        out += ["| " + " | ".join(_esc(c) for c in r) + " |" for r in probe_rows(report)]
    if report.unknown_ops:
        out += ["", "## Unknown ops", ""]
        out += [
            f"- {_item(_code(u.op, cell=False))} ×{u.count}: {_esc(u.verdict)} "
            f"(attrs: {_esc(', '.join(u.attrs))})"
            for u in report.unknown_ops
        ]
    if report.notes:
        out += ["", "## Notes", ""] + [f"- {_item(_esc(n))}" for n in report.notes]
    # Names from the model (nodes, functions, layers) with control characters escaped: none can
    # break a table row or a line.
    return "\n".join(printable(line) for line in out) + "\n"
