"""Formatting of runtime evidence (`--run`) shared by the terminal and Markdown renderers.
Formats only."""

from __future__ import annotations

from ..findings import AuditReport, ConvFinding
from ..opsets import CONV_OPS

# A status as the reports show it where it differs from its JSON token (findings.py).
_STATUS_SHOWN = {"not-found": "not found"}


def observed_cell(f: ConvFinding) -> str:
    """ "fp32 confirmed", "fp16 CONTRADICTED", "not found", ... for one call site."""
    o = f.observed
    if o is None:
        return "-"
    if o.status in _STATUS_SHOWN:
        return _STATUS_SHOWN[o.status]
    status = "CONTRADICTED" if o.status == "contradicted" else o.status
    extra = f" ({o.executed_op})" if o.executed_op and o.executed_op != f.op else ""
    return f"{o.observed_accumulation} {status}{extra}"


def has_runtime(report: AuditReport) -> bool:
    return report.runtime is not None


def probe_rows(report: AuditReport) -> list[tuple[str, ...]]:
    """(configuration, process, kernel, rounding, taps49, overflow, observed) per probe result."""
    rows = []
    rt = report.runtime
    for p in tuple(rt.probes) + tuple(rt.switch_probes):
        vals = {o.probe: f"{o.value} ({o.verdict})" for o in p.outcomes}
        rows.append(
            (
                p.config.key(),
                p.process,
                p.kernel or "-",
                vals.get("rounding", "-"),
                vals.get("taps49", "-"),
                vals.get("overflow", "-"),
                p.observed + (f": {p.note}" if p.note else ""),
            )
        )
    return rows


def runtime_lines(report: AuditReport) -> list[str]:
    """Plain lines: what ran, switches, contradictions and rewrites."""
    rt = report.runtime
    ins = ", ".join(f"{n} {t}{list(s)}" for n, t, s in rt.inputs) or "none"
    counts = ", ".join(f"{_STATUS_SHOWN.get(k, k)} {v}" for k, v in rt.counts) or "none"
    out = [
        f"executed: {rt.executed} on inputs {ins}"
        + (f" (random, seed {rt.seed})" if rt.seed is not None else ""),
        f"executed graphs: {rt.function_graphs} function graph(s), "
        f"{rt.executed_convs} conv or matmul node(s); "
        f"call sites: {counts}",
    ]
    from ..runtime.probes import PROBE_ENV

    switches = dict(rt.switches) or {k: v for p in rt.probes for k, v in p.switches}
    out.append(
        "probe switches (this process): "
        + (
            ", ".join(f"{k}={v!r}" for k, v in sorted(switches.items()))
            or f"none of {', '.join(PROBE_ENV)} set"
        )
    )
    for i, f in enumerate(report.findings, 1):
        o = f.observed
        if o is None:
            continue
        for c in o.contradictions:
            out.append(f"CONTRADICTION #{i} {f.node}: {c}")
    rewrites: dict[str, int] = {}
    for f in report.findings:
        if f.observed is not None:
            for c in f.observed.changes:
                rewrites[c] = rewrites.get(c, 0) + 1
    for c, n in sorted(rewrites.items()):
        out.append(f"runtime rewrite ({n} call site{'s' if n > 1 else ''}): {c}")
    for p in rt.switch_probes:
        sw = dict(p.switches)
        # The switch is read by TensorFlow's Eigen Conv2D kernels for T=half only: no hint for
        # float convs or matmuls, where it changes nothing on any kernel.
        if (
            "TF_CONV2D_USE_FP16_ACCUMULATE" in sw
            and p.kernel.startswith("_MklNative")
            and p.config.T == "half"
            and p.config.op in CONV_OPS
        ):
            kernel = p.kernel.split("[")[0]
            out.append(
                f"note: {p.config.key()} ran oneDNN's {kernel} in the subprocess, "
                "which ignores TF_CONV2D_USE_FP16_ACCUMULATE (fp32 accumulation); add "
                "TF_ENABLE_ONEDNN_OPTS=0 to the same --probe-switch for the Eigen kernel"
            )
    for k in rt.gpu_kernels:
        kern = "; ".join(
            f"{name} [{d.accumulator}]" for name, d in zip(k.kernels, k.decoded, strict=True)
        )
        out.append(f"GPU kernels of {k.tf_op}: {kern} -> {k.accumulator}")
    out.extend(f"note: {n}" for n in rt.notes)
    return out
