"""GPU kernel evidence: the kernel-name decoder on real kernel names from public profiler output,
and the XSpace reader on a recorded-layout fixture (tests/data/gpu_conv_kernels.xplane.pbtxt).

Expected accumulators come from the naming conventions (cuDNN/cuBLAS: h = half accumulate,
s = single; XMMA: "<A><B>_<C><ACC>_<EPI>"; CUTLASS 3: "<A>_<B>_<ACC>_<C>_<D>"), not from the
decoder.
"""

from __future__ import annotations

import os

import pytest

from tf_fp16ops.audit.runtime.kernels import decode, kernels_from_xspace, read_xspace

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "data", "gpu_conv_kernels.xplane.pbtxt")

# (kernel name as recorded, expected accumulator, source of the name)
KERNEL_TABLE = [
    (
        "volta_fp16_s884cudnn_fp16_256x128_ldg8_relu_f2f_exp_small_nhwc2nchw_tn_v1",
        "fp32",
        "nvprof, https://github.com/NVIDIA/apex/issues/666",
    ),
    (
        "volta_fp16_s884cudnn_fp16_256x64_ldg8_relu_f2f_exp_small_nhwc2nchw_tn_v1",
        "fp32",
        "Nsight Systems, https://github.com/pytorch/pytorch/issues/54324",
    ),
    (
        "turing_fp16_s1688cudnn_fp16_256x64_sliced1x2_ldg8_relu_f2f_exp_small_nhwc_tn_v1",
        "fp32",
        "Nsight Systems, https://github.com/pytorch/pytorch/issues/54324",
    ),
    (
        "turing_fp16_s1688cudnn_fp16_256x128_ldg8_relu_f2f_exp_medium_nhwc_tn_v1",
        "fp32",
        "Nsight Systems, https://github.com/pytorch/pytorch/issues/54324",
    ),
    (
        "turing_s1688cudnn_fp16_128x128_ldg8_wgrad_idx_exp_interior_nhwc_nt_v1",
        "fp32",
        "nvprof, https://github.com/apache/mxnet/issues/17665",
    ),
    (
        "volta_fp16_scudnn_fp16_128x64_relu_interior_nn_v1",
        "fp32",
        "nvprof, https://github.com/apache/mxnet/issues/9774",
    ),
    (
        "volta_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148t_nt_v1",
        "fp32",
        "nvprof, https://github.com/ryujaehun/pytorch-gpu-benchmark/issues/6",
    ),
    (
        "volta_scudnn_128x64_relu_small_nn_v1",
        "fp32",
        "nvprof, https://github.com/pytorch/pytorch/issues/13412",
    ),
    (
        "void cudnn::detail::implicit_convolve_sgemm<float, float, int=128, int=6, int=7, int=3, "
        "int=3, int=5, int=1, "
        "bool=1, bool=0, bool=1>(int, int, int, float const *, int, float*, "
        "cudnn::detail::implicit_convolve_sgemm<float, "
        "float, int=128, int=6, int=7, int=3, int=3, int=5, int=1, bool=1, bool=0, bool=1>*, "
        "kernel_conv_params, int, "
        "float, float, int, float, float, int, int)",
        "fp32",
        "nvprof, https://github.com/pytorch/pytorch/issues/13412",
    ),
    (
        "volta_scudnn_128x64_stridedB_splitK_interior_nn_v1",
        "fp32",
        "TensorFlow profiler kernel_stats, github.com/mholmeslinder/semi-supervised-cv "
        "logs/scalars5/20201222-020845/train/plugins/profile/2020_12_22_02_08_58/a0ecb7033138.kernel_stats.pb",
    ),
    (
        "void cudnn::detail::wgrad_alg0_engine<float, 512, 6, 5, 3, 3, 3, false, 512>(int, int, "
        "int, float const*, int, "
        "float*, float const*, kernel_grad_params, int, float, int, int, int, int)",
        "fp32",
        "TensorFlow profiler kernel_stats, github.com/mholmeslinder/semi-supervised-cv (same file)",
    ),
    (
        "void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, true>(int, int, int, float "
        "const*, int, float const*, "
        "int, float*, kernel_grad_params, int, int, float, int, int, int)",
        "fp32",
        "TensorFlow profiler kernel_stats, github.com/shalinekoh/pneumonia_covid19_classification "
        "InceptionResNetV2/logs_finetune/train/plugins/profile/2020_09_22_12_04_38/8a0547ef5ad4.kernel_stats.pb",
    ),
    (
        "sgemm_sm_heavy_nn_ldg",
        "fp32",
        "TensorFlow profiler kernel_stats, shalinekoh/pneumonia_covid19_classification (same file)",
    ),
    (
        "sm80_xmma_wgrad_implicit_gemm_indexed_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize32x256x32_stage3_warpsize1x4x1_g1_"
        "tensor16x8x16_execute_kernel_cudnn_train",
        "fp32",
        "cuDNN log-extractor example in the public code corpus",
    ),
    (
        "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize64x128x64_warpgroupsize1",
        "fp32",
        "profiler table (truncated name as printed) in the public code corpus",
    ),
    (
        "ampere_fp16_s16816gemm_fp16_256x128_ldg8_f2f_gelu_nn_v1",
        "fp32",
        "TensorRT tactic table in the public code corpus",
    ),
    (
        "volta_h884cudnn_256x128_ldg8_relu_exp_small_nhwc_tn_v1",
        "fp16",
        "TensorRT 8.5 verbose log (jetson-inference googlenet), public code corpus",
    ),
    ("turing_h1688cudnn_256x128_ldg8_relu_exp_medium_nhwc_tn_v1", "fp16", "same TensorRT log"),
    (
        "sm70_xmma_fprop_implicit_gemm_f16f16_f16f16_f16_nhwckrsc_nhwc_tilesize128x64x32_stage1_warpsize2x2x1_g1_"
        "tensor8x8x4_t1r1s1",
        "fp16",
        "same TensorRT log",
    ),
    (
        "sm75_xmma_fprop_implicit_gemm_f16f16_f16f16_f16_nhwckrsc_nhwc_tilesize128x128x64_stage1_warpsize2x2x1_g1_"
        "tensor16x8x8_t1r1s1",
        "fp16",
        "same TensorRT log",
    ),
    (
        "trt_turing_h1688cudnn_256x64_ldg8_relu_exp_small_nhwc_tn_v1",
        "fp16",
        "Nsight Systems summary of a TensorRT FP16 engine on a T4, public code corpus",
    ),
    (
        "trt_ampere_h16816gemm_128x64_ldg8_nn_v1",
        "fp16",
        "Nsight Systems kernel counts, public code corpus",
    ),
    (
        "sm80_xmma_fprop_implicit_gemm_f16f16_f16f16_f16_nhwckrsc_nhwc_tilesize128x256x32",
        "fp16",
        "Nsight kernel table (truncated name as printed), public code corpus",
    ),
    (
        "cutlass3x_sm100_tensorop_gemm_e4m3_e4m3_f32_bf16_bf16_128x160x128",
        "fp32",
        "CUTLASS kernel filter, https://github.com/NVIDIA/cutlass/issues/2923",
    ),
    (
        "void nchwToNhwcKernel<__half, __half, float, bool=1, bool=0>(int, int, int, int, __half "
        "const *, __half*, "
        "float, float)",
        "unknown",
        "nvprof, https://github.com/apache/mxnet/issues/17665 (layout kernel)",
    ),
    (
        "sm50_xmma_pooling_coalescedC_NHWC_kMAX_3_False_execute_kernel_trt",
        "unknown",
        "Nsight Systems summary of a TensorRT FP16 engine on a T4, public code corpus (pooling)",
    ),
    (
        "void fft2d_c2r_32x32<float, false, false, 0u, false, false>(float*, float2 const*, int, "
        "int, int, int, int, int, "
        "int, int, int, float, float, cudnn::reduced_divisor, bool, float*, float*, int2, int, "
        "int)",
        "unknown",
        "TensorFlow profiler kernel_stats, shalinekoh/pneumonia_covid19_classification (FFT conv: "
        "not encoded)",
    ),
]


