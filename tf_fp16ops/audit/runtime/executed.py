"""Executed graphs: runs a callable once inside a fresh tf.function and collects, from TensorFlow's
RunMetadata, the graphs the runtime really executed.

Source: the eager context's run metadata (`context.enable_run_metadata()` /
`export_run_metadata()`, the mechanism behind `tf.summary.trace_on(graph=True)`), whose
`function_graphs` hold, per function instantiated while it is on, the graph before and after
grappler (`pre_optimization_graph`, `post_optimization_graph`) and the per-device
`partition_graphs` (after placement and the oneDNN layout pass, e.g. Conv2D -> _MklNativeConv2D).
Function graphs are recorded when a function is instantiated, so the callable is always wrapped
in a new tf.function: nested function calls are inlined into it and appear with their call-node
names as prefixes ("StatefulPartitionedCall/resnet50/conv1_conv/convolution").
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..opsets import CONV_OPS, SITE_OPS

_DTYPES = {1: "float", 2: "double", 14: "bfloat16", 19: "half"}


def canonical_op(op: str) -> str:
    """Maps oneDNN-renamed kernels to the TensorFlow op they implement:
    "_MklNativeConv2D" -> "Conv2D", "_MklNativeFusedConv2D" -> "_FusedConv2D"; oneDNN's Pad
    fusions ("_MklNativePadWithConv2D", "_MklNativePadWithFusedConv2D",
    tensorflow/core/common_runtime/mkl_layout_pass.cc) map to the conv they wrap; other names
    unchanged."""
    for prefix in ("_MklNative", "_Mkl"):
        if op.startswith(prefix):
            rest = op[len(prefix) :].removeprefix("PadWith")
            return rest if rest in SITE_OPS else "_" + rest if "_" + rest in SITE_OPS else op
    return op


def is_site_op(op: str) -> bool:
    """Whether an executed op type is a call site of the audit: a convolution or an op of the
    matmul family, under its own name or a oneDNN kernel name ("_MklMatMul", "_MklEinsum")."""
    c = canonical_op(op)
    return c in SITE_OPS or (
        op.startswith("_") and any(w in op for w in ("Conv", "MatMul", "Einsum"))
    )


def is_conv_op(op: str) -> bool:
    c = canonical_op(op)
    return c in CONV_OPS or (op.startswith("_") and "Conv" in op)


@dataclass(frozen=True)
class ExecutedNode:
    """One convolution or matmul-family node as the runtime ran it.

    Attributes:
      name: node name in the executed function graph (inlined call prefixes included).
      op: op type after grappler (post-optimization graph), e.g. "_FusedConv2D".
      kernel_op: op type in the partitioned graph (after placement and the oneDNN rewrite), e.g.
        "_MklNativeFusedConv2D"; equals `op` when unchanged.
      T / Tacc: dtype attrs ("half", "float", ...), None when absent.
      device: the assigned device, e.g. "/job:localhost/replica:0/task:0/device:CPU:0".
      fused_ops: the `fused_ops` attr of fused convolutions (e.g. ("BiasAdd", "Relu")).
      inputs: input tensor names.
      graph_index: which function graph of the run it came from.
      kernel_label: the partitioned node's `_kernel` label attr (e.g. "MklNameChangeOp"), or "".
      input_casts: "name (SrcT->DstT)" for each data input produced by a Cast.
    """

    name: str
    op: str
    kernel_op: str
    T: str | None
    Tacc: str | None
    device: str
    fused_ops: tuple[str, ...]
    inputs: tuple[str, ...]
    graph_index: int
    kernel_label: str = ""
    input_casts: tuple[str, ...] = ()


@dataclass(frozen=True)
class ExecutedRun:
    """Outputs of one call and the executed graphs (RunMetadata.FunctionGraphs protos)."""

    outputs: tuple[Any, ...]
    function_graphs: tuple[Any, ...]

    def executed_conv_nodes(self) -> list[ExecutedNode]:
        """Convolution and matmul-family nodes of the executed graphs (see `is_site_op`)."""
        out = []
        for gi, fg in enumerate(self.function_graphs):
            placed = {n.name: n for p in fg.partition_graphs for n in p.node}
            post = {n.name: n for n in fg.post_optimization_graph.node}
            for n in fg.post_optimization_graph.node:
                p = placed.get(n.name)
                if not is_site_op(n.op) and not (p is not None and is_site_op(p.op)):
                    continue
                out.append(_executed(n, p, gi, post))
            for name, p in placed.items():  # nodes created after grappler (e.g. by the layout pass)
                if name not in post and is_site_op(p.op):
                    out.append(_executed(p, p, gi, placed))
        return out

    def executed_xla_calls(self) -> list[ExecutedNode]:
        """Call nodes of the executed graphs that XLA compiles: a (Stateful)PartitionedCall with
        `_XlaMustCompile=true` (a jit_compile=True function, compiled and run as one cluster; its
        body's ops never appear as nodes) or an XlaLaunch / _XlaRun node."""
        out = []
        for gi, fg in enumerate(self.function_graphs):
            post = {n.name: n for n in fg.post_optimization_graph.node}
            for n in fg.post_optimization_graph.node:
                must = "_XlaMustCompile" in n.attr and n.attr["_XlaMustCompile"].b
                if must or n.op in ("XlaLaunch", "_XlaRun"):
                    out.append(_executed(n, None, gi, post))
        return out

    def casts(self) -> list[tuple[str, str, str]]:
        """(name, SrcT, DstT) of every Cast in the executed graphs."""
        out = []
        for fg in self.function_graphs:
            for n in fg.post_optimization_graph.node:
                if n.op == "Cast":
                    out.append((n.name, _dtype(n, "SrcT") or "?", _dtype(n, "DstT") or "?"))
        return out


def _dtype(node, attr: str) -> str | None:
    if attr not in node.attr:
        return None
    return _DTYPES.get(node.attr[attr].type, str(node.attr[attr].type))


def _executed(n, p, gi: int, index: dict) -> ExecutedNode:
    src = p if p is not None else n
    casts = []
    for inp in n.input:
        if inp.startswith("^"):
            continue
        prod = index.get(inp.split(":")[0])
        if prod is not None and prod.op == "Cast":
            casts.append(f"{prod.name} ({_dtype(prod, 'SrcT')}->{_dtype(prod, 'DstT')})")
    return ExecutedNode(
        name=n.name,
        op=n.op,
        kernel_op=src.op,
        T=_dtype(n, "T"),
        Tacc=_dtype(n, "Tacc"),
        device=src.device or n.device,
        fused_ops=tuple(s.decode() for s in n.attr["fused_ops"].list.s)
        if "fused_ops" in n.attr
        else (),
        inputs=tuple(n.input),
        graph_index=gi,
        kernel_label=src.attr["_kernel"].s.decode() if "_kernel" in src.attr else "",
        input_casts=tuple(casts),
    )


class _OwnRetracing(logging.Filter):
    """Drops TensorFlow's "triggered tf.function retracing" warning: `collect` traces a new
    function per call by design (one per probe configuration or model), not by mistake."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "triggered tf.function retracing" not in record.getMessage()


def collect(fn: Callable, inputs: Sequence[Any]) -> ExecutedRun:
    """Calls `fn(*inputs)` once inside a new tf.function with run metadata on.

    Args:
      fn: a tf.function, ConcreteFunction, or any callable of tensors (traced by the wrapper).
      inputs: tensors (or values convertible to tensors).
    Returns:
      ExecutedRun with the outputs (flattened) and every function graph instantiated by the call.
    Raises:
      whatever `fn` raises (tf.errors.OpError for bad inputs).
    """
    import tensorflow as tf
    from tensorflow.python.eager import context

    wrapper = tf.function(lambda *args: fn(*args))
    ctx = context.context()
    logger, own = tf.get_logger(), _OwnRetracing()
    logger.addFilter(own)
    ctx.enable_run_metadata()
    try:
        out = wrapper(*inputs)
        md = ctx.export_run_metadata()
    finally:
        ctx.disable_run_metadata()
        logger.removeFilter(own)
    flat = tuple(t.numpy() if hasattr(t, "numpy") else t for t in tf.nest.flatten(out))
    return ExecutedRun(flat, tuple(md.function_graphs) if md is not None else ())
