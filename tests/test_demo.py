"""The seed demo's conclusions (docs/design.md "Cases and their public sources": the seed question)."""
import math

from tf_fp16ops import demo


def test_seed_comparison_conclusions():
    r = demo.seed_comparison(seed=0)
    # TensorFlow's CPU conv2d with T=half accumulates in float: identical to fp32-then-cast.
    assert r.tf_fp16_vs_fp32_cast.max_abs == 0.0 and r.tf_fp16_vs_fp32_cast.share_differ == 0.0
    # With TF's process-wide switch set to exactly "1" (fresh process), TensorFlow does accumulate in fp16.
    assert r.tf_fp16_accumulate_vs_fp32_cast is not None
    assert r.tf_fp16_accumulate_vs_fp32_cast.share_differ > 0.5
    # Our op shows the difference per call: most outputs differ, max |diff| 0.25-0.31 near 36 (spacing 0.03125).
    assert 0.6 < r.ours_half_vs_float.share_differ < 0.9
    assert 0.125 <= r.ours_half_vs_float.max_abs <= 0.5
    assert all(math.isinf(v) and v > 0 for v in r.overflow_half) and len(r.overflow_half) == 3
    assert r.overflow_float == (0.0, 0.0, 0.0)


def test_table_shows_each_comparison():
    text = demo.format_table(demo.seed_comparison(seed=1, with_tf_fp16_accumulate=False))
    assert "tf.nn.conv2d fp16  vs  fp32 conv cast to fp16" in text
    assert "accumulation=float16  vs  float32" in text
    assert "[inf, inf, inf]" in text and "[0.0, 0.0, 0.0]" in text