@pytest.mark.parametrize(
    "name,expected,source", KERNEL_TABLE, ids=[r[0][:48] for r in KERNEL_TABLE]
)
def test_decoder_on_real_kernel_names(name, expected, source):
    d = decode(name)
    assert d.accumulator == expected, (name, d, source)
    assert d.rule


def test_decoder_h_and_s_tokens_only_at_token_start():
    # "fp16_s884" must not be read as "h"; the "s" of "relu_small" is no instruction token.
    assert decode("volta_fp16_s884cudnn_fp16_x").accumulator == "fp32"
    assert decode("my_kernel_relu_small_nn").accumulator == "unknown"
    assert decode("").accumulator == "unknown"


def test_xspace_fixture_kernels_per_tf_op():
    ev = {k.tf_op: k for k in kernels_from_xspace(read_xspace(DATA))}
    # Host-plane events are not GPU kernels; the event without an op stat is dropped.
    assert "fixture/host_only/Conv2D" not in ev
    assert set(ev) == {
        "functional_3/conv2d_478/Conv2D",
        "gradient_tape/model_1/conv2_block1_2_conv/Conv2D/Conv2DBackpropFilter",
        "fixture/conv_fp16_acc/Conv2D",
        "fixture/conv_fp32_acc/Conv2D",
        "fixture/conv_mixed/Conv2D",
    }
    assert ev["functional_3/conv2d_478/Conv2D"].accumulator == "fp32"
    assert ev["functional_3/conv2d_478/Conv2D"].op_type == "Conv2D"
    assert (
        ev["gradient_tape/model_1/conv2_block1_2_conv/Conv2D/Conv2DBackpropFilter"].op_type
        == "Conv2DBackpropFilter"
    )
    assert ev["fixture/conv_fp16_acc/Conv2D"].accumulator == "fp16"
    # An undecodable layout kernel next to an s884 kernel: the decodable one decides.
    fp32 = ev["fixture/conv_fp32_acc/Conv2D"]
    assert fp32.accumulator == "fp32" and len(fp32.kernels) == 2
    assert [d.accumulator for d in fp32.decoded] == ["fp32", "unknown"]
    assert ev["fixture/conv_mixed/Conv2D"].accumulator == "mixed"
    d = ev["fixture/conv_fp16_acc/Conv2D"].to_dict()
    assert d["kernels"] == ["volta_h884cudnn_256x128_ldg8_relu_exp_small_nhwc_tn_v1"]
