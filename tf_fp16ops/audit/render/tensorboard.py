"""TensorBoard renderer: event files with the Markdown report (text plugin), scalars per class
(scalars plugin), the graph with each conv node's audit class attached (graphs plugin), and the
findings as structured data of this package's "fp16_audit" dashboard (tags "fp16_audit/findings",
"fp16_audit/report"; see tf_fp16ops.tensorboard_plugin.metadata).

Layout under `logdir`: one run "audit" holding text, scalars and the graph of the first graph
unit; further graph units (other MetaGraphs) go to runs "audit_unit1", "audit_unit2", ...
Tags: "audit/report" (text), "audit/fp16_share", "audit/fp16_accumulate_share",
"audit/flop_share/<class>", "audit/count/<class>", and per kind (conv, matmul, all)
"audit/kind/<kind>/count", "audit/kind/<kind>/flop_share", "audit/kind/<kind>/fp16_share",
"audit/kind/<kind>/fp16_accumulate_share" (scalars, step 0).
Conv nodes get string attrs "_audit_class", "_audit_accumulation", "_audit_reason"
(classes of all call sites of the node, joined with ", " when they differ).

Written without TensorFlow: the summaries are built by TensorBoard's own `text_pb` / `scalar_pb`
(the values tf.summary.text / tf.summary.scalar write) and written as TFRecords of `Event` protos
by TensorBoard's `RecordWriter`, in the file layout of tf.summary's writer
(`events.out.tfevents.<time>.<host>`, a first event with file_version "brain.Event:2").
"""

from __future__ import annotations

import os
import socket
import time

from ..findings import CLASSES, AuditReport
from .markdown import render_markdown


def annotated_graph_def(report: AuditReport, unit_label: str, graph_def):
    """A copy of `graph_def` whose conv nodes carry the audit's classes (the input is not modified).

    The copy has the type of `graph_def` (TensorFlow's GraphDef or `protos.GraphDef`)."""
    marks: dict[tuple[str, str], dict[str, list[str]]] = {}
    for f in report.findings:
        if f.unit != unit_label:
            continue
        fn = f.function_path[-1] if f.function_path else ""
        m = marks.setdefault((fn, f.node), {"class": [], "acc": [], "reason": []})
        for key, val in (
            ("class", f.audit_class),
            ("acc", f.accumulation),
            ("reason", f.accumulation_reason),
        ):
            if val not in m[key]:
                m[key].append(val)
    gd = type(graph_def)()
    gd.CopyFrom(graph_def)

    def mark(fn: str, nodes) -> None:
        for n in nodes:
            m = marks.get((fn, n.name))
            if m:
                n.attr["_audit_class"].s = ", ".join(m["class"]).encode()
                n.attr["_audit_accumulation"].s = ", ".join(m["acc"]).encode()
                n.attr["_audit_reason"].s = " | ".join(m["reason"]).encode()

    mark("", gd.node)
    for fdef in gd.library.function:
        mark(fdef.signature.name, fdef.node_def)
    return gd


class _EventWriter:
    """One event file in `run_dir`, written synchronously (TensorBoard's RecordWriter framing)."""

    def __init__(self, run_dir: str):
        from tensorboard.compat.proto import event_pb2
        from tensorboard.summary.writer.record_writer import RecordWriter

        self._event = event_pb2.Event
        os.makedirs(run_dir, exist_ok=True)
        now = time.time()
        name = f"events.out.tfevents.{int(now):010d}.{socket.gethostname()}.{os.getpid()}.fp16audit"
        self._file = open(os.path.join(run_dir, name), "wb")
        self._writer = RecordWriter(self._file)
        self.write(file_version="brain.Event:2", wall_time=now)

    def write(self, **fields) -> None:
        fields.setdefault("wall_time", time.time())
        self._writer.write(self._event(**fields).SerializeToString())

    def summary(self, summary, step: int = 0) -> None:
        self.write(step=step, summary=summary)

    def close(self) -> None:
        self._writer.flush()
        self._writer.close()


def write_tensorboard(
    report: AuditReport, logdir: str, graph_units: list[tuple[str, object]]
) -> list[str]:
    """Writes the event files; returns the run directories written.

    Args:
      graph_units: (unit label, GraphDef) pairs of the audited model, in order.
    Raises:
      OSError: `logdir` or a run directory cannot be created or written.
    """
    from tensorboard.plugins.scalar.summary_v2 import scalar_pb
    from tensorboard.plugins.text.summary_v2 import text_pb

    from ...tensorboard_plugin.summary import audit_summary_pb

    runs = []
    main = os.path.join(logdir, "audit")
    w = _EventWriter(main)
    try:
        s = report.summary
        w.summary(text_pb("audit/report", render_markdown(report)))
        w.summary(scalar_pb("audit/fp16_share", s.fp16_share))
        w.summary(scalar_pb("audit/fp16_accumulate_share", s.fp16_accumulate_share))
        by_class = {c.audit_class: c for c in s.classes}
        for cls in CLASSES:
            c = by_class.get(cls)
            w.summary(scalar_pb(f"audit/count/{cls}", float(c.count if c else 0)))
            w.summary(
                scalar_pb(f"audit/flop_share/{cls}", float((c.flop_share or 0.0) if c else 0.0))
            )
        for k in s.by_kind:
            base = f"audit/kind/{k.kind}"
            w.summary(scalar_pb(f"{base}/count", float(k.count)))
            w.summary(scalar_pb(f"{base}/flop_share", float(k.flop_share or 0.0)))
            w.summary(scalar_pb(f"{base}/fp16_share", k.fp16_share))
            w.summary(scalar_pb(f"{base}/fp16_accumulate_share", k.fp16_accumulate_share))
        if graph_units:
            w.write(graph_def=annotated_graph_def(report, *graph_units[0]).SerializeToString())
        # Structured findings for the "fp16 audit" dashboard (tf_fp16ops.tensorboard_plugin).
        w.summary(audit_summary_pb(report))
    finally:
        w.close()
    runs.append(main)
    for i, (label, gd) in enumerate(graph_units[1:], 1):
        d = os.path.join(logdir, f"audit_unit{i}")
        w = _EventWriter(d)
        try:
            w.summary(text_pb("audit/unit", f"graph unit: `{label}`"))
            w.write(graph_def=annotated_graph_def(report, label, gd).SerializeToString())
        finally:
            w.close()
        runs.append(d)
    return runs
