"""Imports TensorFlow without its start-up lines on stderr; real warnings and errors still show.

TensorFlow's C++ runtime writes, while it is imported and when it first looks for devices, lines
that `TF_CPP_MIN_LOG_LEVEL` does not stop (they are written before absl logging is initialised):
"All log messages before absl::InitializeLog() ...", oneDNN's "custom operations are on",
the CUDA stub's "Could not find cuda drivers", "failed call to cuInit" on machines without a GPU
driver, the CPU feature guard's "rebuild TensorFlow with the appropriate compiler flags", and the
duplicate-registration lines of the cuDNN/cuFFT/cuBLAS plugins. `import_tensorflow()` sets
TF_CPP_MIN_LOG_LEVEL=2 unless it is set, points file descriptor 2 at a temporary file around the
import and the first device query, and writes back every captured line that is not one of those
start-up lines (`is_startup_noise`). Used by the CLI's `--run` / `--build-keras` and `make demo`.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile

# (C++ source file, text in its message) of the start-up lines dropped; anything else is replayed.
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
_ABSL_PREINIT = (
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
)
# absl's prefix: severity letter, MMDD, time, thread id, file:line]
_LOG_LINE = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ ([\w.]+):\d+\] (.*)$")
# Second line of the CPU feature guard's message.
_CONTINUATION = re.compile(
    r"^To enable the following instructions: .*, in other operations, rebuild TensorFlow"
)


def is_startup_noise(line: str) -> bool:
    """Whether `line` (without its newline) is one of TensorFlow's start-up lines listed above."""
    if line.strip() == _ABSL_PREINIT or _CONTINUATION.match(line):
        return True
    m = _LOG_LINE.match(line)
    return bool(m) and any(m.group(1) == f and text in m.group(2) for f, text in STARTUP_LINES)


def import_tensorflow():
    """`import tensorflow` (and its first device query) with the start-up lines dropped.

    Returns the tensorflow module; when it is already imported, returns it untouched.
    Raises:
      ImportError: TensorFlow is not installed (its own message; captured lines are replayed first).
    """
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            import tensorflow as tf

            tf.config.list_physical_devices("GPU")  # platform start-up writes its lines now
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            captured = tmp.read().decode("utf-8", "replace")
            kept = [
                line
                for line in captured.splitlines()
                if line.strip() and not is_startup_noise(line)
            ]
            if kept:
                sys.stderr.write("\n".join(kept) + "\n")
                sys.stderr.flush()
    return tf
