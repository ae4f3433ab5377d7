"""GPU check of libtf_fp16ops_gpu.so (the GPU conv kernels of tf_fp16ops) on a machine with
PyTorch + cuDNN and no TensorFlow. Runs from the folder `make gpu-bundle` writes:

    python3 check.py --out OUT_DIR        (or ./run.sh OUT_DIR; at most 6.5 minutes)

The parent process needs only the standard library: it prints the device facts first (the
library's view: driver and runtime versions, compute capability, sm_90a code; then PyTorch's),
stops with a clear message when the driver is older than the CUDA runtime the library was built
with, and runs each section in its own subprocess with its own timeout, all within a total
budget (BUDGET_S, 405 s: a section gets at most what is left of it, so that the summary is
written inside `timeout 420`). Sections append JSON
lines to OUT_DIR/results.jsonl as results come ("start" before every kernel launch, then its
result), so a CUDA fault or a hang names the kernel that was running; OUT_DIR/summary.json and
summary.md are written even when a section dies. Exit status 0 only if every section passed.

Sections (checks that can fail, with their rules):
  exactness  integer data whose partial sums stay within +-2048, so every accumulator gives the
             exact sum: bit-exact against float64 for fprop, dgrad, wgrad on odd shapes,
             strides, dilations, explicit/asymmetric padding, NCHW, groups, depthwise; every
             (T, Tacc) pair; every implementation forced in turn. tools/gpu_check/problems.py
             says which implementations must run each problem on an H200: a forced run must
             report that implementation ran, and the others must be refused.
  random     uniform data against float64. Tacc=float: max err / (gamma_K(2^-24) sum|x*w|
             (1 + u_T) + u_T |exact|) <= 1 (Higham, Accuracy and Stability of Numerical
             Algorithms, 2nd ed., sec. 3.1). Tacc=half: against the CPU-order sequential fp16 sum
             of the same data (refs.seq_half): bit-exact on the direct kernel; on tensor cores
             max and mean error within refs.HALF_MAX_FACTOR / HALF_MEAN_FACTOR of the
             sequential sum's.
  cases      the seed overflow probe and the numerics cases (taps49, tie, overflow, inf-nan):
             the direct kernel must give
             the CPU contract's values; tensor cores with Tacc=float are asserted only where
             every partial sum is exact in binary32 (tie is recorded: Fasi, Higham, Mikaitis,
             Pranesh, "Numerical behavior of NVIDIA tensor cores", PeerJ CS 2021, measured
             non-IEEE alignment/truncation inside the MMA).
  bench      ours (fprop, dgrad, wgrad; Tacc half and float) against cuDNN through PyTorch
             (fp16 storage, fp32 accumulation) and cuDNN's legacy API with a half compute type
             and tensor-op math (true fp16 accumulation), side by side in one process, on the
             seed shape and ResNet-50 layers at N=128. Correctness on sampled outputs against
             float64 (refs.sampled). FAIL unless Tacc=half >= 1.5x cuDNN true-half on every
             ResNet-50 3x3 layer and Tacc=float >= 0.9x cuDNN through PyTorch on every ResNet-50
             layer.
  matmul     Fp16MatMul (one 1x1 fprop of the table per product; problems.MATMUL_*): odd sizes,
             adj_x, adj_y, broadcast batches (x batched with y shared, y batched, both), K = 0
             (+0 outputs), M = 0, T=float. Integer data with sum|x*y| <= 2048: every (T, Tacc)
             pair with every implementation forced in turn gives the float64 product (which the
             sequential fp16 sum of the data equals, checked) bit for bit; implementations as
             problems.h200_matmul_paths says on an H200, and the one that ran is the one
             tfo_matmul_select plans on this device. Random data against float64
             (refs.matmul_verdict): Tacc=half |err| <= gamma_K(2^-11) sum|x*y| + K 2^-25 and
             against the sequential fp16 sum (bit-exact on the direct kernel, refs.half_error_ok
             on tensor cores); Tacc=float (T=float on full-precision binary32 data, so TF32 would
             show) within gamma_K(2^-24); typical errors recorded.
  matmul_bench  BERT-base products (problems.MATMUL_BENCH) against torch.matmul in fp16
             (cuBLAS, fp32 accumulation, reduced-precision split-K reductions off) and, where the
             installed PyTorch has torch.backends.cuda.matmul.allow_fp16_accumulation, cuBLAS
             with fp16 accumulation, side by side in one process: TFLOP/s and ratios; sampled
             outputs against float64. FAIL unless Tacc=float >= 0.9x cuBLAS (fp32 accumulation)
             and Tacc=half >= 0.9x cuBLAS fp16 accumulation (fp32 where absent) on every BERT
             shape, the conv benchmark's Tacc=float bar.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import functools
import glob
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import problems  # noqa: E402
import refs  # noqa: E402
from abi import OPS, AbiError, Library, MatMul, Problem  # noqa: E402

PAIRS = (("half", "half"), ("half", "float"), ("float", "float"))
# Per-section timeouts (seconds), 390 in all, in the order run; BUDGET_S bounds the whole run
# (both scaled by --timeout-scale), so `timeout 420 run.sh` leaves time for the summary.
SECTIONS = {
    "facts": 30,
    "exactness": 70,
    "random": 70,
    "cases": 30,
    "matmul": 40,
    "bench": 110,
    "matmul_bench": 40,
}
BUDGET_S = 405
FORCEABLE = ("sm90", "sm80", "simt", "fallback")
# "cuda" for the GPU check; "cpu" for --cpu-dry-run: the host library (libtf_fp16ops_gpu_host.so,
# `make gpu-host-lib`) on CPU tensors, small problems only, to test this script's own code
# without a GPU (nothing it reports is a GPU result).
DEVICE = "cuda"
DRY_RUN = False


def sync() -> None:
    if DEVICE == "cuda":
        import torch

        torch.cuda.synchronize()


TARGET_HALF_VS_CUDNN_HALF = 1.5
TARGET_FLOAT_VS_TORCH = 0.9
# Fp16MatMul against cuBLAS (torch.matmul): the conv benchmark's Tacc=float bar, for both Tacc.
TARGET_MATMUL_VS_CUBLAS = 0.9


# --------------------------------------------------------------------------------------------
# Results: JSON lines, written as they come.


class Recorder:
    def __init__(self, path: str, section: str):
        self.path, self.section = path, section

    def _write(self, obj: dict) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(obj, default=str) + "\n")
            f.flush()

    def start(self, kernel: str) -> None:
        self._write({"section": self.section, "event": "start", "kernel": kernel})

    def result(self, kernel: str, ok: bool | None, **fields) -> None:
        """ok: True/False for an asserted check, None for a recorded-only value."""
        row = {"section": self.section, "event": "result", "kernel": kernel, "ok": ok, **fields}
        self._write(row)
        if ok is False:
            print(f"  FAIL {kernel}: {json.dumps(fields, default=str)[:400]}", flush=True)


def read_rows(path: str) -> list:
    rows = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError:
                        rows.append({"event": "garbled", "line": line[:200]})
    return rows


def unfinished_kernel(rows: list, section: str) -> str | None:
    """The kernel a section started and never reported (the one running when it died)."""
    pending = None
    for r in rows:
        if r.get("section") != section:
            continue
        if r.get("event") == "start":
            pending = r.get("kernel")
        elif r.get("event") == "result" and r.get("kernel") == pending:
            pending = None
    return pending


# --------------------------------------------------------------------------------------------
# Parent: device facts, preflight, one subprocess per section, summary.


def library_facts(lib: Library) -> dict:
    facts = {"lib": lib.path, "lib_bytes": os.path.getsize(lib.path), **lib.build_info()}
    try:
        driver, cc, sm90a = lib.query_device()
        facts.update(driver_version=driver, compute_capability=cc, sm90a_code=bool(sm90a))
    except AbiError as e:
        facts["query_error"] = str(e)
    return facts


def preflight(facts: dict) -> str | None:
    """A message when the check cannot run on this machine, else None. The rule of CheckDevice
    (conv2d_gpu.cu.cc), CUDA's minor version compatibility: a CUDA X.y runtime runs on a driver
    of CUDA X.0 or newer given SASS for the GPU; PTX JIT needs a driver of CUDA X.y or newer."""
    if "query_error" in facts:
        return f"cannot query the CUDA device: {facts['query_error']}"
    rt, drv = facts["runtime_version"], facts["driver_version"]
    ver = lambda v: f"CUDA {v // 1000}.{v % 1000 // 10}"  # noqa: E731
    if drv <= 0:
        return (
            f"no CUDA driver found (cudaDriverGetVersion() = {drv}); the library needs one "
            f"for CUDA {rt // 1000}.0 or newer. Nothing was run."
        )
    if drv < rt // 1000 * 1000:
        return (
            f"the GPU driver supports {ver(drv)} (cudaDriverGetVersion() = {drv}); the library "
            f"is built with the {ver(rt)} runtime and needs a driver for CUDA {rt // 1000}.0 or "
            f"newer. Nothing was run."
        )
    cc = facts["compute_capability"]
    sass = any(a // 10 == cc // 10 and a <= cc for a in facts.get("sass_archs", []))
    ptx = 0 < facts.get("ptx_arch", 0) <= cc
    if not sass and not ptx:
        return f"compute capability {cc / 10:.1f}: no SASS or PTX of the library runs on it"
    if not sass and drv < rt:
        return (
            f"compute capability {cc / 10:.1f} runs only the compute_{facts['ptx_arch']} PTX, "
            f"whose JIT needs a driver for {ver(rt)} or newer; the driver supports {ver(drv)}. "
            f"Nothing was run."
        )
    return None


def run_section(name: str, cmd: list, timeout: float, jsonl: str) -> dict:
    """Runs one section's subprocess; its stdout/stderr pass through."""
    t0 = time.time()
    try:
        rc = subprocess.run(cmd, timeout=timeout).returncode
        status = "ran" if rc == 0 else f"died (exit status {rc})"
    except subprocess.TimeoutExpired:
        rc, status = None, f"timed out after {timeout:.0f} s"
    rows = [r for r in read_rows(jsonl) if r.get("section") == name]
    results = [r for r in rows if r.get("event") == "result"]
    failed = [r["kernel"] for r in results if r.get("ok") is False]
    info = {
        "section": name,
        "status": status,
        "seconds": round(time.time() - t0, 1),
        "results": len(results),
        "failed": failed,
        "asserted_ok": sum(1 for r in results if r.get("ok") is True),
        "recorded_only": sum(1 for r in results if r.get("ok") is None),
    }
    if status != "ran":
        info["verdict"] = "ERROR"
        info["running_kernel"] = unfinished_kernel(rows, name)
    else:
        info["verdict"] = "FAIL" if failed else ("PASS" if results else "ERROR")
    return info


