"""tools/benchmark_layers.py runs end to end and writes plain tables when its output is not a
terminal (no progress bar: Keras draws one with carriage returns and colour codes on any POSIX
stdout). No timing is asserted."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_redirected_output_is_the_tables_alone(tmp_path):
    out_md = tmp_path / "layers.md"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    run = subprocess.run(
        [
            sys.executable,
            ROOT / "tools/benchmark_layers.py",
            "--repeats",
            "1",
            "--calls",
            "2",
            "--out",
            out_md,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr
    assert "\r" not in run.stdout and "\x1b" not in run.stdout
    assert run.stderr == ""  # no progress bar, no log line
    lines = run.stdout.splitlines()
    assert "2 layer calls per tf.function call" in lines[0], lines[0]
    # Each layer type has a row in each of the two tables (DepthwiseConv2D two: two shapes).
    for layer in (
        "DepthwiseConv2D 3x3 M=1",
        "SeparableConv2D",
        "Conv2DTranspose",
        "Conv1D",
        "Dense",
    ):
        assert sum(ln.startswith(f"| {layer}") for ln in lines) >= 2, layer
    assert out_md.read_text().strip()


def test_an_out_file_in_a_missing_directory_is_refused_before_the_run(tmp_path):
    out_md = tmp_path / "missing" / "layers.md"
    run = subprocess.run(
        [sys.executable, ROOT / "tools/benchmark_layers.py", "--repeats", "1", "--out", out_md],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert f"--out: no directory {str(out_md.parent)!r}" in run.stderr.splitlines()[-1]
    assert run.stdout == ""


@pytest.mark.parametrize(
    "args, message",
    [
        (["--calls", "0"], "--calls must be in [1, 16], got 0"),
        (["--calls", "1000000"], "--calls must be in [1, 16], got 1000000"),
        (["--out", "{tmp}"], "--out: '{tmp}' is not a file name"),
        (["--out", ""], "--out: '' is not a file name"),
        (["--out", "/proc/1/x.md"], "--out: cannot write in '/proc/1'"),
    ],
)
def test_bad_arguments_are_refused_before_the_run(tmp_path, args, message):
    args = [a.format(tmp=tmp_path) for a in args]
    run = subprocess.run(
        [sys.executable, ROOT / "tools/benchmark_layers.py", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert run.stderr.splitlines()[-1].endswith(message.format(tmp=tmp_path))
    assert run.stdout == ""


def test_each_timed_function_runs_the_layer_once_per_input():
    """`--calls C` times C layer calls per tf.function call: the traced function holds one op per
    input (distinct inputs, so Grappler cannot merge them), forward and training step alike."""
    sys.path.insert(0, str(ROOT / "tools"))
    import benchmark_layers as bl

    from tf_fp16ops import layers as L

    tf = bl.tf
    x = tf.ones([1, 5, 5, 3], tf.float16)
    xs = [tf.identity(x) for _ in range(3)]
    layer = L.DepthwiseConv2D(kernel_size=3, accumulation="float16", dtype="mixed_float16")
    layer(x)

    def ops_of(fn, op):
        return sum(n.op == op for n in fn.graph.as_graph_def().node)

    fwd = bl._forward_fn(layer, xs)
    assert ops_of(fwd, "Fp16DepthwiseConv2D") == 3
    assert len(fwd(xs)) == 3
    train = bl._train_fn(layer, xs, [tf.ones([1, 3, 3, 3], tf.float16)] * 3)
    assert ops_of(train, "Fp16DepthwiseConv2D") == 3
    # 3 outputs, 3 input gradients, kernel and bias gradients.
    assert len(train(xs)) == 3 + 3 + 2
