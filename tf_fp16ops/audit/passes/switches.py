"""Switch pass: what each relevant environment switch does in a runtime context.

Sources: see passes/accumulation.py and docs/design.md "Cases and their public sources".
"""

from __future__ import annotations

from ..context import RuntimeContext
from ..findings import SwitchStatus


def switch_statuses(ctx: RuntimeContext) -> tuple[SwitchStatus, ...]:
    out = []
    v = ctx.getenv("TF_FP16_CONV_USE_FP32_COMPUTE")
    if ctx.device == "gpu":
        eff = (
            "selects fp16 compute for cuDNN convs with T=half"
            if v == "0"
            else "keeps fp32 compute for T=half convs "
            '(only the exact string "0" selects fp16; read once per process)'
        )
    else:
        eff = "GPU-only switch: no effect on CPU kernels"
    out.append(SwitchStatus("TF_FP16_CONV_USE_FP32_COMPUTE", v, eff))
    v = ctx.getenv("TF_CONV2D_USE_FP16_ACCUMULATE")
    onednn, why = ctx.onednn_half()
    if ctx.device == "cpu":
        eigen = (
            "CPU Conv2D with T=half accumulates in fp16"
            if v == "1"
            else 'CPU Conv2D with T=half computes in fp32 (only the exact string "1" selects fp16)'
        )
        if onednn:
            eff = (
                f"ignored: oneDNN takes T=half convs on the target CPU ({why}) and "
                "accumulates in fp32; with TF_ENABLE_ONEDNN_OPTS=0 (Eigen kernels) "
                'only the exact string "1" selects fp16'
            )
        elif onednn is None:
            eff = (
                f"{eigen} with the Eigen kernel; ignored if oneDNN takes T=half "
                f"(not determined: {why})"
            )
        else:
            eff = f"{eigen} (Eigen kernel: oneDNN does not take T=half, {why})"
    else:
        eff = "CPU-only switch: no effect on GPU kernels"
    out.append(SwitchStatus("TF_CONV2D_USE_FP16_ACCUMULATE", v, eff))
    v = ctx.getenv("TF_ENABLE_ONEDNN_OPTS")
    if v is not None or ctx.device == "cpu":
        state = {
            True: "oneDNN takes T=half convs, fp32 accumulation",
            False: "T=half convs run TensorFlow's Eigen kernels",
            None: "whether oneDNN takes T=half convs is not determined",
        }[onednn]
        out.append(SwitchStatus("TF_ENABLE_ONEDNN_OPTS", v, f"CPU: {state} ({why})"))
    v = ctx.getenv("TF_ENABLE_AUTO_MIXED_PRECISION")
    if v is not None:
        out.append(
            SwitchStatus(
                "TF_ENABLE_AUTO_MIXED_PRECISION",
                v,
                "ignored in TF2 (a TF1 NVIDIA-container switch); request the rewrite with "
                "tf.config.optimizer.set_experimental_options({'auto_mixed_precision': True}) "
                "or audit with --amp",
            )
        )
    v = ctx.getenv("TF_FP16_MATMUL_USE_FP32_COMPUTE")
    if v is not None:
        out.append(
            SwitchStatus(
                "TF_FP16_MATMUL_USE_FP32_COMPUTE",
                v,
                'GPU matmul switch (parsed as a boolean: only "0" or "false" select '
                "fp16 compute for T=half matmuls); no effect on convolutions, on CPU kernels or on "
                "XLA's dots",
            )
        )
    for name in (
        "TF_AUTO_MIXED_PRECISION_GRAPH_REWRITE_ALLOWLIST_ADD",
        "TF_AUTO_MIXED_PRECISION_GRAPH_REWRITE_ALLOWLIST_REMOVE",
    ):
        v = ctx.getenv(name)
        if v is not None:
            out.append(
                SwitchStatus(
                    name,
                    v,
                    "edits the auto-mixed-precision allow list"
                    + ("" if ctx.amp else " (no effect: the rewrite is not requested)"),
                )
            )
    v = ctx.getenv("TF_XLA_FLAGS")
    if v is not None and "--tf_xla_auto_jit" in v:
        out.append(
            SwitchStatus(
                "TF_XLA_FLAGS",
                v,
                "auto-jit requested: TensorFlow may cluster convs and matmuls into XLA at run "
                "time (CPU clusters also need --tf_xla_cpu_global_jit), where XLA decides the "
                "accumulation; the graph shows which nodes only when it carries _XlaCompile / "
                "_XlaScope marks (tf-fp16-audit --run shows what ran)",
            )
        )
    v = ctx.getenv("NVIDIA_TF32_OVERRIDE")
    if v is not None:
        out.append(
            SwitchStatus(
                "NVIDIA_TF32_OVERRIDE",
                v,
                "disables TF32 for T=float"
                if v == "0"
                else 'only "0" changes anything (disables TF32)',
            )
        )
    return tuple(out)
