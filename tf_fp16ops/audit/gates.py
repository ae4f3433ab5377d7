"""CI gates on a report: `--fail-under FRACTION` and `--require CLASS`.

`--require fp16-accumulate` alone: every call site must be in class fp16-accumulate.
`--require fp16` alone: every call site must store in fp16 (fp16-accumulate or fp16-storage).
`--fail-under F`: the share (FLOP share when every site's FLOPs are known, else count share) of
the required category (default "fp16") must be at least F.
`--fail-on CODE[,CODE]`: no call site may carry a flag with one of these codes (codes.CODES).
"""

from __future__ import annotations

from dataclasses import dataclass

from .findings import FP16_CLASSES, AuditReport

# Call sites named in a failed share gate's message (then "and N more").
_NAMED_SITES = 3


def _fraction(value: float, threshold: float) -> str:
    """`value` with 4 decimals, or as many more (up to 12) as it takes not to print as the
    threshold it differs from (a share of 0.99998 failing ">= 1" must not read "1.0000")."""
    for digits in range(4, 13):
        text = f"{value:.{digits}f}"
        if value == threshold or text != f"{threshold:.{digits}f}":
            return text
    return repr(value)


@dataclass(frozen=True)
class GateResult:
    passed: bool
    message: str


def check(report: AuditReport, fail_under: float | None, require: str | None) -> GateResult | None:
    if fail_under is None and require is None:
        return None
    category = require or "fp16"
    s = report.summary
    value = s.fp16_accumulate_share if category == "fp16-accumulate" else s.fp16_share
    threshold = 1.0 if fail_under is None else fail_under
    if s.call_sites == 0:
        return GateResult(False, f"gate failed: no convolutions found, {category} share undefined")
    ok = value >= threshold - 1e-12
    word = "passed" if ok else "failed"
    message = (
        f"gate {word}: {category} share by {s.share_basis} = {_fraction(value, threshold)}, "
        f"required >= {threshold:.4f}"
    )
    if not ok:
        classes = ("fp16-accumulate",) if category == "fp16-accumulate" else FP16_CLASSES
        outside = [f for f in report.findings if f.audit_class not in classes]
        if outside:
            named = ", ".join(f"{f.node} ({f.audit_class})" for f in outside[:_NAMED_SITES])
            more = len(outside) - _NAMED_SITES
            message += f"; not {category}: {named}" + (f" and {more} more" if more > 0 else "")
    return GateResult(ok, message)


def check_codes(report: AuditReport, codes: tuple[str, ...]) -> GateResult | None:
    """The `--fail-on` gate: fails when any call site carries a flag whose code is in `codes`;
    the message counts the sites per code. None when `codes` is empty."""
    if not codes:
        return None
    hits = {c: 0 for c in codes}
    for f in report.findings:
        for c in set(f.codes):
            if c in hits:
                hits[c] += 1
    found = {c: n for c, n in hits.items() if n}
    if found:
        listed = ", ".join(f"{c} ({n} call site{'s' if n > 1 else ''})" for c, n in found.items())
        return GateResult(False, f"gate failed: --fail-on codes found: {listed}")
    return GateResult(True, f"gate passed: no call site has {', '.join(codes)}")
