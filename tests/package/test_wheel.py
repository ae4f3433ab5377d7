"""The wheel (`make wheel`) installed into a fresh virtualenv and used outside the source tree.

The wheel is the one `make test` just built (TF_FP16OPS_WHEEL), else one built here with
tools/build_wheel.py from the library of the source tree. It is installed with its `[tf]` extra
into a new virtualenv under build/wheel_test/, with every version pinned to the development
virtualenv's (`pip freeze`), so pip takes all files from its local cache. The virtualenv is kept
between runs, keyed by the wheel's SHA-256 (tools/build_wheel.py builds reproducible wheels).
Every command then runs with the working directory in a temporary folder and no PYTHONPATH, so
`tf_fp16ops` can only come from the installed wheel.

Expected values: the 49-tap window (docs/design.md#49-tap-window) by hand, 49 steps of
fp16(0.2) * fp16(0.1); the classes of the bundled example model from how it is built
(tf_fp16ops/audit/demo.py: conv16, conv16_32, conv32 and Fp16Conv2D with Tacc half and float).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "build" / "wheel_test"
TIMEOUT = 600  # seconds per command; the whole file takes far less (see README)


def _run(args, cwd, timeout=TIMEOUT, check=True, **kwargs) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    r = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        **kwargs,
    )
    if check and r.returncode != 0:
        pytest.fail(f"{' '.join(map(str, args))} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return r


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    given = os.environ.get("TF_FP16OPS_WHEEL")
    if given:
        return Path(given).resolve()
    out = tmp_path_factory.mktemp("dist")
    _run(
        [
            sys.executable,
            ROOT / "tools" / "build_wheel.py",
            "--dist",
            out,
            "--staging",
            out / "src",
        ],
        cwd=ROOT,
    )
    (path,) = out.glob("tf_fp16ops-*.whl")
    return path


@pytest.fixture(scope="module")
def venv(wheel) -> Path:
    """A virtualenv with `wheel[tf]` installed, cached by the wheel's hash."""
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()[:16]
    root = CACHE / f"venv-{digest}"
    if (root / ".ready").exists():
        return root
    if CACHE.exists():
        for old in CACHE.glob("venv-*"):
            shutil.rmtree(old)
    CACHE.mkdir(parents=True, exist_ok=True)
    freeze = _run([sys.executable, "-m", "pip", "freeze", "--exclude-editable"], cwd=CACHE).stdout
    pins = [
        line
        for line in freeze.splitlines()
        if "==" in line and not line.lower().startswith(("tf-fp16ops", "tf_fp16ops"))
    ]
    constraints = CACHE / "constraints.txt"
    constraints.write_text("\n".join(pins) + "\n")
    _run([sys.executable, "-m", "venv", root], cwd=CACHE)
    _run(
        [
            root / "bin" / "python",
            "-m",
            "pip",
            "install",
            "--quiet",
            "--only-binary",
            ":all:",
            "-c",
            constraints,
            f"{wheel}[tf]",
        ],
        cwd=CACHE,
    )
    (root / ".ready").write_text(wheel.name + "\n")
    return root


@pytest.fixture(scope="module")
def outside(tmp_path_factory) -> Path:
    """A working directory outside the source tree."""
    d = tmp_path_factory.mktemp("outside")
    assert ROOT not in d.parents
    return d


@pytest.fixture(scope="module")
def demo(venv, outside) -> tuple[str, Path]:
    """`python -m tf_fp16ops.demo` in the virtualenv, with no --workdir: its stdout and the
    directory it names (outside a source tree, a new temporary one; nothing in the working
    directory)."""
    cwd = outside / "demo_cwd"
    cwd.mkdir()
    r = _run([venv / "bin" / "python", "-m", "tf_fp16ops.demo"], cwd=cwd)
    assert r.stderr == "" and list(cwd.iterdir()) == []
    named = next(line for line in r.stdout.splitlines() if line.startswith("Demo files: "))
    workdir = Path(named.split("the example model in ", 1)[1].split(", ", 1)[0])
    assert workdir.name.startswith("tf_fp16ops_demo_") and ROOT not in workdir.parents
    assert f"TensorBoard: tensorboard --logdir {workdir / 'audit_logs'}" in r.stdout
    return r.stdout, workdir


def _wheel_libraries(z: zipfile.ZipFile) -> dict[str, dict]:
    """minor -> build info of each tf_fp16ops/_libs/tf<minor>/ of the wheel."""
    libs = {}
    for name in z.namelist():
        parts = name.split("/")
        if parts[:2] == ["tf_fp16ops", "_libs"] and parts[-1] == "build_info.json":
            libs[parts[2].removeprefix("tf")] = json.loads(z.read(name))
    return libs


