"""TensorFlow without its noise on stderr, for this package's tools; real warnings and errors
still show.

TensorFlow's C++ runtime writes lines that `TF_CPP_MIN_LOG_LEVEL` does not stop. At import and
first device query (before absl logging is initialised): "All log messages before
absl::InitializeLog() ...", oneDNN's "custom operations are on", the CUDA stub's "Could not find
cuda drivers", "failed call to cuInit" on machines without a GPU driver, the CPU feature guard's
"rebuild TensorFlow with the appropriate compiler flags", and the duplicate-registration lines of
the cuDNN/cuFFT/cuBLAS plugins. While stock ops run: "oneDNN supports DT_HALF only on platforms
with AVX-512" (severity E, written by the oneDNN layout pass the first time a T=half op is placed
on a CPU without the DT_HALF features, tensorflow/core/util/util.cc; misleading on AVX-512 CPUs
without avx512_fp16, and not an error: the Eigen kernel runs).

`import_tensorflow()`, called by the demo, `tf-fp16-audit --run/--build-keras`,
`tf-fp16-sensitivity` and `make build`, sets TF_CPP_MIN_LOG_LEVEL=2 unless it is set and points
file descriptor 2 of the process, for the rest of its life, at a pipe read by a small filter
process (`python -m tf_fp16ops._platform.quiet`). The filter writes every line that is not one of
the lines above (`is_noise`) to the original stderr, partial lines (progress bars) within 0.2 s, and
drains the pipe until every writer has closed it, so a line written just before a crash (a
TensorFlow `F` check failure followed by abort) still reaches the terminal. In a user's own
process (the first op use of `tf_fp16ops.conv2d`, the layers, ...) only the import is filtered,
and stderr is given back as it was.
"""

from __future__ import annotations

import atexit
import os
import re
import select
import signal
import subprocess
import sys

# (C++ source file, text in its message) of the lines dropped; anything else is passed on.
STARTUP_LINES = (
    ("port.cc", "oneDNN custom operations are on"),
    ("cudart_stub.cc", "Could not find cuda drivers"),
    ("cuda_platform.cc", "failed call to cuInit"),
    ("cpu_feature_guard.cc", "This TensorFlow binary is optimized"),
    ("cuda_dnn.cc", "Unable to register cuDNN factory"),
    ("cuda_fft.cc", "Unable to register cuFFT factory"),
    ("cuda_blas.cc", "Unable to register cuBLAS factory"),
    ("computation_placer.cc", "computation placer already registered"),
)
RUNTIME_LINES = (("util.cc", "oneDNN supports DT_HALF only on platforms with AVX-512"),)
_ABSL_PREINIT = (
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
)
# absl's prefix: severity letter, MMDD, time, thread id, file:line]
_LOG_LINE = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ ([\w.]+):\d+\] (.*)$")
# Second line of the CPU feature guard's message.
_CONTINUATION = re.compile(
    r"^To enable the following instructions: .*, in other operations, rebuild TensorFlow"
)
# A partial line that may still become a dropped line is held until its newline (or 0.2 s).
_MAY_BE_NOISE = ("I", "W", "E", "F", "T")
_PARTIAL_LINE_WAIT_S = 0.2


def is_startup_noise(line: str) -> bool:
    """Whether `line` (without its newline) is one of TensorFlow's start-up lines listed above."""
    if line.strip() == _ABSL_PREINIT or _CONTINUATION.match(line):
        return True
    m = _LOG_LINE.match(line)
    return bool(m) and any(m.group(1) == f and text in m.group(2) for f, text in STARTUP_LINES)


def is_noise(line: str) -> bool:
    """Whether `line` (without its newline) is a start-up or run-time line listed above."""
    if is_startup_noise(line):
        return True
    m = _LOG_LINE.match(line)
    return bool(m) and any(m.group(1) == f and text in m.group(2) for f, text in RUNTIME_LINES)


def filter_stream(read_fd: int, write_fd: int) -> None:
    """Copies `read_fd` to `write_fd` until end of file, dropping the lines `is_noise` names."""
    pending = b""
    while True:
        ready, _, _ = select.select([read_fd], [], [], _PARTIAL_LINE_WAIT_S if pending else None)
        if not ready:  # a partial line waited long enough: pass it on as it is
            _write_all(write_fd, pending)
            pending = b""
            continue
        chunk = os.read(read_fd, 65536)
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        out = [
            line + b"\n"
            for line in lines
            if not is_noise(line.decode("utf-8", "replace").rstrip("\r"))
        ]
        if pending and not pending.decode("utf-8", "replace").startswith(_MAY_BE_NOISE):
            out.append(pending)
            pending = b""
        if out:
            _write_all(write_fd, b"".join(out))
    if pending and not is_noise(pending.decode("utf-8", "replace")):
        _write_all(write_fd, pending)


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]


_restore_at_exit = None  # set while this process's fd 2 goes through the filter for good


def _start_filter():
    """Points file descriptor 2 at a pipe read by the filter process; returns the function that
    points it back and waits for the filter to drain, or None when no filter could start."""
    sys.stderr.flush()
    # The filter imports this module from the same place as this process did.
    path = os.pathsep.join(p for p in (_package_root(), os.environ.get("PYTHONPATH")) if p)
    try:
        saved = os.dup(2)
    except OSError:  # no stderr to filter
        return None
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tf_fp16ops._platform.quiet"],
            stdin=subprocess.PIPE,
            stdout=saved,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": path},
        )
    except OSError:
        os.close(saved)
        return None
    os.dup2(proc.stdin.fileno(), 2)

    def restore() -> None:
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os.dup2(saved, 2)
        os.close(saved)
        proc.stdin.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()

    return restore


def quiet_stderr() -> None:
    """Routes this process's file descriptor 2 through the filter process for the rest of its
    life (idempotent; the filter drains at exit). Does nothing when the filter cannot start."""
    global _restore_at_exit
    if _restore_at_exit is None:
        _restore_at_exit = _start_filter()
        if _restore_at_exit is not None:
            atexit.register(_restore_at_exit)


def _package_root() -> str:
    # The folder holding tf_fp16ops/ (this module is tf_fp16ops/_platform/quiet.py).
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def import_tensorflow(keep_filtering: bool = True):
    """`import tensorflow` (and its first device query) with stderr filtered.

    keep_filtering: True (this package's tools) keeps fd 2 filtered for the rest of the process;
      False (the library's first op use in a user's process) filters the import only and then
      gives the user's stderr back untouched.
    Returns the tensorflow module; when it is already imported, returns it untouched (and leaves
    stderr as it is).
    Raises:
      ImportError: TensorFlow is not installed (its own message).
    """
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    restore = None
    if keep_filtering:
        quiet_stderr()
    else:
        restore = _start_filter()
    try:
        import tensorflow as tf

        tf.config.list_physical_devices("GPU")  # platform start-up writes its lines now
    finally:
        if restore is not None:
            restore()
    return tf


def _main() -> None:
    # The filter process: it outlives a crash of its writer, and Ctrl-C is for the writer.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    filter_stream(0, 1)


if __name__ == "__main__":
    _main()
