"""Runs convolution cases in worker processes (tests/support/fuzz_worker.py) and the seeded case
generator of the fuzz tests.

run_cases() spreads the cases over a few worker processes; a worker that dies (signal, abort,
exit) is reported as a "crash" result for the case it was running, with the signal and the tail
of its stderr, and a new worker continues with the cases after it. So one TensorFlow start-up
serves many cases while every case still gets its own verdict.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np

WORKER = Path(__file__).resolve().parent / "fuzz_worker.py"


def _run_chunk(cases, results, timeout):
    pending = list(cases)
    while pending:
        with tempfile.TemporaryFile("w+") as err:
            proc = subprocess.Popen(
                [sys.executable, str(WORKER)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
            )
            feeder = threading.Thread(target=_feed, args=(proc, pending), daemon=True)
            feeder.start()
            timer = threading.Timer(timeout, proc.kill)
            timer.start()
            running = None
            done = set()
            for line in proc.stdout:
                msg = json.loads(line)
                if "start" in msg:
                    running = msg["start"]
                else:
                    results[msg["id"]] = msg
                    done.add(msg["id"])
                    running = None
            rc = proc.wait()
            timer.cancel()
            err.seek(0)
            tail = err.read()[-1500:]
        remaining = [c for c in pending if c["id"] not in done]
        if running is None and not remaining:
            return
        if running is None:  # died between cases (should not happen): report the next one
            running = remaining[0]["id"]
        why = f"killed by signal {signal.Signals(-rc).name}" if rc < 0 else f"exit status {rc}"
        results[running] = {"id": running, "status": "crash", "message": why, "stderr": tail}
        pending = [c for c in remaining if c["id"] != running]


def _feed(proc, cases):
    try:
        for c in cases:
            proc.stdin.write(json.dumps(c) + "\n")
        proc.stdin.close()
    except (BrokenPipeError, OSError):
        pass


def run_cases(cases, workers=2, timeout=900):
    """Returns {case id: result} for every case (tests/support/fuzz_worker.py gives the format)."""
    results = {}
    chunks = [cases[i::workers] for i in range(workers)]
    threads = [threading.Thread(target=_run_chunk, args=(ch, results, timeout)) for ch in chunks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def reproducer(case) -> str:
    """A command that runs one case on its own."""
    return f"echo '{json.dumps(case)}' | python {WORKER.relative_to(WORKER.parents[2])}"


# ------------------------------------------------------------------------- seeded generator
DTYPES = ("float16", "float32")
KINDS = ("random", "ints", "binades", "special")


def _window(rng, nchw, ndim_hw):
    """strides/dilations attr in data_format order; ndim_hw = (h, w) values."""
    h, w = ndim_hw
    return [1, 1, h, w] if nchw else [1, h, w, 1]


def _fprop_out(H, W, KH, KW, sh, sw, dh, dw, padding, pads):
    def one(n, k, s, d, before, after):
        e = (k - 1) * d + 1
        if padding == "SAME":
            return -(-n // s)
        padded = n + before + after if padding == "EXPLICIT" else n
        return (padded - e) // s + 1 if padded >= e else None

    return (one(H, KH, sh, dh, pads[0], pads[1]), one(W, KW, sw, dw, pads[2], pads[3]))


def random_case(rng, index, graph_share=0.1, invalid_share=0.1):
    """One random case: geometry, layout, groups, dtypes, padding, values, eager or graph mode,
    sometimes made invalid on purpose (the op must then raise, never crash)."""
    op = ("fprop", "dgrad", "wgrad")[int(rng.integers(3))]
    nchw = bool(rng.random() < 0.3)
    groups = int(rng.choice([1, 1, 1, 2, 3]))
    Cg, Kg = int(rng.integers(1, 6)), int(rng.integers(1, 5))
    C, K = Cg * groups, Kg * groups
    N = int(rng.choice([0, 1, 1, 2, 2, 3]))
    H, W = (int(v) for v in rng.integers(0, 9, 2))
    KH, KW = (int(v) for v in rng.integers(1, 4, 2))
    sh, sw = (int(v) for v in rng.choice([1, 1, 2, 3], 2))
    dh, dw = (int(v) for v in rng.choice([1, 1, 2], 2))
    padding = str(rng.choice(["SAME", "VALID", "EXPLICIT"]))
    pads = [int(v) for v in rng.integers(0, 3, 4)] if padding == "EXPLICIT" else [0, 0, 0, 0]
    dtype = str(rng.choice(DTYPES))
    tacc = "float16" if dtype == "float16" and rng.random() < 0.6 else "float32"
    attrs = {
        "Tacc": tacc,
        "strides": _window(rng, nchw, (sh, sw)),
        "padding": padding,
        "explicit_paddings": [],
        "data_format": "NCHW" if nchw else "NHWC",
        "dilations": _window(rng, nchw, (dh, dw)),
    }
    if padding == "EXPLICIT":
        attrs["explicit_paddings"] = ([0, 0, 0, 0] + pads) if nchw else ([0, 0] + pads + [0, 0])
    P, Q = _fprop_out(H, W, KH, KW, sh, sw, dh, dw, padding, pads)
    P, Q = P if P is not None else 1, Q if Q is not None else 1  # invalid: any dy shape
    act = lambda n, h, w, c: [n, c, h, w] if nchw else [n, h, w, c]  # noqa: E731
    kind = str(rng.choice(KINDS))
    spec = lambda shape, s: {"shape": shape, "dtype": dtype, "kind": kind, "seed": s}  # noqa: E731
    xs, ws, ys = act(N, H, W, C), [KH, KW, Cg, K], act(N, P, Q, K)
    seed = int(rng.integers(1 << 30))
    invalid = None
    if rng.random() < invalid_share:
        choices = ["channels", "stride0", "dtype_mix", "rank"]
        choices += [] if op == "fprop" else ["dy_shape"]
        invalid = str(rng.choice(choices))
        if invalid == "dy_shape":
            ys = list(ys)
            ys[int(rng.integers(4))] += 1
        elif invalid == "channels":
            ws = [KH, KW, C + 1, K]
        elif invalid == "stride0":
            attrs["strides"] = _window(rng, nchw, (0, sw))
        elif invalid == "dtype_mix":
            attrs["Tacc"] = "float16"
            dtype = "float32"
        elif invalid == "rank":
            xs = xs[:3]
    if op == "fprop":
        args = [spec(xs, seed), spec(ws, seed + 1)]
    elif op == "dgrad":
        args = [{"value": xs, "dtype": "int32"}, spec(ws, seed + 1), spec(ys, seed + 2)]
    else:
        args = [spec(xs, seed), {"value": ws, "dtype": "int32"}, spec(ys, seed + 2)]
    case = {
        "id": f"{index}",
        "op": op,
        "mode": "eager",
        "args": args,
        "attrs": attrs,
        "check": True,
        "invalid": invalid,
    }
    if rng.random() < graph_share:
        case["mode"] = "graph"
        unknown = lambda shape: [None if rng.random() < 0.5 else d for d in shape]  # noqa: E731
        case["signature"] = [
            None if "value" in a else (None if rng.random() < 0.1 else unknown(a["shape"]))
            for a in args
        ]
    return case


def random_matmul_case(rng, index, graph_share=0.15, invalid_share=0.1):
    """One random Fp16MatMul case: ranks 2-4, broadcast batch dimensions (size 1 or missing),
    adj_x/adj_y, zero sizes, dtypes and Tacc, eager or graph mode with unknown sizes, sometimes
    made invalid on purpose (inner mismatch, batch mismatch, rank 1, Tacc=half with float)."""
    M, N, K = (int(v) for v in rng.choice([0, 1, 2, 3, 5, 8, 17, 33], 3))
    nb = int(rng.integers(0, 3))
    batch = [int(v) for v in rng.choice([0, 1, 2, 3], nb)] if nb else []
    xb = [d if rng.random() < 0.7 else 1 for d in batch][int(rng.integers(0, nb + 1)) :]
    yb = [d if rng.random() < 0.7 else 1 for d in batch][int(rng.integers(0, nb + 1)) :]
    adj_x, adj_y = bool(rng.random() < 0.3), bool(rng.random() < 0.3)
    xs = xb + ([K, M] if adj_x else [M, K])
    ys = yb + ([N, K] if adj_y else [K, N])
    dtype = str(rng.choice(DTYPES))
    tacc = "float16" if dtype == "float16" and rng.random() < 0.6 else "float32"
    invalid = None
    if rng.random() < invalid_share:
        invalid = str(rng.choice(["inner", "batch", "rank", "dtype_mix"]))
        if invalid == "inner":
            ys[-1 if adj_y else -2] += 1
        elif invalid == "batch":
            xs, ys = [2] + xs[-2:], [3] + ys[-2:]
        elif invalid == "rank":
            xs = xs[-1:]
        else:
            tacc, dtype = "float16", "float32"
    kind = str(rng.choice(KINDS))
    seed = int(rng.integers(1 << 30))
    args = [
        {"shape": xs, "dtype": dtype, "kind": kind, "seed": seed},
        {"shape": ys, "dtype": dtype, "kind": kind, "seed": seed + 1},
    ]
    case = {
        "id": f"mm{index}",
        "op": "matmul",
        "mode": "eager",
        "args": args,
        "attrs": {"Tacc": tacc, "adj_x": adj_x, "adj_y": adj_y},
        "check": True,
        "invalid": invalid,
    }
    if rng.random() < graph_share:
        case["mode"] = "graph"
        case["signature"] = [
            None if rng.random() < 0.1 else [None if rng.random() < 0.5 else d for d in a["shape"]]
            for a in args
        ]
    return case


def random_matmul_cases(seed, count, **kw):
    rng = np.random.default_rng(seed)
    return [random_matmul_case(rng, i, **kw) for i in range(count)]


def random_cases(seed, count, **kw):
    rng = np.random.default_rng(seed)
    return [random_case(rng, i, **kw) for i in range(count)]


def verdict(case, result):
    """'' when the result is acceptable, else why not."""
    st = result.get("status")
    if st == "crash":
        return f"process died ({result['message']}): {result.get('stderr', '')[-600:]}"
    if st == "error":
        if result["type"] not in ("InvalidArgumentError", "ValueError", "TypeError"):
            return f"unexpected error type {result['type']}: {result['message']}"
        return "; ".join(result.get("problems", []))
    if case.get("invalid") in (
        "dy_shape",
        "channels",
        "stride0",
        "dtype_mix",
        "rank",
        "inner",
        "batch",
    ):
        return f"invalid case ({case['invalid']}) returned a result of shape {result['shape']}"
    if result.get("problems"):
        return "; ".join(result["problems"])
    return ""
