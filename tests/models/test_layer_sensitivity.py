"""tf_fp16ops.sensitivity and tf-fp16-sensitivity on the digits CNN (trained here as
examples/train_digits.py trains it, labels given) and on MobileNetV2 (no labels).

Every figure the sweep reports is recomputed independently: a fresh `convert` of the model with
only that layer in float16 (a separate clone, not the runtime switch the sweep uses), compared
in NumPy; the fp16 set is checked the same way on `result.model`.
"""

from __future__ import annotations

import json
import os
import sys

import keras
import numpy as np
import pytest

import tf_fp16ops
from tf_fp16ops.layer_sensitivity.analysis import sensitivity
from tf_fp16ops.layer_sensitivity.cli import main as cli_main
from tf_fp16ops.layer_sensitivity.result import SUMMARY_PREFIX
from tf_fp16ops.layers import _use_fixed_order

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "examples"))
import train_digits  # noqa: E402


def _out(model, x):
    return keras.ops.convert_to_numpy(model(x, training=False)).astype(np.float64)


def _fixed(model):
    """`model` with its tf_fp16ops layers on the op library's fixed-order kernels, as the sweep
    runs its copy (float32 with accumulation='float32' would otherwise take TensorFlow's op,
    whose float32 sums may differ in the last bits: README "Numerics")."""
    _use_fixed_order(model)
    return model


def _rel(a, b):
    d = np.abs(a - b)
    return d.max() / np.abs(a).max(), d.mean() / np.abs(a).mean()


def _acc(y, logits):
    return float(np.mean(logits.argmax(-1) == y))


@pytest.fixture(scope="module")
def digits():
    x, y, x_test, y_test = train_digits.load_digits_data()
    model = train_digits.build_model("float32")
    model.compile(
        optimizer=keras.optimizers.SGD(0.1, momentum=0.9),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=False,
    )
    model.fit(x, y, batch_size=32, epochs=3, shuffle=False, verbose=0)
    return model, x_test, y_test


@pytest.fixture(scope="module")
def digits_result(digits):
    model, x, y = digits
    return sensitivity(model, x, y, tolerance=2e-3, metric_tolerance=0.0, progress=False)


def test_digits_sweep_matches_independent_conversions(digits, digits_result):
    model, x, y = digits
    r = digits_result
    names = [layer.name for layer in model.layers if hasattr(layer, "kernel")]
    assert len(names) == 3 and sorted(layer.name for layer in r.layers) == sorted(names)
    base = _out(_fixed(tf_fp16ops.convert(model, "float32")), x)
    assert r.baseline_metric == pytest.approx(_acc(y, base), abs=0)
    assert r.baseline_metric > 0.5  # chance is 0.1: the model learnt something
    for entry in r.layers:
        one = tf_fp16ops.convert(
            tf_fp16ops.convert(model, "float32"), "float16", layers=[entry.name]
        )
        out = _out(_fixed(one), x)
        max_rel, mean_rel = _rel(base, out)
        assert entry.max_rel == pytest.approx(max_rel, rel=1e-12)
        assert entry.mean_rel == pytest.approx(mean_rel, rel=1e-12)
        assert entry.max_rel > 1e-4  # fp16 accumulation changes every layer's output
        assert entry.metric == _acc(y, out)
        assert entry.metric_change == pytest.approx(entry.metric - r.baseline_metric, abs=1e-15)
    assert [layer.rank for layer in r.layers] == [1, 2, 3]
    assert [layer.max_rel for layer in r.layers] == sorted(
        (layer.max_rel for layer in r.layers), reverse=True
    )
    assert {layer.class_name for layer in r.layers} == {"Conv2D", "Dense"}


def test_digits_fp16_set_is_within_tolerance(digits, digits_result):
    model, x, y = digits
    r = digits_result
    got = _out(_fixed(r.model), x)
    base = _out(_fixed(tf_fp16ops.convert(model, "float32")), x)
    assert _rel(base, got)[0] == pytest.approx(r.set_max_rel, rel=1e-12)
    assert r.set_max_rel <= 2e-3 and _acc(y, got) >= r.baseline_metric
    accs = {
        layer.name: layer.accumulation for layer in r.model.layers if hasattr(layer, "accumulation")
    }
    assert {n for n, a in accs.items() if a == "float16"} == set(r.fp16_set)
    assert {layer.name for layer in r.layers if layer.in_fp16_set} == set(r.fp16_set)


def test_tolerance_extremes(digits):
    model, x, y = digits
    everything = sensitivity(
        model, x, y, tolerance=1e9, metric_tolerance=1.0, progress=False, search="bisect"
    )
    assert len(everything.fp16_set) == 3
    nothing = sensitivity(model, x, tolerance=1e-9, progress=False)
    assert nothing.fp16_set == () and nothing.set_max_rel == 0.0 and nothing.baseline_metric is None
    assert all(
        getattr(layer, "accumulation", "float32") == "float32" for layer in nothing.model.layers
    )


def test_others_original_baseline_is_the_model(digits):
    """The digits model is built from tf_fp16ops layers at float32: 'original' keeps them so."""
    model, x, _ = digits
    r = sensitivity(model, x[:64], tolerance=1.0, others="original", progress=False)
    base = _out(model, x[:64])
    for entry in r.layers:
        # The model with only this layer in float16 and the rest untouched, built independently.
        out = _out(tf_fp16ops.convert(model, "float16", layers=[entry.name]), x[:64])
        assert entry.max_rel == pytest.approx(_rel(base, out)[0], rel=1e-12)
    np.testing.assert_array_equal(
        _out(r.model, x[:64]),
        _out(tf_fp16ops.convert(model, "float16", layers=list(r.fp16_set)), x[:64]),
    )


def test_others_original_runs_the_keras_kernels():
    keras.utils.set_random_seed(5)
    model = keras.Sequential(
        [
            keras.Input((8, 8, 3)),
            keras.layers.Conv2D(8, 3, activation="relu"),
            keras.layers.DepthwiseConv2D(3, depth_multiplier=2),
            keras.layers.Flatten(),
            keras.layers.Dense(5),
        ]
    )
    x = np.random.default_rng(8).normal(size=(6, 8, 8, 3)).astype("float32") * 20
    r = sensitivity(model, x, tolerance=1e-9, others="original", progress=False)
    base = _out(model, x)
    for entry in r.layers:
        out = _out(tf_fp16ops.convert(model, "float16", layers=[entry.name]), x)
        assert entry.max_rel == pytest.approx(_rel(base, out)[0], rel=1e-12)
        assert entry.max_rel > 0
    assert r.fp16_set == () and np.array_equal(_out(r.model, x), base)


