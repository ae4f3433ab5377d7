"""A .keras file with tf_fp16ops.layers.Conv2D is audited statically with the layer's
accumulation."""

import keras

import tf_fp16ops
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
