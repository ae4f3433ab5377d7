"""Checks and benchmarks libtf_fp16ops_gpu.so (the GPU conv kernels of tf_fp16ops) on a CUDA machine
with PyTorch + cuDNN and no TensorFlow.

What it does, in one process (a few minutes on an H200):
  1. exactness: integer data whose partial sums stay within +-2048 (every partial sum is exactly
     representable in fp16), so half and float accumulators must equal the float64 reference bit
     for bit; fprop, dgrad, wgrad on odd shapes, strides, dilations, paddings, NCHW, groups; every
     (T, Tacc) pair and every kernel path that can run the problem (auto, sm90, sm80/simt, fallback);
  2. random data: |ours - ref| <= gamma_K * sum|x*w| + u_T*|ref| per output (Higham, Accuracy and
     Stability of Numerical Algorithms, 2nd ed., sec. 3.1: gamma_K = K*u/(1-K*u); u = 2^-11 for a
     half accumulator, 2^-24 for float; u_T the storage rounding of the output), checked where
     K*u < 1, and the measured relative error (||err||_2 / ||ref||_2) reported everywhere;
  3. the seed overflow probe and the cases C1-C4 of the cases README (direct kernel: the CPU
     contract's values; tensor-core kernels: the values they give, asserted where the result does
     not depend on the hardware summation order);
  4. benchmark side by side: ours (fprop, dgrad, wgrad; half and float accumulators) vs cuDNN through
     PyTorch (fp16 storage, fp32 accumulation) and cuDNN's legacy API with a half compute type and
     tensor-op math (true fp16 accumulation), on the seed shape and ResNet-50 layers at N=128;
     TFLOP/s, ratios, geometric means.
Writes OUT_DIR/gpu_check.json and OUT_DIR/gpu_check.md; exit status 1 if any check failed.

Usage: python tools/gpu_check/check.py --lib build/gpu_check/libtf_fp16ops_gpu.so --out OUT_DIR
"""
from __future__ import annotations

import argparse
import ctypes
import dataclasses
import datetime
import glob
import json
import math
import os
import statistics
import sys
import time
from typing import Callable, Optional

import torch
import torch.nn.functional as F

OPS = ("fprop", "dgrad", "wgrad")
PATHS = {"auto": 0, "sm90": 1, "sm80": 2, "simt": 3, "fallback": 4}
PATH_NAMES = {v: k for k, v in PATHS.items()}
DTYPES = {"half": 0, "float": 1}
TORCH_DTYPE = {"half": torch.float16, "float": torch.float32}
PAIRS = (("half", "half"), ("half", "float"), ("float", "float"))
UNIT_ROUNDOFF = {"half": 2.0 ** -11, "float": 2.0 ** -24}


# --------------------------------------------------------------------------------------------
# Problem description and the library binding

@dataclasses.dataclass(frozen=True)
class Problem:
    """One 2-D convolution; sizes in elements. Filter HWIO [KH, KW, C/groups, K]."""
    name: str
    N: int
    H: int
    W: int
    C: int
    K: int
    KH: int
    KW: int
    stride: tuple = (1, 1)
    dil: tuple = (1, 1)
    pad: tuple = (0, 0, 0, 0)  # top, bottom, left, right
    groups: int = 1
    nchw: bool = False

    @property
    def P(self) -> int:
        eff = (self.KH - 1) * self.dil[0] + 1
        return (self.H + self.pad[0] + self.pad[1] - eff) // self.stride[0] + 1

    @property
    def Q(self) -> int:
        eff = (self.KW - 1) * self.dil[1] + 1
        return (self.W + self.pad[2] + self.pad[3] - eff) // self.stride[1] + 1

    def dims(self) -> list:
        return [self.N, self.H, self.W, self.C, self.KH, self.KW, self.K, self.groups, self.P,
                self.Q, self.stride[0], self.stride[1], self.dil[0], self.dil[1], self.pad[0],
                self.pad[2]]

    def flops(self) -> float:
        return 2.0 * self.N * self.P * self.Q * self.K * (self.C // self.groups) * self.KH * self.KW

    def reduction_length(self, op: str) -> int:
        if op == "fprop":
            return self.KH * self.KW * (self.C // self.groups)
        if op == "dgrad":
            return self.KH * self.KW * (self.K // self.groups)
        return self.N * self.P * self.Q


class Library:
    """ctypes binding of tools/gpu_check/c_api.cc."""

    def __init__(self, path: str):
        self.lib = ctypes.CDLL(path)
        self.lib.tfo_workspace_bytes.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int64),
                                                 ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                                 ctypes.POINTER(ctypes.c_uint64)]
        self.lib.tfo_launch.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int64), ctypes.c_int,
                                        ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                                        ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                        ctypes.c_uint64, ctypes.c_void_p, ctypes.c_int,
                                        ctypes.POINTER(ctypes.c_int), ctypes.c_char_p,
                                        ctypes.c_int]

    def workspace_bytes(self, op: str, p: Problem, t: str, tacc: str) -> int:
        dims = (ctypes.c_int64 * 16)(*p.dims())
        out = ctypes.c_uint64(0)
        rc = self.lib.tfo_workspace_bytes(OPS.index(op), dims, int(p.nchw), DTYPES[t], DTYPES[tacc],
                                          ctypes.byref(out))
        if rc != 0:
            raise ValueError(f"workspace query failed for {p.name} {op}: code {rc}")
        return int(out.value)

    def prepare(self, op: str, p: Problem, t: str, tacc: str, a: torch.Tensor, b: torch.Tensor,
                out: torch.Tensor, path: str = "auto") -> Callable[[], str]:
        """Returns a closure that launches the op on the current stream and returns the path used."""
        ws_bytes = self.workspace_bytes(op, p, t, tacc)
        ws = torch.empty(max(ws_bytes, 1), dtype=torch.uint8, device="cuda")
        dims = (ctypes.c_int64 * 16)(*p.dims())
        used = ctypes.c_int(-1)
        msg = ctypes.create_string_buffer(512)
        args = (OPS.index(op), dims, int(p.nchw), DTYPES[t], DTYPES[tacc],
                ctypes.c_void_p(a.data_ptr()), ctypes.c_void_p(b.data_ptr()),
                ctypes.c_void_p(out.data_ptr()), ctypes.c_void_p(ws.data_ptr()),
                ctypes.c_uint64(ws_bytes),
                ctypes.c_void_p(torch.cuda.current_stream().cuda_stream), PATHS[path],
                ctypes.byref(used), msg, 512)

        def run() -> str:
            rc = self.lib.tfo_launch(*args)
            _ = ws  # keep the workspace alive with the closure
            if rc != 0:
                raise RuntimeError(f"{op} {p.name} path={path}: code {rc}: {msg.value.decode()}")
            return PATH_NAMES.get(used.value, str(used.value))

        return run


