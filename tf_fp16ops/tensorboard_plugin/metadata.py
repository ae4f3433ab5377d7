"""Names and summary metadata of the "fp16_audit" TensorBoard plugin's data.

Data layout (written by `tf_fp16ops.tensorboard_plugin.summary.write_audit_summary`, read by the
plugin backend), in the run that holds the audit's other summaries:

- tag `fp16_audit/findings`: rank-1 string tensor, one element per conv call site, each the
  UTF-8 JSON of `ConvFinding.to_dict()` (layout versioned by the audit's `SCHEMA_VERSION`).
- tag `fp16_audit/report`: scalar string tensor, the JSON of `AuditReport.to_dict()` without its
  "findings" list (source, source format, runtime context, per-class summary, switches, notes).

Both carry `SummaryMetadata.plugin_data` with `plugin_name="fp16_audit"` and as `content` the
UTF-8 JSON `{"version": PLUGIN_DATA_VERSION, "audit_schema_version": "<major.minor>",
"kind": "findings"|"report"}`, and `data_class=DATA_CLASS_TENSOR` so that both the Python
multiplexer and TensorBoard's Rust data server serve them as tensors.

This module imports no TensorFlow: TensorBoard loads it at start-up.
"""

from __future__ import annotations

import json

from tensorboard.compat.proto import summary_pb2

PLUGIN_NAME = "fp16_audit"
# Version of the plugin_data content and of the tensor layout described above.
PLUGIN_DATA_VERSION = 1
FINDINGS_TAG = "fp16_audit/findings"
REPORT_TAG = "fp16_audit/report"
KINDS = {"findings": FINDINGS_TAG, "report": REPORT_TAG}


def create_summary_metadata(kind: str, audit_schema_version: str) -> summary_pb2.SummaryMetadata:
    """SummaryMetadata for one of the two tags.

    Args:
      kind: "findings" or "report".
      audit_schema_version: the audit's `SCHEMA_VERSION` ("major.minor") of the JSON inside.
    Raises:
      ValueError: unknown `kind`.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {sorted(KINDS)}, got {kind!r}")
    content = {
        "version": PLUGIN_DATA_VERSION,
        "audit_schema_version": audit_schema_version,
        "kind": kind,
    }
    return summary_pb2.SummaryMetadata(
        display_name=KINDS[kind],
        summary_description=f"fp16 audit {kind} (JSON, audit schema {audit_schema_version})",
        plugin_data=summary_pb2.SummaryMetadata.PluginData(
            plugin_name=PLUGIN_NAME, content=json.dumps(content, sort_keys=True).encode("utf-8")
        ),
        data_class=summary_pb2.DATA_CLASS_TENSOR,
    )


def parse_plugin_metadata(content: bytes) -> dict:
    """Parses `plugin_data.content`; returns the dict written by `create_summary_metadata`.

    Raises:
      ValueError: content that is not such a JSON object, or a newer `version` than this reader.
    """
    try:
        meta = json.loads(content.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(
            f"fp16_audit plugin_data content is not UTF-8 JSON: {content[:80]!r} ({e})"
        ) from None
    if (
        not isinstance(meta, dict)
        or not isinstance(meta.get("version"), int)
        or meta.get("kind") not in KINDS
    ):
        raise ValueError(
            "fp16_audit plugin_data content lacks an integer 'version' and a known 'kind': "
            f"{meta!r}"
        )
    if meta["version"] > PLUGIN_DATA_VERSION:
        raise ValueError(
            f"fp16_audit plugin_data version {meta['version']} is newer than this reader "
            f"({PLUGIN_DATA_VERSION}); upgrade tf_fp16ops"
        )
    return meta
