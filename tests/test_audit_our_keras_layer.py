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
