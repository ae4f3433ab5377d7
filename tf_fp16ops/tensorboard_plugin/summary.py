"""Writes an audit's findings as "fp16_audit" plugin data (layout: see `.metadata`).

`audit_summary_pb` builds them as a Summary proto without TensorFlow (the audit's `--logdir`
writer uses it); `write_audit_summary` writes them through `tf.summary` (imports TensorFlow).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from . import metadata

if TYPE_CHECKING:  # no run-time import: the audit package imports this module lazily
    from tf_fp16ops.audit.findings import AuditReport


def finding_records(report: AuditReport) -> list[str]:
    """One JSON string per conv call site, in the report's order (`ConvFinding.to_dict()`)."""
    return [json.dumps(f.to_dict(), sort_keys=True) for f in report.findings]


def report_record(report: AuditReport) -> str:
    """The JSON of `report.to_dict()` without the "findings" list."""
    d = report.to_dict()
    d.pop("findings", None)
    return json.dumps(d, sort_keys=True)


def _string_tensor(values: list[str], shape: list[int]):
    from tensorboard.compat.proto import tensor_pb2, tensor_shape_pb2, types_pb2

    dims = [tensor_shape_pb2.TensorShapeProto.Dim(size=d) for d in shape]
    t = tensor_pb2.TensorProto(
        dtype=types_pb2.DT_STRING, tensor_shape=tensor_shape_pb2.TensorShapeProto(dim=dims)
    )
    t.string_val.extend(v.encode("utf-8") for v in values)
    return t


def audit_summary_pb(report: AuditReport):
    """The two summaries as one `Summary` proto (TensorBoard's protos; no TensorFlow needed).

    The same values as `write_audit_summary` writes through tf.summary: tag `fp16_audit/findings`
    a string tensor of shape [call sites], tag `fp16_audit/report` a scalar string tensor."""
    from tensorboard.compat.proto import summary_pb2

    s = summary_pb2.Summary()
    findings = _string_tensor(finding_records(report), [len(report.findings)])
    s.value.add(
        tag=metadata.FINDINGS_TAG,
        tensor=findings,
        metadata=metadata.create_summary_metadata("findings", report.schema_version),
    )
    s.value.add(
        tag=metadata.REPORT_TAG,
        tensor=_string_tensor([report_record(report)], []),
        metadata=metadata.create_summary_metadata("report", report.schema_version),
    )
    return s


def write_audit_summary(report: AuditReport, step: int = 0) -> bool:
    """Writes tags `fp16_audit/findings` and `fp16_audit/report` to the default summary writer.

    Call it inside `with writer.as_default():` of a `tf.summary.create_file_writer(run_dir)`.

    Args:
      report: the audit report; its `schema_version` is recorded in the plugin metadata.
      step: summary step (int64).
    Returns:
      True when both summaries were written, False when no default writer is set (as
      `tf.summary.write` does).
    """
    import tensorflow as tf

    findings = tf.constant(finding_records(report), dtype=tf.string, shape=[len(report.findings)])
    ok_f = tf.summary.write(
        metadata.FINDINGS_TAG,
        findings,
        step=step,
        metadata=metadata.create_summary_metadata("findings", report.schema_version),
    )
    ok_r = tf.summary.write(
        metadata.REPORT_TAG,
        tf.constant(report_record(report), dtype=tf.string),
        step=step,
        metadata=metadata.create_summary_metadata("report", report.schema_version),
    )
    return bool(ok_f) and bool(ok_r)