def test_table_json_and_tensorboard_summaries(digits_result, tmp_path):
    import tensorflow as tf
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    r = digits_result
    table = r.table()
    assert table.splitlines()[0].split() == [
        "rank",
        "position",
        "layer",
        "class",
        "max_rel",
        "mean_rel",
        "metric_change",
        "fp16",
        "set",
    ]
    assert len(table.splitlines()) == 3 + 2
    for line, e in zip(table.splitlines()[1:], r.layers, strict=False):
        assert line.split()[:4] == [str(e.rank), str(e.position), e.path, e.class_name]
        assert e.path.endswith("/" + e.name) and e.position > 0
    data = json.loads(r.to_json())
    assert [layer["name"] for layer in data["layers"]] == [layer.name for layer in r.layers]
    assert data["fp16_set"] == list(r.fp16_set) and data["tolerance"] == 2e-3
    r.write_summaries(str(tmp_path))
    acc = EventAccumulator(str(tmp_path), size_guidance={"tensors": 0})
    acc.Reload()
    tags = set(acc.Tags()["tensors"])
    for layer in r.layers:
        value = tf.make_ndarray(
            acc.Tensors(f"{SUMMARY_PREFIX}/max_rel/{layer.name}")[0].tensor_proto
        )
        assert float(value) == pytest.approx(layer.max_rel, rel=1e-6)
        assert f"{SUMMARY_PREFIX}/metric_change/{layer.name}" in tags
    text = tf.make_ndarray(acc.Tensors(f"{SUMMARY_PREFIX}/table")[0].tensor_proto).item().decode()
    assert text.startswith("| rank | position | layer |")
    blob = (
        tf.make_ndarray(acc.Tensors(f"{SUMMARY_PREFIX}/result_json")[0].tensor_proto)
        .item()
        .decode()
    )
    assert json.loads(blob)["fp16_set"] == list(r.fp16_set)


def test_progress_bar_counts_batches(digits, capsys):
    # 40 samples, batch 16: 3 batches; one layer, greedy: the sweep pass and one set pass.
    model, x, _ = digits
    sensitivity(
        model, x[:40], tolerance=1.0, layers=[model.layers[-1].name], batch_size=16, progress=True
    )
    out = capsys.readouterr().out
    assert "batch" in out and "6/6" in out and "7/6" not in out


def test_no_progress_bar_by_default_when_stdout_is_not_a_terminal(digits, capsys):
    # pytest's captured stdout is not a terminal: Keras would draw its bar there with carriage
    # returns and colour codes.
    model, x, _ = digits
    sensitivity(model, x[:40], tolerance=1.0, layers=[model.layers[-1].name], batch_size=16)
    out = capsys.readouterr().out
    assert "\r" not in out and "\x1b" not in out and "batch" not in out


def test_bad_arguments(digits):
    model, x, y = digits
    with pytest.raises(ValueError, match="tolerance must be a positive number, got -1"):
        sensitivity(model, x, tolerance=-1)
    with pytest.raises(ValueError, match="metric_tolerance must be a number >= 0"):
        sensitivity(model, x, y, metric_tolerance=-0.5)
    with pytest.raises(ValueError, match="others must be one of .* got 'half'"):
        sensitivity(model, x, others="half")
    with pytest.raises(ValueError, match="search must be one of .* got 'random'"):
        sensitivity(model, x, search="random")
    with pytest.raises(ValueError, match="batch_size must be a positive int, got 0"):
        sensitivity(model, x, batch_size=0)
    with pytest.raises(ValueError, match="y has 3 labels for"):
        sensitivity(model, x, y[:3])
    with pytest.raises(ValueError, match="at least one sample"):
        sensitivity(model, x[:0])
    with pytest.raises(TypeError, match="metric must be a callable"):
        sensitivity(model, x, y, metric="accuracy")
    plain = keras.Sequential([keras.Input((3,)), keras.layers.Activation("relu")])
    with pytest.raises(ValueError, match="has no layer convert can switch"):
        sensitivity(plain, np.ones((2, 3), "float32"))


def test_labels_tolerance_types_and_logdir_checked_up_front(digits, tmp_path):
    # NaN or out-of-range labels were scored silently; np.float32 tolerances were rejected; an
    # unwritable logdir failed after the whole sweep with TensorFlow's raw error.
    model, x, y = digits
    x, y = x[:16], np.asarray(y[:16])
    one = [model.layers[-1].name]
    nan = y.astype("float64")
    nan[3] = np.nan
    with pytest.raises(ValueError, match=r"y holds a non-finite label at row 3: nan"):
        sensitivity(model, x, nan, layers=one, progress=False)
    big = y.copy()
    big[5] = 10
    with pytest.raises(ValueError, match=r"y holds class id 10 at row 5; the model has 10 classes"):
        sensitivity(model, x, big, layers=one, progress=False)
    frac = y.astype("float64") + 0.5
    with pytest.raises(ValueError, match=r"y holds class id .* at row 0"):
        sensitivity(model, x, frac, layers=one, progress=False)
    (tmp_path / "file").write_text("")
    bad = tmp_path / "file" / "logs"
    with pytest.raises(ValueError, match=f"logdir '{bad}' cannot be created"):
        sensitivity(model, x, tolerance=1.0, layers=one, logdir=str(bad), progress=False)
    r = sensitivity(
        model,
        x,
        y,
        tolerance=np.float32(1.0),
        metric_tolerance=np.float64(1.0),
        layers=one,
        progress=False,
    )
    assert r.tolerance == 1.0 and type(r.tolerance) is float and r.fp16_set == tuple(one)


