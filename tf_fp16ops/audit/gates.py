"""CI gates on a report: `--fail-under FRACTION` and `--require CLASS`.

`--require fp16-accumulate` alone: every call site must be in class fp16-accumulate.
`--require fp16` alone: every call site must store in fp16 (fp16-accumulate or fp16-storage).
`--fail-under F`: the share (FLOP share when every site's FLOPs are known, else count share) of
the required category (default "fp16") must be at least F.
"""

from __future__ import annotations

from dataclasses import dataclass

from .findings import AuditReport


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
    return GateResult(
        ok,
        f"gate {word}: {category} share by {s.share_basis} = {value:.4f}, "
        f"required >= {threshold:.4f}",
    )
