"""A .keras file with tf_fp16ops.layers.Conv2D is audited statically with the layer's
accumulation."""

import keras
import pytest

import tf_fp16ops
from support.audit_helpers import CPU
from tf_fp16ops.audit import RuntimeContext, audit


def test_keras_archive_with_our_layers(tmp_path):
    model = keras.Sequential(
        [
            keras.Input((8, 8, 3)),
            tf_fp16ops.layers.Conv2D(4, 3, accumulation="float16", name="ours_half"),
            tf_fp16ops.layers.Conv2D(4, 3, accumulation="float32", name="ours_float"),
            keras.layers.Conv2D(2, 3, name="plain"),
        ]
    )
    path = tmp_path / "m.keras"
    model.save(path)
    rows = {
        f.to_dict()["node"].split("/")[0]: f.to_dict()
        for f in audit(str(path), RuntimeContext(device="cpu")).findings
    }
    assert set(rows) == {"ours_half", "ours_float", "plain"}
    # float32 layer, accumulation float16: inputs cast to half, Fp16Conv2D(T=half, Tacc=half).
    assert (rows["ours_half"]["op"], rows["ours_half"]["T"], rows["ours_half"]["accumulation"]) == (
        "Fp16Conv2D",
        "half",
        "fp16",
    )
    assert (
        rows["ours_float"]["op"],
        rows["ours_float"]["T"],
        rows["ours_float"]["accumulation"],
    ) == ("Fp16Conv2D", "float", "fp32")
    assert (rows["plain"]["op"], rows["plain"]["T"], rows["plain"]["accumulation"]) == (
        "Conv2D",
        "float",
        "fp32",
    )


def test_build_keras_and_run_load_our_layers_in_a_fresh_process(tmp_path):
    # A fresh interpreter: the CLI imports tf_fp16ops.audit before TensorFlow, so nothing has
    # registered the layers unless the loader does.
    import subprocess
    import sys

    model = keras.Sequential(
        [
            keras.Input((6, 6, 2)),
            tf_fp16ops.layers.Conv2D(3, 3, accumulation="float16", name="ours_conv"),
            keras.layers.Flatten(),
            tf_fp16ops.layers.Dense(2, accumulation="float16", name="ours_dense"),
        ]
    )
    path = tmp_path / "m.keras"
    model.save(path)
    # --run builds the model (as --build-keras does) and loads it again to call it.
    p = subprocess.run(
        [sys.executable, "-m", "tf_fp16ops.audit", str(path), "--run", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    assert "ours_conv" in p.stdout and "Fp16Conv2D" in p.stdout


def test_build_keras_failure_is_one_line(tmp_path):
    from tf_fp16ops.audit.errors import AuditInputError
    from tf_fp16ops.audit.loader import build_keras

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, name="d")])
    path = tmp_path / "m.keras"
    model.save(path)
    # Rename the class in the archive's config to one Keras does not know.
    import zipfile

    with zipfile.ZipFile(path) as z:
        files = {n: z.read(n) for n in z.namelist()}
    files["config.json"] = files["config.json"].replace(b'"Dense"', b'"NoSuchLayer"')
    bad = tmp_path / "bad.keras"
    with zipfile.ZipFile(bad, "w") as z:
        for n, data in files.items():
            z.writestr(n, data)
    try:
        build_keras(str(bad))
    except AuditInputError as e:
        msg = str(e)
    else:
        raise AssertionError("build_keras accepted an unknown layer class")
    assert msg.startswith(f"{bad}: keras could not build the model"), msg
    assert "\n" not in msg and len(msg) < 600, msg


def _with_units(tmp_path, units: int) -> tuple[str, str]:
    """A saved Dense(2) on 1000 inputs, and a copy whose config.json says `units` (its weights
    file still holds the small kernel: Keras allocates the config's sizes before it reads them)."""
    import zipfile

    model = keras.Sequential([keras.Input((1000,)), keras.layers.Dense(2, name="wide")])
    path = tmp_path / "m.keras"
    model.save(path)
    with zipfile.ZipFile(path) as z:
        files = {n: z.read(n) for n in z.namelist()}
    assert b'"units": 2,' in files["config.json"]
    files["config.json"] = files["config.json"].replace(
        b'"units": 2,', f'"units": {units},'.encode()
    )
    bad = tmp_path / f"units{units}.keras"
    with zipfile.ZipFile(bad, "w") as z:
        for n, data in files.items():
            z.writestr(n, data)
    return str(path), str(bad)


def test_build_keras_refuses_weights_past_the_limit_before_allocating(tmp_path, capsys):
    """A small .keras whose Dense says units=100,000 asks Keras for a 1000 x 100,000 kernel
    (400 MB); the build had no bound. Past --max-weights it is refused, naming the layer and the
    limit; within it, it builds."""
    from tf_fp16ops.audit.cli import main
    from tf_fp16ops.audit.errors import AuditInputError
    from tf_fp16ops.audit.limits import Limits

    small, path = _with_units(tmp_path, 100_000)
    with pytest.raises(AuditInputError) as e:
        audit(path, CPU, build_keras_model=True, limits=Limits(max_weights=1_000_000))
    msg = str(e.value)
    assert msg.startswith(f"{path}: layer 'wide' (Dense) would create a weight of shape "), msg
    assert "[1000, 100000] (100,000,000 elements)" in msg and "1,000,000 elements" in msg, msg
    assert "(--max-weights)" in msg and "\n" not in msg
    assert main(["--build-keras", "--max-weights", "1000000", path]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("tf-fp16-audit: error: ") and "layer 'wide' (Dense)" in err, err
    # The limit counts every weight: kernel 1000 x 2 and bias 2 are 2002 elements.
    with pytest.raises(
        AuditInputError,
        match=r"layer 'wide' \(Dense\) would create a weight of "
        r"shape \[2\] \(2 elements\): .* limit of 2,001 elements",
    ):
        audit(small, CPU, build_keras_model=True, limits=Limits(max_weights=2001))
    report = audit(small, CPU, build_keras_model=True, limits=Limits(max_weights=2002))
    assert [f.keras_layer for f in report.findings] == ["wide"]
