"""Static facts about TensorFlow op types that the audit relies on.

Every table here is data, not logic: the passes read them. Sources are given per table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar


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
    kind: ClassVar[str] = "conv"


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
        # Grappler's remapper fuses DepthwiseConv2dNative + BiasAdd (+ activation) on CPUs
        # where oneDNN runs: depthwise shapes.
        ConvOpInfo("_FusedDepthwiseConv2dNative", "depthwise", "fprop", 0, 1, None, 2, "cpu-only"),
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


@dataclass(frozen=True)
class MatMulOpInfo:
    """How to read one op of the matmul family (a product of two operands, or an einsum).

    Attributes:
      name: op type.
      family: "matmul" (MatMul, _FusedMatMul: 2-D operands), "batch_matmul" (BatchMatMul*,
        Fp16MatMul: batch dimensions broadcast as BatchMatMulV2) or "einsum".
      a_input / b_input: indices of the two operands (Einsum: its N inputs, 1 or 2).
      transpose_a / transpose_b: the attrs that transpose (adjoint) each operand's last two
        dimensions ("transpose_a"/"transpose_b" for MatMul, "adj_x"/"adj_y" for BatchMatMul*);
        None for Einsum (its equation says it).
      dtype_attr: the attr holding the storage dtype T ("T"; BatchMatMulV3: "Ta", with "Tb" and
        "Tout").
      backend: "cublas" for ops TensorFlow runs through cuBLAS/cuBLASLt on GPU
        (tensorflow/core/kernels/matmul_op_impl.h), "ours" for this package's Fp16MatMul.
    """

    name: str
    family: str
    a_input: int = 0
    b_input: int = 1
    transpose_a: str | None = None
    transpose_b: str | None = None
    dtype_attr: str = "T"
    backend: str = "cublas"
    kind: ClassVar[str] = "matmul"
    direction: ClassVar[str] = "matmul"


def _matmul_table() -> dict[str, MatMulOpInfo]:
    mm = ("transpose_a", "transpose_b")
    bmm = ("adj_x", "adj_y")
    rows = [
        MatMulOpInfo("MatMul", "matmul", 0, 1, *mm),
        MatMulOpInfo("_FusedMatMul", "matmul", 0, 1, *mm),
        MatMulOpInfo("BatchMatMul", "batch_matmul", 0, 1, *bmm),
        MatMulOpInfo("BatchMatMulV2", "batch_matmul", 0, 1, *bmm),
        MatMulOpInfo("BatchMatMulV3", "batch_matmul", 0, 1, *bmm, dtype_attr="Ta"),
        MatMulOpInfo("Einsum", "einsum", 0, 1),
        # This package's matmul: attrs T, Tacc, adj_x, adj_y; batch dims broadcast as V2.
        MatMulOpInfo("Fp16MatMul", "batch_matmul", 0, 1, *bmm, backend="ours"),
    ]
    return {r.name: r for r in rows}


MATMUL_OPS: dict[str, MatMulOpInfo] = _matmul_table()

# Every op type the audit reports as a call site: convolutions and the matmul family.
SITE_OPS: dict[str, ConvOpInfo | MatMulOpInfo] = {**CONV_OPS, **MATMUL_OPS}

# Auto mixed precision allow list entries of the matmul family, from TensorFlow's grappler
# `auto_mixed_precision_lists.h` (AutoMixedPrecisionListsFp16::AllowList: MatMul and Einsum;
# BatchMatMul and BatchMatMulV2 with CUDA >= 9.1, which every TensorFlow 2 GPU build has).
AMP_MATMUL_ALLOW = frozenset({"MatMul", "Einsum", "BatchMatMul", "BatchMatMulV2"})

# CPU accumulation of the matmul family with T=half, measured with the probes of
# runtime/probes.py (`python -m tf_fp16ops.audit.runtime.probes MatMul:half:-:cpu ...`, operands
# passed as function arguments so that no constant folding runs the op) on TensorFlow 2.21.0,
# Intel Xeon (family 6 model 167, avx512_fp16), 2026-12-01:
#  * oneDNN taking T=half (TF_ENABLE_ONEDNN_OPTS unset): MatMul, _FusedMatMul, BatchMatMul,
#    BatchMatMulV2 and Einsum ran as _MklMatMul, _MklNativeFusedMatMul, _MklBatchMatMul,
#    _MklBatchMatMulV2 and _MklEinsum and gave the fp32 values;
#  * TensorFlow's Eigen kernels (TF_ENABLE_ONEDNN_OPTS=0): MatMul, BatchMatMul and BatchMatMulV2
#    gave the fp32 values (a 64x512 by 512x64 product on U[0,1) equals the fp32 product rounded to
#    half bit for bit), Einsum the fp16 values (rounding 1.0, taps49 0.98046875, overflow NaN):
#    it sums its products in fp16 (78.9% of that product's outputs differ from fp32, max 0.75);
#    grappler did not fuse MatMul + BiasAdd + Relu for T=half there, so _FusedMatMul stays
#    unmeasured;
#  * BatchMatMulV3 with Ta=Tb=Tout=half has no CPU kernel ("No OpKernel was registered");
#  * TF_FP16_MATMUL_USE_FP32_COMPUTE=0 changed nothing on CPU.
CPU_EIGEN_HALF_MATMUL = {
    "MatMul": "fp32",
    "BatchMatMul": "fp32",
    "BatchMatMulV2": "fp32",
    "Einsum": "fp16",
}
ONEDNN_HALF_MATMUL_OPS = frozenset(
    {"MatMul", "_FusedMatMul", "BatchMatMul", "BatchMatMulV2", "Einsum"}
)

# XLA on CPU (`tf.function(jit_compile=True)`), T=half, measured with the same probes (key suffix
# ":xla") on the same machine and TensorFlow: Conv2D, MatMul, BatchMatMulV2 and Einsum gave the
# fp32 values with oneDNN on or off and with TF_CONV2D_USE_FP16_ACCUMULATE=1 (XLA's CPU conv
# ignores that switch) or TF_FP16_MATMUL_USE_FP32_COMPUTE=0.
XLA_CPU_HALF_MEASURED = frozenset({"Conv2D", "MatMul", "BatchMatMulV2", "Einsum"})

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
# Ops whose output holds input 0's values (and zeros) in another shape, same dtype: a Conv1D
# kernel reaches its Conv2D through ExpandDims (Keras' TF backend), its input through Pad (causal)
# and SpaceToBatchND (dilation), a depthwise kernel reaches Fp16DepthwiseConv2D through Reshape.
# Provenance walks through them for the dtype chain and the variable, not for the shape (a shape
# found beyond one is not the conv's).
RESHAPE_LIKE = frozenset({"ExpandDims", "Reshape", "Squeeze", "Pad", "MirrorPad", "SpaceToBatchND"})
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
        "_FusedDepthwiseConv2dNative",  # grappler's fusion, measured the same way on 2026-12-05
    }
)
