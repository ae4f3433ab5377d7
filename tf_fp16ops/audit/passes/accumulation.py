"""Effective accumulation pass: in which precision a conv sums its products, and why.

Rules (sources in brackets; the cases behind them with their public issues are listed in
docs/design.md "Cases and their public sources"):
  * This package's ops: the `Tacc` attr [docs/design.md "Numerics contract"].
  * TensorFlow convs with T=half on GPU (cuDNN): fp32 unless TF_FP16_CONV_USE_FP32_COMPUTE is
    exactly "0"; read once per process [XLA stream executor, xla/stream_executor/cuda/cuda_dnn.cc].
    DepthwiseConv2dNative: TF's own depthwise kernel accumulates half in float; its cuDNN path
    follows the switch, so "0" gives fp16 only when cuDNN is chosen.
  * TensorFlow convs with T=half on CPU where oneDNN takes T=half (context.onednn_takes_half:
    TensorFlow's rule from tensorflow/core/util/util.cc IsDataTypeSupportedByOneDNNOnThisCPU and
    tensorflow/core/util/port.cc IsMklEnabled, i.e. avx512bw + avx512_fp16/amx_fp16 or
    avx_ne_convert, oneDNN on): the ops of opsets.ONEDNN_HALF_CONV_OPS run as _MklNative kernels
    that accumulate in fp32 (oneDNN's default accumulation mode); TF_CONV2D_USE_FP16_ACCUMULATE
    is ignored; TF_ENABLE_ONEDNN_OPTS=0 brings back the Eigen kernels below.
  * TensorFlow convs with T=half on CPU, Eigen kernels: Conv2D accumulates in fp32 unless
    TF_CONV2D_USE_FP16_ACCUMULATE is exactly "1" [tensorflow/core/kernels/conv_ops_impl.h];
    Conv2DBackpropInput/Filter, Conv3D and
    DepthwiseConv2dNative accumulate in fp16 (measured with the 49-tap probe, TF 2.21.0 CPU, see
    opsets.CPU_HALF_FP16_ACCUMULATE_MEASURED); other ops: not determined statically.
    When the context does not know whether oneDNN takes T=half, an op whose two kernels differ
    is "unknown" with both outcomes in the reason.
  * T=float: fp32 (TF32 inputs on compute capability >= 8.0 when enabled); T=bfloat16: fp32;
    T=double: fp64.
  * The matmul family (`effective_matmul`) with T=half: on GPU, cuBLAS/cuBLASLt compute in fp32
    unless TF_FP16_MATMUL_USE_FP32_COMPUTE parses as false ("0" or "false", any case; TensorFlow's
    ReadBoolFromEnvVar in tensorflow/core/util/matmul_autotune.cc, used by
    GetBlasComputationType in tensorflow/core/kernels/matmul_util.cc; read from source, not
    measured on a GPU); bfloat16 always fp32. On CPU: measured per op
    (opsets.CPU_EIGEN_HALF_MATMUL, opsets.ONEDNN_HALF_MATMUL_OPS).
  * Inside XLA-compiled functions (`xla=True`) XLA decides: on CPU T=half is accumulated in fp32
    (measured under jit_compile=True for opsets.XLA_CPU_HALF_MEASURED; TF's CPU switches
    ignored); on GPU convs follow TF_FP16_CONV_USE_FP32_COMPUTE (XLA calls the same stream
    executor GetConvAccumulatorType, xla/stream_executor/cuda/cuda_dnn.cc) and dots accumulate
    F16 in F32 unless the dot's algorithm is ALG_DOT_F16_F16_F16
    (xla/stream_executor/gpu/gpu_blas_lt.cc, xla/service/algorithm_util.cc), ignoring
    TF_FP16_MATMUL_USE_FP32_COMPUTE; both read from source, not measured on a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..context import RuntimeContext
from ..opsets import (
    CPU_EIGEN_HALF_MATMUL,
    CPU_HALF_FP16_ACCUMULATE_MEASURED,
    ONEDNN_HALF_CONV_OPS,
    ONEDNN_HALF_MATMUL_OPS,
    XLA_CPU_HALF_MEASURED,
    ConvOpInfo,
    MatMulOpInfo,
)

GPU_SOURCE = "read from source, not measured on a GPU"


@dataclass(frozen=True)
class Accumulation:
    accumulation: str  # "fp16" | "fp32" | "fp64" | "unknown"
    reason: str
    tf32: bool = False


def target_device(device_field: str, ctx: RuntimeContext) -> str:
    """The node's own placement when it names CPU or GPU, else the context's device."""
    d = device_field.upper()
    if "GPU" in d:
        return "gpu"
    if "CPU" in d:
        return "cpu"
    return ctx.device


def effective(
    info: ConvOpInfo,
    T: str | None,
    Tacc: str | None,
    device: str,
    ctx: RuntimeContext,
    xla: bool = False,
) -> Accumulation:
    """The accumulation of a convolution; `xla`: it runs inside an XLA-compiled function."""
    common = _common(info, T, Tacc, device, ctx)
    if common is not None:
        return common
    if xla:
        return _xla(info, device, ctx)
    return _conv_half(info, device, ctx)


def effective_matmul(
    info: MatMulOpInfo,
    T: str | None,
    Tacc: str | None,
    device: str,
    ctx: RuntimeContext,
    xla: bool = False,
) -> Accumulation:
    """The accumulation of an op of the matmul family (rules in the module docstring)."""
    common = _common(info, T, Tacc, device, ctx)
    if common is not None:
        return common
    if xla:
        return _xla(info, device, ctx)
    if device == "gpu":
        v = ctx.getenv("TF_FP16_MATMUL_USE_FP32_COMPUTE")
        shown = "unset" if v is None else repr(v)
        if v is not None and v.lower() in ("0", "false"):
            return Accumulation(
                "fp16",
                f"GPU (cuBLAS) {info.name} T=half: TF_FP16_MATMUL_USE_FP32_COMPUTE={shown} "
                f"selects fp16 compute ({GPU_SOURCE})",
            )
        return Accumulation(
            "fp32",
            f"GPU (cuBLAS) {info.name} T=half: fp32 compute; TF_FP16_MATMUL_USE_FP32_COMPUTE="
            f'{shown} (a boolean: only "0" or "false" select fp16; {GPU_SOURCE})',
        )
    if info.name not in ONEDNN_HALF_MATMUL_OPS and info.name not in CPU_EIGEN_HALF_MATMUL:
        return Accumulation(
            "unknown",
            f"CPU {info.name} T=half: accumulator not determined"
            + (
                " (TensorFlow 2.21 has no CPU kernel for it with T=half: measured)"
                if info.name == "BatchMatMulV3"
                else ""
            ),
        )
    onednn, why = ctx.onednn_half() if info.name in ONEDNN_HALF_MATMUL_OPS else (False, "")
    onednn_acc = Accumulation(
        "fp32",
        f"CPU oneDNN (_Mkl{info.name.lstrip('_')}) T=half: fp32 accumulation (measured); "
        f"oneDNN takes T=half on the target CPU ({why}); "
        "TF_ENABLE_ONEDNN_OPTS=0 runs the Eigen kernels",
    )
    if onednn:
        return onednn_acc
    eigen = CPU_EIGEN_HALF_MATMUL.get(info.name)
    where = "CPU (Eigen)" if onednn is False else "CPU"
    if eigen == "fp32":
        eig = Accumulation(
            "fp32", f"{where} {info.name} T=half: computed in fp32, rounded to half (measured)"
        )
    elif eigen == "fp16":
        eig = Accumulation(
            "fp16",
            f"{where} {info.name} T=half: products summed in fp16 (measured: the probes give "
            "the fp16 values)",
        )
    else:
        eig = Accumulation("unknown", f"{where} {info.name} T=half: accumulator not measured")
    if onednn is None and eig.accumulation != "fp32":
        return Accumulation(
            "unknown",
            f"CPU {info.name} T=half: fp32 if oneDNN takes T=half on the target CPU, else "
            f"(Eigen) {eig.accumulation}: {eig.reason}; not determined: {why}",
        )
    return eig


def _xla(info, device: str, ctx: RuntimeContext) -> Accumulation:
    """T=half inside an XLA-compiled function: XLA decides (module docstring)."""
    if device == "gpu":
        if info.kind == "conv":
            v = ctx.getenv("TF_FP16_CONV_USE_FP32_COMPUTE")
            shown = "unset" if v is None else repr(v)
            if v == "0":
                return Accumulation(
                    "fp16",
                    f"XLA GPU conv: TF_FP16_CONV_USE_FP32_COMPUTE={shown} selects fp16 compute "
                    f"(stream executor GetConvAccumulatorType; {GPU_SOURCE})",
                )
            return Accumulation(
                "fp32",
                f"XLA GPU conv T=half: fp32 compute; TF_FP16_CONV_USE_FP32_COMPUTE={shown} "
                f'(only "0" selects fp16; stream executor GetConvAccumulatorType; {GPU_SOURCE})',
            )
        return Accumulation(
            "fp32",
            "XLA GPU dot T=half: F16 accumulated in F32 unless the dot's algorithm is "
            f"ALG_DOT_F16_F16_F16; TF_FP16_MATMUL_USE_FP32_COMPUTE ignored ({GPU_SOURCE})",
        )
    if info.name in XLA_CPU_HALF_MEASURED:
        return Accumulation(
            "fp32",
            f"XLA CPU {info.name} T=half: fp32 accumulation (measured under jit_compile=True); "
            "TF_CONV2D_USE_FP16_ACCUMULATE and oneDNN settings ignored",
        )
    return Accumulation(
        "unknown", f"XLA CPU {info.name} T=half: accumulator not measured under jit_compile=True"
    )


def _common(info, T, Tacc, device: str, ctx: RuntimeContext) -> Accumulation | None:
    """The rules shared by convs and matmuls: this package's Tacc and every T but half;
    None for T=half of a TensorFlow op."""
    if info.backend == "ours":
        if Tacc == "half":
            return Accumulation(
                "fp16",
                "Tacc=half: one fp16 accumulator per output, rounded at every step "
                "(CPU; fp16 MMA accumulators on GPU)",
            )
        if Tacc == "float":
            return Accumulation("fp32", "Tacc=float: fp32 accumulator, rounded once to T")
        return Accumulation("unknown", f"Tacc attr missing or unresolved ({Tacc!r})")
    if T is None:
        return Accumulation("unknown", "T attr missing or unresolved")
    if T == "float":
        tf32 = (
            device == "gpu"
            and ctx.tf32
            and ctx.getenv("NVIDIA_TF32_OVERRIDE") != "0"
            and ctx.compute_capability is not None
            and ctx.compute_capability >= (8, 0)
        )
        return Accumulation(
            "fp32",
            "T=float: fp32"
            + (
                "; inputs rounded to TF32 on tensor cores (compute capability >= 8.0, TF32 enabled)"
                if tf32
                else ""
            ),
            tf32,
        )
    if T == "bfloat16":
        return Accumulation("fp32", "T=bfloat16: fp32 accumulation")
    if T == "double":
        return Accumulation("fp64", "T=double")
    if T != "half":
        return Accumulation("unknown", f"T={T} is not a floating type this audit knows")
    return None


def _conv_half(info: ConvOpInfo, device: str, ctx: RuntimeContext) -> Accumulation:
    """TensorFlow's convs with T=half outside XLA."""
    if device == "gpu":
        if info.backend == "cpu-only":
            return Accumulation("unknown", f"{info.name} has CPU kernels only; see the CPU rules")
        v = ctx.getenv("TF_FP16_CONV_USE_FP32_COMPUTE")
        shown = "unset" if v is None else repr(v)
        if v == "0":
            if info.family == "depthwise":
                return Accumulation(
                    "fp16",
                    'TF_FP16_CONV_USE_FP32_COMPUTE="0" selects fp16 compute in cuDNN; '
                    "applies when TF picks cuDNN for depthwise (its own kernel uses float)",
                )
            return Accumulation(
                "fp16", 'GPU (cuDNN): TF_FP16_CONV_USE_FP32_COMPUTE="0" selects fp16 compute'
            )
        return Accumulation(
            "fp32",
            f"GPU (cuDNN) T=half: fp32 compute; TF_FP16_CONV_USE_FP32_COMPUTE={shown} "
            '(only the exact string "0" selects fp16)',
        )
    onednn, why = ctx.onednn_half() if info.name in ONEDNN_HALF_CONV_OPS else (False, "")
    if onednn:
        kernel = "_MklNative" + info.name.lstrip("_")
        return Accumulation(
            "fp32",
            f"CPU oneDNN ({kernel}) T=half: fp32 accumulation; "
            f"oneDNN takes T=half on the target CPU ({why}); "
            "TF_CONV2D_USE_FP16_ACCUMULATE ignored; "
            "TF_ENABLE_ONEDNN_OPTS=0 runs the Eigen kernels",
        )
    eigen = _cpu_eigen(info, ctx)
    if onednn is None and eigen.accumulation != "fp32":
        return Accumulation(
            "unknown",
            f"CPU {info.name} T=half: fp32 if oneDNN takes T=half on "
            f"the target CPU, else (Eigen) {eigen.accumulation}: "
            f"{eigen.reason}; not determined: {why}",
        )
    return eigen


def _cpu_eigen(info: ConvOpInfo, ctx: RuntimeContext) -> Accumulation:
    """TensorFlow's own (Eigen) CPU kernels with T=half."""
    v = ctx.getenv("TF_CONV2D_USE_FP16_ACCUMULATE")
    shown = "unset" if v is None else repr(v)
    onednn, _ = ctx.onednn_half()
    where = "CPU (Eigen)" if onednn is False else "CPU"
    if info.name == "Conv2D":
        if v == "1":
            return Accumulation(
                "fp16",
                f'{where} Conv2D: TF_CONV2D_USE_FP16_ACCUMULATE="1" selects fp16 accumulation',
            )
        return Accumulation(
            "fp32",
            f"{where} Conv2D T=half: computed in fp32; "
            f"TF_CONV2D_USE_FP16_ACCUMULATE={shown} "
            '(only the exact string "1" selects fp16)',
        )
    if info.name in CPU_HALF_FP16_ACCUMULATE_MEASURED:
        return Accumulation(
            "fp16",
            f"{where} {info.name} T=half accumulates in fp16 whatever the "
            "switch (measured, TF 2.21 CPU, 49-tap probe)",
        )
    return Accumulation("unknown", f"CPU {info.name} T=half: accumulator not determined statically")
