"""Matching static findings to executed conv nodes, and judging each static prediction.

Naming (see executed.py): the executed function wraps the called function, so every executed
node name starts with one call-node component, then the call nodes of nested (inlined) calls,
then the node's name in its function. A static finding reached through call nodes
c0 > c1 > ... > cn with node N is therefore executed as "<wrapper call>/c_k/.../c_n/N", where k is
the number of static call levels above the executed function (0 for a traced Python function,
1 for a SavedModel signature, whose top-level graph calls the signature function).
Grappler's remapper renames a fused conv after the last op of the fused pattern
(Conv2D > BiasAdd > Relu becomes _FusedConv2D named like the Relu), so the names of the conv's
single-consumer chain of fusable ops are candidates too (through ops grappler drops,
`TRANSPARENT`).
"""

from __future__ import annotations

from collections.abc import Iterable

from ..findings import ConvFinding, Observation
from ..graph import AuditGraph, CallSite, parse_input
from .executed import ExecutedNode, canonical_op
from .probes import ProbeConfig, ProbeResult

# Ops grappler's remapper can fuse into a preceding conv (TensorFlow grappler remapper.cc patterns).
FUSABLE = frozenset(
    {
        "BiasAdd",
        "BiasAddV1",
        "Add",
        "AddV2",
        "FusedBatchNorm",
        "FusedBatchNormV2",
        "FusedBatchNormV3",
        "Relu",
        "Relu6",
        "Elu",
        "LeakyRelu",
        "Sigmoid",
        "Tanh",
        "Mul",
        "_MklSwish",
        "Sqrt",
    }
)
# Ops grappler drops where they change nothing at run time (an Identity; a Reshape to the shape
# its input has, such as the one tf_fp16ops.conv2d puts after a Conv2D it hands an unknown batch
# to), after which the conv fuses with what follows them: the chain passes through them.
TRANSPARENT = frozenset({"Identity", "Reshape"})
_CHAIN_OPS = FUSABLE | TRANSPARENT
MAX_FUSION_CHAIN = 5


def fusion_names(ag: AuditGraph, site: CallSite, consumers_cache: dict) -> tuple[str, ...]:
    """The conv node name, then the names of its chain of single fusable (or transparent)
    consumers (same scope)."""
    scope = ag.scopes[site.scope]
    cons = consumers_cache.get(site.scope)
    if cons is None:
        cons = {}
        for name, nd in scope.index.items():
            for inp in nd.input:
                ref = parse_input(inp, scope.fdef is not None)
                if ref is not None and ref[1] == 0:
                    cons.setdefault(ref[0], []).append(name)
        consumers_cache[site.scope] = cons
    names, cur = [site.node], site.node
    for _ in range(MAX_FUSION_CHAIN):
        nxt = [c for c in cons.get(cur, ()) if scope.index[c].op in _CHAIN_OPS]
        if len(nxt) != 1 or len(cons.get(cur, ())) != 1:
            break
        cur = nxt[0]
        names.append(cur)
    return tuple(names)


def match(
    entries: Iterable[tuple[ConvFinding, tuple[str, ...]]],
    executed: list[ExecutedNode],
    levels_above: int,
) -> dict[str, ExecutedNode]:
    """Maps finding.site_id -> executed node.

    Args:
      entries: (finding, names) with names from `fusion_names` (conv name first).
      executed: conv nodes of the executed graphs.
      levels_above: static call levels above the executed function (see the module docstring).
    Exact names (wrapper component stripped) are tried first; otherwise the longest unique
    suffix match on "/"-separated components.
    """
    by_rel: dict[str, list[ExecutedNode]] = {}
    for e in executed:
        rel = e.name.split("/", 1)[1] if "/" in e.name else e.name
        by_rel.setdefault(rel, []).append(e)
    out: dict[str, ExecutedNode] = {}
    taken: set[tuple[int, str]] = set()
    for f, names in entries:
        calls = list(f.call_nodes[levels_above:])
        hit = None
        for name in names:
            cands = by_rel.get("/".join(calls + [name]), [])
            if len(cands) == 1:
                hit = cands[0]
                break
        if hit is None:
            hit = _suffix_match(f, names, executed, taken)
        if hit is not None:
            out[f.site_id] = hit
            taken.add((hit.graph_index, hit.name))
    return out


def _suffix_match(
    f: ConvFinding, names, executed: list[ExecutedNode], taken
) -> ExecutedNode | None:
    for k in range(len(f.call_nodes) + 1):
        for name in names:
            key = "/".join(list(f.call_nodes[k:]) + [name])
            cands = [
                e
                for e in executed
                if (e.name == key or e.name.endswith("/" + key))
                and (e.graph_index, e.name) not in taken
            ]
            if len(cands) == 1:
                return cands[0]
    return None


def device_kind(device: str) -> str:
    d = device.upper()
    return "gpu" if "GPU" in d else "cpu" if "CPU" in d else "?"


def probe_config(node: ExecutedNode) -> ProbeConfig:
    """The probe configuration of an executed node: the op that really ran (oneDNN names mapped
    back), its T and Tacc, and its device kind; under jit_compile=True when XLA ran it."""
    xla = node.kernel_op.startswith(XLA_KERNEL)
    return ProbeConfig(
        node.op if xla else canonical_op(node.kernel_op) if node.kernel_op else node.op,
        node.T or "?",
        node.Tacc,
        device_kind(node.device),
        xla,
    )


