"""The seed demo's conclusions (docs/design.md "Cases and their public sources": the seed question).

Two kinds of CPU run these tests: one where TensorFlow's oneDNN rewrite takes T=half convolutions
(avx512_fp16 / amx_fp16 / avx_ne_convert; they accumulate in fp32 and ignore
TF_CONV2D_USE_FP16_ACCUMULATE) and one where TensorFlow's Eigen kernels run. The Eigen expectations
run in a fresh process with TF_ENABLE_ONEDNN_OPTS=0, which is the Eigen kernel on every CPU.
"""

import math
import tempfile
from pathlib import Path

from support.cpu_features import onednn_takes_half_here
from tf_fp16ops import demo


def test_seed_comparison_conclusions():
    r = demo.seed_comparison(seed=0)
    # TensorFlow's CPU conv2d with T=half accumulates in float: identical to fp32-then-cast.
    assert r.tf_fp16_vs_fp32_cast.max_abs == 0.0 and r.tf_fp16_vs_fp32_cast.share_differ == 0.0
    assert r.tf_fp16_accumulate_vs_fp32_cast is not None
    # oneDNN took the conv exactly where the CPU has the features of TensorFlow's rule.
    assert r.onednn_took_conv == onednn_takes_half_here(), r.tf_fp16_accumulate_kernel
    if r.onednn_took_conv:
        # oneDNN ignored the switch (fp32 accumulation); the Eigen kernel, run too, honours it.
        assert r.tf_fp16_accumulate_kernel == "_MklNativeConv2D"
        assert r.tf_fp16_accumulate_vs_fp32_cast.share_differ < 0.05
        assert r.tf_fp16_accumulate_eigen_vs_fp32_cast.share_differ > 0.5
    else:
        # With TF's process-wide switch set to exactly "1" (fresh process), the Eigen kernel
        # accumulates in fp16.
        assert r.tf_fp16_accumulate_kernel == "Conv2D"
        assert r.tf_fp16_accumulate_vs_fp32_cast.share_differ > 0.5
        assert r.tf_fp16_accumulate_eigen_vs_fp32_cast is None
    # Our op shows the difference per call: most outputs differ, max |diff| 0.25-0.31 near 36
    # (spacing 0.03125).
    assert 0.6 < r.ours_half_vs_float.share_differ < 0.9
    assert 0.125 <= r.ours_half_vs_float.max_abs <= 0.5
    assert all(math.isinf(v) and v > 0 for v in r.overflow_half) and len(r.overflow_half) == 3
    assert r.overflow_float == (0.0, 0.0, 0.0)
    # The table says what ran: the extra Eigen line and the note exactly when oneDNN took the conv.
    text = demo.format_table(r)
    assert ("TF_ENABLE_ONEDNN_OPTS=0 (fresh process)" in text) == r.onednn_took_conv
    assert ("ignores TF_CONV2D_USE_FP16_ACCUMULATE" in text) == r.onednn_took_conv


def test_table_shows_each_comparison():
    text = demo.format_table(demo.seed_comparison(seed=1, with_tf_fp16_accumulate=False))
    assert "tf.nn.conv2d fp16  vs  fp32 conv cast to fp16" in text
    assert "accumulation=float16  vs  float32" in text
    assert "[inf, inf, inf]" in text and "[0.0, 0.0, 0.0]" in text


def test_default_workdir_is_build_demo_of_a_source_tree_else_a_new_temporary_directory():
    # Which applies depends on where tf_fp16ops comes from: the source tree, or an installed
    # wheel (`make matrix` runs this file outside the tree; tests/package/test_wheel.py runs the
    # demo).
    tree = Path(demo.__file__).resolve().parent.parent
    workdir = demo.default_workdir()
    if (tree / "Makefile").is_file() and (tree / "BUILD").is_file():
        assert workdir == tree / "build" / "demo"
    else:
        assert workdir.parent.resolve() == Path(tempfile.gettempdir()).resolve()
        assert workdir.name.startswith("tf_fp16ops_demo_") and list(workdir.iterdir()) == []
        workdir.rmdir()


def test_audit_writes_where_told_and_prints_its_hint_on_stdout(tmp_path, capsys):
    work, logs = tmp_path / "work", tmp_path / "logs"
    work.mkdir()
    assert demo.run_audit(work, logs) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert out.splitlines()[-1] == f"TensorBoard: tensorboard --logdir {logs}"
    assert (work / "example_savedmodel" / "saved_model.pb").is_file()
    assert list(logs.rglob("events.out.tfevents.*"))
