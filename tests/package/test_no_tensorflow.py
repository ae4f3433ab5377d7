"""Layering: the static audit, the CLI without --run and the TensorBoard plugin never import
TensorFlow nor load the op library, and work in a virtualenv without TensorFlow; TensorBoard
starts and serves the "fp16 audit" tab when _fp16ops.so is missing or built for another TensorFlow.

The virtualenv without TensorFlow (numpy, networkx, tensorboard, protobuf at the pinned versions,
from pip's configured local index; the source tree on its path through a .pth file, and this
package's TensorBoard entry point from pyproject.toml in a dist-info) is built once under
build/notf-venv and reused. The bundled example SavedModel is written by TensorFlow in this
(test) process first; the other virtualenv only reads it.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import tomllib

REPO = Path(__file__).resolve().parents[2]
NOTF_VENV = REPO / "build" / "notf-venv"
# The pins of requirements.txt (protobuf: the version TensorFlow's wheel brought into .venv).
NOTF_PACKAGES = ("numpy", "networkx", "tensorboard", "protobuf")
# Classes of the bundled example's five signatures on CPU (tf_fp16ops/audit/demo.py):
# conv16 T=half (TF computes in fp32), conv32, conv16_32 (fp16 values in a float conv),
# ours_half (Tacc=half), ours_float (Tacc=float).
EXAMPLE_CLASSES = sorted(["fp16-storage", "fp32", "fake-fp16", "fp16-accumulate", "fp16-storage"])
STATIC_MODULES = (
    "tf_fp16ops",
    "tf_fp16ops.audit",
    "tf_fp16ops.audit.cli",
    "tf_fp16ops.audit.render.tensorboard",
    "tf_fp16ops.tensorboard_plugin",
    "tf_fp16ops.tensorboard_plugin.plugin",
    "tf_fp16ops.tensorboard_plugin.summary",
)
SERVER_WAIT_S = 120


def _run(python, code: str, env=None, timeout=300, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(python), "-c", code],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=cwd or "/",
    )


_CHECK_NOTHING_HEAVY = """
import sys
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("tensorflow", "keras", "tf_keras"))
assert not heavy, heavy
assert "tf_fp16ops._platform.library" not in sys.modules
with open("/proc/self/maps") as f:
    assert "_fp16ops.so" not in f.read(), "op library mapped"
