"""JSON renderer: `AuditReport.to_dict()` with its schema_version.

Layout: the report object indented by two spaces, each finding one compact object on its own line
(`json.dumps` indents only with its pure-Python encoder, several times slower than the C one on
the thousands of findings of a large model; the document is the same JSON either way)."""

from __future__ import annotations

import json

from ..findings import AuditReport

_ROWS = ("findings",)  # lists written one compact object per line


def render_json(report: AuditReport) -> str:
    parts = []
    for key, value in report.to_dict().items():
        if key in _ROWS and value:
            rows = ",\n".join("    " + json.dumps(x) for x in value)
            text = "[\n" + rows + "\n  ]"
        else:
            text = json.dumps(value, indent=2).replace("\n", "\n  ")
        parts.append(f"  {json.dumps(key)}: {text}")
    return "{\n" + ",\n".join(parts) + "\n}\n"
