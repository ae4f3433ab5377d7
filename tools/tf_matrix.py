"""The TensorFlow matrix: an op library per TensorFlow minor, and the tests that depend on it.

    python tools/tf_matrix.py build [--minors 2.16 2.21]     # `make matrix-libs`
    python tools/tf_matrix.py test --wheel WHEEL [--minors ...]  # `make matrix`
    python tools/tf_matrix.py list                           # the minors, one line

The releases and their Keras pins are in tools/tf_matrix.txt. For each minor:

* a virtualenv build/matrix/venv-<minor> with `tensorflow==<release>`, its `keras==<pin>`, and
  pytest, hypothesis and networkx at the pins of requirements.txt; kept between runs (remade
  only when tools/tf_matrix.txt or those pins change), its files from pip's cache after the first
  download;
* `build`: the op library built by Bazel against that virtualenv's TensorFlow (its headers and
  libtensorflow_framework.so.2, through third_party/tf/tf_configure.bzl and PYTHON_BIN_PATH) into
  build/matrix/lib-<minor>/_fp16ops.so with build_info.json; then the source tree's own build
  is configured back to the development virtualenv (`make build` reuses its cached objects);
* `test`: the wheel installed into that virtualenv, with those of its requirements the
  virtualenv lacks (TensorFlow and Keras held at their pins), and the version-sensitive test
  files (TESTS) run with the virtualenv's Python from a copy in a temporary directory outside
  the source tree, so `tf_fp16ops` comes from the wheel alone.

Prints one line per step and a summary table (minor, release, Keras, result, seconds); exits 1
when any minor fails, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MATRIX_FILE = ROOT / "tools" / "tf_matrix.txt"
MATRIX_DIR = ROOT / "build" / "matrix"
# The tests whose result depends on the TensorFlow and Keras versions: op exactness, gradients,
# the Keras layers (save/load), convert, the demo, the audit's --run, the plugin's routes.
TESTS = (
    "ops/test_conv2d_reference.py",
    "ops/test_gradients.py",
    "layers/test_layers_conv2d.py",
    "layers/test_layers_exact.py",
    "models/test_conversion.py",
    "models/test_saved_model.py",
    "models/test_demo.py",
    "audit/runtime/test_audit_runtime.py",
    "tensorboard_plugin/test_tb_plugin_routes.py",
)
# What the tests need beside themselves: pytest's set-up, the support package and the data.
SUPPORT = ("conftest.py", "support", "data")
# Test tools pinned as in the development virtualenv.
TEST_TOOLS = ("pytest", "hypothesis", "networkx")


@dataclass(frozen=True)
class Entry:
    """One row of tools/tf_matrix.txt."""

    tensorflow: str  # e.g. "2.16.2"
    keras: str  # e.g. "3.3.3"

    @property
    def minor(self) -> str:
        return ".".join(self.tensorflow.split(".")[:2])

    @property
    def venv(self) -> Path:
        return MATRIX_DIR / f"venv-{self.minor}"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def lib_dir(self) -> Path:
        return MATRIX_DIR / f"lib-{self.minor}"


def read_matrix(path: Path = MATRIX_FILE) -> list[Entry]:
    """The rows of tools/tf_matrix.txt ("<tensorflow> <keras>", '#' comments).

    Raises:
      ValueError: a malformed line (its number and text).
    """
    entries = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2 or not all(re.fullmatch(r"\d+\.\d+\.\d+", p) for p in parts):
            raise ValueError(f"{path}:{n}: expected '<tensorflow> <keras>' versions, got {line!r}")
        entries.append(Entry(*parts))
    return entries


def select(entries: list[Entry], minors: list[str] | None) -> list[Entry]:
    """The entries of `minors` ("2.16", ...; None or ["all"]: every entry).

    Raises:
      ValueError: a minor that tools/tf_matrix.txt does not list.
    """
    if not minors or minors == ["all"]:
        return entries
    by_minor = {e.minor: e for e in entries}
    unknown = [m for m in minors if m not in by_minor]
    if unknown:
        raise ValueError(
            f"--minors {' '.join(unknown)}: not in {MATRIX_FILE.name} "
            f"(supported: {' '.join(by_minor)})"
        )
    return [by_minor[m] for m in minors]


def dev_pins() -> dict[str, str]:
    """name -> version of requirements.txt's `name==version` lines."""
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==(\S+)", line)
        if m:
            pins[m.group(1).lower()] = m.group(2)
    return pins


def _run(args, log: Path, **kwargs) -> None:
    """Runs `args` with its output appended to `log`; raises RuntimeError naming the log."""
    with open(log, "a") as f:
        f.write(f"$ {' '.join(map(str, args))}\n")
        f.flush()
        r = subprocess.run([str(a) for a in args], stdout=f, stderr=subprocess.STDOUT, **kwargs)
    if r.returncode != 0:
        raise RuntimeError(f"{Path(str(args[0])).name} ... exited {r.returncode} (log: {log})")


def ensure_venv(e: Entry, log: Path) -> None:
    pins = dev_pins()
    wanted = [f"tensorflow=={e.tensorflow}", f"keras=={e.keras}"] + [
        f"{t}=={pins[t]}" for t in TEST_TOOLS if t in pins
    ]
    marker = e.venv / ".matrix-ready"
    if marker.is_file() and marker.read_text().split() == wanted:
        return
    if e.venv.exists():
        shutil.rmtree(e.venv)
    _run([sys.executable, "-m", "venv", e.venv], log)
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    _run([e.python, "-m", "pip", "install", "-q", "--only-binary", ":all:", *wanted], log, env=env)
    marker.write_text("\n".join(wanted) + "\n")