def test_cli(digits, tmp_path, capsys):
    model, x, y = digits
    path = str(tmp_path / "digits.keras")
    model.save(path)
    np.save(tmp_path / "x.npy", x[:100])
    np.save(tmp_path / "y.npy", y[:100])
    rc = cli_main(
        [
            path,
            "--inputs",
            str(tmp_path / "x.npy"),
            "--labels",
            str(tmp_path / "y.npy"),
            "--tolerance",
            "1e9",
            "--metric-tolerance",
            "1",
            "--json",
            str(tmp_path / "r.json"),
            "--logdir",
            str(tmp_path / "tb"),
            "--save-model",
            str(tmp_path / "set.keras"),
            "--no-progress",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    assert "fp16 set: 3 of 3 layers (greedy" in out
    assert json.loads((tmp_path / "r.json").read_text())["num_samples"] == 100
    assert os.listdir(tmp_path / "tb")
    loaded = keras.saving.load_model(str(tmp_path / "set.keras"))
    assert {layer.accumulation for layer in loaded.layers if hasattr(layer, "accumulation")} == {
        "float16"
    }

    # stdout not a terminal (captured here, redirected by a user): no progress bar in the table
    assert cli_main([path, "--random-inputs", "4", "--tolerance", "1e9"]) == 0
    out = capsys.readouterr().out
    assert "fp16 set:" in out and "\r" not in out and "\x1b[" not in out and "batch" not in out

    assert cli_main([path, "--random-inputs", "0"]) == 2
    assert "--random-inputs must be >= 1" in capsys.readouterr().err
    missing = str(tmp_path / "missing.keras")
    assert cli_main([missing, "--random-inputs", "2"]) == 2
    err = capsys.readouterr().err
    assert err == f"tf-fp16-sensitivity: error: model {missing!r}: no such file\n"
    assert cli_main([str(tmp_path), "--random-inputs", "2"]) == 2
    assert "is a directory (a SavedModel?)" in capsys.readouterr().err
    # flags are named as flags, and checked before the model is loaded (a missing model here)
    for flags, message in (
        (["--tolerance", "0"], "--tolerance must be a positive number, got 0.0"),
        (["--tolerance", "nan"], "--tolerance must be a positive number, got nan"),
        (["--metric-tolerance", "-1"], "--metric-tolerance must be a number >= 0, got -1.0"),
        (["--batch-size", "0"], "--batch-size must be >= 1, got 0"),
    ):
        assert cli_main([missing, "--random-inputs", "4", *flags]) == 2
        assert capsys.readouterr().err == f"tf-fp16-sensitivity: error: {message}\n"
    assert cli_main([path, "--inputs", str(tmp_path / "nope.npy")]) == 2
    assert "--inputs '" in capsys.readouterr().err
    # inputs of the wrong shape are named by their flag and file, not by the API's `x`
    wrong = str(tmp_path / "wrong.npy")
    np.save(wrong, x[:4, :-1])
    assert cli_main([path, "--inputs", wrong]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"tf-fp16-sensitivity: error: --inputs {wrong!r} has shape {x[:4, :-1].shape}; "
        "the model's input"
    ), err
    assert err.count("\n") == 1
    # labels that do not fit the inputs: named by their flags too
    labels = str(tmp_path / "y3.npy")
    np.save(labels, y[:3])
    assert cli_main([path, "--inputs", str(tmp_path / "x.npy"), "--labels", labels]) == 2
    assert capsys.readouterr().err == (
        f"tf-fp16-sensitivity: error: --labels {labels!r} has 3 labels for the 100 samples of "
        f"--inputs {str(tmp_path / 'x.npy')!r}\n"
    )


@pytest.fixture(scope="module")
def mobilenet():
    return keras.applications.MobileNetV2(
        weights=None, input_shape=(32, 32, 3), classes=10, classifier_activation=None
    )


def test_mobilenetv2_without_labels(mobilenet):
    x = np.random.default_rng(0).uniform(-1, 1, (2, 32, 32, 3)).astype("float32")
    r = sensitivity(mobilenet, x, tolerance=1e-2, search="bisect", progress=False)
    assert len(r.layers) == 53 and r.baseline_metric is None
    assert {layer.class_name for layer in r.layers} == {"Conv2D", "DepthwiseConv2D", "Dense"}
    assert 0 < len(r.fp16_set) < 53
    base = _out(_fixed(tf_fp16ops.convert(mobilenet, "float32")), x)
    got = _out(_fixed(r.model), x)
    assert _rel(base, got)[0] == pytest.approx(r.set_max_rel, rel=1e-12) and r.set_max_rel <= 1e-2
    # Spot-check the sweep on the least sensitive layer with a fresh conversion.
    for entry in r.layers[-1:]:
        one = tf_fp16ops.convert(
            tf_fp16ops.convert(mobilenet, "float32"), "float16", layers=[entry.name]
        )
        assert entry.max_rel == pytest.approx(_rel(base, _out(_fixed(one), x))[0], rel=1e-12)


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--random-inputs", "2", "--search", "linear"], "argument --search: invalid choice"),
        (["--random-inputs", "2", "--others", "fp16"], "argument --others: invalid choice"),
        ([], "one of the arguments --inputs --random-inputs is required"),
    ],
)
def test_cli_flag_errors_are_one_line(tmp_path, capsys, args, needle):
    """argparse printed its usage block before the error line."""
    try:
        status = cli_main([str(tmp_path / "m.keras"), *args])
    except SystemExit as e:
        status = e.code
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1, err
    assert err.startswith("tf-fp16-sensitivity: error: ") and needle in err, err


