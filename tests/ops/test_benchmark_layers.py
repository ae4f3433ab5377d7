"""tools/benchmark_layers.py runs end to end and writes plain tables when its output is not a
terminal (no progress bar: Keras draws one with carriage returns and colour codes on any POSIX
stdout). No timing is asserted."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_redirected_output_is_the_tables_alone(tmp_path):
    out_md = tmp_path / "layers.md"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    run = subprocess.run(
        [sys.executable, ROOT / "tools/benchmark_layers.py", "--repeats", "1", "--out", out_md],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr
    assert "\r" not in run.stdout and "\x1b" not in run.stdout
    assert "\r" not in run.stderr and "\x1b" not in run.stderr
    lines = run.stdout.splitlines()
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
