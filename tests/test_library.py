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
from tf_fp16ops import _library

PKG = Path(tf_fp16ops.__file__).resolve().parent


def copy_package(tmp_path, with_library=True, built_for=None, source_tree=False):
    dst = tmp_path / "tf_fp16ops"
    shutil.copytree(
        PKG, dst, ignore=shutil.ignore_patterns("__pycache__", "*.so", "_build_info.json")
    )
    if with_library:
        shutil.copy(PKG / "_fp16ops.so", dst / "_fp16ops.so")
    (dst / "_build_info.json").write_text(
        json.dumps({"tensorflow_version": built_for or tf.__version__})
    )
    if source_tree:  # a checkout: Makefile and BUILD beside the package
        (tmp_path / "Makefile").write_text("")
        (tmp_path / "BUILD").write_text("")
    return tmp_path


def import_in_subprocess(path):
    """Imports the package and uses an op: the library is loaded (and checked) at first op use."""
    env = dict(os.environ, PYTHONPATH=str(path), TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run(
        [sys.executable, "-c", "import tf_fp16ops; tf_fp16ops.conv2d"],
        cwd=path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_import_error_names_versions_and_rebuild_command_when_built_for_another_tf(tmp_path):
    r = import_in_subprocess(copy_package(tmp_path, built_for="2.99.0", source_tree=True))
    assert r.returncode != 0
    assert "ImportError" in r.stderr
    assert "built for TensorFlow 2.99.0" in r.stderr
    assert f"TensorFlow {tf.__version__} is installed" in r.stderr
    assert "make build" in r.stderr


def test_import_error_outside_a_source_tree_names_the_tensorflow_to_install(tmp_path):
    r = import_in_subprocess(copy_package(tmp_path, built_for="2.99.0"))
    assert r.returncode != 0 and "built for TensorFlow 2.99.0" in r.stderr
    assert "pip install 'tensorflow==2.99.0'" in r.stderr and "make build" not in r.stderr


def test_import_error_when_library_is_missing(tmp_path):
    r = import_in_subprocess(copy_package(tmp_path, with_library=False, source_tree=True))
    assert r.returncode != 0
    assert "ImportError" in r.stderr and "is missing" in r.stderr and "make build" in r.stderr


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
    root = Path(__file__).resolve().parent.parent
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