def test_python_dash_m_runs_the_cli(tmp_path):
    """`python -m tf_fp16ops.layer_sensitivity` had no __main__ module."""
    import subprocess

    r = subprocess.run(
        [sys.executable, "-m", "tf_fp16ops.layer_sensitivity", str(tmp_path / "m.keras")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2, r.stderr
    assert r.stderr == (
        "tf-fp16-sensitivity: error: one of the arguments --inputs --random-inputs is required\n"
    )


def test_cli_model_too_large_to_build_is_one_line(tmp_path, capsys):
    """A small .keras file whose Conv1D asks for a 2^31-1-tap kernel (275 GB): the load ended in
    TensorFlow's 20-frame ResourceExhaustedError traceback."""
    import zipfile

    layer = {
        "module": "keras.layers",
        "class_name": "Conv1D",
        "config": {"name": "c1", "dtype": "float32", "filters": 8, "kernel_size": [2**31 - 1]},
        "build_config": {"input_shape": [None, 2**31 - 1, 4]},
    }
    path = str(tmp_path / "m.keras")
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(
            "config.json",
            json.dumps(
                {
                    "module": "keras",
                    "class_name": "Sequential",
                    "config": {"name": "m", "layers": [layer]},
                }
            ),
        )
    assert cli_main([path, "--random-inputs", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tf-fp16-sensitivity: error: cannot load model {path!r}: "), err
    assert err.count("\n") == 1, err


def test_cli_checks_outputs_before_the_run(tmp_path, capsys):
    # A model path that does not exist: an output check that passed would fail later on the
    # model instead, so each line below is the up-front check.
    missing = str(tmp_path / "missing.keras")
    for flag, bad in (
        ("--json", "/proc/nope.json"),
        ("--save-model", "/proc/nope.keras"),
        ("--logdir", "/proc/nope"),
        ("--json", str(tmp_path)),
    ):
        assert cli_main([missing, "--random-inputs", "2", flag, bad]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"tf-fp16-sensitivity: error: {flag} {bad!r}: cannot write"), err
        assert err.count("\n") == 1
    assert not os.path.exists(tmp_path / "r.json")
    cli_main([missing, "--random-inputs", "2", "--json", str(tmp_path / "r.json")])
    assert f"model {missing!r}: no such file" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "r.json")  # the probe leaves nothing behind


# Makes `import tensorflow` / `import keras` fail as in an environment without them.
_HIDE_TF = """
import importlib.abc, sys
class _Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("tensorflow", "keras"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, _Hide())
"""


@pytest.mark.parametrize(
    "run",
    [
        "from tf_fp16ops.layer_sensitivity.cli import main; "
        "sys.exit(main(['m.keras', '--inputs', 'x']))",
        "import runpy; runpy.run_module('tf_fp16ops.demo', run_name='__main__')",
    ],
    ids=["tf-fp16-sensitivity", "demo"],
)
def test_without_tensorflow_one_line(run, tmp_path):
    import subprocess

    # files that exist (the CLI checks them before importing TensorFlow); never read here
    (tmp_path / "m.keras").write_bytes(b"")
    (tmp_path / "x").write_bytes(b"")
    p = subprocess.run(
        [sys.executable, "-c", _HIDE_TF + run],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=REPO),
    )
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1, p.stderr
    assert "needs TensorFlow: No module named 'tensorflow'" in p.stderr
    assert "pip install 'tf_fp16ops[tf]'" in p.stderr


def test_bad_x_non_finite_reference_and_empty_selection():
    model = keras.Sequential(
        [keras.Input((4,)), keras.layers.Dense(3, name="d1"), keras.layers.Dense(2, name="d2")]
    )
    x = np.ones((5, 4), "float32")
    with pytest.raises(ValueError, match=r"^x has shape \(3,\); the model's input .* \(N, 4\)"):
        sensitivity(model, [1, 2, 3], progress=False)
    with pytest.raises(ValueError, match=r"^x has shape \(5, 3\)"):
        sensitivity(model, np.ones((5, 3), "float32"), progress=False)
    with pytest.raises(ValueError, match="x must hold numbers, got dtype <U1"):
        sensitivity(model, np.full((5, 4), "a"), progress=False)
    with pytest.raises(ValueError, match="metric_tolerance needs labels y"):
        sensitivity(model, x, metric_tolerance=0.1, progress=False)
    with pytest.raises(ValueError, match="layers selects no layer"):
        sensitivity(model, x, layers=[], progress=False)
    nan = x.copy()
    nan[1, 2] = np.nan  # one bad sample: its 2 outputs are NaN, the other 8 finite
    with pytest.raises(
        ValueError, match=r"^x: the model's outputs on x are not all finite \(2 of 10"
    ):
        sensitivity(model, nan, progress=False)
    with pytest.raises(ValueError, match=r"not all finite \(10 of 10"):
        sensitivity(model, np.full((5, 4), np.nan, "float32"), progress=False)
    # All-zero outputs (zero inputs, no bias): every layer would read "fp16-safe" at error 0.
    with pytest.raises(
        ValueError, match=r"^x: the model's outputs on x are all zero \(10 values\); sensitivity"
    ):
        sensitivity(model, np.zeros((5, 4), "float32"), progress=False)


@pytest.mark.parametrize("others", ["float32", "original"])
def test_transformer_sweep_matches_independent_conversions(others):
    # MultiHeadAttention (projections and both attention products), EinsumDense and Dense of a
    # 2-block encoder are candidates; each one-at-a-time error equals that of the model
    # converted with only this layer at float16 (the others at float32, or left as Keras's).
    from support.transformer import encoder, inputs

    model, x = encoder(), inputs(4, 1)
    r = sensitivity(model, x, tolerance=1e-3, others=others, progress=False)
    assert {(e.name, e.class_name) for e in r.layers} == {
        ("mha_0", "MultiHeadAttention"),
        ("mha_1", "MultiHeadAttention"),
        ("ff1_0", "Dense"),
        ("ff1_1", "Dense"),
        ("ff2_0", "EinsumDense"),
        ("ff2_1", "EinsumDense"),
    }
    start = tf_fp16ops.convert(model, "float32") if others == "float32" else model
    base = _out(start, x)
    for entry in r.layers:
        out = _out(tf_fp16ops.convert(start, "float16", layers=[entry.name]), x)
        max_rel, mean_rel = _rel(base, out)
        assert entry.max_rel == pytest.approx(max_rel, rel=1e-12)
        assert entry.mean_rel == pytest.approx(mean_rel, rel=1e-12)
        assert entry.max_rel > 1e-5


def _skip_model():
    # Skip connections, a layer called twice, a nested functional model and two outputs, one of
    # which does not depend on some layers.
    keras.utils.set_random_seed(9)
    inp = keras.Input((6, 6, 3))
    a = keras.layers.Conv2D(4, 3, padding="same", name="a")(inp)
    shared = keras.layers.Conv2D(4, 1, name="shared")
    b = shared(keras.layers.Conv2D(4, 3, padding="same", name="b")(a))
    c = shared(a)
    inner_in = keras.Input((6, 6, 4))
    inner = keras.Model(inner_in, keras.layers.Conv2D(4, 3, padding="same", name="in1")(inner_in))
    d = inner(b + c)
    head = keras.layers.Dense(3, name="head")(keras.layers.Flatten()(d))
    side = keras.layers.Dense(2, name="side")(keras.layers.Flatten()(a))
    return keras.Model(inp, [head, side])


@pytest.mark.parametrize("others", ["float32", "original"])
def test_reuse_gives_the_results_of_full_runs(others, digits):
    from support.transformer import encoder, inputs

    rng = np.random.default_rng(4)
    cases = [
        (_skip_model(), rng.normal(size=(5, 6, 6, 3)).astype("float32")),
        (encoder(), inputs(3, 2)),
        (digits[0], digits[1][:40]),  # Sequential
    ]
    for model, x in cases:
        kw = dict(tolerance=1e-3, others=others, progress=False, batch_size=2)
        new = sensitivity(model, x, reuse=True, **kw)
        old = sensitivity(model, x, reuse=False, **kw)
        assert [(e.name, e.max_rel, e.mean_rel) for e in new.layers] == [
            (e.name, e.max_rel, e.mean_rel) for e in old.layers
        ]
        assert new.fp16_set == old.fp16_set and new.set_max_rel == old.set_max_rel
    with pytest.raises(ValueError, match="reuse must be True, False or 'stacked', got 1"):
        sensitivity(cases[0][0], cases[0][1], reuse=1, progress=False)
    with pytest.raises(TypeError, match="progress must be True, False or None, got 'yes'"):
        sensitivity(cases[0][0], cases[0][1], progress="yes")


@pytest.mark.parametrize("others", ["float32", "original"])
def test_stacked_reuse_gives_the_results_of_full_runs(others, digits, monkeypatch):
    # reuse='stacked' runs the sweep states of a batch together; STACK_ROWS = 4 with batches of
    # 2 puts 2 states in a call, so the 6 layers of the skip model take 3 groups.
    from support.transformer import encoder, inputs
    from tf_fp16ops.layer_sensitivity import analysis as layer_sensitivity

    monkeypatch.setattr(layer_sensitivity, "STACK_ROWS", 4)
    rng = np.random.default_rng(4)
    kw = dict(tolerance=1e-3, others=others, progress=False, batch_size=2)
    for model, x in (
        (_skip_model(), rng.normal(size=(5, 6, 6, 3)).astype("float32")),
        (digits[0], digits[1][:40]),  # Sequential
    ):
        new = sensitivity(model, x, reuse="stacked", **kw)
        old = sensitivity(model, x, reuse=False, **kw)
        if others == "float32":  # every conv and Dense on tf_fp16ops' fixed-order kernels
            assert [(e.name, e.max_rel, e.mean_rel) for e in new.layers] == [
                (e.name, e.max_rel, e.mean_rel) for e in old.layers
            ]
            assert new.fp16_set == old.fp16_set and new.set_max_rel == old.set_max_rel
        else:
            # Keras's own kernels: TensorFlow's Eigen convolution (TF_ENABLE_ONEDNN_OPTS=0 or
            # a CPU without avx512_fp16) rounds by call size, so to that rounding only.
            got = {e.name: e for e in new.layers}
            for e in old.layers:
                assert got[e.name].max_rel == pytest.approx(e.max_rel, rel=1e-3)
                assert got[e.name].mean_rel == pytest.approx(e.mean_rel, rel=1e-3)
    # Keras's LayerNormalization rounds differently by call size (up to an fp32 ulp of its
    # outputs between 3 and 18 samples here), so the encoder's errors agree to the size of that
    # rounding against the fp16 errors (~5e-4): relative 1e-3 on each layer's max_rel/mean_rel.
    model, x = encoder(), inputs(3, 2)
    new = {e.name: e for e in sensitivity(model, x, reuse="stacked", **kw).layers}
    old = {e.name: e for e in sensitivity(model, x, reuse=False, **kw).layers}
    assert new.keys() == old.keys()
    for name, e in old.items():
        assert new[name].max_rel == pytest.approx(e.max_rel, rel=1e-3)
        assert new[name].mean_rel == pytest.approx(e.mean_rel, rel=1e-3)


def _masked_models():
    """Two models whose masks (Embedding mask_zero) reach the candidate layers, with inputs in
    which padding (0) masks some positions: MultiHeadAttention over the embeddings (it clears
    the mask on its inputs when called), and a Dense/EinsumDense chain whose pooling reads the
    mask, with a MultiHeadAttention and a Dense consuming the same masked tensor (Keras's own
    run shows the Dense no mask: the attention called first clears it)."""
    keras.utils.set_random_seed(0)
    tok = keras.Input((6,), dtype="int32", name="tokens")
    x = keras.layers.Embedding(20, 8, mask_zero=True)(tok)
    a = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4, name="mha")(x, x)
    mha = keras.Model(tok, keras.layers.Dense(4, name="head")(a))
    tok2 = keras.Input((6,), dtype="int32")
    h = keras.layers.Dense(8, name="d1")(keras.layers.Embedding(20, 8, mask_zero=True)(tok2))
    att = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4, name="att")(h, h)
    both = keras.layers.Add()([att, keras.layers.Dense(8, name="d3")(h)])
    pooled = keras.layers.GlobalAveragePooling1D()(keras.layers.Dense(8, name="d2")(both))
    ed = keras.layers.EinsumDense("bd,de->be", output_shape=8, name="ed")(pooled)
    chain = keras.Model(tok2, keras.layers.Dense(3, name="out")(ed))
    toks = np.array([[3, 4, 5, 0, 0, 0], [1, 2, 3, 4, 5, 6]] * 4, "int32")
    return [(mha, toks), (chain, toks)]


