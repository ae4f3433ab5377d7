"""Static facts about TensorFlow op types that the audit relies on.

Every table here is data, not logic: the passes read them. Sources are given per table.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ConvOpInfo:
    """How to read one convolution op type.

    Attributes:
      name: op type.
      family: "conv2d", "conv3d", "depthwise", "fused" or "ours".
      direction: "fprop", "dgrad" (gradient w.r.t. input) or "wgrad" (gradient w.r.t. filter),
        in cuDNN/CUTLASS terms.
      data_input: index of the activation input (fprop/wgrad) or None.
      filter_input: index of the filter input, or None for wgrad (the filter is the output).
      grad_input: index of the output-gradient input (dgrad/wgrad) or None.
      spatial_dims: 2 or 3.
      backend: "cudnn" for ops TensorFlow runs through cuDNN on GPU, "ours" for this package,
        "cpu-only" for ops that have CPU kernels only.
    """

    name: str
    family: str
    direction: str
    data_input: int | None
    filter_input: int | None
    grad_input: int | None
    spatial_dims: int = 2
    backend: str = "cudnn"


def _table() -> dict[str, ConvOpInfo]:
    rows = [
        ConvOpInfo("Conv2D", "conv2d", "fprop", 0, 1, None),
        ConvOpInfo("Conv2DBackpropInput", "conv2d", "dgrad", None, 1, 2),
        ConvOpInfo("Conv2DBackpropFilter", "conv2d", "wgrad", 0, None, 2),
        ConvOpInfo("Conv3D", "conv3d", "fprop", 0, 1, None, 3),
        ConvOpInfo("Conv3DBackpropInput", "conv3d", "dgrad", None, 1, 2, 3),
        ConvOpInfo("Conv3DBackpropInputV2", "conv3d", "dgrad", None, 1, 2, 3),
        ConvOpInfo("Conv3DBackpropFilter", "conv3d", "wgrad", 0, None, 2, 3),
        ConvOpInfo("Conv3DBackpropFilterV2", "conv3d", "wgrad", 0, None, 2, 3),
        ConvOpInfo("DepthwiseConv2dNative", "depthwise", "fprop", 0, 1, None),
        ConvOpInfo("DepthwiseConv2dNativeBackpropInput", "depthwise", "dgrad", None, 1, 2),
        ConvOpInfo("DepthwiseConv2dNativeBackpropFilter", "depthwise", "wgrad", 0, None, 2),
        ConvOpInfo("_FusedConv2D", "fused", "fprop", 0, 1, None),
        ConvOpInfo("FusedConv2DBiasActivation", "fused", "fprop", 0, 1, None),
        ConvOpInfo("FusedPadConv2D", "fused", "fprop", 0, 2, None, 2, "cpu-only"),
        ConvOpInfo("FusedResizeAndPadConv2D", "fused", "fprop", 0, 3, None, 2, "cpu-only"),
        ConvOpInfo("Fp16Conv2D", "ours", "fprop", 0, 1, None, 2, "ours"),
        ConvOpInfo("Fp16Conv2DBackpropInput", "ours", "dgrad", None, 1, 2, 2, "ours"),
        ConvOpInfo("Fp16Conv2DBackpropFilter", "ours", "wgrad", 0, None, 2, 2, "ours"),
        # Filter [KH, KW, C, M] as DepthwiseConv2dNative's (shapes), accumulation from Tacc (ours).
        ConvOpInfo("Fp16DepthwiseConv2D", "depthwise", "fprop", 0, 1, None, 2, "ours"),
    ]
    return {r.name: r for r in rows}


CONV_OPS: dict[str, ConvOpInfo] = _table()

# Ops whose output is their input (value-wise) for provenance purposes. Cast is handled apart.
IDENTITY_LIKE = frozenset(
    {
        "Identity",
        "IdentityN",
        "Snapshot",
        "StopGradient",
        "PreventGradient",
        "CheckNumerics",
        "EnsureShape",
        "Enter",
        "RefIdentity",
        "DebugIdentity",
        "DebugIdentityV2",
    }
)
READ_VARIABLE = frozenset({"ReadVariableOp"})
VARIABLE_OPS = frozenset({"VarHandleOp", "VariableV2", "Variable", "VarHandleOpV2"})
CAST_OPS = frozenset({"Cast"})

# Call ops and the attrs naming the callee(s). Input offset = number of leading inputs that
# are not function arguments (If/Case: the predicate / branch index).
CALL_ATTRS: dict[str, tuple[tuple[str, ...], int]] = {
    "PartitionedCall": (("f",), 0),
    "StatefulPartitionedCall": (("f",), 0),
    "If": (("then_branch", "else_branch"), 1),
    "StatelessIf": (("then_branch", "else_branch"), 1),
    "While": (("cond", "body"), 0),
    "StatelessWhile": (("cond", "body"), 0),
    "Case": (("branches",), 1),
    "StatelessCase": (("branches",), 1),
}

# Auto mixed precision allow list entries for convolutions and their gates, from TensorFlow's
# grappler `auto_mixed_precision_lists.h` (AutoMixedPrecisionListsFp16::AllowList):
# Conv2D and backprops always; Conv3D* with cuDNN >= 7.6.2; DepthwiseConv2dNative* with cuDNN >= 8.
AMP_CONV_ALLOW: dict[str, tuple[int, ...] | None] = {
    "Conv2D": None,
    "Conv2DBackpropFilter": None,
    "Conv2DBackpropInput": None,
    "Conv3D": (7, 6, 2),
    "Conv3DBackpropFilter": (7, 6, 2),
    "Conv3DBackpropFilterV2": (7, 6, 2),
    "Conv3DBackpropInput": (7, 6, 2),
    "Conv3DBackpropInputV2": (7, 6, 2),
    "DepthwiseConv2dNative": (8,),
    "DepthwiseConv2dNativeBackpropFilter": (8,),
    "DepthwiseConv2dNativeBackpropInput": (8,),
}
AMP_MIN_COMPUTE_CAPABILITY = (7, 0)

# CPU kernels with T=half whose accumulator was measured with the 49-tap probe (49 taps of
# fp16(0.2)*fp16(0.1); fp32 accumulation gives 0.9794921875, fp16 gives 0.98046875) on
# TensorFlow 2.21.0, x86_64, in separate processes per switch value, with TensorFlow's own
# (Eigen) kernels, i.e. where oneDNN does not take T=half (see context.onednn_takes_half):
# Conv2D gives the fp32 value unless TF_CONV2D_USE_FP16_ACCUMULATE is exactly "1";
# the others give the fp16 value whatever the switch.
CPU_HALF_FP16_ACCUMULATE_MEASURED = frozenset(
    {
        "Conv2DBackpropInput",
        "Conv2DBackpropFilter",
        "Conv3D",
        "DepthwiseConv2dNative",
    }
)

# Conv ops the oneDNN layout pass rewrites to _MklNative<op> kernels when oneDNN takes T=half
# (op list: tensorflow/core/common_runtime/mkl_layout_pass.cc). oneDNN's default accumulation mode
# ("strict") accumulates f16 in f32 (oneDNN developer guide, "Primitive Attributes: accumulation
# mode"); measured with the probes (fp32 values, _MklNative kernels) for every op below on
# TensorFlow 2.21.0, Intel Xeon with avx512_fp16, TF_ENABLE_ONEDNN_OPTS unset, whatever
# TF_CONV2D_USE_FP16_ACCUMULATE.
ONEDNN_HALF_CONV_OPS = frozenset(
    {
        "Conv2D",
        "Conv2DBackpropInput",
        "Conv2DBackpropFilter",
        "_FusedConv2D",
        "Conv3D",
        "Conv3DBackpropInputV2",
        "Conv3DBackpropFilterV2",
        "DepthwiseConv2dNative",
        "DepthwiseConv2dNativeBackpropInput",
        "DepthwiseConv2dNativeBackpropFilter",
    }
)