"""


def test_static_modules_import_without_tensorflow_or_the_op_library():
    code = "".join(f"import {m}\n" for m in STATIC_MODULES) + _CHECK_NOTHING_HEAVY
    r = _run(sys.executable, code, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stderr == ""


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> Path:
    """The bundled example SavedModel, written by TensorFlow (with this package's ops)."""
    from tf_fp16ops.audit import demo_example

    return Path(demo_example(str(tmp_path_factory.mktemp("example") / "example_savedmodel")))


def test_cli_static_audit_imports_no_tensorflow_and_stays_quiet(example, tmp_path):
    out = tmp_path / "r.json"
    code = (
        f"from tf_fp16ops.audit.cli import main\n"
        f"assert main([{str(example)!r}, '--format', 'json', '--output', {str(out)!r}]) == 0\n"
        + _CHECK_NOTHING_HEAVY
    )
    r = _run(sys.executable, code, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stderr == "" and r.stdout == ""
    rep = json.loads(out.read_text())
    assert sorted(f["audit_class"] for f in rep["findings"]) == EXAMPLE_CLASSES


def test_import_of_package_is_lazy_and_ops_raise_the_library_error(tmp_path):
    """Without the .so: subpackages import; the ImportError comes at the first op use."""
    copy = tmp_path / "tf_fp16ops"
    shutil.copytree(REPO / "tf_fp16ops", copy, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    code = (
        "import tf_fp16ops, tf_fp16ops.audit, tf_fp16ops.tensorboard_plugin.plugin\n"
        + _CHECK_NOTHING_HEAVY
        + "try:\n    tf_fp16ops.conv2d\nexcept ImportError as e:\n    print(e)\n"
        "else:\n    raise SystemExit('no ImportError')\n"
    )
    r = _run(
        sys.executable,
        code,
        env={**os.environ, "PYTHONPATH": str(tmp_path), "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert r.returncode == 0, r.stderr[-2000:]
    # Outside a source tree (no Makefile/BUILD beside the package) the remedy is the install.
    line = r.stdout.strip()
    assert line.startswith(f"tf_fp16ops: this installation ({copy}) holds no op library"), line
    assert line.endswith("is installed; reinstall tf_fp16ops from its wheel"), line


def _pinned(name: str) -> str:
    from importlib.metadata import version

    return f"{name}=={version(name)}"


def _notf_python() -> Path:
    """build/notf-venv/bin/python, created on first use (a stamp holds the pins it was made
    with)."""
    pins = [_pinned(n) for n in NOTF_PACKAGES]
    py = NOTF_VENV / "bin" / "python"
    stamp = NOTF_VENV / ".tf_fp16ops-pins"
    if not (py.exists() and stamp.exists() and stamp.read_text() == " ".join(pins)):
        shutil.rmtree(NOTF_VENV, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(NOTF_VENV)], check=True, timeout=300)
        r = subprocess.run(
            [str(NOTF_VENV / "bin" / "pip"), "install", "-q", *pins],
            capture_output=True,
            text=True,
            timeout=900,
        )
        if r.returncode != 0:
            pytest.fail(
                f"pip install {' '.join(pins)} into {NOTF_VENV} failed:\n{r.stderr[-3000:]}"
            )
        stamp.write_text(" ".join(pins))
    site = Path(
        _run(py, "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    )
    # The source tree on the path, and this package's entry points as pyproject declares them.
    (site / "tf_fp16ops_source.pth").write_text(str(REPO) + "\n")
    eps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]
    dist = site / "tf_fp16ops_source_tree-0.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: tf-fp16ops-source-tree\nVersion: 0\n"
    )
    (dist / "entry_points.txt").write_text(
        "".join(
            f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in items.items())
            for group, items in eps.items()
        )
    )
    return py


@pytest.fixture(scope="module")
def notf_python() -> Path:
    py = _notf_python()
    r = _run(py, "import importlib.util as u; print(u.find_spec('tensorflow') is None)")
    assert r.stdout.strip() == "True", "the virtualenv without TensorFlow has TensorFlow"
    return py


_SERVE_ROUTES = """
import json, sys
from tensorboard.backend import application
from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
from tensorboard.plugins import base_plugin
from werkzeug import test as wtest
from tf_fp16ops.tensorboard_plugin.plugin import Fp16AuditPlugin
logdir = sys.argv[1]
mux = plugin_event_multiplexer.EventMultiplexer()
mux.AddRunsFromDirectory(logdir)
mux.Reload()
provider = data_provider.MultiplexerDataProvider(mux, logdir)
ctx = base_plugin.TBContext(logdir=logdir, data_provider=provider, multiplexer=mux)
client = wtest.Client(application.TensorBoardWSGI([Fp16AuditPlugin(ctx)], data_provider=provider))
out = {}
for route in ("runs", "findings?run=audit"):
    r = client.get("/data/plugin/fp16_audit/" + route)
    assert r.status_code == 200, (route, r.status_code)
    out[route] = json.loads(r.get_data(as_text=True))
print(json.dumps(out))
"""


def test_venv_without_tensorflow_audits_the_example_and_serves_its_logdir(
    notf_python, example, tmp_path
):
    logdir = tmp_path / "logs"
    r = subprocess.run(
        [
            str(notf_python),
            "-m",
            "tf_fp16ops.audit",
            str(example),
            "--format",
            "json",
            "--logdir",
            str(logdir),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stderr.strip() == f"TensorBoard: tensorboard --logdir {logdir}"
    rep = json.loads(r.stdout)
    assert sorted(f["audit_class"] for f in rep["findings"]) == EXAMPLE_CLASSES
    assert (
        rep["context"]["origin"] == "process (TensorFlow not installed)"
        and rep["context"]["tf_version"] == ""
    )
    served = subprocess.run(
        [str(notf_python), "-c", _SERVE_ROUTES, str(logdir)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
    )
    assert served.returncode == 0, served.stderr[-2000:]
    data = json.loads(served.stdout)
    (run,) = data["runs"]["runs"]
    assert run["run"] == "audit" and run["call_sites"] == 5
    assert (
        sorted(f["audit_class"] for f in data["findings?run=audit"]["findings"]) == EXAMPLE_CLASSES
    )


def test_venv_without_tensorflow_audits_a_keras_file_with_this_packages_layers(
    notf_python, tmp_path
):
    """The static .keras path builds this package's layers from protos alone: a .keras holding
    tf_fp16ops' Conv2D, DepthwiseConv2D, SeparableConv2D, Conv1D and Dense (written here with
    TensorFlow) is audited in the virtualenv without TensorFlow, each layer with its Tacc."""
    import keras

    from tf_fp16ops import layers

    inp = keras.Input((8, 8, 16))
    x = layers.Conv2D(16, 3, padding="same", accumulation="float16", name="c2")(inp)
    x = layers.DepthwiseConv2D(3, padding="same", accumulation="float32", name="dw")(x)
    x = layers.SeparableConv2D(8, 3, accumulation="float16", name="sep")(x)  # 6x6x8
    x = keras.layers.Reshape((36, 8))(x)
    x = layers.Conv1D(8, 3, accumulation="float16", name="c1")(x)  # 34x8
    x = keras.layers.Flatten()(x)
    out = layers.Dense(4, accumulation="float32", name="fc")(x)
    path = tmp_path / "ours.keras"
    keras.Model(inp, out).save(str(path))
    r = subprocess.run(
        [str(notf_python), "-m", "tf_fp16ops.audit", str(path), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stderr == ""
    rep = json.loads(r.stdout)
    got = sorted((f["keras_layer"], f["op"], f["Tacc"]) for f in rep["findings"])
    assert got == [
        ("c1", "Fp16Conv2D", "half"),
        ("c2", "Fp16Conv2D", "half"),
        ("dw", "Fp16DepthwiseConv2D", "float"),
        ("fc", "Fp16Conv2D", "float"),
        ("sep", "Fp16Conv2D", "half"),
        ("sep", "Fp16DepthwiseConv2D", "half"),
    ]
    flops = {(f["keras_layer"], f["op"]): f["flops"] for f in rep["findings"]}
    # by hand, per example: SAME 3x3 16->16 on 8x8; VALID 3x3 depthwise 16 -> 6x6; pointwise
    # 16->8 on 6x6; Conv1D k3 8->8 on 36 -> 34; Dense 34*8 -> 4
    assert flops[("c2", "Fp16Conv2D")] == 2 * 8 * 8 * 16 * 3 * 3 * 16
    assert flops[("sep", "Fp16DepthwiseConv2D")] == 2 * 6 * 6 * 16 * 3 * 3
    assert flops[("sep", "Fp16Conv2D")] == 2 * 6 * 6 * 8 * 16
    assert flops[("c1", "Fp16Conv2D")] == 2 * 34 * 8 * 3 * 8
    assert flops[("fc", "Fp16Conv2D")] == 2 * 4 * 34 * 8
    assert {f["accumulation"] for f in rep["findings"] if f["Tacc"] == "half"} == {"fp16"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get_json(url: str):
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read().decode())


def _serve_and_list(python: Path, logdir: Path, env: dict, log: Path) -> tuple[dict, dict]:
    """Starts `tensorboard --logdir` with `python`; returns (plugins listing, fp16_audit runs)."""
    port = _free_port()
    cmd = [
        str(python),
        "-m",
        "tensorboard.main",
        "--logdir",
        str(logdir),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--load_fast",
        "false",
        "--reload_interval",
        "1",
    ]
    with open(log, "wb") as logf:
        proc = subprocess.Popen(
            cmd, stdout=logf, stderr=subprocess.STDOUT, env=env, cwd="/", start_new_session=True
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_WAIT_S
        while True:
            assert proc.poll() is None, f"tensorboard exited: {log.read_text()[-3000:]}"
            try:
                runs = _get_json(f"{base}/data/plugin/fp16_audit/runs")
                if runs["runs"]:
                    return _get_json(f"{base}/data/plugins_listing"), runs
            except (urllib.error.URLError, ConnectionError, json.JSONDecodeError):
                pass
            assert time.monotonic() < deadline, (
                f"no fp16_audit runs within {SERVER_WAIT_S} s: {log.read_text()[-3000:]}"
            )
            time.sleep(1)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def example_logdir(example, tmp_path_factory) -> Path:
    from tf_fp16ops.audit.cli import main

    logdir = tmp_path_factory.mktemp("example_logs")
    assert main([str(example), "--logdir", str(logdir), "--output", os.devnull]) == 0
    return logdir


@pytest.mark.parametrize("library", ["missing", "built-for-another-tensorflow", "no-tensorflow"])
def test_tensorboard_serves_the_tab_without_a_usable_op_library(library, example_logdir, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if library == "no-tensorflow":
        python = _notf_python()
    else:
        # A copy of the package first on the path (the installed entry point then loads it).
        python = Path(sys.executable)
        copy = tmp_path / "pkg" / "tf_fp16ops"
        shutil.copytree(
            REPO / "tf_fp16ops", copy, ignore=shutil.ignore_patterns("__pycache__", "*.so")
        )
        if library == "built-for-another-tensorflow":
            shutil.copy(REPO / "tf_fp16ops" / "_fp16ops.so", copy / "_fp16ops.so")
            (copy / "_build_info.json").write_text(json.dumps({"tensorflow_version": "2.99.0"}))
        env["PYTHONPATH"] = str(copy.parent)
    listing, runs = _serve_and_list(python, example_logdir, env, tmp_path / "tensorboard.log")
    assert listing["fp16_audit"]["enabled"] is True
    assert listing["fp16_audit"]["tab_name"] == "fp16 audit"
    (run,) = runs["runs"]
    assert run["run"] == "audit" and run["call_sites"] == 5


@pytest.mark.parametrize("flag", ["--run", "--build-keras"])
def test_options_that_need_tensorflow_say_so_without_it(notf_python, example, flag):
    r = subprocess.run(
        [str(notf_python), "-m", "tf_fp16ops.audit", str(example), flag],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
    )
    assert r.returncode == 2 and r.stdout == ""
    (line,) = r.stderr.splitlines()
    assert line.startswith(f"tf-fp16-audit: error: {flag} needs TensorFlow: "), line
    assert "tensorflow" in line
