"""oneDNN kernel names in partitioned graphs map back to the TensorFlow op they implement
(names from tensorflow/core/common_runtime/mkl_layout_pass.cc)."""

import pytest

from tf_fp16ops.audit.runtime.executed import canonical_op, is_conv_op, is_site_op


@pytest.mark.parametrize(
    "kernel,op",
    [
        ("_MklNativeConv2D", "Conv2D"),
        ("_MklConv2D", "Conv2D"),
        ("_MklNativeFusedConv2D", "_FusedConv2D"),
        ("_MklNativePadWithConv2D", "Conv2D"),  # Pad folded into the conv by oneDNN
        ("_MklNativePadWithFusedConv2D", "_FusedConv2D"),
        ("_MklNativeConv2DBackpropInput", "Conv2DBackpropInput"),
        ("_MklNativeDepthwiseConv2dNative", "DepthwiseConv2dNative"),
        ("Conv2D", "Conv2D"),
        ("_MklNativeMatMul", "MatMul"),  # the matmul family are call sites too
        ("_MklMatMul", "MatMul"),
        ("_MklBatchMatMulV2", "BatchMatMulV2"),
        ("_MklEinsum", "Einsum"),
        ("_MklNativeFusedMatMul", "_FusedMatMul"),
        ("_MklNativeSoftmax", "_MklNativeSoftmax"),  # neither: unchanged
    ],
)
def test_canonical_op(kernel, op):
    assert canonical_op(kernel) == op


def test_matmul_is_not_a_conv():
    assert not is_conv_op("_MklNativeMatMul") and is_conv_op("_MklNativePadWithFusedConv2D")


def test_matmul_family_is_a_site():
    assert is_site_op("_MklNativeMatMul") and is_site_op("Einsum") and is_site_op("Conv2D")
    assert not is_site_op("_MklNativeSoftmax") and not is_site_op("Relu")
