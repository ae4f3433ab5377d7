"""Audit of real Keras application models generated here (weights=None, small inputs).

Expected counts come from the architectures: ResNet50 has 53 Conv2D layers; MobileNetV2 has
35 Conv2D and 17 DepthwiseConv2D layers; each ends in one Dense classifier on a rank-2 input, run
by Keras' TF backend as one MatMul (a matmul call site). Expected classes come from the switch and
policy rules (docs/design.md "Cases and their public sources") and the CPU measurement documented in
tf_fp16ops/audit/opsets.py.
"""

from __future__ import annotations

import os

import keras
import pytest

from support.audit_helpers import CPU, class_counts, gpu, node_counts
from tf_fp16ops.audit import audit

ARCH = {
    "ResNet50": {"Conv2D": 53, "MatMul": 1},
    "MobileNetV2": {"Conv2D": 35, "DepthwiseConv2dNative": 17, "MatMul": 1},
}
POLICIES = ("float32", "float16", "mixed_float16")


@pytest.fixture(scope="session")
def app_models(tmp_path_factory):
    """Builds each (architecture, policy) once per session: {key: (saved_model_dir, keras_path)}."""
    cache: dict = {}
    root = tmp_path_factory.mktemp("apps")

    def get(arch: str, policy: str):
        if (arch, policy) not in cache:
            prev = keras.mixed_precision.global_policy()
            keras.mixed_precision.set_global_policy(policy)
            try:
                m = getattr(keras.applications, arch)(
                    weights=None, input_shape=(32, 32, 3), classes=10
                )
            finally:
                keras.mixed_precision.set_global_policy(prev)
            sm, kp = str(root / f"{arch}_{policy}"), str(root / f"{arch}_{policy}.keras")
            m.export(sm, verbose=False)
            m.save(kp)
            cache[(arch, policy)] = (sm, kp)
        return cache[(arch, policy)]

    return get


@pytest.mark.parametrize("arch", sorted(ARCH))
@pytest.mark.parametrize("policy", POLICIES)
def test_saved_model_counts_and_classes_cpu(app_models, arch, policy):
    sm, _ = app_models(arch, policy)
    r = audit(sm, CPU, signature="serve")
    assert dict(node_counts(r)) == ARCH[arch]
    assert r.summary.call_sites == sum(ARCH[arch].values())
    n_conv, n_dw = ARCH[arch].get("Conv2D", 0), ARCH[arch].get("DepthwiseConv2dNative", 0)
    if policy == "float32":
        assert dict(class_counts(r)) == {"fp32": n_conv + n_dw + 1}
    else:
        # CPU: Conv2D T=half computes in fp32 unless TF_CONV2D_USE_FP16_ACCUMULATE="1"; CPU
        # depthwise with T=half accumulates in fp16, MatMul in fp32 (measured, see opsets.py).
        expected = {"fp16-storage": n_conv + 1}
        if n_dw:
            expected["fp16-accumulate"] = n_dw
        assert dict(class_counts(r)) == expected
    for f in r.findings:
        assert f.T == ("float" if policy == "float32" else "half")
        assert f.filter.variable is not None
        # Under mixed_float16 the variable is float and is cast to half on the way to the conv.
        want = {"float32": ("float",), "float16": ("half",), "mixed_float16": ("float", "half")}[
            policy
        ]
        assert f.filter.dtypes == want
        assert any(fl.startswith("variable-cast") for fl in f.flag_texts) == (
            policy == "mixed_float16"
        )
        assert f.flops is not None and f.flops > 0


def test_resnet50_first_conv_flops_by_hand(app_models):
    sm, _ = app_models("ResNet50", "float32")
    r = audit(sm, CPU, signature="serve")
    first = [f for f in r.findings if "conv1_conv" in f.node]
    assert len(first) == 1
    # 32x32 input, ZeroPadding 3 -> 38, 7x7 stride 2 VALID -> 16x16x64; MACs per output 7*7*3.
    assert first[0].output_shape[1:] == (16, 16, 64)
    assert first[0].flops == 2 * 16 * 16 * 64 * 7 * 7 * 3


