"""Start-up benchmark of `tf-fp16-audit` (not a timed test): wall time of whole CLI calls.

Peers, each a fresh process per call, run alternately in one session on the same inputs:
  new:           the `tf-fp16-audit` console script (static audit: TensorFlow is not imported);
  tf-imported:   the same CLI after `import tensorflow` in that process (what every call paid
                 while the audit read TensorFlow's protos and tf.config: the old code path);
  old-tree:      with --old-tree DIR, `python -m tf_fp16ops.audit` of another checkout (e.g.
                 `git worktree add /tmp/old <commit>` with its op library copied in).
Inputs: the bundled example SavedModel (5 convolutions; written once by TensorFlow in a
subprocess, not timed) and a synthetic SavedModel with --sites call sites (protos only).
Reports the median of --repeat calls per peer and input, and the ratios to "new".

  python tools/audit_startup_bench.py [--repeat 5] [--sites 5000] [--old-tree /tmp/old]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cpu_model() -> str:
    sys.path.insert(0, str(ROOT))
    from tf_fp16ops.audit.context import read_cpu_model

    return read_cpu_model()


def synthetic_saved_model(path: Path, sites: int) -> None:
    """A SavedModel whose one MetaGraph holds the scale bench's graph with `sites` Conv2D call sites
    (100 per function, call chains 5 deep)."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "tools"))
    from audit_scale_bench import make_graph

    from tf_fp16ops.audit import protos

    functions = max(1, sites // 100)
    sm = protos.SavedModel(saved_model_schema_version=1)
    mg = sm.meta_graphs.add()
    mg.meta_info_def.tags.append("serve")
    mg.graph_def.CopyFrom(make_graph(functions, 1001, 100, 5))
    path.mkdir(parents=True, exist_ok=True)
    (path / "saved_model.pb").write_bytes(sm.SerializeToString())


def example_saved_model(path: Path) -> None:
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r}); "
        "from tf_fp16ops.audit import demo_example; "
        f"demo_example({str(path)!r})"
    )
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, env=env, timeout=900
    )


def peers(old_tree: Path | None) -> dict[str, list[str]]:
    script = Path(sys.executable).with_name("tf-fp16-audit")
    new = [str(script)] if script.exists() else [sys.executable, "-m", "tf_fp16ops.audit"]
    out = {
        "new": new,
        "tf-imported": [
            sys.executable,
            "-c",
            "import sys, tensorflow; from tf_fp16ops.audit.cli import main; "
            "sys.exit(main(sys.argv[1:]))",
        ],
    }
    if old_tree is not None:
        out["old-tree"] = [sys.executable, "-m", "tf_fp16ops.audit"]
    return out


def time_call(cmd: list[str], model: Path, env: dict) -> tuple[float, float]:
    """(wall seconds, CPU seconds user + system) of one call."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(
        cmd + [str(model), "--output", os.devnull],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd="/",
    )
    dt = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} {model}: exit status {r.returncode}\n{r.stderr[-2000:]}")
    return dt, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--sites", type=int, default=5000)
    p.add_argument(
        "--old-tree", type=Path, help="another checkout whose CLI to time as peer 'old-tree'"
    )
    args = p.parse_args(argv)
    if args.repeat < 1 or args.sites < 100:
        p.error("--repeat must be >= 1 and --sites >= 100")
    base_env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))
    envs = {
        "new": dict(base_env, PYTHONPATH=str(ROOT)),
        "tf-imported": dict(base_env, PYTHONPATH=str(ROOT)),
    }
    if args.old_tree is not None:
        envs["old-tree"] = dict(base_env, PYTHONPATH=str(args.old_tree.resolve()))
    cmds = peers(args.old_tree)
    with tempfile.TemporaryDirectory() as d:
        models = {
            "bundled example (5 convs)": Path(d) / "example",
            f"synthetic ({args.sites} call sites)": Path(d) / "synthetic",
        }
        example_saved_model(models["bundled example (5 convs)"])
        synthetic_saved_model(models[f"synthetic ({args.sites} call sites)"], args.sites)
        times = {(m, peer): [] for m in models for peer in cmds}
        for name, peer in times:  # one warm-up call per peer and input (page cache), not counted
            time_call(cmds[peer], models[name], envs[peer])
        for _ in range(args.repeat):
            for name, model in models.items():
                for peer, cmd in cmds.items():
                    times[(name, peer)].append(time_call(cmd, model, envs[peer]))
    print(
        f"tf-fp16-audit per call, median of {args.repeat} (fresh process each; peers alternate): "
        f"wall seconds (CPU seconds user+system)"
    )
    print(f"machine: {cpu_model()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    header = (
        f"{'input':<30}"
        + "".join(f"{peer:>20}" for peer in cmds)
        + "".join(f"{peer + '/new wall':>22}" for peer in cmds if peer != "new")
    )
    print(header)
    for name in models:
        wall = {peer: statistics.median(w for w, _ in times[(name, peer)]) for peer in cmds}
        cpu = {peer: statistics.median(c for _, c in times[(name, peer)]) for peer in cmds}
        print(
            f"{name:<30}"
            + "".join(f"{f'{wall[p]:.2f} s ({cpu[p]:.2f})':>20}" for p in cmds)
            + "".join(f"{wall[p] / wall['new']:>21.1f}x" for p in cmds if p != "new")
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