def test_wheel_holds_a_library_per_minor_build_info_and_metadata(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        metadata = z.read(f"{dist_info}/METADATA").decode()
        wheel_meta = z.read(f"{dist_info}/WHEEL").decode()
        entry_points = z.read(f"{dist_info}/entry_points.txt").decode()
        libs = _wheel_libraries(z)
        sizes = {m: z.getinfo(f"tf_fp16ops/_libs/tf{m}/_fp16ops.so").file_size for m in libs}
    assert {
        "tf_fp16ops/__init__.py",
        "tf_fp16ops/audit/cli.py",
        "tf_fp16ops/tensorboard_plugin/static/index.js",
        "tf_fp16ops/tensorboard_plugin/static/view.html",
        "tf_fp16ops/tensorboard_plugin/static/style.css",
    } <= names
    # No library outside _libs/ (the source tree's own build is not shipped as such).
    assert "tf_fp16ops/_fp16ops.so" not in names and "tf_fp16ops/_build_info.json" not in names
    assert all(size > 10_000 for size in sizes.values()), sizes
    assert not any(n.startswith(("tests/", "tools/", "cc/")) for n in names)
    # A native library: a platform wheel, not py3-none-any.
    assert "Root-Is-Purelib: false" in wheel_meta
    tag = next(
        line.split(": ", 1)[1] for line in wheel_meta.splitlines() if line.startswith("Tag:")
    )
    assert wheel.name.endswith(f"-{tag}.whl")
    m = re.fullmatch(r"cp\d+-cp\d+-manylinux_2_(\d+)_x86_64", tag)
    assert m, tag
    # Honest: the tag's glibc is no older than the newest GLIBC_2.x symbol version any library
    # needs (binutils' objdump lists them), so no older system installs it and then fails.
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(wheel) as z:
        needed = set()
        for minor in libs:
            lib = Path(z.extract(f"tf_fp16ops/_libs/tf{minor}/_fp16ops.so", tmp))
            if shutil.which("objdump"):
                dyn = subprocess.run(
                    ["objdump", "-T", str(lib)], capture_output=True, text=True, check=True
                ).stdout
                needed |= {int(v) for v in re.findall(r"\bGLIBC_2\.(\d+)\b", dyn)}
    assert not needed or int(m.group(1)) >= max(needed), (tag, sorted(needed))
    # Each library is recorded with a release of its own minor; the one of this virtualenv's
    # TensorFlow (which `make build` compiles against) is among them.
    tf_version = importlib.metadata.version("tensorflow")
    assert all(info["tensorflow_version"].startswith(f"{m}.") for m, info in libs.items())
    assert libs[".".join(tf_version.split(".")[:2])]["tensorflow_version"] == tf_version
    requires = [
        line.split(": ", 1)[1]
        for line in metadata.splitlines()
        if line.startswith("Requires-Dist:")
    ]
    assert sorted(r for r in requires if "extra ==" not in r) == [
        "networkx",
        "numpy",
        "protobuf",
        "tensorboard",
    ]
    # TensorFlow only through the [tf] extra, which admits exactly the minors with a library.
    (tf_req,) = [r for r in requires if r.endswith('extra == "tf"')]
    spec = SpecifierSet(tf_req.split(";")[0].removeprefix("tensorflow"))
    for minor in range(10, 30):
        for release in (f"2.{minor}.0", f"2.{minor}.7"):
            assert (release in spec) == (f"2.{minor}" in libs), (tf_req, release)
    assert [r for r in requires if r.endswith('extra == "examples"')] == [
        'scikit-learn; extra == "examples"'
    ]
    assert "tf-fp16-audit = tf_fp16ops.audit.cli:main" in entry_points
    assert "fp16_audit = tf_fp16ops.tensorboard_plugin.plugin:Fp16AuditPlugin" in entry_points


def test_demo_from_the_installed_wheel(demo):
    out, workdir = demo
    lines = out.splitlines()
    same = next(line for line in lines if "fp32 conv cast to fp16 (this process)" in line)
    assert same.split()[-2:] == ["0", "0.0%"]  # TensorFlow's fp16 conv accumulates in fp32
    assert "tf_fp16ops.conv2d accumulation=float16 -> [inf, inf, inf]" in out
    assert "tf_fp16ops.conv2d accumulation=float32 -> [0.0, 0.0, 0.0]" in out
    assert "Fp16Conv2D" in out and "fp16-accumulate" in out
    assert (workdir / "example_savedmodel" / "saved_model.pb").is_file()


@pytest.fixture(scope="module")
def audit_json(venv, demo, outside) -> tuple[dict, Path]:
    logdir = outside / "audit_logs"
    r = _run(
        [
            venv / "bin" / "tf-fp16-audit",
            demo[1] / "example_savedmodel",
            "--format",
            "json",
            "--device",
            "gpu",
            "--compute-capability",
            "8.0",
            "--env",
            "TF_FP16_CONV_USE_FP32_COMPUTE=false",
            "--logdir",
            logdir,
        ],
        cwd=outside,
    )
    return json.loads(r.stdout[r.stdout.index("{") : r.stdout.rindex("}") + 1]), logdir


def test_audit_cli_from_the_installed_wheel(audit_json):
    report, _ = audit_json
    got = sorted((f["op"], f["T"], f["Tacc"], f["audit_class"]) for f in report["findings"])
    assert got == [
        ("Conv2D", "float", None, "fake-fp16"),  # conv16_32: fp16 values computed in fp32
        ("Conv2D", "float", None, "fp32"),  # conv32
        ("Conv2D", "half", None, "fp16-storage"),  # conv16: cuDNN computes in fp32 ("false")
        ("Fp16Conv2D", "half", "float", "fp16-storage"),
        ("Fp16Conv2D", "half", "half", "fp16-accumulate"),
    ]


_PLUGIN_ROUTES = """
import json, sys
from importlib.metadata import entry_points
from tensorboard.backend import application
from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
from tensorboard.plugins import base_plugin
from werkzeug import test as wtest

logdir = sys.argv[1]
(ep,) = [e for e in entry_points(group="tensorboard_plugins") if e.name == "fp16_audit"]
plugin_class = ep.load()
mux = plugin_event_multiplexer.EventMultiplexer()
mux.AddRunsFromDirectory(logdir)
mux.Reload()
provider = data_provider.MultiplexerDataProvider(mux, logdir)
ctx = base_plugin.TBContext(logdir=logdir, data_provider=provider, multiplexer=mux)
client = wtest.Client(application.TensorBoardWSGI([plugin_class(ctx)], data_provider=provider))
out = {"module": plugin_class.__module__, "file": sys.modules[plugin_class.__module__].__file__}
for name, url in (("listing", "/data/plugins_listing"), ("runs", "/data/plugin/fp16_audit/runs")):
    r = client.get(url)
    out[name] = [r.status_code, json.loads(r.get_data(as_text=True))]
run = out["runs"][1]["runs"][0]["run"]
r = client.get("/data/plugin/fp16_audit/findings?run=" + run)
out["findings"] = [r.status_code, json.loads(r.get_data(as_text=True))]
r = client.get("/data/plugin/fp16_audit/index.js")
out["index_js"] = [r.status_code, r.mimetype, len(r.get_data())]
print(json.dumps(out))
"""


def test_tensorboard_plugin_routes_from_the_installed_wheel(venv, audit_json, outside):
    report, logdir = audit_json
    r = _run([venv / "bin" / "python", "-c", _PLUGIN_ROUTES, logdir], cwd=outside)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert Path(out["file"]).is_relative_to(venv)  # loaded through the installed entry point
    status, listing = out["listing"]
    assert status == 200 and listing["fp16_audit"]["enabled"] is True
    status, runs = out["runs"]
    assert status == 200 and [r["call_sites"] for r in runs["runs"]] == [5]
    status, findings = out["findings"]
    assert status == 200
    assert sorted(f["audit_class"] for f in findings["findings"]) == sorted(
        f["audit_class"] for f in report["findings"]
    )
    assert out["index_js"][:2] == [200, "text/javascript"] and out["index_js"][2] > 1000


_SAVE = """
import sys
import numpy as np, tensorflow as tf, tf_fp16ops

class Window(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([1, 9, 9, 1], tf.float16),
                                  tf.TensorSpec([7, 7, 1, 1], tf.float16)])
    def __call__(self, x, w):
        return (tf_fp16ops.conv2d(x, w, 1, "VALID", accumulation="float16"),
                tf_fp16ops.conv2d(x, w, 1, "VALID", accumulation="float32"))

tf.saved_model.save(Window(), sys.argv[1])
print(tf_fp16ops.__file__)
"""

_LOAD = """
import sys
import numpy as np, tensorflow as tf
import tf_fp16ops  # registers Fp16Conv2D; without it: "Op type not registered"

m = tf.saved_model.load(sys.argv[1])
half, flt = m(np.full([1, 9, 9, 1], 0.2, np.float16), np.full([7, 7, 1, 1], 0.1, np.float16))
print(sorted(set(half.numpy().ravel().tolist())), sorted(set(flt.numpy().ravel().tolist())),
      half.shape.as_list())
"""


def test_savedmodel_with_the_op_saved_and_loaded_from_the_installed_wheel(venv, outside):
    path = outside / "window_savedmodel"
    r = _run([venv / "bin" / "python", "-c", _SAVE, path], cwd=outside)
    assert Path(r.stdout.strip().splitlines()[-1]).is_relative_to(venv)
    r = _run([venv / "bin" / "python", "-c", _LOAD, path], cwd=outside)  # a fresh process
    # 49 products of fp16(0.2) = 0.199951171875 and fp16(0.1) = 0.0999755859375: rounded once
    # from fp32 0.9794921875; rounded to fp16 at each step 0.98046875.
    assert r.stdout.strip().splitlines()[-1] == "[0.98046875] [0.9794921875] [1, 3, 3, 1]"


_MISMATCH = """
import numpy as np, tensorflow as tf
tf.__version__ = "2.0.0"  # stands for a TensorFlow minor the wheel has no library for
import tf_fp16ops
try:
    tf_fp16ops.conv2d(np.ones([1, 1, 1, 1], np.float16), np.ones([1, 1, 1, 1], np.float16), 1,
                      "VALID")
except tf_fp16ops.OpLibraryError as e:
    print(e)
"""


def test_other_tensorflow_version_is_refused_naming_the_supported_ones(wheel, venv, outside):
    r = _run([venv / "bin" / "python", "-c", _MISMATCH], cwd=outside)
    with zipfile.ZipFile(wheel) as z:
        built = sorted(
            (i["tensorflow_version"] for i in _wheel_libraries(z).values()),
            key=lambda v: tuple(map(int, v.split("."))),
        )
    # An installed wheel has no source tree to rebuild in: the fix is a supported TensorFlow.
    assert r.stdout.strip() == (
        "tf_fp16ops: no op library for the installed TensorFlow 2.0.0; this tf_fp16ops holds "
        f"libraries built for TensorFlow {', '.join(built)}: install one of those minor "
        "releases (`pip install 'tf_fp16ops[tf]'` picks one)"
    ), r.stdout + r.stderr


def test_build_wheel_refuses_two_libraries_for_one_minor(tmp_path):
    lib, info = ROOT / "tf_fp16ops" / "_fp16ops.so", ROOT / "tf_fp16ops" / "_build_info.json"
    cmd = [sys.executable, ROOT / "tools" / "build_wheel.py", "--dist", tmp_path / "dist"]
    cmd += ["--staging", tmp_path / "src"]
    r = _run(cmd + ["--library", lib, "--build-info", info] * 2, cwd=tmp_path, check=False)
    assert r.returncode == 1 and r.stdout == ""
    minor = ".".join(importlib.metadata.version("tensorflow").split(".")[:2])
    assert r.stderr == f"build_wheel: two op libraries for TensorFlow {minor}: {lib} and {lib}\n"
    assert not (tmp_path / "dist").exists()


@pytest.mark.parametrize("missing", ["--library", "--build-info"])
def test_build_wheel_names_a_missing_input(tmp_path, missing):
    args = {
        "--library": ROOT / "tf_fp16ops" / "_fp16ops.so",
        "--build-info": ROOT / "tf_fp16ops" / "_build_info.json",
        "--dist": tmp_path / "dist",
        "--staging": tmp_path / "src",
    }
    args[missing] = tmp_path / "absent"
    cmd = [sys.executable, ROOT / "tools" / "build_wheel.py"]
    r = _run(cmd + [x for kv in args.items() for x in kv], cwd=tmp_path, check=False)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.splitlines() == [r.stderr.strip()]  # one line
    assert str(tmp_path / "absent") in r.stderr and "make build" in r.stderr
    assert not (tmp_path / "dist").exists()


def test_readme_install_commands_name_the_wheel_that_is_built(wheel):
    # README's "Install from a wheel" commands are copied by users: the file they name must be
    # the one `make wheel` writes (its platform tag follows the libraries' glibc/libstdc++ needs).
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    named = set(re.findall(r"dist/(tf_fp16ops-[^\s\"\[:]+\.whl)", readme))
    assert named == {wheel.name}
