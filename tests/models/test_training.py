"""Training the digits CNN of examples/train_digits.py: the loss falls with float16 and float32
accumulation, and the same training step under MirroredStrategy (two logical CPUs) and
MultiWorkerMirroredStrategy (two worker processes on localhost) gives the single-device losses.

Tolerances: with float32 accumulation the distributed step differs from the single-device one
only in the order of fp32 sums (per-replica partial gradients, the all-reduce), so the losses of
3 steps agree to a relative 1e-5 (~170 fp32 ulps). With float16 accumulation each replica's
filter gradient sums its half of the batch in an fp16 accumulator, a different rounding sequence;
the losses agree to a relative 1e-3 (about 2 fp16 ulps, 2^-11 = 4.9e-4).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKER = os.path.join(REPO, "tests", "support", "distributed_training_worker.py")
sys.path.insert(0, os.path.join(REPO, "examples"))

import train_digits  # noqa: E402

from support.local_cluster import run_workers  # noqa: E402

FLOAT32_RTOL = 1e-5
FLOAT16_RTOL = 1e-3
TIMEOUT_S = 240


@pytest.fixture(scope="module")
def single_device_losses():
    strategy = tf.distribute.get_strategy()
    return {a: train_digits.replica_losses(strategy, a) for a in ("float32", "float16")}


def _env(**extra):
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **extra}


def _assert_losses_match(got, expected):
    np.testing.assert_allclose(got["float32"], expected["float32"], rtol=FLOAT32_RTOL, atol=0)
    np.testing.assert_allclose(got["float16"], expected["float16"], rtol=FLOAT16_RTOL, atol=0)


@pytest.mark.parametrize("accumulation", ["float16", "float32"])
def test_digits_loss_falls(accumulation):
    result = train_digits.train(accumulation, epochs=3, n_train=1000)
    assert len(result.losses) == 3 and all(np.isfinite(result.losses))
    assert result.losses[0] < 2.3  # ln(10) = 2.303 is the loss of uniform guessing
    assert result.losses[2] < 0.7 * result.losses[0], result.losses
    assert result.test_accuracy > 0.5, result  # 10 classes: chance is 0.1


def test_float16_and_float32_training_differ():
    """Same data, same initial weights: the runs must differ if fp16 arithmetic is really used."""
    l16 = train_digits.train("float16", epochs=1, n_train=256).losses
    l32 = train_digits.train("float32", epochs=1, n_train=256).losses
    assert l16 != l32


def test_example_script_runs(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            os.path.join(REPO, "examples", "train_digits.py"),
            "--epochs",
            "2",
            "--train-images",
            "256",
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        cwd=str(tmp_path),
        # as a user runs it: TensorFlow's own log level, so that its start-up lines would show
        env={k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    tf_log = re.compile(r"^([IWEF]\d{4} |WARNING: All log messages|To enable the following)")
    assert [x for x in proc.stderr.splitlines() if tf_log.match(x)] == []
    lines = [line for line in proc.stdout.splitlines() if line.startswith("accumulation=")]
    assert [line.split(":")[0] for line in lines] == [
        "accumulation=float16",
        "accumulation=float32",
    ]


def test_single_device_step_losses_fall(single_device_losses):
    for losses in single_device_losses.values():
        assert len(losses) == 3 and losses[2] < losses[0]


def test_mirrored_strategy_two_logical_cpus(single_device_losses, tmp_path):
    out = tmp_path / "mirrored.json"
    proc = subprocess.run(
        [sys.executable, WORKER, "--strategy", "mirrored", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env=_env(),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["replicas"] == 2
    _assert_losses_match(result["losses"], single_device_losses)


def test_multi_worker_mirrored_strategy_two_processes(single_device_losses, tmp_path):
    statuses = run_workers(
        lambda i: [
            sys.executable,
            WORKER,
            "--strategy",
            "multiworker",
            "--out",
            str(tmp_path / f"worker{i}.json"),
        ],
        2,
        TIMEOUT_S,
        _env(),
    )
    for rc, err in statuses:
        assert rc == 0, err[-3000:]
    results = [json.loads((tmp_path / f"worker{i}.json").read_text()) for i in range(2)]
    assert [r["replicas"] for r in results] == [2, 2]
    assert (
        results[0]["losses"] == results[1]["losses"]
    )  # the all-reduced loss is the same on both workers
    _assert_losses_match(results[0]["losses"], single_device_losses)


@pytest.mark.parametrize("script", ["train_digits.py", "sensitivity_digits.py"])
def test_examples_without_scikit_learn_say_so_in_one_line(script):
    # sys.modules["sklearn"] = None makes scikit-learn not importable (importlib's find_spec
    # returns None for it), as in a virtualenv with the wheel but not its [examples] extra.
    code = (
        "import runpy, sys; sys.modules['sklearn'] = None; "
        f"sys.argv = [{script!r}]; sys.path.insert(0, {os.path.join(REPO, 'examples')!r}); "
        f"runpy.run_path({os.path.join(REPO, 'examples', script)!r}, run_name='__main__')"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.splitlines()[-1] == (
        f"{script}: error: the digits data set ships inside scikit-learn, which is not "
        "installed: pip install 'tf_fp16ops[examples]' (or scikit-learn)"
    )