def build(e: Entry, log: Path, bazel: str) -> None:
    """Builds the op library against `e`'s TensorFlow into e.lib_dir."""
    _run(
        [bazel, "build", f"--repo_env=PYTHON_BIN_PATH={e.python}", "//:_fp16ops.so"], log, cwd=ROOT
    )
    version = subprocess.run(
        [e.python, "-c", "import importlib.metadata as m; print(m.version('tensorflow'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    e.lib_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "bazel-bin" / "_fp16ops.so", e.lib_dir / "_fp16ops.so")
    os.chmod(e.lib_dir / "_fp16ops.so", 0o755)
    (e.lib_dir / "build_info.json").write_text(
        json.dumps({"tensorflow_version": version, "cuda": False}, sort_keys=True)
    )


def copy_tests(tests: tuple[str, ...], dest: Path) -> Path:
    """Copies `tests` (paths below tests/) and SUPPORT into dest/tests/, keeping their folders;
    returns dest/tests."""
    copy = dest / "tests"
    for name in (*SUPPORT, *tests):
        src, dst = ROOT / "tests" / name, copy / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
        elif src.is_file():
            shutil.copy(src, dst)
    return copy


def test(e: Entry, wheel: Path, log: Path, tests: tuple[str, ...] = TESTS) -> None:
    """Installs `wheel` into e's virtualenv and runs `tests` from a copy outside the source tree."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", TF_CPP_MIN_LOG_LEVEL="2")
    pip = [e.python, "-m", "pip", "install", "-q", "--only-binary", ":all:"]
    _run([*pip, "--no-deps", "--force-reinstall", wheel], log, env=env)
    # Then the wheel's own requirements that this TensorFlow does not bring (TensorFlow 2.21
    # no longer requires tensorboard), resolved with TensorFlow and Keras held at their pins.
    _run([*pip, wheel, f"tensorflow=={e.tensorflow}", f"keras=={e.keras}"], log, env=env)
    with tempfile.TemporaryDirectory(prefix=f"tf_fp16ops_matrix_{e.minor}_") as tmp:
        copy = copy_tests(tests, Path(tmp))
        # --rootdir: the copy's tests/ (conftest.py there), whichever areas are run.
        _run(
            [
                e.python,
                "-m",
                "pytest",
                "-q",
                "-rfE",
                "-p",
                "no:cacheprovider",
                "--rootdir",
                copy,
                *tests,
            ],
            log,
            cwd=copy,
            env=env,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("command", choices=("build", "test", "list"))
    parser.add_argument(
        "--minors", nargs="+", help="TensorFlow minors, e.g. 2.16 2.21 (default: all)"
    )
    parser.add_argument("--wheel", type=Path, help="the wheel to test (`test`)")
    parser.add_argument(
        "--tests",
        nargs="+",
        choices=TESTS,
        default=TESTS,
        metavar="FILE",
        help=f"`test`: these test files only (default: all of {' '.join(TESTS)})",
    )
    parser.add_argument("--bazel", default=shutil.which("bazel") or "bazel", help="bazel binary")
    args = parser.parse_args(argv)
    try:
        entries = select(read_matrix(), args.minors)
    except (OSError, ValueError) as err:
        parser.error(str(err))
    if args.command == "list":
        print(" ".join(e.minor for e in entries))
        return 0
    if args.command == "test" and (args.wheel is None or not args.wheel.is_file()):
        parser.error(f"--wheel {args.wheel}: not a file (build it with `make wheel`)")
    MATRIX_DIR.mkdir(parents=True, exist_ok=True)
    rows = []
    for e in entries:
        log = MATRIX_DIR / f"{args.command}-{e.minor}.log"
        log.write_text("")
        start = time.monotonic()
        try:
            ensure_venv(e, log)
            if args.command == "build":
                build(e, log, args.bazel)
            else:
                test(e, args.wheel.resolve(), log, tuple(args.tests))
            result = "passed" if args.command == "test" else "built"
        except (RuntimeError, OSError, subprocess.CalledProcessError) as err:
            result = f"FAILED: {err}"
        seconds = time.monotonic() - start
        if args.command == "test" and result == "passed":
            counts = re.findall(r"^=*\s*(\d+ passed.*?)\s*=*$", log.read_text(), re.M)
            result = f"passed ({counts[-1]})" if counts else result
        print(f"tf_matrix {args.command} {e.minor}: {result} ({seconds:.0f} s)", flush=True)
        rows.append((e, result, seconds))
    if args.command == "build":
        # Back to the development virtualenv's TensorFlow (.bazelrc.user), so that the source
        # tree's Bazel output (and `make build`) is the development build again.
        subprocess.run([args.bazel, "build", "//:_fp16ops.so"], cwd=ROOT, capture_output=True)
    print(f"\n| TensorFlow | Keras | {args.command} | seconds |\n|---|---|---|---|")
    for e, result, seconds in rows:
        print(f"| {e.tensorflow} | {e.keras} | {result} | {seconds:.0f} |")
    return 0 if all(not r.startswith("FAILED") for _, r, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
