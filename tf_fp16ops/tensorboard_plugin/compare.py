"""Run-vs-run comparison of audit findings: which conv and matmul call sites changed class.

Works on finding dicts (`ConvFinding.to_dict()` as stored in the plugin data), so it needs neither
TensorFlow nor the audit's analysis. Two findings are "the same conv" when their match keys are
equal (see `match_key`); the key is built to survive what differs between two exports of one
model: the numeric suffixes TensorFlow appends to traced function names, and the op-specific tail
of the conv node's name (`.../convolution` for Conv2D, `.../Fp16Conv2D/Fp16Conv2D` for this
package's op, `.../depthwise` for DepthwiseConv2dNative, `.../Tensordot/MatMul` for a Dense,
`.../Fp16Einsum/Fp16MatMul/Fp16MatMul` for this package's einsum), so a Keras layer converted to
the op family still matches its original.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# Trailing node-name components that name the op, not the layer (TensorFlow's and Keras's own
# names for the conv node inside a layer's name scope, and this package's op name scope).
OP_NAME_TAILS = frozenset(
    {
        "convolution",
        "Conv2D",
        "Conv3D",
        "depthwise",
        "Fp16Conv2D",
        "Conv2DBackpropInput",
        "Conv2DBackpropFilter",
        "Fp16Conv2DBackpropInput",
        "Fp16Conv2DBackpropFilter",
        "DepthwiseConv2dNative",
        "_FusedConv2D",
        "conv2d",
        "conv3d",
        # the matmul family: TensorFlow's and Keras's names (`dense/Tensordot/MatMul`,
        # `mha/einsum/Einsum`), this package's (`.../Fp16Einsum/Fp16MatMul/Fp16MatMul`; a
        # converted Dense runs as `.../Fp16Conv2D/Fp16Conv2D`)
        "MatMul",
        "BatchMatMul",
        "BatchMatMulV2",
        "BatchMatMulV3",
        "_FusedMatMul",
        "Einsum",
        "einsum",
        "Tensordot",
        "matmul",
        "Fp16MatMul",
        "Fp16Einsum",
    }
)
_TRACE_SUFFIX = re.compile(r"_\d+$")


def normalize_function(name: str) -> str:
    """Function name without TensorFlow's trace prefix "__inference_" and numeric suffix "_<n>"."""
    if name.startswith("__inference_"):
        name = name[len("__inference_") :]
    return _TRACE_SUFFIX.sub("", name)


# Tails that come numbered within one layer scope (MultiHeadAttention's two products:
# `einsum`, `einsum_1`; ours `Fp16Einsum`, `Fp16Einsum_1`). Other names keep their "_<n>": a
# Keras layer auto-named `conv2d_1` is a layer, not an op tail.
_NUMBERED_TAILS = frozenset({"einsum", "Fp16Einsum"})


def layer_scope(node: str, op: str = "") -> str:
    """Node name without trailing op-named components (keeps at least one component)."""
    parts = node.split("/")
    while len(parts) > 1 and (
        parts[-1] in OP_NAME_TAILS
        or parts[-1] == op
        or _TRACE_SUFFIX.sub("", parts[-1]) in _NUMBERED_TAILS
    ):
        parts.pop()
    return "/".join(parts)


def match_key(finding: Mapping) -> str:
    """The match key of a finding dict:
    "<signatures> | <normalized function path> | <layer scope> | <direction>"."""
    sigs = ",".join(finding.get("signatures") or ())
    path = " > ".join(normalize_function(f) for f in finding.get("function_path") or ())
    scope = layer_scope(finding["node"], finding.get("op", ""))
    return f"{sigs} | {path} | {scope} | {finding.get('direction', '')}"


def _keyed(findings: Iterable[Mapping]) -> dict[str, Mapping]:
    """Findings by match key; repeated keys within one run get "#2", "#3", ... in report order."""
    seen: Counter = Counter()
    out: dict[str, Mapping] = {}
    for f in findings:
        k = match_key(f)
        seen[k] += 1
        out[k if seen[k] == 1 else f"{k} #{seen[k]}"] = f
    return out


@dataclass(frozen=True)
class ClassChange:
    """One conv matched in both runs whose audit class differs."""

    key: str
    a: Mapping
    b: Mapping

    def to_dict(self) -> dict:
        def side(f: Mapping) -> dict:
            return {
                k: f.get(k)
                for k in (
                    "site_id",
                    "node",
                    "op",
                    "T",
                    "Tacc",
                    "audit_class",
                    "accumulation",
                    "accumulation_reason",
                    "flops",
                    "flags",
                )
            }

        return {"key": self.key, "a": side(self.a), "b": side(self.b)}


@dataclass(frozen=True)
class RunComparison:
    """Findings of run A against run B.

    changed: convs present in both whose `audit_class` differs, in run A's order.
    unchanged: number of convs present in both with the same class.
    only_a / only_b: site ids of convs with no match in the other run.
    """

    changed: tuple[ClassChange, ...]
    unchanged: int
    only_a: tuple[str, ...]
    only_b: tuple[str, ...]

    def to_dict(self) -> dict:
        return {
            "changed": [c.to_dict() for c in self.changed],
            "unchanged": self.unchanged,
            "only_a": list(self.only_a),
            "only_b": list(self.only_b),
        }


def compare_findings(a: Iterable[Mapping], b: Iterable[Mapping]) -> RunComparison:
    """Matches findings of two runs by `match_key` and lists the class changes."""
    ka, kb = _keyed(a), _keyed(b)
    changed, unchanged = [], 0
    for k, fa in ka.items():
        fb = kb.get(k)
        if fb is None:
            continue
        if fa["audit_class"] != fb["audit_class"]:
            changed.append(ClassChange(k, fa, fb))
        else:
            unchanged += 1
    return RunComparison(
        changed=tuple(changed),
        unchanged=unchanged,
        only_a=tuple(f["site_id"] for k, f in ka.items() if k not in kb),
        only_b=tuple(f["site_id"] for k, f in kb.items() if k not in ka),
    )
