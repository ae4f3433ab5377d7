"""TensorBoard renderer: event files with the Markdown report (text plugin), scalars per class
(scalars plugin), the graph with each conv node's audit class attached (graphs plugin), and the
findings as structured data of this package's "fp16_audit" dashboard (tags "fp16_audit/findings",
"fp16_audit/report"; see tf_fp16ops.tensorboard_plugin.metadata).

Layout under `logdir`: one run "audit" holding text, scalars and the graph of the first graph
unit; further graph units (other MetaGraphs) go to runs "audit_unit1", "audit_unit2", ...
Tags: "audit/report" (text), "audit/fp16_share", "audit/fp16_accumulate_share",
"audit/flop_share/<class>", "audit/count/<class>" (scalars, step 0).
Conv nodes get string attrs "_audit_class", "_audit_accumulation", "_audit_reason"
(classes of all call sites of the node, joined with ", " when they differ).
"""
from __future__ import annotations

import os

from ..findings import CLASSES, AuditReport
from .markdown import render_markdown


def annotated_graph_def(report: AuditReport, unit_label: str, graph_def):
    """A copy of `graph_def` whose conv nodes carry the audit's classes (the input is not modified)."""
    from tensorflow.core.framework import graph_pb2

    marks: dict[tuple[str, str], dict[str, list[str]]] = {}
    for f in report.findings:
        if f.unit != unit_label:
            continue
        fn = f.function_path[-1] if f.function_path else ""
        m = marks.setdefault((fn, f.node), {"class": [], "acc": [], "reason": []})
        for key, val in (("class", f.audit_class), ("acc", f.accumulation), ("reason", f.accumulation_reason)):
            if val not in m[key]:
                m[key].append(val)
    gd = graph_pb2.GraphDef()
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


def write_tensorboard(report: AuditReport, logdir: str, graph_units: list[tuple[str, object]]) -> list[str]:
    """Writes the event files; returns the run directories written.

    Args:
      graph_units: (unit label, GraphDef) pairs of the audited model, in order.
    """
    import tensorflow as tf

    runs = []
    main = os.path.join(logdir, "audit")
    writer = tf.summary.create_file_writer(main)
    s = report.summary
    with writer.as_default():
        tf.summary.text("audit/report", render_markdown(report), step=0)
        tf.summary.scalar("audit/fp16_share", s.fp16_share, step=0)
        tf.summary.scalar("audit/fp16_accumulate_share", s.fp16_accumulate_share, step=0)
        by_class = {c.audit_class: c for c in s.classes}
        for cls in CLASSES:
            c = by_class.get(cls)
            tf.summary.scalar(f"audit/count/{cls}", c.count if c else 0, step=0)
            tf.summary.scalar(f"audit/flop_share/{cls}", (c.flop_share or 0.0) if c else 0.0, step=0)
        if graph_units:
            tf.summary.graph(annotated_graph_def(report, *graph_units[0]))
        # Structured findings for the "fp16 audit" dashboard (tf_fp16ops.tensorboard_plugin).
        from ...tensorboard_plugin.summary import write_audit_summary
        write_audit_summary(report, step=0)
    writer.flush()
    writer.close()
    runs.append(main)
    for i, (label, gd) in enumerate(graph_units[1:], 1):
        d = os.path.join(logdir, f"audit_unit{i}")
        w = tf.summary.create_file_writer(d)
        with w.as_default():
            tf.summary.text("audit/unit", f"graph unit: `{label}`", step=0)
            tf.summary.graph(annotated_graph_def(report, label, gd))
        w.flush()
        w.close()
        runs.append(d)
    return runs
