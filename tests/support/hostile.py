"""Runs `tf-fp16-audit` on hostile input in a subprocess bounded in time and memory."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

CPU_SECONDS = 10  # RLIMIT_CPU: the run is killed (SIGXCPU) past 10 s of CPU time
# Wall-clock limit: catches a hang that uses no CPU (a blocking open of a FIFO). Larger than
# CPU_SECONDS because the machines running the tests are shared (wall time there runs 2-6x the
# CPU time of a run).
WALL_SECONDS = 60
ADDRESS_SPACE = 2**30  # 1 GiB of virtual memory (RLIMIT_AS): a blow-up fails instead of swapping

_MAIN = "import sys; from tf_fp16ops.audit.cli import main; sys.exit(main())"


def _limit():
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))


def run_bounded(args, cwd=None) -> subprocess.CompletedProcess:
    """`tf-fp16-audit ARGS` in a subprocess limited to 1 GiB of address space and 10 s of CPU
    time (killed past either: a MemoryError or a signal, which the tests' checks of the exit
    status and output then report), and to WALL_SECONDS of wall time (TimeoutExpired).
    Output is bytes-safe text (surrogateescape)."""
    env = dict(
        os.environ,
        PYTHONPATH=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    )
    return subprocess.run(
        [sys.executable, "-c", _MAIN, *args],
        capture_output=True,
        text=True,
        errors="surrogateescape",
        timeout=WALL_SECONDS,
        preexec_fn=_limit,
        env=env,
        cwd=cwd,
    )
