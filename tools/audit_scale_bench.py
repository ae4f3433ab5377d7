"""Scale benchmark of the graph audit (not a timed test).

Builds a synthetic GraphDef of >= 200k nodes with >= 20k convolutions spread over nested functions
(chains of PartitionedCall, `depth` functions deep), then measures, each in a fresh process:
  parse: `GraphDef.ParseFromString` of the serialized bytes alone;
  audit: tf_fp16ops.audit load (parse included) + graph build + all passes -> AuditReport.
Reports the audit/parse time ratio (median of --repeat runs) and the peak RSS growth of each
process above its baseline after importing the audit (no TensorFlow: the protos are TensorBoard's,
see tf_fp16ops/audit/protos.py).

Before timing, each child runs gc.collect(), so that a collection owed by the imports does not land
inside the first measurement that allocates enough objects (it mattered when the audit imported
TensorFlow: ~0.2 s over its ~340k tracked objects). Pass --no-collect to measure without it.

  python tools/audit_scale_bench.py [--functions 200] [--nodes-per-function 1001] \
      [--convs-per-function 100]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time


def make_graph(nfunc: int, per: int, convs: int, depth: int):
    from tf_fp16ops.audit import protos

    half = protos.DT_HALF
    g = protos.GraphDef()
    for fi in range(nfunc):
        f = g.library.function.add()
        f.signature.name = f"fn_{fi}"
        a = f.signature.input_arg.add()
        a.name, a.type = "x", half
        o = f.signature.output_arg.add()
        o.name, o.type = "y", half
        w = f.node_def.add()
        w.name, w.op = "w", "Const"
        w.attr["dtype"].type = half
        t = w.attr["value"].tensor
        t.dtype = half
        for d in (3, 3, 16, 16):
            t.tensor_shape.dim.add().size = d
        r = f.node_def.add()
        r.name, r.op = "w/read", "Identity"
        r.input.append("w:output:0")
        r.attr["T"].type = half
        prev, k = "x", 0
        every = (per - 2) // convs
        for i in range(per - 2):
            n = f.node_def.add()
            if i % every == 0 and k < convs:
                k += 1
                n.name, n.op = f"conv{i}", "Conv2D"
                n.input.extend([prev, "w/read:output:0"])
                n.attr["T"].type = half
                n.attr["strides"].list.i.extend([1, 1, 1, 1])
                n.attr["padding"].s = b"SAME"
                s = n.attr["_output_shapes"].list.shape.add()
                for d in (1, 32, 32, 16):
                    s.dim.add().size = d
                prev = f"conv{i}:output:0"
            elif fi % depth != depth - 1 and i == (per - 2) // 2 + 1:
                n.name, n.op = "call", "PartitionedCall"
                n.input.append(prev)
                n.attr["f"].func.name = f"fn_{fi + 1}"
                n.attr["Tin"].list.type.append(half)
                n.attr["Tout"].list.type.append(half)
                prev = "call:output:0"
            else:
                n.name, n.op = f"relu{i}", "Relu"
                n.input.append(prev)
                n.attr["T"].type = half
                prev = f"relu{i}:activations:0"
        f.ret["y"] = prev
    p = g.node.add()
    p.name, p.op = "x", "Placeholder"
    p.attr["dtype"].type = half
    for fi in range(0, nfunc, depth):
        n = g.node.add()
        n.name, n.op = f"root{fi}", "StatefulPartitionedCall"
        n.input.append("x")
        n.attr["f"].func.name = f"fn_{fi}"
    return g


def _child(mode: str, path: str, collect: bool) -> None:
    import gc

    from tf_fp16ops.audit import protos

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with open(path, "rb") as f:
        data = f.read()
    if mode == "audit":
        from tf_fp16ops.audit import RuntimeContext, audit
    if collect:
        gc.collect()
    if mode == "parse":
        t = time.perf_counter()
        protos.GraphDef().ParseFromString(data)
        dt = time.perf_counter() - t
        extra = {}
    else:
        del data
        t = time.perf_counter()
        report = audit(path, RuntimeContext(device="cpu"))
        dt = time.perf_counter() - t
        extra = {"call_sites": report.summary.call_sites, "conv_nodes": report.summary.conv_nodes}
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        json.dumps(
            {
                "seconds": dt,
                "peak_rss_growth_mb": (peak - base) / 1024,
                "peak_rss_mb": peak / 1024,
                **extra,
            }
        )
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--functions", type=int, default=200)
    p.add_argument("--nodes-per-function", type=int, default=1001)
    p.add_argument("--convs-per-function", type=int, default=100)
    p.add_argument("--depth", type=int, default=5, help="functions per nested call chain")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument(
        "--no-collect",
        action="store_true",
        help="do not run gc.collect() before timing (see the module doc)",
    )
    p.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        _child(*args.child, collect=not args.no_collect)
        return 0
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    g = make_graph(args.functions, args.nodes_per_function, args.convs_per_function, args.depth)
    nodes = len(g.node) + sum(len(f.node_def) for f in g.library.function)
    convs = sum(1 for f in g.library.function for n in f.node_def if n.op == "Conv2D")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "synthetic.pb")
        with open(path, "wb") as f:
            f.write(g.SerializeToString())
        size_mb = os.path.getsize(path) / 1e6
        del g
        results = {"parse": [], "audit": []}
        for _ in range(args.repeat):
            for mode in ("parse", "audit"):
                cmd = [sys.executable, __file__, "--child", mode, path] + (
                    ["--no-collect"] if args.no_collect else []
                )
                out = subprocess.run(
                    cmd, capture_output=True, text=True, check=True, env=dict(os.environ)
                )
                results[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
    tp = statistics.median(r["seconds"] for r in results["parse"])
    ta = statistics.median(r["seconds"] for r in results["audit"])
    mem_a = max(r["peak_rss_growth_mb"] for r in results["audit"])
    mem_p = max(r["peak_rss_growth_mb"] for r in results["parse"])
    abs_a = max(r["peak_rss_mb"] for r in results["audit"])
    abs_p = max(r["peak_rss_mb"] for r in results["parse"])
    a0 = results["audit"][0]
    print(
        f"graph: {nodes} nodes, {convs} Conv2D in {args.functions} functions "
        f"(call chains {args.depth} deep), "
        f"{size_mb:.1f} MB serialized"
    )
    print(f"audit found {a0['call_sites']} call sites / {a0['conv_nodes']} conv nodes")
    print(
        f"parse alone: {tp:.3f} s (median of {args.repeat}), peak RSS growth {mem_p:.0f} MB "
        f"(process peak {abs_p:.0f} MB)"
    )
    print(
        f"audit:       {ta:.3f} s (median of {args.repeat}), peak RSS growth {mem_a:.0f} MB "
        f"(process peak {abs_a:.0f} MB)"
    )
    print(
        f"ratio audit/parse time: {ta / tp:.2f}x   machine: {platform.machine()} "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"gc.collect() before timing: {'no' if args.no_collect else 'yes'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