@pytest.mark.parametrize("reuse", [True, "stacked"])
def test_reuse_on_masked_models_gives_the_results_of_full_runs(reuse):
    # The reuse sweep reran a node on kept activations that no longer carried their Keras mask
    # (MultiHeadAttention clears it on its inputs): the mha row read max_rel 1.02 instead of
    # 8e-4. Reference: whole-model runs (reuse=False), and for each row a fresh convert of the
    # model with only that layer at float16, compared in NumPy.
    for model, toks in _masked_models():
        kw = dict(tolerance=1e-3, progress=False, batch_size=4)
        new = sensitivity(model, toks, reuse=reuse, **kw)
        old = sensitivity(model, toks, reuse=False, **kw)
        assert [(e.name, e.max_rel, e.mean_rel) for e in new.layers] == [
            (e.name, e.max_rel, e.mean_rel) for e in old.layers
        ]
        assert new.fp16_set == old.fp16_set and new.set_max_rel == old.set_max_rel
        start = tf_fp16ops.convert(model, "float32")
        base = _out(start, toks)
        for entry in new.layers:
            out = _out(tf_fp16ops.convert(start, "float16", layers=[entry.name]), toks)
            max_rel, mean_rel = _rel(base, out)
            assert entry.max_rel == pytest.approx(max_rel, rel=1e-12)
            assert entry.mean_rel == pytest.approx(mean_rel, rel=1e-12)
            assert 1e-6 < entry.max_rel < 1e-2


