"""The audit pipeline: loaded model + runtime context -> AuditReport. Pure; prints nothing."""

from __future__ import annotations

from .context import RuntimeContext
from .errors import MalformedModelError, as_text
from .findings import AuditReport
from .graph import AuditGraph, build_graph
from .keras_config import scope_name
from .limits import DEFAULT, Budget, Limits
from .model import LoadedModel
from .passes import provenance
from .passes.sites import SiteMemo, finding
from .passes.summary import summarize
from .passes.switches import switch_statuses
from .passes.unknown_ops import unknown_ops


def analyze(
    model: LoadedModel,
    ctx: RuntimeContext,
    graph: AuditGraph | None = None,
    signature: str | None = None,
    limits: Limits = DEFAULT,
) -> AuditReport:
    """Runs every pass over every conv call site.

    Args:
      signature: keep only call sites reached from this SavedModel signature's outputs.
      limits: the budget of nodes, call sites and call edges; past it the report is partial
        (`AuditReport.partial` says which budget ran out).
    Raises:
      AuditInputError: a malformed model (e.g. a node input "x:abc"), naming `model.source`, or an
        unknown `signature`.
    """
    try:
        budget = Budget(limits)
        ag = graph if graph is not None else build_graph(model, budget)
        layers = {layer.name: layer for layer in model.keras_layers}
        # static .keras graphs name nodes after the sanitized layer name
        for layer in model.keras_layers:
            layers.setdefault(scope_name(layer.name), layer)
        memo = SiteMemo()
        findings = tuple(
            finding(ag, site, ctx, layers, model.keras_model_name, memo)
            for site in ag.call_sites(budget)
        )
        if provenance.budget_spent(memo.provenance):
            budget.over(
                "provenance: the input walks of all call sites took "
                f"{provenance.MAX_TOTAL_STEPS:,} steps; the sites after that have source "
                '"(chain too long)"'
            )
    except MalformedModelError as e:
        raise e.at(model.source) from None
    if signature is not None:
        known = {n for s in ag.scopes.values() for names in s.signatures.values() for n in names}
        if signature not in known:
            from .errors import AuditInputError

            has = ", ".join(sorted(known))
            if not has:
                has = {
                    "keras": "none: a .keras file holds no signatures, a SavedModel does",
                    "graph_def": "none: a GraphDef holds no signatures, a SavedModel does",
                }.get(model.format, "none")
            raise AuditInputError(f"{model.source}: no signature {signature!r} (has: {has})")
        findings = tuple(f for f in findings if signature in f.signatures)
    notes = [as_text(n) for n in model.notes] + [as_text(n) for n in ag.notes]
    loops = sum(1 for f in findings if f.flops is not None and "in-loop" in f.codes)
    branches = sum(1 for f in findings if f.flops is not None and "in-branch" in f.codes)
    parts = []
    if loops:
        parts.append(f"of {loops} call site(s) in loop bodies are per iteration")
    if branches:
        parts.append(
            f"of {branches} call site(s) in If/Case branches per branch (one branch runs per call)"
        )
    if parts:
        notes.append(
            f"FLOPs {' and '.join(parts)}; the FLOP total and shares count each once (see each "
            "site's flops_note)"
        )
    in_xla = sum(1 for f in findings if f.xla is not None)
    if in_xla:
        notes.append(
            f"{in_xla} call site(s) run inside XLA-compiled functions (jit_compile=True or "
            "auto-jit marks): XLA decides their accumulation, not TensorFlow's kernels "
            "(TF_CONV2D_USE_FP16_ACCUMULATE and oneDNN settings do not apply on CPU; "
            "TF_FP16_MATMUL_USE_FP32_COMPUTE does not apply to XLA's dots)"
        )
    if ctx.amp:
        notes.append(
            "auto mixed precision requested: the rewrite happens at run time inside grappler; "
            "the graph still shows T=float, and amp columns are predictions"
        )
    if model.format == "graph_def" and findings and all(f.flops is None for f in findings):
        notes.append(
            "FLOPs unknown at every call site: this GraphDef records no tensor shapes "
            "(_output_shapes); write it with graph.as_graph_def(add_shapes=True)"
        )
    if model.format == "keras":
        notes.append(
            "Keras config read statically: conv nodes are reconstructed from layer configs "
            "(use --build-keras to trace the real model in Keras safe mode)"
        )
    return AuditReport(
        as_text(model.source),
        model.format,
        ctx,
        findings,
        summarize(findings),
        switch_statuses(ctx),
        unknown_ops(ag),
        tuple(notes),
        partial=tuple(model.partial) + tuple(budget.partial),
    )


def select_kind(report: AuditReport, kind: str) -> AuditReport:
    """The report restricted to call sites of `kind` ("conv" or "matmul"; "all" keeps every one),
    with its summary recomputed.

    Raises:
      ValueError: an unknown `kind`.
    """
    from dataclasses import replace

    if kind == "all":
        return report
    if kind not in ("conv", "matmul"):
        raise ValueError(f"kind must be 'conv', 'matmul' or 'all', got {kind!r}")
    findings = tuple(f for f in report.findings if f.kind == kind)
    return replace(report, findings=findings, summary=summarize(findings))
