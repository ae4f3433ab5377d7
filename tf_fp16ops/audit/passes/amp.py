"""Auto mixed precision pass: predicts grappler's fp16 rewrite of a conv. Always a prediction.

Rules [tensorflow/core/grappler/optimizers/auto_mixed_precision_lists.h; docs/design.md]: only
when the rewrite is requested (`--amp` / tf.config.optimizer option), on a GPU of compute
capability >= 7.0, for T=float ops on the allow list (Conv2D and backprops; Conv3D* with
cuDNN >= 7.6.2; DepthwiseConv2dNative* with cuDNN >= 8; MatMul, Einsum, BatchMatMul and
BatchMatMulV2, opsets.AMP_MATMUL_ALLOW), edited by
TF_AUTO_MIXED_PRECISION_GRAPH_REWRITE_ALLOWLIST_ADD / _REMOVE (comma-separated op names).
Grappler skips the rewrite when no suitable GPU is present.
"""

from __future__ import annotations

from ..context import RuntimeContext
from ..findings import AmpPrediction
from ..opsets import AMP_CONV_ALLOW, AMP_MATMUL_ALLOW, AMP_MIN_COMPUTE_CAPABILITY


def _env_list(ctx: RuntimeContext, name: str) -> set[str]:
    v = ctx.getenv(name)
    return {x.strip() for x in v.split(",") if x.strip()} if v else set()


def predict(op: str, T: str | None, device: str, ctx: RuntimeContext) -> AmpPrediction | None:
    if not ctx.amp:
        return None
    keep = T or "?"
    if T != "float":
        return AmpPrediction(False, keep, f"T={T}: the rewrite only changes float ops")
    if device != "gpu":
        return AmpPrediction(False, keep, "no GPU target: grappler skips the fp16 rewrite")
    cc = ctx.compute_capability
    if cc is None:
        return AmpPrediction(
            False,
            keep,
            "GPU compute capability unknown (give --compute-capability); the rewrite needs >= 7.0",
        )
    if cc < AMP_MIN_COMPUTE_CAPABILITY:
        return AmpPrediction(
            False, keep, f"compute capability {cc[0]}.{cc[1]} < 7.0: rewrite skipped"
        )
    added = _env_list(ctx, "TF_AUTO_MIXED_PRECISION_GRAPH_REWRITE_ALLOWLIST_ADD")
    removed = _env_list(ctx, "TF_AUTO_MIXED_PRECISION_GRAPH_REWRITE_ALLOWLIST_REMOVE")
    if op in removed:
        return AmpPrediction(
            False,
            keep,
            f"{op} removed from the allow list by "
            "TF_AUTO_MIXED_PRECISION_GRAPH_REWRITE_ALLOWLIST_REMOVE",
        )
    if op in added:
        return AmpPrediction(
            True,
            "half",
            f"{op} added to the allow list by TF_AUTO_MIXED_PRECISION_GRAPH_REWRITE_ALLOWLIST_ADD",
        )
    if op not in AMP_CONV_ALLOW and op not in AMP_MATMUL_ALLOW:
        return AmpPrediction(False, keep, f"{op} is on no auto-mixed-precision list")
    gate = AMP_CONV_ALLOW.get(op)
    if gate is not None:
        if ctx.cudnn_version is None:
            return AmpPrediction(
                False,
                keep,
                f"{op} needs cuDNN >= {'.'.join(map(str, gate))}; "
                "cuDNN version unknown (give --cudnn-version)",
            )
        if tuple(ctx.cudnn_version) < gate:
            return AmpPrediction(False, keep, f"{op} needs cuDNN >= {'.'.join(map(str, gate))}")
    return AmpPrediction(
        True,
        "half",
        f"{op} is on the fp16 allow list; GPU compute capability {cc[0]}.{cc[1]} >= 7.0",
    )