def not_run(name: str, why: str) -> dict:
    """The summary entry of a section that was not started."""
    return {
        "section": name,
        "status": why,
        "seconds": 0.0,
        "results": 0,
        "failed": [],
        "asserted_ok": 0,
        "recorded_only": 0,
        "verdict": "ERROR",
        "running_kernel": None,
    }


def write_summary(out: str, facts: dict, sections: list, stopped: str | None) -> dict:
    verdicts = [s["verdict"] for s in sections]
    summary = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "facts": facts,
        "stopped": stopped,
        "sections": sections,
        "verdict": "STOPPED"
        if stopped
        else ("PASS" if verdicts and all(v == "PASS" for v in verdicts) else "FAIL"),
    }
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1, default=str)
    lines = [
        f"# GPU check of {os.path.basename(facts.get('lib', '?'))} - {summary['date']}",
        "",
        f"- Facts: {json.dumps(facts, default=str)}",
        f"- Verdict: **{summary['verdict']}**",
    ]
    if stopped:
        lines.append(f"- Stopped: {stopped}")
    lines += [
        "",
        "| section | verdict | status | s | asserted ok | failed | recorded only |"
        " running kernel |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in sections:
        lines.append(
            f"| {s['section']} | {s['verdict']} | {s['status']} | {s['seconds']} | "
            f"{s['asserted_ok']} | {len(s['failed'])} | {s['recorded_only']} | "
            f"{s.get('running_kernel') or ''} |"
        )
    for s in sections:
        for k in s["failed"][:50]:
            lines.append(f"- FAIL {s['section']}: {k}")
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return summary


def parent(args) -> int:
    os.makedirs(args.out, exist_ok=True)
    jsonl = os.path.join(args.out, "results.jsonl")
    if os.path.exists(jsonl):
        os.remove(jsonl)
    lib = Library(args.lib)
    facts = library_facts(lib)
    print("device facts (library):", json.dumps(facts), flush=True)
    stopped = preflight(facts)
    sections = []
    if stopped:
        print("GPU check stopped:", stopped, flush=True)
    else:
        skip = set(filter(None, args.skip.split(",")))
        deadline = time.time() + BUDGET_S * args.timeout_scale
        for name, timeout in SECTIONS.items():
            if name in skip:
                continue
            left = deadline - time.time()
            if left < 5 * args.timeout_scale:
                info = not_run(name, f"not run: the {BUDGET_S} s budget was spent")
                sections.append(info)
                print(f"[{name}] ERROR: {info['status']}", flush=True)
                continue
            cmd = [
                sys.executable,
                os.path.abspath(__file__),
                "--lib",
                args.lib,
                "--out",
                args.out,
                "--section",
                name,
            ] + (["--cpu-dry-run"] if DRY_RUN else [])
            timeout = min(timeout * args.timeout_scale, left)
            print(f"[{name}] (timeout {timeout:.0f} s)", flush=True)
            info = run_section(name, cmd, timeout, jsonl)
            sections.append(info)
            print(
                f"[{name}] {info['verdict']}: {info['status']}, {info['asserted_ok']} ok, "
                f"{len(info['failed'])} failed, {info['recorded_only']} recorded, "
                f"{info['seconds']} s"
                + (
                    f"; running kernel: {info['running_kernel']}"
                    if info.get("running_kernel")
                    else ""
                ),
                flush=True,
            )
    summary = write_summary(args.out, facts, sections, stopped)
    print(f"verdict {summary['verdict']}; {os.path.join(args.out, 'summary.md')}", flush=True)
    return 0 if summary["verdict"] == "PASS" else (2 if stopped else 1)


# --------------------------------------------------------------------------------------------
# Child sections (PyTorch from here on).


def _torch():
    import torch
    import torch.nn.functional as F

    return torch, F


def act_to_nchw(t, nchw):
    return t if nchw else t.permute(0, 3, 1, 2)


def act_from_nchw(t, nchw):
    return (t if nchw else t.permute(0, 2, 3, 1)).contiguous()


def full_reference(p: Problem, x, w, dy):
    """float64 fprop, dgrad, wgrad in our layouts (PyTorch autograd on explicitly padded input;
    small problems only). x, dy: our activation layout; w: HWIO."""
    torch, F = _torch()
    x64 = act_to_nchw(x, p.nchw).double().detach().requires_grad_(True)
    w64 = w.permute(3, 2, 0, 1).double().detach().requires_grad_(True)
    top, bottom, left, right = refs._pads(p)
    xp = F.pad(x64, (left, right, top, bottom))
    y = F.conv2d(xp, w64, stride=p.stride, dilation=p.dil, groups=p.groups)
    y.backward(act_to_nchw(dy, p.nchw).double())
    return (
        act_from_nchw(y.detach(), p.nchw),
        act_from_nchw(x64.grad, p.nchw),
        w64.grad.permute(2, 3, 1, 0).contiguous(),
    )


def operands(op, x, w, dy):
    return {"fprop": (x, w), "dgrad": (w, dy), "wgrad": (x, dy)}[op]


def out_like(op: str, p: Problem, t: str):
    torch, _ = _torch()
    xs, ws, ys = p.shapes()
    shape = {"fprop": ys, "dgrad": xs, "wgrad": ws}[op]
    dtype = torch.float16 if t == "half" else torch.float32
    return torch.full(shape, float("nan"), dtype=dtype, device=DEVICE)


class Gpu:
    """The library on the current device, with torch-allocated workspaces."""

    def __init__(self, lib: Library):
        self.lib = lib

    def prepare(self, op, p, t, tacc, a, b, out, path="auto") -> Callable[[], str]:
        torch, _ = _torch()
        _, nbytes = self.lib.select(op, p, t, tacc, path)
        ws = torch.empty(max(nbytes, 1), dtype=torch.uint8, device=DEVICE)
        stream = torch.cuda.current_stream().cuda_stream if DEVICE == "cuda" else 0

        def run() -> str:
            _ = ws
            return self.lib.launch(
                op,
                p,
                t,
                tacc,
                a.data_ptr(),
                b.data_ptr(),
                out.data_ptr(),
                ws.data_ptr(),
                nbytes,
                stream,
                path,
            )

        return run

    def run(self, op, p, t, tacc, a, b, out, path="auto") -> str:
        torch, _ = _torch()
        used = self.prepare(op, p, t, tacc, a, b, out, path)()
        sync()
        return used


def expected_paths(lib: Library, p: Problem, op: str, t: str):
    """(paths, auto) that must run on this device: problems.h200_paths on an H200 with sm_90a
    code; elsewhere the same rules without sm90 (asserted only on an H200: the check's target)."""
    driver, cc, sm90a = lib.query_device()
    paths, auto = problems.h200_paths(p, op, t)
    if cc == 90 and sm90a:
        return paths, auto, True
    paths = [x for x in paths if x != "sm90"]
    if cc < 80:
        paths = ["fallback"]
    return paths, paths[0], False


def expected_matmul_paths(lib: Library, m: MatMul, t: str):
    """expected_paths of the 1x1 fprop that runs the matmul (problems.h200_matmul_paths)."""
    return expected_paths(lib, m.fprop_problem(), "fprop", t)


def section_facts(lib: Library, rec: Recorder) -> None:
    torch, _ = _torch()
    if DEVICE != "cuda":
        rec.result("device facts", None, device="cpu (dry run)", torch=torch.__version__)
        return
    props = torch.cuda.get_device_properties(0)
    facts = {
        "gpu": torch.cuda.get_device_name(0),
        "capability": f"{props.major}.{props.minor}",
        "memory_gib": round(props.total_memory / 2**30, 1),
        "sms": props.multi_processor_count,
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "python": sys.version.split()[0],
    }
    print("device facts (PyTorch):", json.dumps(facts), flush=True)
    rec.result("device facts", None, **facts)
    lib_cc = lib.query_device()[1]
    rec.result(
        "library and PyTorch see the same device",
        lib_cc == props.major * 10 + props.minor,
        library_cc=lib_cc,
    )


def record_refusal(rec: Recorder, kernel: str, asserted: bool, run: Callable[[], str]) -> None:
    """A forced implementation the expectation says cannot run the problem: it must be refused
    with InvalidArgument; running anyway fails where the expectation is asserted (an H200)."""
    try:
        used = run()
        rec.result(
            kernel,
            False if asserted else None,
            used=used,
            error="ran although the expectation says it cannot",
        )
    except AbiError as e:
        rec.result(kernel, e.code == "InvalidArgument", refused=e.message)


def section_exactness(lib: Library, rec: Recorder) -> None:
    torch, _ = _torch()
    gpu = Gpu(lib)
    gen = torch.Generator(device=DEVICE).manual_seed(1234)
    for p in problems.EXACT_PROBLEMS:
        xs, ws, ys = p.shapes()
        longest = max(p.reduction_length(op) for op in OPS)
        bound = max(1, min(3, int(math.sqrt(2048.0 / longest))))

        def draw(s, bound=bound):
            return torch.randint(-bound, bound + 1, s, generator=gen, device=DEVICE).double()

        x, w, dy = draw(xs), draw(ws), draw(ys)
        refs_ = full_reference(p, x, w, dy)
        worst = max(float(r.max()) for r in full_reference(p, x.abs(), w.abs(), dy.abs()))
        if worst > 2048:  # then partial sums need not be exact in binary16: a broken test
            rec.result(f"integer data of {p.name}", False, max_abs_sum=worst)
            continue
        for op_i, op in enumerate(OPS):
            ref = refs_[op_i]
            for t, tacc in PAIRS:
                dt = torch.float16 if t == "half" else torch.float32
                a, b = operands(op, x.to(dt), w.to(dt), dy.to(dt))
                paths, auto, asserted = expected_paths(lib, p, op, t)
                for path in ("auto",) + FORCEABLE:
                    kernel = f"{op} {p.name} T={t} Tacc={tacc} path={path}"
                    want = auto if path == "auto" else path
                    out = out_like(op, p, t)
                    rec.start(kernel)
                    if path != "auto" and path not in paths:
                        forced = functools.partial(gpu.run, op, p, t, tacc, a, b, out, path)
                        record_refusal(rec, kernel, asserted, forced)
                        continue
                    try:
                        used = gpu.run(op, p, t, tacc, a, b, out, path)
                    except AbiError as e:
                        rec.result(kernel, False, error=str(e))
                        continue
                    mism = int(((out.double() - ref) != 0).sum()) + int(torch.isnan(out).sum())
                    ok = mism == 0 and (used == want or not asserted)
                    rec.result(
                        kernel, ok, used=used, expected=want, mismatches=mism, elements=out.numel()
                    )


def section_random(lib: Library, rec: Recorder) -> None:
    torch, _ = _torch()
    gpu = Gpu(lib)
    B = refs.TorchBackend(DEVICE)
    gen = torch.Generator(device=DEVICE).manual_seed(7)
    for p in problems.RANDOM_PROBLEMS[-1:] if DRY_RUN else problems.RANDOM_PROBLEMS:
        xs, ws, ys = p.shapes()
        x = (torch.rand(xs, generator=gen, device=DEVICE) * 2 - 1).half()
        w = (torch.rand(ws, generator=gen, device=DEVICE) - 0.5).half()
        dy = (torch.rand(ys, generator=gen, device=DEVICE) - 0.5).half()
        exact = full_reference(p, x.double(), w.double(), dy.double())
        absum = full_reference(p, x.double().abs(), w.double().abs(), dy.double().abs())
        for op_i, op in enumerate(OPS):
            ref, s = exact[op_i], absum[op_i]
            k = p.reduction_length(op)
            seq = None
            for t, tacc in PAIRS:
                dt = torch.float16 if t == "half" else torch.float32
                a, b = operands(op, x.to(dt), w.to(dt), dy.to(dt))
                for path in ("auto", "fallback"):
                    kernel = f"{op} {p.name} T={t} Tacc={tacc} path={path}"
                    out = out_like(op, p, t)
                    rec.start(kernel)
                    try:
                        used = gpu.run(op, p, t, tacc, a, b, out, path)
                    except AbiError as e:
                        rec.result(kernel, False, error=str(e))
                        continue
                    err = (out.double() - ref).abs()
                    row = {
                        "used": used,
                        "K": k,
                        "nonfinite": int((~torch.isfinite(out)).sum()),
                        "rel_err_norm": float(err.norm() / ref.norm()),
                    }
                    if tacc == "float":
                        bound = refs.float_acc_bound(k, s, ref, t)
                        row["max_err_over_bound"] = float((err / bound.clamp_min(1e-300)).max())
                        ok = row["max_err_over_bound"] <= 1.0 and row["nonfinite"] == 0
                    else:
                        if seq is None:
                            seq = refs.seq_half(B, op, p, x, w, dy)
                        seq_err = (seq - ref).abs()
                        row.update(
                            gpu_max=float(err.max()),
                            gpu_mean=float(err.mean()),
                            seq_max=float(seq_err.max()),
                            seq_mean=float(seq_err.mean()),
                        )
                        if used == "fallback":
                            row["mismatches_vs_sequential"] = int((out.double() != seq).sum())
                            ok = row["mismatches_vs_sequential"] == 0
                        else:
                            ok = refs.half_error_ok(
                                row["gpu_max"],
                                row["gpu_mean"],
                                row["seq_max"],
                                row["seq_mean"],
                                float(ref.abs().max()),
                            )
                    rec.result(kernel, ok, **row)


def one_by_one(gpu: Gpu, xs_vals, ws_vals, tacc: str, path: str, pad_to: int = 1, k_out: int = 1):
    """1x1 fprop over C = len(xs_vals) zero-padded to a multiple of pad_to, K = k_out copies;
    returns (first output, used)."""
    torch, _ = _torch()
    c = len(xs_vals)
    c_pad = -(-c // pad_to) * pad_to
    x = torch.zeros((1, 1, 1, c_pad), dtype=torch.float16, device=DEVICE)
    w = torch.zeros((1, 1, c_pad, k_out), dtype=torch.float16, device=DEVICE)
    x[0, 0, 0, :c] = torch.tensor(xs_vals, dtype=torch.float64).half()
    w[0, 0, :c, :] = torch.tensor(ws_vals, dtype=torch.float64).half()[:, None]
    p = Problem(f"case_1x1_c{c_pad}", 1, 1, 1, c_pad, k_out, 1, 1)
    out = out_like("fprop", p, "half")
    used = gpu.run("fprop", p, "half", tacc, x, w, out, path)
    return float(out.flatten()[0].double()), used, p


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def section_cases(lib: Library, rec: Recorder) -> None:
    torch, _ = _torch()
    gpu = Gpu(lib)
    inf, nan = float("inf"), float("nan")
    # Seed overflow probe: x = 65504 in [1,1,4,1], w = [65504, -65504] as [1,2,1,1]; Tacc=half
    # overflows at the first step (inf), Tacc=float gives 0; every partial sum is exact in
    # binary32 (65504^2 = 4190209 * 2^10), so the tensor-core float result is asserted too.
    for tacc, expect in (("half", inf), ("float", 0.0)):
        x = torch.full((1, 1, 4, 1), 65504.0, device=DEVICE).half()
        w = torch.tensor([65504.0, -65504.0], device=DEVICE).half().reshape(1, 2, 1, 1)
        p = Problem("seed_probe", 1, 1, 4, 1, 1, 1, 2)
        out = out_like("fprop", p, "half")
        kernel = f"seed_overflow_probe Tacc={tacc}"
        rec.start(kernel)
        used = gpu.run("fprop", p, "half", tacc, x, w, out)
        got = out.flatten().double().tolist()
        rec.result(kernel, all(same(g, expect) for g in got), got=got, expected=expect, used=used)
        x8 = torch.zeros((1, 1, 4, 8), device=DEVICE).half()
        x8[..., 0] = 65504.0
        w8 = torch.zeros((1, 2, 8, 8), device=DEVICE).half()
        w8[0, 0, 0, :] = 65504.0
        w8[0, 1, 0, :] = -65504.0
        p8 = Problem("seed_probe_c8", 1, 1, 4, 8, 8, 1, 2)
        _, auto, asserted = expected_paths(lib, p8, "fprop", "half")
        out8 = out_like("fprop", p8, "half")
        kernel = f"seed_overflow_probe_tensor_core Tacc={tacc}"
        rec.start(kernel)
        used8 = gpu.run("fprop", p8, "half", tacc, x8, w8, out8)
        got8 = out8[..., 0].flatten().double().tolist()
        ok = (used8 == auto or not asserted) and (
            all(same(g, expect) for g in got8) if tacc == "float" else True
        )
        rec.result(
            kernel, ok, got=got8, expected=expect, used=used8, asserted_value=tacc == "float"
        )
    # taps49: 49 taps of 0.2 * 0.1.
    x = torch.full((1, 9, 9, 1), 0.2, device=DEVICE).half()
    w = torch.full((7, 7, 1, 1), 0.1, device=DEVICE).half()
    p = Problem("c1", 1, 9, 9, 1, 1, 7, 7)
    for tacc, e in (("half", 0.98046875), ("float", 0.9794921875)):
        out = out_like("fprop", p, "half")
        kernel = f"taps49 Tacc={tacc}"
        rec.start(kernel)
        used = gpu.run("fprop", p, "half", tacc, x, w, out)
        got = out.flatten().double().tolist()
        rec.result(kernel, all(g == e for g in got), got=got[:3], expected=e, used=used)
    # tie, overflow, inf-nan: 1x1 along C. Direct kernel: the CPU contract's value, asserted.
    # Tensor cores:
    # Tacc=float asserted where every partial sum is exact in binary32 (exact_fp32), Tacc=half
    # only for the inf-nan inf/NaN results and the overflow to inf; the rest is recorded.
    cases = [
        ("tie", [2050.0, 1 + 2**-10], [1.0, 1 - 2**-10], 2050.0, 2052.0, False),
        (
            "overflow [65504,65504,-65504]",
            [65504.0, 65504.0, -65504.0],
            [1.0] * 3,
            inf,
            65504.0,
            True,
        ),
        ("overflow [300,300]x[300,-300]", [300.0, 300.0], [300.0, -300.0], inf, 0.0, True),
        ("overflow [65504,65504]x[1,1]", [65504.0, 65504.0], [1.0, 1.0], inf, inf, True),
        ("overflow 4096 ones", [1.0] * 4096, [1.0] * 4096, 2048.0, 4096.0, True),
        ("overflow 3000 ones", [1.0] * 3000, [1.0] * 3000, 2048.0, 3000.0, True),
        ("overflow [2048,1,1]", [2048.0, 1.0, 1.0], [1.0] * 3, 2048.0, 2050.0, True),
        ("overflow [1,1,2048]", [1.0, 1.0, 2048.0], [1.0] * 3, 2050.0, 2050.0, True),
        ("inf-nan [inf,inf]x[1,-1]", [inf, inf], [1.0, -1.0], nan, nan, True),
        ("inf-nan [inf,inf]x[1,1]", [inf, inf], [1.0, 1.0], inf, inf, True),
        ("inf-nan [inf,inf]x[1,0]", [inf, inf], [1.0, 0.0], nan, nan, True),
    ]
    for name, xv, wv, e_half, e_float, exact_fp32 in cases:
        for tacc, e in (("half", e_half), ("float", e_float)):
            kernel = f"{name} Tacc={tacc} direct"
            rec.start(kernel)
            got, used, _ = one_by_one(gpu, xv, wv, tacc, "fallback")
            rec.result(kernel, same(got, e) and used == "fallback", got=got, expected=e, used=used)
            kernel = f"{name} Tacc={tacc} tensor-core"
            rec.start(kernel)
            got8, used8, p8 = one_by_one(gpu, xv, wv, tacc, "auto", pad_to=8, k_out=8)
            _, auto, asserted = expected_paths(lib, p8, "fprop", "half")
            value_asserted = (
                exact_fp32
                if tacc == "float"
                else name.startswith("inf-nan") or name == "overflow [65504,65504]x[1,1]"
            )
            path_ok = used8 == auto or not asserted
            ok = (path_ok and same(got8, e)) if value_asserted else (True if path_ok else False)
            rec.result(
                kernel,
                ok if (value_asserted or not path_ok) else None,
                got=got8,
                contract=e,
                used=used8,
                value_asserted=value_asserted,
            )


class CudnnLegacy:
    """cuDNN's legacy API through ctypes: NHWC half tensors, KRSC half filter, a chosen compute type
    (2 = CUDNN_DATA_HALF, 0 = CUDNN_DATA_FLOAT) and math type (1 = CUDNN_TENSOR_OP_MATH)."""

    class Perf(ctypes.Structure):
        _fields_ = [
            ("algo", ctypes.c_int),
            ("status", ctypes.c_int),
            ("time", ctypes.c_float),
            ("memory", ctypes.c_size_t),
            ("determinism", ctypes.c_int),
            ("mathType", ctypes.c_int),
            ("reserved", ctypes.c_int * 3),
        ]

    def __init__(self):
        torch, _ = _torch()
        self.lib = None
        libdir = os.path.join(os.path.dirname(torch.__file__), "..", "nvidia", "cudnn", "lib")
        for cand in sorted(glob.glob(os.path.join(libdir, "libcudnn.so*"))) + ["libcudnn.so.9"]:
            try:
                self.lib = ctypes.CDLL(cand)
                self.path = cand
                break
            except OSError:
                continue
        if self.lib is None:
            raise OSError("libcudnn not found")
        self.handle = ctypes.c_void_p()
        self._chk(self.lib.cudnnCreate(ctypes.byref(self.handle)), "cudnnCreate")
        self._chk(
            self.lib.cudnnSetStream(
                self.handle, ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
            ),
            "cudnnSetStream",
        )

    @staticmethod
    def _chk(rc: int, what: str):
        if rc != 0:
            raise RuntimeError(f"{what} -> cuDNN status {rc}")

    def _tensor(self, n, c, h, w):
        d = ctypes.c_void_p()
        self._chk(self.lib.cudnnCreateTensorDescriptor(ctypes.byref(d)), "tensor desc")
        self._chk(
            self.lib.cudnnSetTensor4dDescriptor(d, 1, 2, n, c, h, w), "set tensor (NHWC half)"
        )
        return d

    def prepare(self, op: str, p: Problem, x, w_krsc, dy, out, compute: int, math_type: int):
        """Returns (run closure, algo, math type reported by cuDNN)."""
        torch, _ = _torch()
        lib = self.lib
        xd = self._tensor(p.N, p.C, p.H, p.W)
        yd = self._tensor(p.N, p.K, p.P, p.Q)
        wd, cd = ctypes.c_void_p(), ctypes.c_void_p()
        self._chk(lib.cudnnCreateFilterDescriptor(ctypes.byref(wd)), "filter desc")
        self._chk(lib.cudnnSetFilter4dDescriptor(wd, 2, 1, p.K, p.C, p.KH, p.KW), "set filter")
        self._chk(lib.cudnnCreateConvolutionDescriptor(ctypes.byref(cd)), "conv desc")
        assert p.pad[0] == p.pad[1] and p.pad[2] == p.pad[3]
        self._chk(
            lib.cudnnSetConvolution2dDescriptor(
                cd, p.pad[0], p.pad[2], p.stride[0], p.stride[1], p.dil[0], p.dil[1], 1, compute
            ),
            "set conv",
        )
        self._chk(lib.cudnnSetConvolutionMathType(cd, math_type), "math type")
        perfs = (self.Perf * 8)()
        cnt = ctypes.c_int()
        if op == "fprop":
            self._chk(
                lib.cudnnFindConvolutionForwardAlgorithm(
                    self.handle, xd, wd, cd, yd, 8, ctypes.byref(cnt), perfs
                ),
                "find fwd",
            )
        elif op == "dgrad":
            self._chk(
                lib.cudnnFindConvolutionBackwardDataAlgorithm(
                    self.handle, wd, yd, cd, xd, 8, ctypes.byref(cnt), perfs
                ),
                "find bwd data",
            )
        else:
            self._chk(
                lib.cudnnFindConvolutionBackwardFilterAlgorithm(
                    self.handle, xd, yd, cd, wd, 8, ctypes.byref(cnt), perfs
                ),
                "find bwd filter",
            )
        good = [q for q in perfs[: cnt.value] if q.status == 0]
        if not good:
            raise RuntimeError(f"cuDNN found no algorithm for {op}")
        best = good[0]
        ws = torch.empty(max(best.memory, 1), dtype=torch.uint8, device="cuda")
        alpha, beta = ctypes.c_float(1.0), ctypes.c_float(0.0)

        def ptr(t):
            return ctypes.c_void_p(t.data_ptr())

        keep = (xd, yd, wd, cd, ws)

        def run():
            _ = keep
            if op == "fprop":
                rc = lib.cudnnConvolutionForward(
                    self.handle,
                    ctypes.byref(alpha),
                    xd,
                    ptr(x),
                    wd,
                    ptr(w_krsc),
                    cd,
                    best.algo,
                    ptr(ws),
                    ctypes.c_size_t(best.memory),
                    ctypes.byref(beta),
                    yd,
                    ptr(out),
                )
            elif op == "dgrad":
                rc = lib.cudnnConvolutionBackwardData(
                    self.handle,
                    ctypes.byref(alpha),
                    wd,
                    ptr(w_krsc),
                    yd,
                    ptr(dy),
                    cd,
                    best.algo,
                    ptr(ws),
                    ctypes.c_size_t(best.memory),
                    ctypes.byref(beta),
                    xd,
                    ptr(out),
                )
            else:
                rc = lib.cudnnConvolutionBackwardFilter(
                    self.handle,
                    ctypes.byref(alpha),
                    xd,
                    ptr(x),
                    yd,
                    ptr(dy),
                    cd,
                    best.algo,
                    ptr(ws),
                    ctypes.c_size_t(best.memory),
                    ctypes.byref(beta),
                    wd,
                    ptr(out),
                )
            self._chk(rc, op)

        return run, best.algo, best.mathType


def time_ms(fn: Callable[[], object], iters: int = 10, warm: int = 2) -> float:
    torch, _ = _torch()
    if DEVICE != "cuda":  # dry run: one untimed call is enough to exercise the code
        t = time.perf_counter()
        fn()
        return (time.perf_counter() - t) * 1e3
    for _ in range(warm):
        fn()
    sync()
    times = []
    for _ in range(iters):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def sample_relerr(B, op, p, x, w, dy, out_ours_layout, gen, n: int) -> float:
    """||ours - exact|| / ||exact|| over n sampled outputs (float64, refs.sampled)."""
    torch, _ = _torch()
    flat = out_ours_layout.reshape(-1)
    idx = torch.randint(0, flat.numel(), (n,), generator=gen, device=DEVICE)
    exact = torch.tensor(refs.sampled(B, op, p, x, w, dy, idx), dtype=torch.float64, device=DEVICE)
    got = flat[idx].double()
    return float((got - exact).norm() / exact.norm().clamp_min(1e-300))


# Sampled relative error (norm) allowed on the benchmark shapes: fp16 output rounding is 2^-11
# relative; a mis-indexed result is off by O(1).
BENCH_RELERR = {"half": 2e-2, "float": 2e-3}


def targets_met(row: dict, p: Problem) -> bool:
    """Adds the speed-up ratios to a benchmark row (ours vs peer, > 1: ours faster) and says
    whether the targets hold: Tacc=float >= 0.9x cuDNN through PyTorch on every ResNet-50 layer;
    Tacc=half >= 1.5x cuDNN true-half on every ResNet-50 3x3 layer (a missing cuDNN time fails)."""
    ok = True
    if row.get("torch_ms"):
        row["float_vs_torch"] = row["torch_ms"] / row["ours_float_ms"]
    if row.get("cudnn_half_ms"):
        row["half_vs_cudnn_half"] = row["cudnn_half_ms"] / row["ours_half_ms"]
    if p.name.startswith("r50"):
        row["target_float_vs_torch"] = TARGET_FLOAT_VS_TORCH
        ok &= row.get("float_vs_torch", 0.0) >= TARGET_FLOAT_VS_TORCH
        if p.KH == 3:
            row["target_half_vs_cudnn_half"] = TARGET_HALF_VS_CUDNN_HALF
            ok &= row.get("half_vs_cudnn_half", 0.0) >= TARGET_HALF_VS_CUDNN_HALF
    return bool(ok)


def section_bench(lib: Library, rec: Recorder) -> None:
    torch, F = _torch()
    gpu = Gpu(lib)
    B = refs.TorchBackend(DEVICE)
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    cudnn = None
    try:
        cudnn = CudnnLegacy() if DEVICE == "cuda" else None
    except (OSError, RuntimeError) as e:
        rec.result("cuDNN legacy API", False, error=str(e))
    gen = torch.Generator(device=DEVICE).manual_seed(11)
    for p in problems.BENCH_PROBLEMS[:1] if DRY_RUN else problems.BENCH_PROBLEMS:
        torch.manual_seed(0)
        xs, ws, ys = p.shapes()
        x = torch.rand(xs, device=DEVICE).half()
        w = (torch.rand(ws, device=DEVICE) - 0.5).half()
        dy = (torch.rand(ys, device=DEVICE) - 0.5).half()
        xt, dyt = x.permute(0, 3, 1, 2), dy.permute(0, 3, 1, 2)
        wt = w.permute(3, 0, 1, 2).contiguous().permute(0, 3, 1, 2)  # KRSC memory, OIHW view
        w_krsc = w.permute(3, 0, 1, 2).contiguous()
        pad = (p.pad[0], p.pad[2])
        for op in OPS:
            a, b = operands(op, x, w, dy)
            row = {"shape": p.name, "op": op, "gflop": p.flops() / 1e9}
            kernel = f"bench {op} {p.name}"
            rec.start(kernel)
            ok = True
            for tacc in ("half", "float"):
                out = out_like(op, p, "half")
                run = gpu.prepare(op, p, "half", tacc, a, b, out)
                row[f"ours_{tacc}_path"] = run()
                row[f"ours_{tacc}_ms"] = time_ms(run)
                rel = sample_relerr(B, op, p, x, w, dy, out, gen, 64 if op == "wgrad" else 2048)
                row[f"ours_{tacc}_sampled_relerr"] = rel
                _, want, asserted = expected_paths(lib, p, op, "half")
                row[f"ours_{tacc}_expected_path"] = want
                ok &= rel <= BENCH_RELERR[tacc]
                ok &= row[f"ours_{tacc}_path"] != "fallback" or DRY_RUN  # tensor cores on GPUs
                ok &= row[f"ours_{tacc}_path"] == want or not asserted
            if op == "fprop":

                def fn(xt=xt, wt=wt, p=p, pad=pad):
                    return F.conv2d(xt, wt, stride=p.stride, padding=pad, dilation=p.dil)
            else:
                mask = [op == "dgrad", op == "wgrad", False]

                def fn(m=mask, dyt=dyt, xt=xt, wt=wt, p=p, pad=pad):
                    return torch.ops.aten.convolution_backward(
                        dyt,
                        xt,
                        wt,
                        None,
                        list(p.stride),
                        list(pad),
                        list(p.dil),
                        False,
                        [0, 0],
                        1,
                        m,
                    )

            try:
                row["torch_ms"] = time_ms(fn)
            except RuntimeError as e:  # e.g. a half convolution PyTorch's CPU build lacks
                if DEVICE == "cuda":
                    raise
                row["torch_ms"], row["torch_error"] = None, str(e)[:200]
            if cudnn is not None:
                shape_c = {"fprop": ys, "dgrad": xs, "wgrad": (p.K, p.KH, p.KW, p.C)}[op]
                out_c = torch.empty(shape_c, dtype=torch.half, device=DEVICE)
                try:
                    run_c, algo, mt = cudnn.prepare(op, p, x, w_krsc, dy, out_c, 2, 1)
                    run_c()
                    row["cudnn_half_ms"] = time_ms(run_c)
                    row["cudnn_half_algo"], row["cudnn_half_mathType"] = algo, mt
                except RuntimeError as e:
                    row["cudnn_half_error"] = str(e)

            def tf(ms, row=row):  # GFLOP/ms = TFLOP/s
                return row["gflop"] / ms if ms else None

            row.update(
                ours_half_tflops=tf(row["ours_half_ms"]),
                ours_float_tflops=tf(row["ours_float_ms"]),
                torch_tflops=tf(row["torch_ms"]),
                cudnn_half_tflops=tf(row.get("cudnn_half_ms")),
            )
            ok &= targets_met(row, p)
            rec.result(kernel, bool(ok), **row)
        del x, w, dy
        sync()
    rows = [
        r
        for r in read_rows(rec.path)
        if r.get("section") == "bench" and r.get("event") == "result" and "shape" in r
    ]
    for op in OPS:
        for key, keep in (
            ("half_vs_cudnn_half", lambda r: r["shape"].startswith("r50") and "3x3" in r["shape"]),
            ("float_vs_torch", lambda r: r["shape"].startswith("r50")),
        ):
            vals = [r[key] for r in rows if r["op"] == op and keep(r) and r.get(key)]
            if vals:
                rec.result(
                    f"geomean {op} {key}",
                    None,
                    geomean=math.exp(sum(map(math.log, vals)) / len(vals)),
                    n=len(vals),
                )


# --------------------------------------------------------------------------------------------
# Fp16MatMul (cc/kernels/gpu/matmul_gpu.h through tfo_matmul_select / tfo_matmul_launch).


def matmul_prepare(lib: Library, m: MatMul, t: str, tacc: str, x, y, out, path="auto"):
    """A closure that runs the matmul (x, y, out: torch tensors as stored) with a torch-allocated
    workspace and returns the implementation that ran."""
    torch, _ = _torch()
    _, nbytes = lib.matmul_select(m, t, tacc, path)
    ws = torch.empty(max(nbytes, 1), dtype=torch.uint8, device=DEVICE)
    stream = torch.cuda.current_stream().cuda_stream if DEVICE == "cuda" else 0

    def run() -> str:
        return lib.matmul_launch(
            m, t, tacc, x.data_ptr(), y.data_ptr(), out.data_ptr(), ws.data_ptr(), nbytes, stream,
            path,
        )  # fmt: skip

    return run


def matmul_run(lib: Library, m: MatMul, t: str, tacc: str, x, y, out, path="auto") -> str:
    """Runs the matmul once and waits for it; returns the implementation that ran."""
    used = matmul_prepare(lib, m, t, tacc, x, y, out, path)()
    sync()
    return used


def matmul_out(m: MatMul, t: str):
    torch, _ = _torch()
    dtype = torch.float16 if t == "half" else torch.float32
    return torch.full(m.out_shape(), float("nan"), dtype=dtype, device=DEVICE)


def exact_int_bound(k: int) -> int:
    """Integer data in [-b, b] with K * b^2 <= 2048: every partial sum of x*y is an integer of
    magnitude <= 2048, exact in binary16 and binary32, so every accumulator gives the exact sum."""
    return max(1, min(3, math.isqrt(2048 // max(k, 1))))


def section_matmul(lib: Library, rec: Recorder) -> None:
    torch, _ = _torch()
    if not lib.has_matmul:
        rec.result("matmul C ABI", False, error=f"{lib.path} has no tfo_matmul_launch")
        return
    B = refs.TorchBackend(DEVICE)
    gen = torch.Generator(device=DEVICE).manual_seed(2048)
    for m in problems.MATMUL_EXACT:
        bound = exact_int_bound(m.K)

        def draw(shape, bound=bound):
            return torch.randint(-bound, bound + 1, shape, generator=gen, device=DEVICE).double()

        x, y = draw(m.x_shape), draw(m.y_shape)
        exact = refs.matmul_exact(B, m, x, y)
        worst = float(refs.matmul_exact(B, m, x, y, absolute=True).max()) if exact.numel() else 0
        seq_mism = int((refs.seq_half_matmul(B, m, x, y) != exact).sum())
        if worst > 2048 or seq_mism:  # then the data do not test what they should: broken test
            rec.result(f"matmul integer data of {m.name}", False, max_abs_sum=worst,
                       seq_half_mismatches=seq_mism)  # fmt: skip
            continue
        for t, tacc in PAIRS:
            dt = torch.float16 if t == "half" else torch.float32
            xt, yt = x.to(dt), y.to(dt)
            paths, auto, asserted = expected_matmul_paths(lib, m, t)
            selected = lib.matmul_select(m, t, tacc)[0]
            for path in ("auto",) + FORCEABLE:
                kernel = f"matmul {m.name} T={t} Tacc={tacc} path={path}"
                want = auto if path == "auto" else path
                out = matmul_out(m, t)
                rec.start(kernel)
                if path != "auto" and path not in paths:
                    forced = functools.partial(matmul_run, lib, m, t, tacc, xt, yt, out, path)
                    record_refusal(rec, kernel, asserted, forced)
                    continue
                try:
                    used = matmul_run(lib, m, t, tacc, xt, yt, out, path)
                except AbiError as e:
                    rec.result(kernel, False, error=str(e))
                    continue
                mism = int((out.double() != exact).sum()) + int(torch.isnan(out).sum())
                negative_zeros = int(((out == 0) & torch.signbit(out)).sum())  # K = 0: +0
                ok = (
                    mism == 0
                    and negative_zeros == 0
                    and (used == want or not asserted)
                    and (path != "auto" or used == selected)
                )
                rec.result(
                    kernel, ok, used=used, expected=want, selected=selected, mismatches=mism,
                    negative_zeros=negative_zeros, elements=out.numel(),
                )  # fmt: skip
    # Random data: binary16 values for T=half; full-precision binary32 values for T=float.
    for m in problems.MATMUL_RANDOM[-2:] if DRY_RUN else problems.MATMUL_RANDOM:
        xh = (torch.rand(m.x_shape, generator=gen, device=DEVICE) * 2 - 1).half()
        yh = (torch.rand(m.y_shape, generator=gen, device=DEVICE) - 0.5).half()
        xf = torch.rand(m.x_shape, generator=gen, device=DEVICE) * 2 - 1
        yf = torch.rand(m.y_shape, generator=gen, device=DEVICE) - 0.5
        data = {}
        for t, (x, y) in (("half", (xh, yh)), ("float", (xf, yf))):
            data[t] = (
                x,
                y,
                refs.matmul_exact(B, m, x, y),
                refs.matmul_exact(B, m, x, y, absolute=True),
            )
        seq = None
        for t, tacc in PAIRS:
            x, y, exact, absum = data[t]
            paths, auto, asserted = expected_matmul_paths(lib, m, t)
            for path in ("auto", "fallback"):
                kernel = f"matmul {m.name} T={t} Tacc={tacc} path={path}"
                want = auto if path == "auto" else path
                out = matmul_out(m, t)
                rec.start(kernel)
                try:
                    used = matmul_run(lib, m, t, tacc, x, y, out, path)
                except AbiError as e:
                    rec.result(kernel, False, error=str(e))
                    continue
                if tacc == "half" and seq is None:
                    seq = refs.seq_half_matmul(B, m, xh, yh)
                ok, row = refs.matmul_verdict(
                    B, out, exact, absum, m.K, t, tacc, seq if tacc == "half" else None,
                    sequential=used == "fallback",
                )  # fmt: skip
                ok = ok and (used == want or not asserted)
                rec.result(kernel, ok, used=used, expected=want, **row)


def matmul_targets_met(row: dict, m: MatMul) -> bool:
    """Adds the ratios to a matmul benchmark row (peer time / ours, > 1: ours faster) and says
    whether the targets hold on the BERT shapes: Tacc=float >= 0.9x cuBLAS with fp32
    accumulation; Tacc=half >= 0.9x cuBLAS with fp16 accumulation, or with fp32 accumulation
    where the installed PyTorch cannot ask for fp16 (a missing cuBLAS time fails)."""
    if row.get("cublas_ms"):
        row["float_vs_cublas"] = row["cublas_ms"] / row["ours_float_ms"]
        row["half_vs_cublas"] = row["cublas_ms"] / row["ours_half_ms"]
    if row.get("cublas_fp16acc_ms"):
        row["half_vs_cublas_fp16acc"] = row["cublas_fp16acc_ms"] / row["ours_half_ms"]
    if not m.name.startswith("bert"):
        return True
    row["target_vs_cublas"] = TARGET_MATMUL_VS_CUBLAS
    half_peer = "half_vs_cublas_fp16acc" if row.get("cublas_fp16acc_ms") else "half_vs_cublas"
    row["half_target_peer"] = half_peer
    return bool(
        row.get("float_vs_cublas", 0.0) >= TARGET_MATMUL_VS_CUBLAS
        and row.get(half_peer, 0.0) >= TARGET_MATMUL_VS_CUBLAS
    )


def matmul_sample_relerr(B, m: MatMul, x, y, out, gen, n: int = 2048) -> float:
    """||out - exact|| / ||exact|| over n sampled outputs (float64, refs.sampled_matmul)."""
    torch, _ = _torch()
    idx = torch.randint(0, out.numel(), (n,), generator=gen, device=DEVICE)
    exact = torch.tensor(refs.sampled_matmul(B, m, x, y, idx), dtype=torch.float64, device=DEVICE)
    got = out.reshape(-1)[idx].double()
    return float((got - exact).norm() / exact.norm().clamp_min(1e-300))


def section_matmul_bench(lib: Library, rec: Recorder) -> None:
    torch, _ = _torch()
    if not lib.has_matmul:
        rec.result("matmul C ABI", False, error=f"{lib.path} has no tfo_matmul_launch")
        return
    B = refs.TorchBackend(DEVICE)
    flags = torch.backends.cuda.matmul
    flags.allow_tf32 = False
    has_fp16acc = hasattr(flags, "allow_fp16_accumulation")
    gen = torch.Generator(device=DEVICE).manual_seed(13)
    for m in problems.MATMUL_BENCH_DRY if DRY_RUN else problems.MATMUL_BENCH:
        torch.manual_seed(0)
        x = torch.rand(m.x_shape, device=DEVICE).half()
        y = (torch.rand(m.y_shape, device=DEVICE) - 0.5).half()
        row = {"shape": m.name, "gflop": m.flops() / 1e9, "batch": m.batch, "M": m.M, "N": m.N,
               "K": m.K, "adj_x": m.adj_x, "adj_y": m.adj_y}  # fmt: skip
        kernel = f"matmul bench {m.name}"
        rec.start(kernel)
        ok = True
        _, want, asserted = expected_matmul_paths(lib, m, "half")
        row["ours_expected_path"] = want
        for tacc in ("half", "float"):
            out = matmul_out(m, "half")
            run = matmul_prepare(lib, m, "half", tacc, x, y, out)
            row[f"ours_{tacc}_path"] = run()
            row[f"ours_{tacc}_ms"] = time_ms(run)
            rel = matmul_sample_relerr(B, m, x, y, out, gen)
            row[f"ours_{tacc}_sampled_relerr"] = rel
            ok &= rel <= BENCH_RELERR[tacc]
            ok &= row[f"ours_{tacc}_path"] != "fallback" or DRY_RUN  # tensor cores on GPUs
            ok &= row[f"ours_{tacc}_path"] == want or not asserted
        xv = x.transpose(-1, -2) if m.adj_x else x  # views: cuBLAS takes the transposes itself
        yv = y.transpose(-1, -2) if m.adj_y else y
        peers = [("cublas", False)] + ([("cublas_fp16acc", True)] if has_fp16acc else [])
        if not has_fp16acc:
            row["cublas_fp16acc"] = f"torch {torch.__version__} lacks allow_fp16_accumulation"
        for name, fp16acc in peers:
            try:
                flags.allow_fp16_reduced_precision_reduction = False
                if has_fp16acc:
                    flags.allow_fp16_accumulation = fp16acc
                got = torch.matmul(xv, yv)
                row[f"{name}_ms"] = time_ms(lambda xv=xv, yv=yv: torch.matmul(xv, yv))
                row[f"{name}_sampled_relerr"] = matmul_sample_relerr(B, m, x, y, got, gen)
            except RuntimeError as e:  # e.g. a half matmul PyTorch's CPU build lacks
                if DEVICE == "cuda":
                    raise
                row[f"{name}_ms"], row[f"{name}_error"] = None, str(e)[:200]
            finally:
                if has_fp16acc:
                    flags.allow_fp16_accumulation = False

        def tf(ms, row=row):  # GFLOP/ms = TFLOP/s
            return row["gflop"] / ms if ms else None

        for key in ("ours_half", "ours_float", "cublas", "cublas_fp16acc"):
            row[f"{key}_tflops"] = tf(row.get(f"{key}_ms"))
        ok &= matmul_targets_met(row, m)
        rec.result(kernel, bool(ok), **row)
        del x, y
        sync()
    rows = [
        r
        for r in read_rows(rec.path)
        if r.get("section") == "matmul_bench" and r.get("event") == "result" and "shape" in r
    ]
    for key in ("float_vs_cublas", "half_vs_cublas", "half_vs_cublas_fp16acc"):
        vals = [r[key] for r in rows if r["shape"].startswith("bert") and r.get(key)]
        if vals:
            rec.result(
                f"geomean matmul {key}",
                None,
                geomean=math.exp(sum(map(math.log, vals)) / len(vals)),
                n=len(vals),
            )


SECTION_FNS = {
    "facts": section_facts,
    "exactness": section_exactness,
    "random": section_random,
    "cases": section_cases,
    "bench": section_bench,
    "matmul": section_matmul,
    "matmul_bench": section_matmul_bench,
}


def child(args) -> int:
    lib = Library(args.lib)
    rec = Recorder(os.path.join(args.out, "results.jsonl"), args.section)
    try:
        SECTION_FNS[args.section](lib, rec)
    except Exception as e:  # the kernel that raised stays "started": the parent names it
        rec.result(f"{args.section} section", False, error=f"{type(e).__name__}: {e}")
        return 1
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--lib",
        default=os.path.join(HERE, "libtf_fp16ops_gpu.so"),
        help="path of libtf_fp16ops_gpu.so (default: next to this script)",
    )
    ap.add_argument("--out", default=os.path.join(HERE, "results"), help="output directory")
    ap.add_argument(
        "--skip", default="", help="comma-separated sections to skip: " + ",".join(SECTIONS)
    )
    ap.add_argument(
        "--timeout-scale",
        type=float,
        default=1.0,
        help="multiplies every section's timeout (slower GPUs)",
    )
    ap.add_argument(
        "--cpu-dry-run",
        action="store_true",
        help="test this script without a GPU: --lib is the host library "
        "(make gpu-host-lib), tensors live on the CPU, small problems only",
    )
    ap.add_argument("--section", choices=sorted(SECTIONS), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    global DEVICE, DRY_RUN
    if args.cpu_dry_run:
        DEVICE, DRY_RUN = "cpu", True
    if args.section:
        return child(args)
    return parent(args)


if __name__ == "__main__":
    sys.exit(main())