def test_stacked_reuse_falls_back_one_state_at_a_time(monkeypatch):
    # Where states cannot share a stacked mask (present in some, absent in others), each state
    # of the group reruns alone as with reuse=True: still the full runs' results.
    from tf_fp16ops.layer_sensitivity.reuse import Reuse, UnstackableMasks

    def unstackable(*args, **kwargs):
        raise UnstackableMasks

    monkeypatch.setattr(Reuse, "run_stacked", unstackable)
    model, toks = _masked_models()[1]
    kw = dict(tolerance=1e-3, progress=False, batch_size=4)
    new = sensitivity(model, toks, reuse="stacked", **kw)
    old = sensitivity(model, toks, reuse=False, **kw)
    assert len(new.layers) == 6
    assert _as_records(new) == _as_records(old)


def test_reuse_recomputes_only_downstream_nodes():
    from tf_fp16ops.layer_sensitivity.reuse import Reuse

    model = _skip_model()
    reuse = Reuse(model)
    assert reuse.usable
    by_id = {
        id(n): n.operation.name
        for nodes in model._nodes_by_depth.values()
        for n in nodes
        if n.operation is not None and not n.is_input
    }

    def names(layer_name):
        layer = model.get_layer(layer_name)
        return sorted(by_id[i] for i in reuse.downstream(layer))

    assert names("head") == ["head"]
    assert names("side") == ["side"]
    # in1 sits inside the nested model: its node and what follows it.
    inner = next(layer for layer in model.layers if isinstance(layer, keras.Model))
    got = sorted(by_id[i] for i in reuse.downstream(inner.get_layer("in1")))
    assert got == sorted([inner.name, "head", model.get_layer("head").input._keras_history[0].name])
    # The shared layer's two calls and everything after them; not a, b or side.
    got = names("shared")
    assert "a" not in got and "b" not in got and "side" not in got and got.count("shared") == 2
    assert len(reuse.downstream(model.get_layer("a"))) == len(by_id)


def test_results_give_keras_paths_and_positions():
    model = _skip_model()
    x = np.random.default_rng(6).normal(size=(3, 6, 6, 3)).astype("float32")
    r = sensitivity(model, x, tolerance=1e-3, progress=False)
    inner = next(layer for layer in model.layers if isinstance(layer, keras.Model))
    # Expected by hand: model.layers in order, the nested model's layers right after it.
    order = []
    for layer in model.layers:
        order.append(f"{model.name}/{layer.name}")
        if layer is inner:
            order += [f"{model.name}/{inner.name}/{sub.name}" for sub in inner.layers]
    by_name = {e.name: e for e in r.layers}
    assert by_name["in1"].path == f"{model.name}/{inner.name}/in1"
    assert by_name["head"].path == f"{model.name}/head"
    for e in r.layers:
        assert order[e.position - 1] == e.path
    data = json.loads(r.to_json())
    assert {layer["name"]: layer["path"] for layer in data["layers"]} == {
        e.name: e.path for e in r.layers
    }


def test_paths_and_positions_count_the_layers_inside_layers():
    # The encoder's model.layers: input, then per block mha, ln1, ff1, ff2, ln2. Keras's
    # MultiHeadAttention holds six layers of its own (query, key, value EinsumDense, softmax,
    # dropout, attention_output EinsumDense), which follow it depth first.
    from support.transformer import encoder, inputs

    model = encoder()
    r = sensitivity(model, inputs(2, 3), tolerance=1e-3, progress=False)
    got = {e.name: (e.path, e.position) for e in r.layers}
    m = model.name
    assert got == {
        "mha_0": (f"{m}/mha_0", 2),
        "ff1_0": (f"{m}/ff1_0", 10),
        "ff2_0": (f"{m}/ff2_0", 11),
        "mha_1": (f"{m}/mha_1", 13),
        "ff1_1": (f"{m}/ff1_1", 21),
        "ff2_1": (f"{m}/ff2_1", 22),
    }
    from tf_fp16ops.layer_sensitivity.reuse import layer_paths

    paths = layer_paths(model)
    assert paths["query"] == (f"{m}/mha_0/query", 3)
    assert paths["attention_output"] == (f"{m}/mha_0/attention_output", 8)
    # Nested twice: a Sequential inside a functional model inside the model.
    keras.utils.set_random_seed(2)
    seq = keras.Sequential([keras.Input((4,)), keras.layers.Dense(4, name="deep")], name="seq")
    mid_in = keras.Input((4,))
    mid = keras.Model(mid_in, seq(keras.layers.Dense(4, name="mid_dense")(mid_in)), name="mid")
    top_in = keras.Input((4,))
    top = keras.Model(top_in, keras.layers.Dense(2, name="out")(mid(top_in)), name="top")
    r = sensitivity(top, np.ones((3, 4), "float32"), tolerance=1.0, progress=False)
    # top.layers: input(1), mid(2) [mid.layers: input(3), mid_dense(4), seq(5) [deep(6)]], out(7)
    assert {e.name: (e.path, e.position) for e in r.layers} == {
        "mid_dense": ("top/mid/mid_dense", 4),
        "deep": ("top/mid/seq/deep", 6),
        "out": ("top/out", 7),
    }
    assert "top/mid/seq/deep" in r.table() and "| 6 | top/mid/seq/deep |" in r.table(True)


