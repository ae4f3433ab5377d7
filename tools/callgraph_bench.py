"""Call-graph benchmark of the static audit (not a timed test): chains and diamonds.

Each case is a GraphDef built by tests/support/callgraph_models.py: a PartitionedCall chain of N
functions (each passing its two arguments on, one conv at the bottom) or a diamond of depth D (each
level calls the next twice: 2**(D-1) call paths to the conv). Each (tree, case) runs
`tf-fp16-audit --format json` in a fresh process (PYTHONPATH = that source tree), so trees can be
compared side by side in one run: CPU time (user + sys) and wall time of the child, its peak RSS
(ru_maxrss), the call sites it reported and its exit status. A run past --timeout seconds or its
address-space limit (--max-gib) is reported as such.

  python tools/callgraph_bench.py --tree after=. [--tree before=/path/to/old/tree] \
      [--chains 10000,20000,50000] [--diamonds 20,40] [--timeout 120] [--max-gib 8]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# The child reports its own peak RSS and CPU time (getrusage(RUSAGE_SELF)) on its last stderr line.
_MAIN = (
    "import resource, sys\n"
    "from tf_fp16ops.audit.cli import main\n"
    "try:\n"
    "    rc = main()\n"
    "finally:\n"
    "    u = resource.getrusage(resource.RUSAGE_SELF)\n"
    "    sys.stderr.write(f'\\nRUSAGE {u.ru_maxrss} {u.ru_utime + u.ru_stime}\\n')\n"
    "sys.exit(rc)\n"
)


def _cpu_name() -> str:
    sys.path.insert(0, os.path.join(HERE, ".."))
    from tf_fp16ops.audit.context import read_cpu_model

    return read_cpu_model()


def _write_cases(d: str, chains, diamonds) -> list[tuple[str, str]]:
    sys.path.insert(0, os.path.join(HERE, "..", "tests"))
    sys.path.insert(0, os.path.join(HERE, ".."))
    from support.callgraph_models import chain, diamond

    out = []
    for n in chains:
        p = os.path.join(d, f"chain_{n}.pb")
        with open(p, "wb") as f:
            f.write(chain(n).SerializeToString())
        out.append((f"chain {n}", p))
    for depth in diamonds:
        p = os.path.join(d, f"diamond_{depth}.pb")
        with open(p, "wb") as f:
            f.write(diamond(depth).SerializeToString())
        out.append((f"diamond depth {depth}", p))
    return out


def _run(tree: str, path: str, timeout: float, max_bytes: int) -> dict:
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (max_bytes, max_bytes))

    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", _MAIN, "--format", "json", path],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=os.path.abspath(tree),  # python -c puts the working directory first on sys.path
        preexec_fn=limit,
    )
    killed_usage = None
    try:
        out, err = proc.communicate(timeout=timeout)
        status = proc.returncode
    except subprocess.TimeoutExpired:
        proc.kill()
        # Reap it here to get its resource usage (CPU time and peak RSS until the kill).
        _, _, killed_usage = os.wait4(proc.pid, 0)
        proc.returncode = -9
        out, err = proc.stdout.read(), proc.stderr.read()
        status = "timeout"
    wall = time.perf_counter() - t0
    lines = err.decode(errors="replace").strip().splitlines()
    rss_kb = cpu = None
    if killed_usage is not None:
        rss_kb = killed_usage.ru_maxrss
        cpu = killed_usage.ru_utime + killed_usage.ru_stime
    if lines and lines[-1].startswith("RUSAGE "):
        _, rss, cpu_s = lines.pop().split()
        rss_kb, cpu = int(rss), float(cpu_s)
    sites = None
    if status == 0:
        sites = len(json.loads(out)["findings"])
    return {
        "status": status,
        "cpu_s": None if cpu is None else round(cpu, 2),
        "wall_s": round(wall, 2),
        "peak_rss_mb": None if rss_kb is None else round(rss_kb / 1024),
        "sites": sites,
        "stderr": [ln for ln in lines if ln.strip()][-1:],
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", required=True, metavar="LABEL=DIR")
    ap.add_argument("--chains", default="10000,20000,50000")
    ap.add_argument("--diamonds", default="20,40")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--max-gib", type=float, default=8.0)
    args = ap.parse_args(argv)
    trees = [t.split("=", 1) for t in args.tree]
    chains = [int(x) for x in args.chains.split(",") if x]
    diamonds = [int(x) for x in args.diamonds.split(",") if x]
    print(
        f"# machine: {platform.machine()} {os.cpu_count()} CPUs, {_cpu_name()}; "
        f"Python {platform.python_version()}; timeout {args.timeout:g} s, "
        f"address space {args.max_gib:g} GiB per run"
    )
    print(
        "| case | "
        + " | ".join(f"{label}: CPU s / wall s / peak RSS MB / sites" for label, _ in trees)
        + " |"
    )
    print("|---|" + "---|" * len(trees))
    with tempfile.TemporaryDirectory() as d:
        for name, path in _write_cases(d, chains, diamonds):
            cells = []
            for _, tree in trees:
                r = _run(tree, path, args.timeout, int(args.max_gib * 2**30))
                if r["status"] == "timeout":
                    cells.append(
                        f"killed at {args.timeout:g} s wall, after {r['cpu_s']} s CPU / "
                        f"{r['peak_rss_mb']} MB / -"
                    )
                elif r["status"] != 0:
                    cells.append(
                        f"exit {r['status']} after {r['cpu_s']} / {r['wall_s']} / "
                        f"{r['peak_rss_mb']}: {' '.join(r['stderr'])[:80]}"
                    )
                else:
                    cells.append(
                        f"{r['cpu_s']} / {r['wall_s']} / {r['peak_rss_mb']} / {r['sites']}"
                    )
                print(f"<!-- {name} {tree}: {json.dumps(r)} -->", file=sys.stderr)
            print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
