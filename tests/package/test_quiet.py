"""Output is part of the interface: no TensorFlow start-up lines in `make demo` or any CLI output,
while lines that are not start-up noise (real warnings, errors) still reach stderr.

The demo and `--run` run in subprocesses with TF_CPP_MIN_LOG_LEVEL unset (as a user's shell has
it), so the lines TensorFlow writes at import and device start-up would show if not handled.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tf_fp16ops._platform.quiet import is_noise, is_startup_noise

REPO = Path(__file__).resolve().parents[2]
# Lines TensorFlow 2.21 wrote on this machine (CPU only) at import and first device query.
RECORDED_STARTUP = (
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1796116698.313799   20447 port.cc:153] oneDNN custom operations are on. "
    "You may see slightly different numerical results due to floating-point round-off errors "
    "from different computation "
    "orders. To turn them off, set the environment variable `TF_ENABLE_ONEDNN_OPTS=0`.",
    "I0000 00:00:1796116698.314074   20447 cudart_stub.cc:31] "
    "Could not find cuda drivers on your machine, "
    "GPU will not be used.",
    "E0000 00:00:1796116719.024172   20609 cuda_platform.cc:52] "
    "failed call to cuInit: INTERNAL: CUDA error: "
    "Failed call to cuInit: UNKNOWN ERROR (303)",
    "To enable the following instructions: AVX2 AVX512F FMA, in other operations, "
    "rebuild TensorFlow with the "
    "appropriate compiler flags.",
)
# The line TensorFlow 2.21 wrote on a 2-core AMD EPYC (avx512f/bw/vnni/bf16, no avx512_fp16) when
# the first stock T=half conv ran, under oneDNN's default (on).
RECORDED_RUNTIME = (
    "E0000 00:00:1796140037.519245   81723 util.cc:131] oneDNN supports DT_HALF only on "
    "platforms with AVX-512. Falling back to the default Eigen-based implementation if present."
)
REAL = (
    "E0000 00:00:1796116719.024172   20609 cuda_platform.cc:52] some other CUDA failure",
    "W0000 00:00:1796116719.024172   20609 op_kernel.cc:1857] "
    "OP_REQUIRES failed at conv_ops.cc:101",
    "Traceback (most recent call last):",
)


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env["PYTHONPATH"] = str(REPO)
    return env


@pytest.mark.parametrize("line", RECORDED_STARTUP)
def test_recorded_startup_lines_are_noise(line):
    assert is_startup_noise(line)


@pytest.mark.parametrize("line", REAL)
def test_other_lines_are_not_noise(line):
    assert not is_startup_noise(line) and not is_noise(line)


def test_recorded_runtime_line_is_noise_but_not_startup():
    assert is_noise(RECORDED_RUNTIME) and not is_startup_noise(RECORDED_RUNTIME)
    # Another util.cc error, or the same text from another file, passes.
    assert not is_noise(RECORDED_RUNTIME.replace("oneDNN supports DT_HALF", "oneDNN failed"))
    assert not is_noise(RECORDED_RUNTIME.replace("util.cc", "conv_ops.cc"))


def _stand_in_tensorflow(tmp_path, conv_writes: bytes, then: str = "") -> Path:
    """A `tensorflow` whose stock-op stand-in `nn.conv2d` writes `conv_writes` to file descriptor
    2 when it runs, as TensorFlow's C++ code does, then runs `then` (Python source)."""
    fake = tmp_path / "tensorflow"
    fake.mkdir()
    (fake / "__init__.py").write_text(
        textwrap.dedent(f"""
        import os, types
        def list_physical_devices(kind):
            return []
        def conv2d(*args):
            os.write(2, {conv_writes!r})
            {then or "pass"}
        config = types.SimpleNamespace(list_physical_devices=list_physical_devices)
        nn = types.SimpleNamespace(conv2d=conv2d)
    """)
    )
    return tmp_path


def _run_with_stand_in(tmp_path, code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", "from tf_fp16ops._platform.quiet import import_tensorflow\n" + code],
        capture_output=True,
        timeout=60,
        env={**_env(), "PYTHONPATH": f"{tmp_path}:{REPO}"},
        cwd="/",
    )