XLA_KERNEL = "XLA cluster"


def match_xla(
    findings: Iterable[ConvFinding], calls: list[ExecutedNode], levels_above: int
) -> dict[str, ExecutedNode]:
    """Maps finding.site_id -> a stand-in ExecutedNode for call sites inside an XLA-compiled
    function (`finding.xla` set) whose compiled call node ran: XLA runs the function as one
    cluster, so the site is known to have run when the call node on its path did. The stand-in
    has the finding's op, T and Tacc, the call node's device, and kernel_op "XLA cluster (NODE)".
    Auto-jit clusters (_XlaCompile / _XlaRun of a cluster function) are not mapped back."""
    out = {}
    for f in findings:
        if f.xla is None or not calls:
            continue
        for j in range(len(f.call_nodes), levels_above, -1):
            key = "/".join(f.call_nodes[levels_above:j])
            cands = [c for c in calls if c.name == key or c.name.endswith("/" + key)]
            if len(cands) == 1:
                c = cands[0]
                out[f.site_id] = ExecutedNode(
                    name=f"{c.name}/{f.node}",
                    op=f.op,
                    kernel_op=f"{XLA_KERNEL} ({c.name})",
                    T=f.T,
                    Tacc=f.Tacc,
                    device=c.device,
                    fused_ops=(),
                    inputs=(),
                    graph_index=c.graph_index,
                )
                break
    return out


def observe(f: ConvFinding, node: ExecutedNode | None, probe: ProbeResult | None) -> Observation:
    """Compares the static finding with what ran (pure)."""
    if node is None:
        return Observation("not-found")
    changes, contra = [], []
    static_op, ran = f.op, canonical_op(node.op)
    if ran != static_op:
        if node.fused_ops:
            changes.append(f"fused into {ran}({', '.join(node.fused_ops)})")
        else:
            changes.append(f"op {static_op} -> {ran}")
    if node.kernel_op and node.kernel_op != node.op:
        changes.append(
            f"kernel {node.kernel_op}" + (f" [{node.kernel_label}]" if node.kernel_label else "")
        )
    amp_casts = [c for c in node.input_casts if "AutoMixedPrecision" in c or "CastTo" in c]
    if amp_casts:
        changes.append("cast inserted by grappler: " + "; ".join(amp_casts))
    amp_rewrite = f.amp is not None and f.amp.rewrite
    if node.T != f.T:
        changes.append(f"dtype T {f.T} -> {node.T}")
        if amp_rewrite and f.amp.predicted_T == node.T:
            changes.append("auto mixed precision rewrite predicted and observed")
        else:
            contra.append(f"static T={f.T}, executed T={node.T}")
    elif amp_rewrite and f.amp.predicted_T != node.T:
        contra.append(
            f"auto mixed precision rewrite to {f.amp.predicted_T} predicted, executed T={node.T}"
        )
    if f.Tacc is not None and node.Tacc != f.Tacc:
        contra.append(f"static Tacc={f.Tacc}, executed Tacc={node.Tacc}")
    kind = device_kind(node.device)
    if kind != "?" and kind != f.target_device:
        contra.append(
            f"static analysis assumed {f.target_device}, "
            f"placed on {node.device.split('device:')[-1]}"
        )
    observed = probe.observed if probe is not None else "not-probed"
    if observed in ("fp16", "fp32"):
        static_acc = f.accumulation
        if amp_rewrite and f.amp.predicted_T == node.T:
            static_acc = observed if static_acc == "unknown" else static_acc
        if observed != static_acc and not (amp_rewrite and f.amp.predicted_T == node.T):
            msg = (
                f"static accumulation {static_acc}, probes of {probe.config.key()} "
                f"observed {observed}"
            )
            ran_kernel = node.kernel_op or ""
            if ran_kernel.startswith("_MklNative") and node.T == "half":
                msg += (
                    f" (oneDNN kernel {ran_kernel} ran: oneDNN takes T=half on this CPU, fp32 "
                    "accumulation; audit with --cpu-onednn-fp16 yes, or run with "
                    "TF_ENABLE_ONEDNN_OPTS=0)"
                )
            elif (
                kind == "cpu"
                and node.T == "half"
                and ran_kernel
                and not ran_kernel.startswith("_Mkl")
                and observed == "fp16"
                and static_acc == "fp32"
            ):
                msg += (
                    f" (TensorFlow's own kernel {ran_kernel} ran, not oneDNN; audit with "
                    "--cpu-onednn-fp16 no)"
                )
            contra.append(msg)
    status = (
        "contradicted" if contra else "confirmed" if observed in ("fp16", "fp32") else "unverified"
    )
    return Observation(
        status,
        node.name,
        node.op,
        node.kernel_op + (f" [{node.kernel_label}]" if node.kernel_label else ""),
        node.T,
        node.Tacc,
        node.device,
        node.fused_ops,
        observed,
        probe.config.key() if probe is not None else None,
        tuple(changes),
        tuple(contra),
    )
