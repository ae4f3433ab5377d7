"""SavedModels that contain Fp16Conv2D ops (docs/design.md "Custom-op SavedModels"): save, reload
in a fresh process, the "Op type not registered" failure without the library, the loader, loading
the library twice or through a symlink."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

import tf_fp16ops
from tf_fp16ops._platform import library as _library
from tf_fp16ops.layers import Conv2D

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The op library the package loads for this TensorFlow (the source tree's, or a wheel's).
LIBRARY = _library.find(tf.__version__).path


class ConvModule(tf.Module):
    def __init__(self):
        super().__init__()
        self.w = tf.Variable(np.random.default_rng(1).normal(size=(3, 3, 2, 4)).astype(np.float16))

    @tf.function(input_signature=[tf.TensorSpec([None, 6, 6, 2], tf.float16)])
    def f(self, x):
        return tf_fp16ops.conv2d(x, self.w, 1, "SAME", accumulation="float16")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("savedmodel")
    model = keras.Sequential(
        [
            keras.Input((6, 6, 2)),
            Conv2D(4, 3, padding="same", accumulation="float16"),
            Conv2D(3, 3, accumulation="float32", activation="relu"),
            keras.layers.Flatten(),
        ]
    )
    x32 = np.random.default_rng(0).normal(size=(2, 6, 6, 2)).astype(np.float32)
    model.export(str(root / "keras_export"), format="tf_saved_model", verbose=False)
    module = ConvModule()
    tf.saved_model.save(module, str(root / "module"))
    x16 = x32.astype(np.float16)
    np.save(root / "x32.npy", x32)
    np.save(root / "x16.npy", x16)
    np.save(root / "y_keras.npy", keras.ops.convert_to_numpy(model(x32)))
    np.save(root / "y_module.npy", module.f(x16).numpy())
    return root


def _run(script: str, root) -> subprocess.CompletedProcess:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=str(root),
        env=env,
    )


def test_reload_after_import_gives_identical_outputs(saved):
    proc = _run(
        """
        import numpy as np, tensorflow as tf
        import tf_fp16ops
        k = tf.saved_model.load("keras_export")
        m = tf.saved_model.load("module")
        np.save("y_keras_reloaded.npy", k.serve(np.load("x32.npy")).numpy())
        np.save("y_module_reloaded.npy", m.f(np.load("x16.npy")).numpy())
    """,
        saved,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name in ("keras", "module"):
        expected, got = np.load(saved / f"y_{name}.npy"), np.load(saved / f"y_{name}_reloaded.npy")
        assert got.dtype == expected.dtype and got.shape == expected.shape
        np.testing.assert_array_equal(got, expected)


def test_without_library_op_not_registered_then_loader_fixes_it(saved):
    proc = _run(
        """
        import numpy as np, sys, tensorflow as tf
        for path in ("keras_export", "module"):
            try:
                tf.saved_model.load(path)
            except Exception as e:
                print("LOAD-ERROR", path, type(e).__name__, str(e).splitlines()[0])
            else:
                sys.exit("loaded without the op library")
        assert "tf_fp16ops" not in sys.modules
        from tf_fp16ops import load_saved_model
        m = load_saved_model("module")
        np.save("y_module_loader.npy", m.f(np.load("x16.npy")).numpy())
    """,
        saved,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    errors = [line for line in proc.stdout.splitlines() if line.startswith("LOAD-ERROR")]
    assert len(errors) == 2
    for line in errors:
        assert (
            "NotFoundError" in line or "RuntimeError" in line
        ) and "Op type not registered 'Fp16Conv2D'" in line, line
    np.testing.assert_array_equal(
        np.load(saved / "y_module_loader.npy"), np.load(saved / "y_module.npy")
    )


def test_library_twice_and_through_symlink_is_harmless(saved, tmp_path):
    link = tmp_path / "linked_fp16ops.so"
    link.symlink_to(LIBRARY)
    proc = _run(
        f"""
        import numpy as np, tensorflow as tf
        import tf_fp16ops
        tf.load_op_library({str(LIBRARY)!r})   # the same file again
        tf.load_op_library({str(link)!r})                    # and through a symlink
        m = tf.saved_model.load("module")
        m2 = tf_fp16ops.load_saved_model("module")
        np.save("first.npy", m.f(np.load("x16.npy")).numpy())
        np.save("again.npy", m2.f(np.load("x16.npy")).numpy())
        x1, w1 = tf.ones([1, 3, 3, 2], tf.float16), tf.ones([3, 3, 2, 1], tf.float16)
        ones = tf_fp16ops.conv2d(x1, w1, 1, "VALID")
        np.save("ones.npy", ones.numpy())
    """,
        saved,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    expected = np.load(saved / "y_module.npy")
    np.testing.assert_array_equal(np.load(saved / "first.npy"), expected)
    np.testing.assert_array_equal(np.load(saved / "again.npy"), expected)
    assert np.load(saved / "ones.npy").reshape(-1).tolist() == [18.0]  # 3*3*2 products of 1*1


def test_symlink_loaded_before_the_package(saved, tmp_path):
    link = tmp_path / "linked_fp16ops.so"
    link.symlink_to(LIBRARY)
    proc = _run(
        f"""
        import numpy as np, tensorflow as tf
        # e.g. a serving set-up, before the package
        tf.load_op_library({str(link)!r})
        m = tf.saved_model.load("module")
        np.save("first.npy", m.f(np.load("x16.npy")).numpy())
        import tf_fp16ops
        x1, w1 = tf.ones([1, 3, 3, 2], tf.float16), tf.ones([3, 3, 2, 1], tf.float16)
        ones = tf_fp16ops.conv2d(x1, w1, 1, "VALID")
        np.save("ones.npy", ones.numpy())
    """,
        saved,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    np.testing.assert_array_equal(np.load(saved / "first.npy"), np.load(saved / "y_module.npy"))
    assert np.load(saved / "ones.npy").reshape(-1).tolist() == [18.0]


def test_loader_bad_path(tmp_path):
    with pytest.raises(OSError, match="missing_dir"):
        tf_fp16ops.load_saved_model(tmp_path / "missing_dir")
