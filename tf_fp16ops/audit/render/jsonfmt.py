"""JSON renderer: `AuditReport.to_dict()` with its schema_version."""

from __future__ import annotations

import json

from ..findings import AuditReport


def render_json(report: AuditReport) -> str:
    return json.dumps(report.to_dict(), indent=2, sort_keys=False) + "\n"