def test_runtime_line_of_a_stock_op_is_dropped_and_real_lines_pass(tmp_path):
    """After import_tensorflow(), a stock op that writes the recorded run-time line and a real
    error: only the real error, our own message and a progress bar's partial line arrive."""
    writes = (RECORDED_RUNTIME + "\n" + REAL[0] + "\n").encode()
    _stand_in_tensorflow(tmp_path, writes)
    r = _run_with_stand_in(
        tmp_path,
        "import sys\ntf = import_tensorflow()\ntf.nn.conv2d()\n"
        "print('tool: error: one line', file=sys.stderr)\n"
        "sys.stderr.write(' 3/8 [=====>....]')\nprint('done')",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"done\n"
    assert r.stderr.decode() == REAL[0] + "\ntool: error: one line\n 3/8 [=====>....]"


def test_a_fatal_line_before_a_crash_still_arrives(tmp_path):
    """TensorFlow's check failures write an F line and abort: the filter outlives the crash."""
    fatal = "F0000 00:00:1796116719.024172   20609 conv_ops.cc:42] Check failed: 1 == 2"
    _stand_in_tensorflow(tmp_path, (RECORDED_RUNTIME + "\n" + fatal + "\n").encode(), "os.abort()")
    r = _run_with_stand_in(tmp_path, "tf = import_tensorflow()\ntf.nn.conv2d()")
    assert r.returncode == -6
    assert r.stderr.decode() == fatal + "\n"


def test_import_replays_real_lines_and_drops_startup_lines(tmp_path):
    """A stand-in `tensorflow` that writes to file descriptor 2 as TensorFlow's C++ code does."""
    fake = tmp_path / "tensorflow"
    fake.mkdir()
    at_import = ("\n".join(list(RECORDED_STARTUP[:3]) + [REAL[0]]) + "\n").encode()
    at_device_query = (RECORDED_STARTUP[3] + "\n").encode()
    (fake / "__init__.py").write_text(
        textwrap.dedent(f"""
        import os, types
        os.write(2, {at_import!r})
        def list_physical_devices(kind):
            os.write(2, {at_device_query!r})
        config = types.SimpleNamespace(list_physical_devices=list_physical_devices)
    """)
    )
    code = (
        "from tf_fp16ops._platform.quiet import import_tensorflow\n"
        "tf = import_tensorflow()\nprint(tf.__name__)"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**_env(), "PYTHONPATH": f"{tmp_path}:{REPO}"},
        cwd="/",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == "tensorflow\n"
    assert r.stderr == REAL[0] + "\n"


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("demo")
    r = subprocess.run(
        [sys.executable, "-m", "tf_fp16ops.demo", "--workdir", str(work)],
        capture_output=True,
        text=True,
        timeout=600,
        env=_env(),
        cwd="/",
    )
    return work, r


def test_demo_prints_no_tensorflow_startup_lines(demo_run):
    work, r = demo_run
    assert r.returncode == 0, r.stderr[-3000:]
    # Nothing on stderr: the demo's closing hint (the audit CLI's --logdir message) is on stdout.
    assert r.stderr == ""
    assert f"TensorBoard: tensorboard --logdir {work / 'audit_logs'}" in r.stdout.splitlines()
    assert "tf_fp16ops.conv2d accumulation=float16" in r.stdout and "fp16-accumulate" in r.stdout


def test_run_audit_leaves_stderr_empty(demo_run):
    work, _ = demo_run
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "tf_fp16ops.audit",
            str(work / "example_savedmodel"),
            "--run",
            "--signature",
            "conv16",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=_env(),
        cwd="/",
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stderr == ""
    assert "confirmed" in r.stdout


def test_static_audit_leaves_stderr_empty(demo_run):
    work, _ = demo_run
    r = subprocess.run(
        [sys.executable, "-m", "tf_fp16ops.audit", str(work / "example_savedmodel")],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
        cwd="/",
    )
    assert r.returncode == 0 and r.stderr == ""
    assert "5 conv call sites" in r.stdout


def test_library_import_filters_the_import_only(tmp_path):
    """The library's first op use imports TensorFlow with keep_filtering=False: the start-up
    lines are dropped, and afterwards the user's stderr is their own again (fd 2 unchanged, so
    even a line the tools would drop arrives)."""
    _stand_in_tensorflow(tmp_path, (RECORDED_RUNTIME + "\n").encode())
    init = tmp_path / "tensorflow" / "__init__.py"
    init.write_text(
        f"import os\nos.write(2, {(RECORDED_STARTUP[1] + chr(10)).encode()!r})\n" + init.read_text()
    )
    r = _run_with_stand_in(
        tmp_path,
        "import os\nbefore = os.fstat(2).st_ino\n"
        "tf = import_tensorflow(keep_filtering=False)\n"
        "assert os.fstat(2).st_ino == before\ntf.nn.conv2d()",
    )
    assert r.returncode == 0, r.stderr
    assert r.stderr.decode() == RECORDED_RUNTIME + "\n"


def test_public_quiet_stderr_drops_the_runtime_line_without_importing_tensorflow(tmp_path):
    """`tf_fp16ops.quiet_stderr()` (what the examples call): the recorded run-time line written
    to fd 2 is dropped, a real error passes, and neither TensorFlow nor the op library is
    imported by the call."""
    code = (
        "import os, sys\nimport tf_fp16ops\ntf_fp16ops.quiet_stderr()\n"
        "assert 'tensorflow' not in sys.modules, 'quiet_stderr imported TensorFlow'\n"
        f"os.write(2, {(RECORDED_RUNTIME + chr(10) + REAL[0] + chr(10)).encode()!r})\n"
        "print('done')"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        timeout=60,
        env={**_env(), "PYTHONPATH": REPO},
        cwd="/",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"done\n"
    assert r.stderr.decode() == REAL[0] + "\n"