# --------------------------------------------------------------------------------------------
# Layouts and the float64 reference (PyTorch autograd on explicitly padded input)

def act_to_nchw(t: torch.Tensor, nchw: bool) -> torch.Tensor:
    return t if nchw else t.permute(0, 3, 1, 2)


def act_from_nchw(t: torch.Tensor, nchw: bool) -> torch.Tensor:
    return (t if nchw else t.permute(0, 2, 3, 1)).contiguous()


def hwio_to_oihw(w: torch.Tensor) -> torch.Tensor:
    return w.permute(3, 2, 0, 1)


def reference(p: Problem, x: torch.Tensor, w: torch.Tensor, dy: Optional[torch.Tensor]):
    """float64 fprop output and, when dy is given, dgrad and wgrad, all in our layouts.
    x, dy: our activation layout; w: HWIO. Asymmetric padding via F.pad (negative = crop)."""
    x64 = act_to_nchw(x, p.nchw).double().detach().requires_grad_(dy is not None)
    w64 = hwio_to_oihw(w).double().detach().requires_grad_(dy is not None)
    top, bottom, left, right = p.pad
    bottom_eff = (p.P - 1) * p.stride[0] + (p.KH - 1) * p.dil[0] + 1 - p.H - top
    right_eff = (p.Q - 1) * p.stride[1] + (p.KW - 1) * p.dil[1] + 1 - p.W - left
    xp = F.pad(x64, (left, right_eff, top, bottom_eff))
    y = F.conv2d(xp, w64, stride=p.stride, dilation=p.dil, groups=p.groups)
    assert y.shape[2:] == (p.P, p.Q), (y.shape, p)
    if dy is None:
        return act_from_nchw(y.detach(), p.nchw), None, None
    y.backward(act_to_nchw(dy, p.nchw).double())
    return (act_from_nchw(y.detach(), p.nchw), act_from_nchw(x64.grad, p.nchw),
            w64.grad.permute(2, 3, 1, 0).contiguous())


def abs_reference(p: Problem, x, w, dy):
    """Sum of |products| per output (the gamma_K bound's sum|x*w|) for fprop, dgrad, wgrad."""
    return reference(p, x.abs(), w.abs(), None if dy is None else dy.abs())


