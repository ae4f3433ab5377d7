"""The Keras layers are registered whatever the order of the imports: imported before TensorFlow
(as `tf_fp16ops.quiet_stderr()` must be), the package registers them when the later import of
TensorFlow or Keras has finished, so a converted .keras file loads without `import
tf_fp16ops.layers`. Each case runs in a fresh process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _run(code: str, tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"},
    )


@pytest.fixture(scope="module")
def converted_keras_file(tmp_path_factory) -> Path:
    import keras

    import tf_fp16ops

    path = tmp_path_factory.mktemp("order") / "converted.keras"
    model = keras.Sequential([keras.Input((6, 6, 2)), keras.layers.Conv2D(3, 3)])
    tf_fp16ops.convert(model, accumulation="float16").save(path)
    return path


@pytest.mark.parametrize(
    "imports",
    [
        "import keras",
        "import tensorflow as tf\nimport keras",
        "import tensorflow as tf\nkeras = tf.keras",
    ],
)
def test_a_converted_file_loads_when_the_package_was_imported_first(
    converted_keras_file, imports, tmp_path
):
    code = (
        "import sys\n"
        "import tf_fp16ops\n"
        "tf_fp16ops.quiet_stderr()\n"
        "assert 'tensorflow' not in sys.modules and 'keras' not in sys.modules\n"
        f"{imports}\n"
        f"model = keras.models.load_model({str(converted_keras_file)!r})\n"
        "layer = model.layers[0]\n"
        "print(type(layer).__module__, type(layer).__name__, layer.accumulation)\n"
        # The finder has left sys.meta_path.
        "print(sorted(type(f).__name__ for f in sys.meta_path if 'Register' in type(f).__name__))\n"
    )
    r = _run(code, tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.splitlines() == ["tf_fp16ops.layers Conv2D float16", "[]"]


def test_without_a_later_import_nothing_heavy_is_imported(tmp_path):
    code = (
        "import sys\n"
        "import tf_fp16ops, tf_fp16ops.audit\n"
        "import json\n"  # an unrelated import passes through the finder
        "heavy = [m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras')]\n"
        "assert not heavy, heavy\n"
        "assert 'tf_fp16ops.layers' not in sys.modules\n"
        "print([type(f).__name__ for f in sys.meta_path].count('_RegisterAfterImport'))\n"
        "import importlib; importlib.reload(tf_fp16ops)\n"  # installed once
        "print([type(f).__name__ for f in sys.meta_path].count('_RegisterAfterImport'))\n"
    )
    r = _run(code, tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["1", "1"]