@pytest.mark.parametrize("arch", sorted(ARCH))
def test_gpu_switch_exact_string(app_models, arch):
    sm, _ = app_models(arch, "mixed_float16")
    total = sum(ARCH[arch].values()) - 1  # the convs; the conv switch leaves the MatMul alone
    r0 = audit(sm, gpu({"TF_FP16_CONV_USE_FP32_COMPUTE": "0"}), signature="serve")
    assert dict(class_counts(r0)) == {"fp16-accumulate": total, "fp16-storage": 1}
    rfalse = audit(sm, gpu({"TF_FP16_CONV_USE_FP32_COMPUTE": "false"}), signature="serve")
    assert dict(class_counts(rfalse)) == {"fp16-storage": total + 1}


@pytest.mark.parametrize("arch", sorted(ARCH))
@pytest.mark.parametrize("policy", POLICIES)
def test_keras_archive_static_matches_saved_model(app_models, arch, policy):
    sm, kp = app_models(arch, policy)
    rs = audit(kp, CPU)
    assert rs.source_format == "keras"
    assert dict(node_counts(rs)) == ARCH[arch]
    assert {f.keras_policy for f in rs.findings} == {policy}
    r = audit(sm, CPU, signature="serve")
    assert rs.summary.total_flops == r.summary.total_flops
    assert class_counts(rs) == class_counts(r)


def test_amp_prediction_gates(app_models):
    sm, _ = app_models("MobileNetV2", "float32")
    old = audit(
        sm, gpu(amp=True, compute_capability="8.0", cudnn_version="7.6.5"), signature="serve"
    )
    # depthwise needs cuDNN >= 8; the classifier's MatMul is on the allow list without a gate
    assert old.summary.amp_predicted_rewrites == 35 + 1
    new = audit(
        sm, gpu(amp=True, compute_capability="8.0", cudnn_version="8.9.7"), signature="serve"
    )
    assert new.summary.amp_predicted_rewrites == 52 + 1
    volta_less = audit(
        sm, gpu(amp=True, compute_capability="6.1", cudnn_version="8.9.7"), signature="serve"
    )
    assert volta_less.summary.amp_predicted_rewrites == 0
    assert all(
        f.T == "float" and f.audit_class == "fp32" for f in new.findings
    )  # static facts unchanged
    assert all(f.amp.label.startswith("prediction") for f in new.findings)
    cpu_amp = audit(sm, CPU.with_overrides(amp=True), signature="serve")
    assert cpu_amp.summary.amp_predicted_rewrites == 0


def test_tf32_flag_on_ampere(app_models):
    sm, _ = app_models("ResNet50", "float32")
    r = audit(sm, gpu(compute_capability="8.0"), signature="serve")
    assert all("tf32" in f.flag_texts for f in r.findings)
    r = audit(
        sm, gpu(compute_capability="8.0", env={"NVIDIA_TF32_OVERRIDE": "0"}), signature="serve"
    )
    assert not any("tf32" in f.flag_texts for f in r.findings)


def test_two_signatures_give_two_call_paths(app_models):
    sm, _ = app_models("ResNet50", "float16")
    r = audit(sm, CPU)
    # "serve" and "serving_default" both call the model: 53 convs and the classifier's MatMul
    assert r.summary.call_sites == 2 * 54
    assert r.summary.conv_nodes == 54
    assert os.path.isdir(sm)


def test_a_signature_with_several_outputs_is_named_once(tmp_path):
    """Every output of a signature names the same top-level call node: the call site's
    signatures hold the signature once ("multi", not "multi,multi,multi")."""
    import tensorflow as tf

    w = tf.Variable(tf.ones([3, 3, 2, 2]))

    class M(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([1, 6, 6, 2])])
        def multi(self, x):
            y = tf.nn.conv2d(x, w, 1, "SAME")
            return {"a": y, "b": y + 1.0, "c": y * 2.0}

    m = M()
    m.w = w
    path = str(tmp_path / "sm")
    tf.saved_model.save(m, path, signatures={"multi": m.multi})
    (finding,) = audit(path, CPU).findings
    assert finding.signatures == ("multi",)