def test_cli_inputs_that_are_not_an_npy_array(digits, tmp_path, capsys):
    """A GraphDef (or any non-.npy file) as --inputs: one line naming the flag and the file;
    nothing is unpickled and NumPy's allow_pickle hint is not passed on."""
    model, _, _ = digits
    path = str(tmp_path / "digits.keras")
    model.save(path)
    bad = tmp_path / "g.pb"
    bad.write_bytes(b"\n\x0bConv2D\x12\x03op1" * 8)
    assert cli_main([path, "--inputs", str(bad), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"tf-fp16-sensitivity: error: cannot read inputs/labels: --inputs {str(bad)!r} is not "
        "a .npy array file"
    ]


# -- evaluation set as a tf.data.Dataset, and strategy= ---------------------------------------

WORKER = os.path.join(REPO, "tests", "support", "distributed_sensitivity_worker.py")
DIST_TIMEOUT_S = 240


def _labelled_skip_model(tmp_path):
    """The skip model saved as .keras (loaded back: the weights every process reads), 7 inputs
    and class ids of its first output (3 classes)."""
    path = str(tmp_path / "skip.keras")
    _skip_model().save(path)
    rng = np.random.default_rng(12)
    x = rng.normal(size=(7, 6, 6, 3)).astype("float32")
    y = rng.integers(0, 3, size=7)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    return keras.saving.load_model(path), path, x, y


def _unknown_size(x, y, batch):
    import tensorflow as tf

    ds = tf.data.Dataset.from_tensor_slices((x, y)).filter(lambda a, b: True).batch(batch)
    assert int(ds.cardinality()) == int(tf.data.UNKNOWN_CARDINALITY)
    return ds


def _as_records(result):
    return json.loads(json.dumps(result.to_dict()))


def test_dataset_of_unknown_size_gives_the_results_of_arrays(tmp_path, capsys):
    model, _, x, y = _labelled_skip_model(tmp_path)
    kw = dict(tolerance=1e-3, metric_tolerance=1.0)
    arrays = sensitivity(model, x, y, batch_size=3, progress=False, **kw)
    streamed = sensitivity(model, _unknown_size(x, y, 3), progress=True, **kw)
    assert _as_records(streamed) == _as_records(arrays)
    assert streamed.num_samples == 7 and streamed.baseline_metric is not None
    # Batches counted: 3 per pass; the total (1 sweep pass + 6 greedy set passes for the 6
    # convertible layers) is known only
    # after the first pass, and the bar ends on it.
    out = capsys.readouterr().out
    assert "batch" in out and "21/21" in out and "22/21" not in out
    # Without labels in the elements: no metric.
    import tensorflow as tf

    plain = tf.data.Dataset.from_tensor_slices(x).batch(4)
    r = sensitivity(model, plain, tolerance=1e-3, progress=False)
    assert r.baseline_metric is None
    assert [(e.name, e.max_rel) for e in r.layers] == [
        (e.name, e.max_rel) for e in sensitivity(model, x, tolerance=1e-3, progress=False).layers
    ]


def test_dataset_bad_arguments(tmp_path):
    import tensorflow as tf

    model, _, x, y = _labelled_skip_model(tmp_path)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(3)
    with pytest.raises(ValueError, match="y must be None when x is a tf.data.Dataset"):
        sensitivity(model, ds, y, progress=False)
    with pytest.raises(ValueError, match="batch_size must be None when x is a tf.data.Dataset"):
        sensitivity(model, ds, batch_size=3, progress=False)
    with pytest.raises(ValueError, match="x is an infinite tf.data.Dataset"):
        sensitivity(model, ds.repeat(), progress=False)
    with pytest.raises(ValueError, match=r"x must hold at least one sample \(the dataset gave"):
        sensitivity(model, ds.take(0), progress=False)
    with pytest.raises(ValueError, match=r"^x has shape \(3, 6, 6\)"):
        sensitivity(model, tf.data.Dataset.from_tensor_slices(x[..., 0]).batch(3), progress=False)
    with pytest.raises(ValueError, match="sample_weight"):
        sensitivity(model, tf.data.Dataset.from_tensor_slices((x, y, y)).batch(3), progress=False)


def test_bad_strategy_arguments(digits):
    import tensorflow as tf

    model, x, _ = digits
    with pytest.raises(TypeError, match="strategy must be a tf.distribute.Strategy, got str"):
        sensitivity(model, x[:4], strategy="mirrored", progress=False)
    with pytest.raises(TypeError, match="got the class MirroredStrategy"):
        sensitivity(model, x[:4], strategy=tf.distribute.MirroredStrategy, progress=False)


def _one_device(model, x, y):
    return _as_records(
        sensitivity(model, x, y, batch_size=3, tolerance=1e-3, metric_tolerance=1.0, progress=False)
    )


def _worker_argv(path, tmp_path, strategy, out, dataset):
    return [
        sys.executable,
        WORKER,
        "--strategy",
        strategy,
        "--model",
        path,
        "--inputs",
        str(tmp_path / "x.npy"),
        "--labels",
        str(tmp_path / "y.npy"),
        "--batch-size",
        "3",
        "--tolerance",
        "1e-3",
        "--out",
        str(out),
    ] + (["--dataset"] if dataset else [])


@pytest.mark.parametrize("dataset", [False, True], ids=["arrays", "dataset"])
def test_mirrored_strategy_two_logical_cpus_gives_the_one_device_results(tmp_path, dataset):
    import subprocess

    # 7 samples in batches of 3: replicas take 1+2, 1+2 and 0+1 samples (an empty share too).
    model, path, x, y = _labelled_skip_model(tmp_path)
    out = tmp_path / "mirrored.json"
    p = subprocess.run(
        _worker_argv(path, tmp_path, "mirrored", out, dataset),
        capture_output=True,
        text=True,
        timeout=DIST_TIMEOUT_S,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert "eagerly has significant overhead" not in p.stderr
    got = json.loads(out.read_text())
    assert got["replicas"] == 2
    assert got["result"] == _one_device(model, x, y)


def test_multi_worker_mirrored_strategy_two_processes_gives_the_one_device_results(tmp_path):
    from support.local_cluster import run_workers

    model, path, x, y = _labelled_skip_model(tmp_path)
    outs = [tmp_path / f"worker{i}.json" for i in range(2)]
    statuses = run_workers(
        lambda i: _worker_argv(path, tmp_path, "multiworker", outs[i], dataset=False),
        2,
        DIST_TIMEOUT_S,
        {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    for rc, err in statuses:
        assert rc == 0, err[-3000:]
    got = [json.loads(o.read_text()) for o in outs]
    assert [g["replicas"] for g in got] == [2, 2]
    expected = _one_device(model, x, y)
    assert got[0]["result"] == expected and got[1]["result"] == expected


# -- the CLI where memory is too small, files that are not what they claim, token-id inputs --


def test_cli_inputs_larger_than_memory_one_line(tmp_path, capsys):
    # --random-inputs and an --inputs header that declare more than the machine holds raised
    # MemoryError with a traceback (exit 1); now one line naming the flag, exit 2, and nothing
    # of that size is allocated (the .npy header is read, not the array).
    path = str(tmp_path / "small.keras")
    _skip_model().save(path)
    n = 10**12  # 432 TB of float32 (6, 6, 3) samples
    assert cli_main([path, "--random-inputs", str(n), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(
        f"tf-fp16-sensitivity: error: cannot read inputs/labels: --random-inputs {n} "
    )
    assert "more than this machine's memory" in err
    big = tmp_path / "x.npy"
    with open(big, "wb") as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": "<f4", "fortran_order": False, "shape": (10**11, 6, 6, 3)}
        )
        f.write(b"\0" * 64)
    assert os.path.getsize(big) < 256
    assert cli_main([path, "--inputs", str(big), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"tf-fp16-sensitivity: error: cannot read inputs/labels: --inputs {str(big)!r} declares "
        "shape (100000000000, 6, 6, 3) of float32 (43200000000000 bytes) but holds 64 bytes of "
        "data (truncated or corrupt)\n"
    )


def test_cli_memory_error_while_loading_is_one_line(tmp_path, capsys, monkeypatch):
    # A file within the machine's memory whose load still runs out of it (memory in use).
    path = str(tmp_path / "small.keras")
    _skip_model().save(path)
    np.save(tmp_path / "x.npy", np.zeros((2, 6, 6, 3), "float32"))

    def no_memory(*args, **kwargs):
        raise MemoryError("Unable to allocate")

    monkeypatch.setattr(np, "load", no_memory)
    assert cli_main([path, "--inputs", str(tmp_path / "x.npy"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"tf-fp16-sensitivity: error: cannot read inputs/labels: --inputs "
        f"{str(tmp_path / 'x.npy')!r}: not enough memory to load it\n"
    )


def test_cli_random_inputs_drawn_in_float32():
    # Drawn as float32 directly: no float64 array twice the size on the way.
    import tracemalloc

    from tf_fp16ops.layer_sensitivity.cli import _random_inputs

    model = _skip_model()
    want = np.random.default_rng(0).standard_normal((5000, 6, 6, 3), dtype=np.float32)
    tracemalloc.start()
    try:
        x = _random_inputs(model, 5000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert x.dtype == np.float32 and np.array_equal(x, want)
    assert peak < 1.25 * x.nbytes, (peak, x.nbytes)


def test_cli_model_file_that_is_not_a_zip_and_token_inputs(tmp_path, capsys):
    bad = tmp_path / "m.keras"
    bad.write_text("not a zip archive")
    assert cli_main([str(bad), "--random-inputs", "2"]) == 2
    assert capsys.readouterr().err == (
        f"tf-fp16-sensitivity: error: model {str(bad)!r} is not a .keras zip archive\n"
    )
    # An int32 input (token ids for an Embedding) gets no normal values cast to integers.
    model, _ = _masked_models()[0]
    path = str(tmp_path / "tokens.keras")
    model.save(path)
    assert cli_main([path, "--random-inputs", "4", "--no-progress"]) == 2
    assert capsys.readouterr().err == (
        "tf-fp16-sensitivity: error: cannot read inputs/labels: --random-inputs 4: the model's "
        "input 'tokens' is int32, not floating point (token ids?): normal values would not be "
        "valid; pass --inputs\n"
    )


# -- arguments: a metric that gives NaN, layers and batch_size types, dataset structure ------


def test_metric_nan_layers_batch_size_and_dataset_structure(tmp_path):
    import tensorflow as tf

    model, _, x, y = _labelled_skip_model(tmp_path)

    def nan_metric(y_true, y_pred):
        return float("nan")

    # A NaN metric compared False with every tolerance: an empty fp16 set, silently.
    with pytest.raises(ValueError, match=r"metric 'nan_metric' returned nan \(the baseline\)"):
        sensitivity(model, x, y, metric=nan_metric, metric_tolerance=1.0, progress=False)
    with pytest.raises(TypeError, match=r"layers must be None, a layer name, .* got 5$"):
        sensitivity(model, x, layers=5, progress=False)
    with pytest.raises(TypeError, match=r"layers must be None, a layer name, .* got 5$"):
        tf_fp16ops.convert(model, "float16", layers=5)
    # NumPy integers are batch sizes (the same results as the int); bools are not.
    kw = dict(tolerance=1e-3, progress=False)
    got = sensitivity(model, x, batch_size=np.int64(4), **kw)
    assert _as_records(got) == _as_records(sensitivity(model, x, batch_size=4, **kw))
    for bad in (True, np.bool_(True), 2.0):
        with pytest.raises(ValueError, match="batch_size must be a positive int, got"):
            sensitivity(model, x, batch_size=bad, **kw)
    four = tf.data.Dataset.from_tensor_slices((x, y, y, y)).batch(3)
    with pytest.raises(ValueError) as info:
        sensitivity(model, four, **kw)
    assert str(info.value) == (
        "x: the dataset's elements are 4-tuples (float32[None, 6, 6, 3], int64[None], "
        "int64[None], int64[None]); sensitivity takes x or (x, y) elements"
    )


def test_the_sweep_keeps_float32_layers_on_fixed_order_kernels(monkeypatch):
    """The sweep's float32 layers never ask the rule that hands a float32 forward to TensorFlow's
    op (tf_fp16ops/_platform/stock_conv.py), whose sums may depend on the call size; a plain
    float32 conversion of the same model does ask it."""
    from tf_fp16ops._platform import stock_conv

    asked = []
    real = stock_conv.stock_wins

    def recording(pass_, *args):
        asked.append(pass_)
        return real(pass_, *args)

    monkeypatch.setattr(stock_conv, "stock_wins", recording)
    model, x = _skip_model(), np.random.default_rng(3).normal(size=(4, 6, 6, 3)).astype("float32")
    sensitivity(model, x, tolerance=1e-3, progress=False, batch_size=2)
    assert "fprop" not in asked
    tf_fp16ops.convert(model, "float32")(x, training=False)
    assert "fprop" in asked