def shapes_of(p: Problem):
    x = (p.N, p.C, p.H, p.W) if p.nchw else (p.N, p.H, p.W, p.C)
    y = (p.N, p.K, p.P, p.Q) if p.nchw else (p.N, p.P, p.Q, p.K)
    w = (p.KH, p.KW, p.C // p.groups, p.K)
    return x, w, y


def operands(op: str, x, w, dy):
    """(a, b) argument order of the C ABI for op."""
    return {"fprop": (x, w), "dgrad": (w, dy), "wgrad": (x, dy)}[op]


def out_like(op: str, p: Problem, t: str) -> torch.Tensor:
    xs, ws, ys = shapes_of(p)
    shape = {"fprop": ys, "dgrad": xs, "wgrad": ws}[op]
    return torch.full(shape, float("nan"), dtype=TORCH_DTYPE[t], device="cuda")


def candidate_paths(t: str) -> list:
    return ["auto", "fallback"] + (["sm90", "sm80"] if t == "half" else ["simt"])


# --------------------------------------------------------------------------------------------
# 1. exactness

EXACT_PROBLEMS = [
    Problem("aligned_3x3_same", 2, 9, 11, 16, 24, 3, 3, pad=(1, 1, 1, 1)),
    Problem("odd_channels_valid", 3, 7, 5, 3, 5, 3, 3),
    Problem("stride2_same_asym", 2, 10, 10, 8, 16, 3, 3, stride=(2, 2), pad=(0, 1, 0, 1)),
    Problem("dilation2", 2, 12, 12, 16, 8, 3, 3, dil=(2, 2), pad=(2, 2, 2, 2)),
    Problem("1x1_stride2", 2, 8, 8, 32, 64, 1, 1, stride=(2, 2)),
    Problem("nchw_3x3", 2, 9, 11, 16, 24, 3, 3, pad=(1, 1, 1, 1), nchw=True),
    Problem("groups2", 2, 6, 7, 16, 16, 3, 3, pad=(1, 1, 1, 1), groups=2),
    Problem("valid_leftover_rows", 2, 10, 11, 8, 8, 3, 3, stride=(2, 2)),
    Problem("7x7_stride2_pad3", 2, 16, 16, 8, 16, 7, 7, stride=(2, 2), pad=(3, 3, 3, 3)),
    Problem("resnet_like_64", 4, 14, 14, 64, 64, 3, 3, pad=(1, 1, 1, 1)),
    Problem("explicit_asym_pad", 2, 9, 8, 8, 16, 3, 2, pad=(2, 1, 0, 3)),
    Problem("channels4", 2, 6, 6, 4, 12, 3, 3, pad=(1, 1, 1, 1)),
    Problem("stride_1x2_dil_2x1", 2, 9, 12, 8, 8, 3, 3, stride=(1, 2), dil=(2, 1), pad=(1, 2, 0, 1)),
]


def integer_tensor(shape, bound: int, gen: torch.Generator) -> torch.Tensor:
    return torch.randint(-bound, bound + 1, shape, generator=gen, device="cuda").double()


def check_exactness(lib: Library, results: dict) -> bool:
    ok_all = True
    gen = torch.Generator(device="cuda").manual_seed(1234)
    rows = []
    for p in EXACT_PROBLEMS:
        xs, ws, ys = shapes_of(p)
        # Value range so that sum |x*w| <= 2048 for every output of every op; verified below.
        longest = max(p.reduction_length(op) for op in OPS)
        bound = max(1, min(3, int(math.sqrt(2048.0 / longest))))
        x = integer_tensor(xs, bound, gen)
        w = integer_tensor(ws, bound, gen)
        dy = integer_tensor(ys, bound, gen)
        refs = reference(p, x, w, dy)
        sums = abs_reference(p, x, w, dy)
        worst = max(float(s.max()) for s in sums)
        if worst > 2048:
            raise AssertionError(f"test construction: {p.name} has sum|x*w| = {worst} > 2048")
        for op_i, op in enumerate(OPS):
            ref = refs[op_i]
            for t, tacc in PAIRS:
                a, b = operands(op, x.to(TORCH_DTYPE[t]), w.to(TORCH_DTYPE[t]), dy.to(TORCH_DTYPE[t]))
                for path in candidate_paths(t):
                    out = out_like(op, p, t)
                    try:
                        used = lib.prepare(op, p, t, tacc, a, b, out, path)()
                        torch.cuda.synchronize()
                    except RuntimeError as e:
                        if path == "auto" or path == "fallback" or "cannot run this problem" not in str(e):
                            ok_all = False
                            rows.append({"problem": p.name, "op": op, "T": t, "Tacc": tacc,
                                         "path": path, "ok": False, "error": str(e)})
                        continue
                    diff = (out.double() - ref).abs()
                    mism = int((diff != 0).sum()) + int(torch.isnan(out).sum())
                    ok = mism == 0
                    ok_all &= ok
                    rows.append({"problem": p.name, "op": op, "T": t, "Tacc": tacc, "path": path,
                                 "used": used, "ok": ok, "mismatches": mism,
                                 "elements": out.numel(), "max_abs_sum": worst})
    results["exactness"] = rows
    n_ok = sum(r["ok"] for r in rows)
    print(f"[exactness] {n_ok}/{len(rows)} runs bit-exact", flush=True)
    for r in rows:
        if not r["ok"]:
            print("  FAIL", r, flush=True)
    return ok_all


# --------------------------------------------------------------------------------------------
# 2. random data against the gamma_K bound

RANDOM_PROBLEMS = [
    Problem("r50_56x56_64_n4", 4, 56, 56, 64, 64, 3, 3, pad=(1, 1, 1, 1)),
    Problem("r50_28x28_128_n4", 4, 28, 28, 128, 128, 3, 3, pad=(1, 1, 1, 1)),
    Problem("r50_14x14_256_n4", 4, 14, 14, 256, 256, 3, 3, pad=(1, 1, 1, 1)),
    Problem("r50_7x7_512_n4", 4, 7, 7, 512, 512, 3, 3, pad=(1, 1, 1, 1)),
    Problem("odd_5x5_s2_c3", 4, 33, 31, 3, 10, 5, 5, stride=(2, 2), pad=(2, 2, 2, 2)),
]


def gamma(k: int, u: float) -> float:
    return k * u / (1 - k * u) if k * u < 1 else float("inf")


def check_random(lib: Library, results: dict) -> bool:
    ok_all = True
    gen = torch.Generator(device="cuda").manual_seed(7)
    rows = []
    for p in RANDOM_PROBLEMS:
        xs, ws, ys = shapes_of(p)
        x = torch.rand(xs, generator=gen, device="cuda").half().double()
        w = (torch.rand(ws, generator=gen, device="cuda") - 0.5).half().double()
        dy = (torch.rand(ys, generator=gen, device="cuda") - 0.5).half().double()
        refs = reference(p, x, w, dy)
        sums = abs_reference(p, x, w, dy)
        for op_i, op in enumerate(OPS):
            ref, s = refs[op_i], sums[op_i]
            k = p.reduction_length(op)
            for t, tacc in PAIRS:
                a, b = operands(op, x.to(TORCH_DTYPE[t]), w.to(TORCH_DTYPE[t]), dy.to(TORCH_DTYPE[t]))
                out = out_like(op, p, t)
                used = lib.prepare(op, p, t, tacc, a, b, out)()
                torch.cuda.synchronize()
                err = (out.double() - ref).abs()
                g = gamma(k, UNIT_ROUNDOFF[tacc])
                rel = float(err.norm() / ref.norm())
                row = {"problem": p.name, "op": op, "T": t, "Tacc": tacc, "used": used,
                       "K": k, "gamma_K": g, "rel_err_norm": rel,
                       "median_rel_err": float((err / ref.abs().clamp_min(1e-30))[ref.abs() > 1e-3].median()),
                       "nonfinite": int((~torch.isfinite(out)).sum())}
                if math.isfinite(g):
                    bound = g * s + UNIT_ROUNDOFF[t] * ref.abs()
                    ratio = float((err / bound.clamp_min(1e-300)).max())
                    row["max_err_over_bound"] = ratio
                    row["ok"] = ratio <= 1.0 and row["nonfinite"] == 0
                    ok_all &= row["ok"]
                else:
                    row["max_err_over_bound"] = None
                    row["ok"] = None  # K*u >= 1: no a-priori bound; error reported only
                rows.append(row)
    results["random"] = rows
    print("[random] problem op T/Tacc path K rel_err max_err/bound ok", flush=True)
    for r in rows:
        print(f"  {r['problem']} {r['op']} {r['T']}/{r['Tacc']} {r['used']} K={r['K']} "
              f"rel={r['rel_err_norm']:.2e} ratio={r['max_err_over_bound']} ok={r['ok']}", flush=True)
    return ok_all


# --------------------------------------------------------------------------------------------
# 3. overflow probe and cases

def one_by_one(lib: Library, xs_vals, ws_vals, t: str, tacc: str, path: str, pad_to: int = 1,
               k_out: int = 1):
    """1x1 conv over C = len(xs_vals) (zero-padded to a multiple of pad_to), K = k_out copies."""
    c = len(xs_vals)
    c_pad = ((c + pad_to - 1) // pad_to) * pad_to
    x = torch.zeros((1, 1, 1, c_pad), dtype=TORCH_DTYPE[t], device="cuda")
    w = torch.zeros((1, 1, c_pad, k_out), dtype=TORCH_DTYPE[t], device="cuda")
    x[0, 0, 0, :c] = torch.tensor(xs_vals, dtype=torch.float64).to(TORCH_DTYPE[t])
    w[0, 0, :c, :] = torch.tensor(ws_vals, dtype=torch.float64).to(TORCH_DTYPE[t])[:, None]
    p = Problem("1x1", 1, 1, 1, c_pad, k_out, 1, 1)
    out = out_like("fprop", p, t)
    used = lib.prepare("fprop", p, t, tacc, x, w, out, path)()
    torch.cuda.synchronize()
    return [float(v) for v in out.flatten().double().tolist()][:1] if k_out > 1 else \
        [float(v) for v in out.flatten().double().tolist()], used


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def check_cases(lib: Library, results: dict) -> bool:
    rows = []
    ok_all = True
    inf, nan = float("inf"), float("nan")

    def record(name, got, expect, used, asserted=True):
        nonlocal ok_all
        ok = all(same(g, e) for g, e in zip(got, expect)) and len(got) == len(expect)
        if asserted:
            ok_all &= ok
        rows.append({"case": name, "got": got, "expected": expect, "used": used,
                     "ok": ok if asserted else None})

    # Seed overflow probe: x = fp16(65519) = 65504 in [1,1,4,1], w = [65504, -65504] as [1,2,1,1].
    for tacc, expect in (("half", [inf] * 3), ("float", [0.0] * 3)):
        x = torch.full((1, 1, 4, 1), 65519.0, device="cuda").half()
        w = torch.tensor([65519.0, -65519.0], device="cuda").half().reshape(1, 2, 1, 1)
        p = Problem("seed_probe", 1, 1, 4, 1, 1, 1, 2)
        out = out_like("fprop", p, "half")
        used = lib.prepare("fprop", p, "half", tacc, x, w, out)()
        torch.cuda.synchronize()
        record(f"seed_overflow_probe Tacc={tacc}", out.flatten().double().tolist(), expect, used)
        # Same numbers with 8 zero-padded channels and 8 outputs: the tensor-core kernels.
        x8 = torch.zeros((1, 1, 4, 8), device="cuda").half(); x8[..., 0] = 65504.0
        w8 = torch.zeros((1, 2, 8, 8), device="cuda").half(); w8[0, 0, 0, :] = 65504.0; w8[0, 1, 0, :] = -65504.0
        p8 = Problem("seed_probe_c8", 1, 1, 4, 8, 8, 1, 2)
        out8 = out_like("fprop", p8, "half")
        used8 = lib.prepare("fprop", p8, "half", tacc, x8, w8, out8)()
        torch.cuda.synchronize()
        record(f"seed_overflow_probe_tensor_core Tacc={tacc}", out8[..., 0].flatten().double().tolist(),
               expect, used8, asserted=(tacc == "float"))

    # C1: 49-tap window.
    x = torch.full((1, 9, 9, 1), 0.2, device="cuda").half()
    w = torch.full((7, 7, 1, 1), 0.1, device="cuda").half()
    p = Problem("c1", 1, 9, 9, 1, 1, 7, 7)
    for tacc, e in (("half", 0.98046875), ("float", 0.9794921875)):
        out = out_like("fprop", p, "half")
        used = lib.prepare("fprop", p, "half", tacc, x, w, out)()
        torch.cuda.synchronize()
        record(f"C1 Tacc={tacc}", out.flatten().double().tolist(), [e] * 9, used)

    # C2, C3, C4: 1x1 convolutions along C; direct kernel = CPU contract.
    cases = [
        ("C2", [2050.0, 1 + 2 ** -10], [1.0, 1 - 2 ** -10], 2050.0, 2052.0),
        ("C3 [65504,65504,-65504]", [65504.0, 65504.0, -65504.0], [1.0, 1.0, 1.0], inf, 65504.0),
        ("C3 [300,300]x[300,-300]", [300.0, 300.0], [300.0, -300.0], inf, 0.0),
        ("C3 [65504,65504]x[1,1]", [65504.0, 65504.0], [1.0, 1.0], inf, inf),
        ("C3 4096 ones", [1.0] * 4096, [1.0] * 4096, 2048.0, 4096.0),
        ("C3 3000 ones", [1.0] * 3000, [1.0] * 3000, 2048.0, 3000.0),
        ("C3 [2048,1,1]", [2048.0, 1.0, 1.0], [1.0, 1.0, 1.0], 2048.0, 2050.0),
        ("C3 [1,1,2048]", [1.0, 1.0, 2048.0], [1.0, 1.0, 1.0], 2050.0, 2050.0),
        ("C4 [inf,inf]x[1,-1]", [inf, inf], [1.0, -1.0], nan, nan),
        ("C4 [inf,inf]x[1,1]", [inf, inf], [1.0, 1.0], inf, inf),
        ("C4 [inf,inf]x[1,0]", [inf, inf], [1.0, 0.0], nan, nan),
    ]
    for name, xv, wv, e_half, e_float in cases:
        for tacc, e in (("half", e_half), ("float", e_float)):
            got, used = one_by_one(lib, xv, wv, "half", tacc, "fallback")
            record(f"{name} Tacc={tacc} direct", got, [e], used)
            # Tensor cores: channels zero-padded to 8, 8 outputs. The float accumulator's values
            # are exact integers/inf/NaN in fp32, so they are asserted; the half accumulator's
            # depend on the MMA's internal order and are reported only (C4 NaN/inf excepted).
            got8, used8 = one_by_one(lib, xv, wv, "half", tacc, "auto", pad_to=8, k_out=8)
            assert_tc = tacc == "float" or name.startswith("C4") or name == "C3 [65504,65504]x[1,1]"
            record(f"{name} Tacc={tacc} tensor-core", got8, [e], used8, asserted=assert_tc)
    results["cases"] = rows
    print("[cases]", flush=True)
    for r in rows:
        print(f"  {r['case']}: got {r['got'][:3]} expected {r['expected'][:3]} path={r['used']} ok={r['ok']}",
              flush=True)
    return ok_all


# --------------------------------------------------------------------------------------------
# 4. benchmark

BENCH_PROBLEMS = [  # the shapes of cudnn_anchor.py
    Problem("seed_16x32x32x16_k16_3x3_valid", 16, 32, 32, 16, 16, 3, 3),
    Problem("r50_56x56_64to64_3x3", 128, 56, 56, 64, 64, 3, 3, pad=(1, 1, 1, 1)),
    Problem("r50_28x28_128to128_3x3", 128, 28, 28, 128, 128, 3, 3, pad=(1, 1, 1, 1)),
    Problem("r50_14x14_256to256_3x3", 128, 14, 14, 256, 256, 3, 3, pad=(1, 1, 1, 1)),
    Problem("r50_7x7_512to512_3x3", 128, 7, 7, 512, 512, 3, 3, pad=(1, 1, 1, 1)),
    Problem("r50_56x56_256to64_1x1", 128, 56, 56, 256, 64, 1, 1),
    Problem("r50_14x14_256to1024_1x1", 128, 14, 14, 256, 1024, 1, 1),
]


def time_ms(fn: Callable[[], object], iters: int = 20, warm: int = 3) -> float:
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


class CudnnLegacy:
    """cuDNN's legacy API through ctypes: NHWC half tensors, KRSC half filter, a chosen compute type
    (2 = CUDNN_DATA_HALF, 0 = CUDNN_DATA_FLOAT) and math type (1 = CUDNN_TENSOR_OP_MATH)."""

    class Perf(ctypes.Structure):
        _fields_ = [("algo", ctypes.c_int), ("status", ctypes.c_int), ("time", ctypes.c_float),
                    ("memory", ctypes.c_size_t), ("determinism", ctypes.c_int),
                    ("mathType", ctypes.c_int), ("reserved", ctypes.c_int * 3)]

    def __init__(self):
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
        self._chk(self.lib.cudnnSetStream(self.handle, ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)),
                  "cudnnSetStream")

    @staticmethod
    def _chk(rc: int, what: str):
        if rc != 0:
            raise RuntimeError(f"{what} -> cuDNN status {rc}")

    def _tensor(self, n, c, h, w):
        d = ctypes.c_void_p()
        self._chk(self.lib.cudnnCreateTensorDescriptor(ctypes.byref(d)), "tensor desc")
        self._chk(self.lib.cudnnSetTensor4dDescriptor(d, 1, 2, n, c, h, w), "set tensor (NHWC half)")
        return d

    def prepare(self, op: str, p: Problem, x, w_krsc, dy, out, compute: int, math_type: int):
        """Returns (run closure, algo, math type reported by cuDNN)."""
        lib = self.lib
        xd = self._tensor(p.N, p.C, p.H, p.W)
        yd = self._tensor(p.N, p.K, p.P, p.Q)
        wd, cd = ctypes.c_void_p(), ctypes.c_void_p()
        self._chk(lib.cudnnCreateFilterDescriptor(ctypes.byref(wd)), "filter desc")
        self._chk(lib.cudnnSetFilter4dDescriptor(wd, 2, 1, p.K, p.C, p.KH, p.KW), "set filter")
        self._chk(lib.cudnnCreateConvolutionDescriptor(ctypes.byref(cd)), "conv desc")
        assert p.pad[0] == p.pad[1] and p.pad[2] == p.pad[3]
        self._chk(lib.cudnnSetConvolution2dDescriptor(cd, p.pad[0], p.pad[2], p.stride[0], p.stride[1],
                                                      p.dil[0], p.dil[1], 1, compute), "set conv")
        self._chk(lib.cudnnSetConvolutionMathType(cd, math_type), "math type")
        perfs = (self.Perf * 8)()
        cnt = ctypes.c_int()
        if op == "fprop":
            self._chk(lib.cudnnFindConvolutionForwardAlgorithm(self.handle, xd, wd, cd, yd, 8,
                                                               ctypes.byref(cnt), perfs), "find fwd")
        elif op == "dgrad":
            self._chk(lib.cudnnFindConvolutionBackwardDataAlgorithm(self.handle, wd, yd, cd, xd, 8,
                                                                    ctypes.byref(cnt), perfs), "find bwd data")
        else:
            self._chk(lib.cudnnFindConvolutionBackwardFilterAlgorithm(self.handle, xd, yd, cd, wd, 8,
                                                                      ctypes.byref(cnt), perfs), "find bwd filter")
        good = [q for q in perfs[:cnt.value] if q.status == 0]
        if not good:
            raise RuntimeError(f"cuDNN found no algorithm for {op}")
        best = good[0]
        ws = torch.empty(max(best.memory, 1), dtype=torch.uint8, device="cuda")
        alpha, beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
        ptr = lambda t: ctypes.c_void_p(t.data_ptr())
        keep = (xd, yd, wd, cd, ws)

        def run():
            _ = keep
            if op == "fprop":
                rc = lib.cudnnConvolutionForward(self.handle, ctypes.byref(alpha), xd, ptr(x), wd, ptr(w_krsc), cd,
                                                 best.algo, ptr(ws), ctypes.c_size_t(best.memory),
                                                 ctypes.byref(beta), yd, ptr(out))
            elif op == "dgrad":
                rc = lib.cudnnConvolutionBackwardData(self.handle, ctypes.byref(alpha), wd, ptr(w_krsc), yd, ptr(dy),
                                                      cd, best.algo, ptr(ws), ctypes.c_size_t(best.memory),
                                                      ctypes.byref(beta), xd, ptr(out))
            else:
                rc = lib.cudnnConvolutionBackwardFilter(self.handle, ctypes.byref(alpha), xd, ptr(x), yd, ptr(dy),
                                                        cd, best.algo, ptr(ws), ctypes.c_size_t(best.memory),
                                                        ctypes.byref(beta), wd, ptr(out))
            self._chk(rc, op)

        return run, best.algo, best.mathType


def benchmark(lib: Library, results: dict, cudnn: Optional[CudnnLegacy], with_sm80: bool) -> None:
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    rows = []
    for p in BENCH_PROBLEMS:
        torch.manual_seed(0)
        xs, ws, ys = shapes_of(p)
        x = torch.rand(xs, device="cuda").half()                 # NHWC
        w = (torch.rand(ws, device="cuda") - 0.5).half()          # HWIO
        dy = (torch.rand(ys, device="cuda") - 0.5).half()         # NPQK
        refs = reference(p, x.double(), w.double(), dy.double())
        # PyTorch views: logical NCHW / OIHW with channels_last memory (= NHWC / KRSC).
        xt = x.permute(0, 3, 1, 2)
        dyt = dy.permute(0, 3, 1, 2)
        wt = w.permute(3, 0, 1, 2).contiguous().permute(0, 3, 1, 2)  # KRSC memory
        w_krsc = w.permute(3, 0, 1, 2).contiguous()
        pad = (p.pad[0], p.pad[2])
        row = {"shape": p.name, "gflop": p.flops() / 1e9}

        def relerr(out_ours_layout, op_i):
            ref = refs[op_i]
            return float((out_ours_layout.double() - ref).norm() / ref.norm())

        for op_i, op in enumerate(OPS):
            a, b = operands(op, x, w, dy)
            for tacc in ("half", "float"):
                out = out_like(op, p, "half")
                run = lib.prepare(op, p, "half", tacc, a, b, out)
                row[f"ours_{op}_{tacc}_path"] = run()
                row[f"ours_{op}_{tacc}_ms"] = time_ms(run)
                row[f"ours_{op}_{tacc}_relerr"] = relerr(out, op_i)
                if with_sm80 and p.KH == 3:
                    out2 = out_like(op, p, "half")
                    try:
                        run2 = lib.prepare(op, p, "half", tacc, a, b, out2, "sm80")
                        run2()
                        row[f"sm80_{op}_{tacc}_ms"] = time_ms(run2)
                    except RuntimeError as e:
                        row[f"sm80_{op}_{tacc}_err"] = str(e)
            # cuDNN through PyTorch: fp16 storage, fp32 accumulation.
            if op == "fprop":
                fn = lambda: F.conv2d(xt, wt, stride=p.stride, padding=pad, dilation=p.dil)
                got = fn().permute(0, 2, 3, 1)
            else:
                mask = [op == "dgrad", op == "wgrad", False]
                fn = lambda m=mask: torch.ops.aten.convolution_backward(
                    dyt, xt, wt, None, list(p.stride), list(pad), list(p.dil), False, [0, 0], 1, m)
                res = fn()
                got = res[0].permute(0, 2, 3, 1) if op == "dgrad" else res[1].permute(2, 3, 1, 0)
            row[f"torch_{op}_ms"] = time_ms(fn)
            row[f"torch_{op}_relerr"] = relerr(got, op_i)
            # cuDNN legacy API, half compute type + tensor-op math (true fp16 accumulation).
            if cudnn is not None:
                out_c = torch.empty({"fprop": ys, "dgrad": xs, "wgrad": (p.K, p.KH, p.KW, p.C)}[op],
                                    dtype=torch.half, device="cuda")
                try:
                    run_c, algo, mt = cudnn.prepare(op, p, x, w_krsc, dy, out_c, 2, 1)
                    run_c()
                    row[f"cudnn_half_{op}_ms"] = time_ms(run_c)
                    row[f"cudnn_half_{op}_algo"] = algo
                    row[f"cudnn_half_{op}_mathType"] = mt
                    got_c = out_c.permute(1, 2, 3, 0) if op == "wgrad" else out_c
                    row[f"cudnn_half_{op}_relerr"] = relerr(got_c, op_i)
                except RuntimeError as e:
                    row[f"cudnn_half_{op}_err"] = str(e)
        rows.append(row)
        print(json.dumps(row), flush=True)
        del refs
        torch.cuda.empty_cache()
    results["benchmark"] = rows


def tflops(row: dict, key: str) -> Optional[float]:
    ms = row.get(key)
    return row["gflop"] / ms if ms else None


def summarize(results: dict) -> None:
    rows = results.get("benchmark", [])
    summary = {}
    for op in OPS:
        for name, num, den in (("half_vs_cudnn_half", f"ours_{op}_half_ms", f"cudnn_half_{op}_ms"),
                               ("float_vs_torch", f"ours_{op}_float_ms", f"torch_{op}_ms"),
                               ("half_vs_torch", f"ours_{op}_half_ms", f"torch_{op}_ms")):
            for subset, keep in (("resnet50", lambda r: r["shape"].startswith("r50")),
                                 ("resnet50_3x3", lambda r: r["shape"].startswith("r50") and "3x3" in r["shape"])):
                ratios = [r[den] / r[num] for r in rows if keep(r) and r.get(num) and r.get(den)]
                if ratios:
                    summary[f"{op}_{name}_{subset}_geomean"] = math.exp(sum(map(math.log, ratios)) / len(ratios))
    results["summary"] = summary


def markdown(results: dict) -> str:
    env = results["environment"]
    lines = [f"# GPU check of libtf_fp16ops_gpu.so — {env['date']}", "",
             f"- GPU: {env['gpu']} (CC {env['capability']}), driver CUDA {env['cuda_driver']}, "
             f"PyTorch {env['torch']}, cuDNN {env['cudnn']}",
             f"- Command: `{env['command']}`",
             f"- Library: `{env['lib']}` ({env['lib_bytes']} bytes)",
             f"- Exactness: {results['verdict']['exactness']}; random-data bound: "
             f"{results['verdict']['random']}; cases: {results['verdict']['cases']}", ""]
    lines += ["## Benchmark (TFLOP/s; ratios are speed-ups of ours over the peer)", "",
              "Peers: **torch** = cuDNN through PyTorch (fp16 storage, fp32 accumulation); "
              "**cudnn-half** = cuDNN legacy API, CUDNN_DATA_HALF compute type + tensor-op math "
              "(fp16 accumulation). Median of 20 timed runs, CUDA events, same process.", ""]
    lines.append("| shape | op | ours half-acc | ours float-acc | torch (fp32 acc) | cudnn-half | "
                 "half/cudnn-half | float/torch | path (half, float) | relerr ours half / float / torch / cudnn-half |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    fmt = lambda v: f"{v:.1f}" if v else "-"
    for r in results.get("benchmark", []):
        for op in OPS:
            oh, of = tflops(r, f"ours_{op}_half_ms"), tflops(r, f"ours_{op}_float_ms")
            tt, ch = tflops(r, f"torch_{op}_ms"), tflops(r, f"cudnn_half_{op}_ms")
            rh = f"{oh / ch:.2f}" if oh and ch else "-"
            rf = f"{of / tt:.2f}" if of and tt else "-"
            errs = " / ".join(f"{r[k]:.1e}" if isinstance(r.get(k), float) else "-" for k in
                              (f"ours_{op}_half_relerr", f"ours_{op}_float_relerr",
                               f"torch_{op}_relerr", f"cudnn_half_{op}_relerr"))
            lines.append(f"| {r['shape']} | {op} | {fmt(oh)} | {fmt(of)} | {fmt(tt)} | {fmt(ch)} | {rh} | {rf} | "
                         f"{r.get(f'ours_{op}_half_path')}, {r.get(f'ours_{op}_float_path')} | {errs} |")
    sm80 = [(r["shape"], op, tflops(r, f"sm80_{op}_half_ms"), tflops(r, f"sm80_{op}_float_ms"))
            for r in results.get("benchmark", []) for op in OPS if r.get(f"sm80_{op}_half_ms")]
    if sm80:
        lines += ["", "CUTLASS 2.x (sm80 path, forced) on the same shapes, TFLOP/s half-acc / float-acc:", ""]
        lines += [f"- {s} {op}: {fmt(h)} / {fmt(f)}" for s, op, h, f in sm80]
    lines += ["", "## Geometric means of speed-up ratios", ""]
    lines += [f"- {k}: {v:.2f}" for k, v in sorted(results.get("summary", {}).items())]
    lines += ["", "## Random data (relative error ||err||/||ref||, float64 reference)", "",
              "| problem | op | T/Tacc | path | K | rel err | max err / (gamma_K sum|xw| + u_T|ref|) |",
              "|---|---|---|---|---|---|---|"]
    for r in results.get("random", []):
        ratio = "n/a (K*u >= 1)" if r["max_err_over_bound"] is None else f"{r['max_err_over_bound']:.3f}"
        lines.append(f"| {r['problem']} | {r['op']} | {r['T']}/{r['Tacc']} | {r['used']} | {r['K']} | "
                     f"{r['rel_err_norm']:.2e} | {ratio} |")
    lines += ["", "## Cases", "", "| case | got | expected | path | asserted/ok |", "|---|---|---|---|---|"]
    for r in results.get("cases", []):
        lines.append(f"| {r['case']} | {r['got'][:3]} | {r['expected'][:3]} | {r['used']} | {r['ok']} |")
    ex = results.get("exactness", [])
    lines += ["", f"## Exactness: {sum(1 for r in ex if r['ok'])}/{len(ex)} runs bit-exact", ""]
    paths = {}
    for r in ex:
        key = r.get("used", "error")
        paths[key] = paths.get(key, 0) + 1
    lines.append("Runs per kernel path: " + ", ".join(f"{k}: {v}" for k, v in sorted(paths.items())))
    for r in ex:
        if not r["ok"]:
            lines.append(f"- FAIL {r}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default="build/gpu_check/libtf_fp16ops_gpu.so", help="path of libtf_fp16ops_gpu.so")
    ap.add_argument("--out", default="gpu_check_out", help="output directory for gpu_check.json/.md")
    ap.add_argument("--skip", default="", help="comma-separated sections to skip: exactness,random,cases,bench")
    ap.add_argument("--no-sm80-bench", action="store_true", help="do not time the forced CUTLASS 2.x path")
    args = ap.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    lib = Library(args.lib)
    props = torch.cuda.get_device_properties(0)
    results = {"environment": {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "gpu": torch.cuda.get_device_name(0), "capability": f"{props.major}.{props.minor}",
        "cuda_driver": torch.version.cuda, "torch": torch.__version__,
        "cudnn": torch.backends.cudnn.version(), "lib": args.lib,
        "lib_bytes": os.path.getsize(args.lib), "command": " ".join([sys.executable] + sys.argv)}}
    print(results["environment"], flush=True)
    verdict = {}

    def section(name, fn):
        if name in skip:
            verdict[name] = "skipped"
            return
        t = time.time()
        try:
            verdict[name] = "PASS" if fn() else "FAIL"
        except Exception as e:  # report and go on: later sections still give information
            verdict[name] = f"ERROR: {type(e).__name__}: {e}"
            print(f"[{name}] ERROR", repr(e), flush=True)
        print(f"[{name}] {verdict[name]} in {time.time() - t:.1f}s", flush=True)

    section("exactness", lambda: check_exactness(lib, results))
    section("random", lambda: check_random(lib, results))
    section("cases", lambda: check_cases(lib, results))
    cudnn = None
    try:
        cudnn = CudnnLegacy()
    except OSError as e:
        print("cuDNN legacy API unavailable:", e, flush=True)

    def bench():
        benchmark(lib, results, cudnn, not args.no_sm80_bench)
        summarize(results)
        return True

    section("bench", bench)
    results["verdict"] = verdict
    results["elapsed_s"] = time.time() - t0
    with open(os.path.join(args.out, "gpu_check.json"), "w") as f:
        json.dump(results, f, indent=1, default=str)
    with open(os.path.join(args.out, "gpu_check.md"), "w") as f:
        f.write(markdown(results))
    print(markdown(results), flush=True)
    print(f"total {results['elapsed_s']:.1f}s; verdict {verdict}", flush=True)
    return 0 if all(v in ("PASS", "skipped") for v in verdict.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
