"""Loading the op library: version check, clear ImportError, repeated and symlinked loads,
and the C++ ABI of the built library against the installed framework (docs/design.md:
"Custom-op SavedModels", "ABI mismatch")."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tensorflow as tf

import tf_fp16ops
from tf_fp16ops._platform import library as _library

PKG = Path(tf_fp16ops.__file__).resolve().parent


INSTALLED_MINOR = _library.minor_of(tf.__version__)


def copy_package(tmp_path, with_library=True, built_for=None, source_tree=False, wheel_libs=()):
    """A copy of the package in tmp_path: with the source tree's library (recorded as built for
    `built_for`, default the installed TensorFlow) and/or wheel libraries `wheel_libs`, a list of
    (TensorFlow version, library bytes or None for the real library)."""
    dst = tmp_path / "tf_fp16ops"
    shutil.copytree(
        PKG,
        dst,
        ignore=shutil.ignore_patterns("__pycache__", "*.so", "_build_info.json", "_libs"),
    )
    if with_library:
        shutil.copy(PKG / "_fp16ops.so", dst / "_fp16ops.so")
        (dst / "_build_info.json").write_text(
            json.dumps({"tensorflow_version": built_for or tf.__version__})
        )
    for version, content in wheel_libs:
        d = dst / "_libs" / f"tf{_library.minor_of(version)}"
        d.mkdir(parents=True)
        if content is None:
            shutil.copy(PKG / "_fp16ops.so", d / "_fp16ops.so")
        else:
            (d / "_fp16ops.so").write_bytes(content)
        (d / "build_info.json").write_text(json.dumps({"tensorflow_version": version}))
    if source_tree:  # a checkout: Makefile and BUILD beside the package
        (tmp_path / "Makefile").write_text("")
        (tmp_path / "BUILD").write_text("")
    return tmp_path


def run_in(path, code="import tf_fp16ops; tf_fp16ops.conv2d", args=None):
    """Runs `code` (or `python ARGS`) with the package copy at `path` first on sys.path."""
    env = dict(os.environ, PYTHONPATH=str(path), TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run(
        [sys.executable, *(args or ["-c", code])],
        cwd=path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def error_line(r) -> str:
    """The exception line of a failed run's traceback, after checking the traceback is short: the
    caller's frame and the package's attribute access, no import machinery, nothing chained."""
    assert r.returncode != 0, r.stdout
    lines = r.stderr.strip().splitlines()
    assert lines[0] == "Traceback (most recent call last):", r.stderr
    assert "importlib" not in r.stderr and "<frozen" not in r.stderr, r.stderr
    assert "During handling" not in r.stderr and "direct cause" not in r.stderr, r.stderr
    assert sum(line.lstrip().startswith("File ") for line in lines) <= 2, r.stderr
    assert lines[-1].startswith("tf_fp16ops.OpLibraryError: tf_fp16ops: "), r.stderr
    assert "unknown" not in lines[-1]
    return lines[-1]


def test_import_error_names_versions_and_rebuild_command_when_built_for_another_tf(tmp_path):
    line = error_line(run_in(copy_package(tmp_path, built_for="2.99.0", source_tree=True)))
    assert line == (
        f"tf_fp16ops.OpLibraryError: tf_fp16ops: the op library in {tmp_path} was built for "
        f"TensorFlow 2.99.0, and TensorFlow {tf.__version__} is installed; run `make build` in "
        f"{tmp_path} to build it for TensorFlow {tf.__version__}"
    )


def test_import_error_outside_a_source_tree_names_the_supported_versions(tmp_path):
    path = copy_package(tmp_path, with_library=False, wheel_libs=[("2.98.1", b""), ("2.99.0", b"")])
    line = error_line(run_in(path))
    assert line == (
        f"tf_fp16ops.OpLibraryError: tf_fp16ops: no op library for the installed TensorFlow "
        f"{tf.__version__}; this tf_fp16ops holds libraries built for TensorFlow 2.98.1, 2.99.0: "
        "install one of those minor releases (`pip install 'tf_fp16ops[tf]'` picks one)"
    )


def test_import_error_when_library_is_missing_is_one_line(tmp_path):
    # A clone that was never built: no library, no build info.
    line = error_line(run_in(copy_package(tmp_path, with_library=False, source_tree=True)))
    assert line == (
        f"tf_fp16ops.OpLibraryError: tf_fp16ops: no op library has been built in this source "
        f"tree ({tmp_path}), and TensorFlow {tf.__version__} is installed; run `make build` in "
        f"{tmp_path} to build it for TensorFlow {tf.__version__}"
    )
    # `import tf_fp16ops` itself still works (the static audit needs no op library), and the
    # error is an ImportError that callers can catch by either name.
    r = run_in(
        tmp_path,
        "import tensorflow, tf_fp16ops\n"
        "try:\n    tf_fp16ops.layers\nexcept ImportError as e:\n"
        "    print(type(e).__name__, isinstance(e, tf_fp16ops.OpLibraryError))",
    )
    assert r.returncode == 0 and r.stdout.strip() == "OpLibraryError True", r.stderr


def test_a_library_that_fails_to_load_is_one_line(tmp_path):
    path = copy_package(tmp_path, with_library=False, wheel_libs=[(tf.__version__, b"not ELF")])
    line = error_line(run_in(path))
    lib = tmp_path / "tf_fp16ops" / "_libs" / f"tf{INSTALLED_MINOR}" / "_fp16ops.so"
    assert line.startswith(
        f"tf_fp16ops.OpLibraryError: tf_fp16ops: the op library {lib} (built for TensorFlow "
        f"{tf.__version__}) failed to load into TensorFlow {tf.__version__}: "
    )
    assert line.endswith("; reinstall tf_fp16ops from its wheel")


def test_the_library_of_the_installed_minor_is_loaded_from_the_wheel_layout(tmp_path):
    # A wheel with a library per minor: a bogus one for another minor and the real one, recorded
    # with another patch release of the installed minor (one build serves every patch release).
    other_patch = f"{INSTALLED_MINOR}.99"
    path = copy_package(
        tmp_path, with_library=False, wheel_libs=[("2.99.0", b"not ELF"), (other_patch, None)]
    )
    code = (
        "import numpy as np, tensorflow as tf, tf_fp16ops\n"
        "from tf_fp16ops._platform import library as _library\n"
        "y = tf_fp16ops.conv2d(np.ones([1, 2, 2, 1], np.float16), np.ones([1, 1, 1, 1], "
        "np.float16), 1, 'VALID')\n"
        "print(float(y.numpy().sum()), _library.loaded())"
    )
    r = run_in(path, code)
    assert r.returncode == 0, r.stderr
    lib = tmp_path / "tf_fp16ops" / "_libs" / f"tf{INSTALLED_MINOR}" / "_fp16ops.so"
    assert r.stdout.strip() == f"4.0 {_library.Library(lib, other_patch)!r}"


def test_the_demo_says_so_in_one_line_and_exits_2(tmp_path):
    path = copy_package(tmp_path, with_library=False, source_tree=True)
    r = run_in(path, args=["-m", "tf_fp16ops.demo", "--no-audit"])
    assert r.returncode == 2 and r.stdout == "", r.stdout
    assert r.stderr.splitlines() == [
        f"python -m tf_fp16ops.demo: error: tf_fp16ops: no op library has been built in this "
        f"source tree ({tmp_path}), and TensorFlow {tf.__version__} is installed; run `make "
        f"build` in {tmp_path} to build it for TensorFlow {tf.__version__}"
    ], r.stderr


def test_loading_twice_and_through_a_symlink_is_harmless(tmp_path):
    link = tmp_path / "linked_fp16ops.so"
    link.symlink_to(_library.LIBRARY_PATH)
    # TensorFlow registers each op once; further loads of the same file (by any path) are no-ops.
    tf.load_op_library(str(_library.LIBRARY_PATH))
    tf.load_op_library(str(link))
    assert _library.load() is _library.load()
    y = tf_fp16ops.conv2d(
        tf.ones([1, 2, 2, 1], tf.float16), tf.ones([1, 1, 1, 1], tf.float16), 1, "VALID"
    )
    assert y.numpy().sum() == 4


def _symbols(args, path):
    """Mangled dynamic symbol names (no spaces, so the last field is the whole name)."""
    out = subprocess.run(
        ["nm", "-D", *args, str(path)], capture_output=True, text=True, check=True
    ).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


@pytest.mark.skipif(shutil.which("nm") is None, reason="binutils' nm is not installed")
def test_undefined_tensorflow_symbols_resolve_in_the_installed_framework():
    # ABI mismatch (tensorflow #9137): a library built with the other _GLIBCXX_USE_CXX11_ABI would
    # need symbols (with or without [abi:cxx11] / __cxx11) that the framework does not export.
    framework = Path(tf.sysconfig.get_lib()) / "libtensorflow_framework.so.2"
    needed = {
        s
        for s in _symbols(["--undefined-only"], _library.LIBRARY_PATH)
        if "10tensorflow" in s or "3tsl" in s
    }
    assert needed, "the op library should import TensorFlow symbols"
    exported = _symbols(["--defined-only"], framework)
    missing = sorted(needed - exported)
    assert not missing, f"unresolved TensorFlow symbols: {missing[:5]}"


def test_build_flags_come_from_tf_sysconfig():
    flags = tf.sysconfig.get_compile_flags()
    abi = [f for f in flags if f.startswith("-D_GLIBCXX_USE_CXX11_ABI=")]
    assert abi, flags
    root = Path(__file__).resolve().parents[2]
    # bazel-<workspace folder name> links to the execroot, which links the external repositories.
    generated = sorted(root.glob("bazel-*/external/local_config_tf/tf_flags.bzl"))
    if not generated:
        pytest.skip("no Bazel output tree in the source tree (library built elsewhere)")
    text = generated[0].read_text()
    assert abi[0] in text and f'TF_VERSION = "{tf.__version__}"' in text


def test_dir_lists_no_helper_modules():
    names = dir(tf_fp16ops)
    assert not {"importlib", "sys", "annotations"} & set(names), names
    assert {"conv2d", "convert", "layers", "sensitivity", "__version__"} <= set(names)


@pytest.mark.parametrize("value", ["bogus", "SCALAR", " avx2", "avx512f", "avx-512"])
def test_an_unknown_cpu_isa_cap_is_a_value_error(value):
    """Any TF_FP16OPS_CPU_ISA but the four caps (or nothing) ran the AVX2 path silently."""
    with pytest.raises(ValueError) as e:
        _library.check_cpu_isa_cap({"TF_FP16OPS_CPU_ISA": value})
    assert str(e.value) == (
        "tf_fp16ops: TF_FP16OPS_CPU_ISA must be one of 'avx512fp16', 'avx512', 'avx2', 'scalar' "
        f"or empty, got {value!r}"
    )


@pytest.mark.parametrize("value", ["", "avx512fp16", "avx512", "avx2", "scalar"])
def test_the_known_cpu_isa_caps_load(value):
    assert _library.check_cpu_isa_cap({"TF_FP16OPS_CPU_ISA": value}) is None
    assert _library.check_cpu_isa_cap({}) is None


def test_loading_with_an_unknown_cap_fails_in_one_line():
    env = dict(os.environ, TF_FP16OPS_CPU_ISA="Scalar", TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run(
        [sys.executable, "-c", "import tf_fp16ops.ops"], env=env, capture_output=True, text=True
    )
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1] == (
        "ValueError: tf_fp16ops: TF_FP16OPS_CPU_ISA must be one of 'avx512fp16', 'avx512', "
        "'avx2', 'scalar' or empty, got 'Scalar'"
    )


def test_the_stand_ins_cover_every_registered_layer():
    import keras

    from tf_fp16ops import layers
    from tf_fp16ops._platform.missing_library import LAYER_NAMES

    registered = sorted(
        keras.saving.get_registered_name(c) for c in layers.KERAS_EQUIVALENTS.values()
    )
    assert registered == sorted(f"tf_fp16ops>{n}" for n in LAYER_NAMES)


@pytest.mark.parametrize("first", ["import tensorflow, tf_fp16ops", "import tf_fp16ops, keras"])
def test_a_converted_model_without_the_library_fails_in_one_line(tmp_path, first):
    # Keras would say "Could not locate class 'Conv2D'" and print the layer's whole config.
    import keras

    import tf_fp16ops

    saved = tmp_path / "converted.keras"
    model = keras.Sequential([keras.Input((5, 5, 2)), keras.layers.DepthwiseConv2D(3)])
    tf_fp16ops.convert(model, "float16").save(saved)
    path = copy_package(tmp_path / "pkg", with_library=False, source_tree=True)
    r = run_in(path, f"{first}\nimport keras\nkeras.models.load_model({str(saved)!r})")
    assert r.returncode != 0
    assert r.stderr.strip().splitlines()[-1] == (
        "tf_fp16ops.OpLibraryError: tf_fp16ops: cannot load the layer "
        "'tf_fp16ops>DepthwiseConv2D': no op library has been built in this source tree "
        f"({path}), and TensorFlow {tf.__version__} is installed; run `make build` in {path} to "
        f"build it for TensorFlow {tf.__version__}"
    ), r.stderr
    if first.startswith("import tensorflow"):
        # The stand-ins are registered under this package's names only: Keras's own layers load.
        plain = tmp_path / "plain.keras"
        model.save(plain)
        r = run_in(
            path, f"{first}\nimport keras\nprint(keras.models.load_model({str(plain)!r}).name)"
        )
        assert r.returncode == 0 and r.stdout.strip() == model.name, r.stderr
