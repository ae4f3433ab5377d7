"""References and acceptance rules of the GPU check, written once for two array backends: NumPy
(tests/gpu/test_gpu_host.py checks them on a CPU against tests/support/reference.py) and PyTorch
on the GPU (check.py). Layouts: activations NHWC, filter HWIO; problems as abi.Problem.

- seq_half: the CPU contract's sequential binary16 sum (fprop over (kh, kw, ci), dgrad over
  (kh, kw, ko), wgrad over (n, p, q)), each step round_binary16(x*w + acc). The step is computed
  in binary64 (the product of two binary16 numbers is exact there), rounded to binary32 with
  round-to-odd and then to binary16 with round-to-nearest-even: with 13 extra bits the two
  roundings equal one (Boldo & Melquiond, "Emulation of FMA and correctly rounded sums: proved
  algorithms using rounding to odd", IEEE Trans. Computers 57(4), 2008). PyTorch has no direct
  binary64 -> binary16 conversion that rounds once, hence the detour.
- sampled: float64 values of chosen outputs only (the N=128 benchmark shapes would need ~430
  GFLOP of float64 work for full references).
- half_error_ok / gamma_bound: the acceptance rules, stated with their factors.
- Fp16MatMul (abi.MatMul, row-major operands): matmul_exact (float64, optionally of |x|, |y|),
  seq_half_matmul (the CPU contract's chain over k ascending, each step round_binary16(x*y +
  acc) as above), sampled_matmul, and matmul_verdict (the rules of check.py's matmul section).
"""

from __future__ import annotations

import math

# Tacc=half on tensor cores runs in the MMA's order, not the CPU's: its error against float64 may
# differ from the sequential sum's, but not by much. Accepted when
#   max|gpu - exact| <= HALF_MAX_FACTOR * max|seq - exact| + one binary16 ulp of max|exact|, and
#   mean|gpu - exact| <= HALF_MEAN_FACTOR * mean|seq - exact| + 2^-24.
# A mis-indexed or transposed result is off by O(|exact|), orders of magnitude beyond.
HALF_MAX_FACTOR = 4.0
HALF_MEAN_FACTOR = 4.0


class NumpyBackend:
    def __init__(self):
        import numpy as np

        self.np = np

    def f64(self, a):
        return self.np.asarray(a, dtype=self.np.float64)

    def zeros(self, shape, like):
        return self.np.zeros(shape, dtype=self.np.float64)

    def pad(self, x, top, bottom, left, right):
        """Zero padding of NHWC H and W; negative amounts crop."""
        np = self.np
        x = np.pad(
            x, ((0, 0), (max(top, 0), max(bottom, 0)), (max(left, 0), max(right, 0)), (0, 0))
        )
        h, w = x.shape[1], x.shape[2]
        return x[:, max(-top, 0) : h - max(-bottom, 0), max(-left, 0) : w - max(-right, 0), :]

    def round16(self, d):
        """binary64 -> binary16 with one rounding (via round-to-odd binary32)."""
        np = self.np
        f = d.astype(np.float32)
        fi = f.view(np.int32).copy()
        inexact = f.astype(np.float64) != d
        over = np.abs(f.astype(np.float64)) > np.abs(d)
        fi = np.where(inexact & over, fi - 1, fi)
        fi = np.where(inexact, fi | 1, fi)
        return fi.view(np.float32).astype(np.float16).astype(np.float64)

    def arange(self, n):
        return self.np.arange(n)

    def where(self, c, a, b):
        return self.np.where(c, a, b)

    def sum_last(self, a, dims):
        return a.sum(axis=tuple(range(a.ndim - dims, a.ndim)))

    def ints(self, values):
        return self.np.asarray(values, dtype=self.np.int64)

    def swap_last(self, a):
        return a.swapaxes(-1, -2)

    def isfinite(self, a):
        return self.np.isfinite(a)


class TorchBackend:
    def __init__(self, device="cuda"):
        import torch
        import torch.nn.functional as F

        self.torch, self.F, self.device = torch, F, device

    def f64(self, a):
        return a.to(self.torch.float64)

    def zeros(self, shape, like):
        return self.torch.zeros(shape, dtype=self.torch.float64, device=like.device)

    def pad(self, x, top, bottom, left, right):
        return self.F.pad(x, (0, 0, left, right, top, bottom))

    def round16(self, d):
        torch = self.torch
        f = d.to(torch.float32)
        fi = f.view(torch.int32).clone()
        fd = f.to(torch.float64)
        inexact = fd != d
        over = fd.abs() > d.abs()
        fi = torch.where(inexact & over, fi - 1, fi)
        fi = torch.where(inexact, fi | 1, fi)
        return fi.view(torch.float32).to(torch.float16).to(torch.float64)

    def arange(self, n):
        return self.torch.arange(n, device=self.device)

    def where(self, c, a, b):
        return self.torch.where(c, a, b)

    def sum_last(self, a, dims):
        return a.sum(dim=tuple(range(a.dim() - dims, a.dim())))

    def ints(self, values):
        return self.torch.tensor(list(values), dtype=self.torch.int64, device=self.device)

    def swap_last(self, a):
        return a.transpose(-1, -2)

    def isfinite(self, a):
        return self.torch.isfinite(a)


def _pads(p):
    bottom = (p.P - 1) * p.stride[0] + (p.KH - 1) * p.dil[0] + 1 - p.H - p.pad[0]
    right = (p.Q - 1) * p.stride[1] + (p.KW - 1) * p.dil[1] + 1 - p.W - p.pad[2]
    return p.pad[0], bottom, p.pad[2], right


def seq_half(B, op, p, x, w, dy):
    """The sequential binary16 reference (module docstring), float64 array of binary16 values,
    NHWC/HWIO. x, w, dy: binary16 values in any float dtype (NHWC, HWIO, NHWC)."""
    x, w, dy = B.f64(x), B.f64(w), B.f64(dy)
    top, bottom, left, right = _pads(p)
    sh, sw = p.stride
    dh, dw = p.dil
    Cg, Kg = p.C // p.groups, p.K // p.groups
    if op == "fprop":
        xp = B.pad(x, top, bottom, left, right)
        acc = B.zeros((p.N, p.P, p.Q, p.K), x)
        cidx = (B.arange(p.K) // Kg) * Cg
        for kh in range(p.KH):
            for kw in range(p.KW):
                rows = xp[
                    :,
                    kh * dh : kh * dh + (p.P - 1) * sh + 1 : sh,
                    kw * dw : kw * dw + (p.Q - 1) * sw + 1 : sw,
                    :,
                ]
                for ci in range(Cg):
                    acc = B.round16(rows[..., cidx + ci] * w[kh, kw, ci, :] + acc)
        return acc
    if op == "dgrad":
        acc = B.zeros((p.N, p.H + top + max(bottom, 0), p.W + left + max(right, 0), p.C), x)
        for kh in range(p.KH):
            for kw in range(p.KW):
                hs = slice(kh * dh, kh * dh + (p.P - 1) * sh + 1, sh)
                ws = slice(kw * dw, kw * dw + (p.Q - 1) * sw + 1, sw)
                for ko in range(Kg):
                    for g in range(p.groups):
                        cs = slice(g * Cg, (g + 1) * Cg)
                        k = g * Kg + ko
                        acc[:, hs, ws, cs] = B.round16(
                            dy[:, :, :, k : k + 1] * w[kh, kw, :, k] + acc[:, hs, ws, cs]
                        )
        return acc[:, top : top + p.H, left : left + p.W, :]
    xp = B.pad(x, top, bottom, left, right)
    acc = B.zeros((p.KH, p.KW, Cg, p.K), x)
    kh = B.arange(p.KH)[:, None, None, None]
    kw = B.arange(p.KW)[None, :, None, None]
    ci = B.arange(Cg)[None, None, :, None]
    c = ((B.arange(p.K) // Kg) * Cg)[None, None, None, :] + ci
    for n in range(p.N):
        for op_ in range(p.P):
            for oq in range(p.Q):
                xs = xp[n, op_ * sh + kh * dh, oq * sw + kw * dw, c]
                acc = B.round16(xs * dy[n, op_, oq, :] + acc)
    return acc


def sampled(B, op, p, x, w, dy, idx):
    """float64 values (a list) of the outputs at linear indices `idx` (an integer array of the
    backend) into NHWC y / NHWC dx / HWIO dw."""
    x, w, dy = B.f64(x), B.f64(w), B.f64(dy)
    top, bottom, left, right = _pads(p)
    sh, sw = p.stride
    dh, dw = p.dil
    Cg, Kg = p.C // p.groups, p.K // p.groups
    if op == "fprop":
        k = idx % p.K
        q = (idx // p.K) % p.Q
        pp = (idx // (p.K * p.Q)) % p.P
        n = idx // (p.K * p.Q * p.P)
        xp = B.pad(x, top, bottom, left, right)
        kh = B.arange(p.KH)[None, :, None, None]
        kw = B.arange(p.KW)[None, None, :, None]
        ci = B.arange(Cg)[None, None, None, :]
        c = ((k // Kg) * Cg)[:, None, None, None] + ci
        patch = xp[
            n[:, None, None, None],
            pp[:, None, None, None] * sh + kh * dh,
            q[:, None, None, None] * sw + kw * dw,
            c,
        ]
        wk = w[kh, kw, ci, k[:, None, None, None]]
        return B.sum_last(patch * wk, 3).tolist()
    if op == "dgrad":
        c = idx % p.C
        wi = (idx // p.C) % p.W
        hi = (idx // (p.C * p.W)) % p.H
        n = idx // (p.C * p.W * p.H)
        total = B.zeros(tuple(idx.shape), x)
        ko = B.arange(Kg)[None, :]
        for kh in range(p.KH):
            for kw in range(p.KW):
                th = hi + top - kh * dh
                tw = wi + left - kw * dw
                ok = (
                    (th >= 0)
                    & (th % sh == 0)
                    & (th // sh < p.P)
                    & (tw >= 0)
                    & (tw % sw == 0)
                    & (tw // sw < p.Q)
                )
                pp = B.where(ok, th // sh, 0 * th)
                qq = B.where(ok, tw // sw, 0 * tw)
                k = ((c // Cg) * Kg)[:, None] + ko
                prod = dy[n[:, None], pp[:, None], qq[:, None], k] * w[kh, kw, (c % Cg)[:, None], k]
                total = total + B.where(ok, prod.sum(-1), 0 * total)
        return total.tolist()
    k = idx % p.K
    ci = (idx // p.K) % Cg
    kw = (idx // (p.K * Cg)) % p.KW
    kh = idx // (p.K * Cg * p.KW)
    c = (k // Kg) * Cg + ci
    xp = B.pad(x, top, bottom, left, right)
    out = []
    for s_ in range(int(idx.shape[0])):
        h0, w0 = int(kh[s_]) * dh, int(kw[s_]) * dw
        rows = xp[
            :, h0 : h0 + (p.P - 1) * sh + 1 : sh, w0 : w0 + (p.Q - 1) * sw + 1 : sw, int(c[s_])
        ]
        out.append(float((rows * dy[:, :, :, int(k[s_])]).sum()))
    return out


def gamma(k: int, u: float) -> float:
    """Higham's gamma_K = K*u / (1 - K*u) (Accuracy and Stability of Numerical Algorithms, 2nd ed.,
    sec. 3.1); inf when K*u >= 1."""
    return k * u / (1 - k * u) if k * u < 1 else math.inf


def half_error_ok(
    gpu_max: float, gpu_mean: float, seq_max: float, seq_mean: float, exact_absmax: float
) -> bool:
    """The Tacc=half acceptance rule (module constants). Errors are |value - float64 exact|."""
    ulp = 2.0 ** (math.floor(math.log2(exact_absmax)) - 10) if exact_absmax > 0 else 2.0**-24
    return bool(
        gpu_max <= HALF_MAX_FACTOR * seq_max + ulp
        and gpu_mean <= HALF_MEAN_FACTOR * seq_mean + 2.0**-24
    )


# --------------------------------------------------------------------------------------------
# Fp16MatMul. x, y: the operands as stored (row-major, adj_x / adj_y layouts, binary16 or binary32
# values in any float dtype); m: abi.MatMul.

U_HALF, U_FLOAT = 2.0**-11, 2.0**-24


def _matrices(B, m, x, y):
    """x and y as [batch, M, K] and [batch, K, N] float64 (the broadcast batch gathered)."""
    xm = x.reshape((m.x_matrices,) + tuple(m.x_shape[-2:]))
    ym = y.reshape((m.y_matrices,) + tuple(m.y_shape[-2:]))
    if m.adj_x:
        xm = B.swap_last(xm)
    if m.adj_y:
        ym = B.swap_last(ym)
    return B.f64(xm[B.ints(m.x_offsets())]), B.f64(ym[B.ints(m.y_offsets())])


def matmul_exact(B, m, x, y, absolute=False):
    """float64 product [*batch, M, N] (of |x| and |y| when `absolute`: sum|x*y| per output)."""
    xb, yb = _matrices(B, m, x, y)
    if absolute:
        xb, yb = abs(xb), abs(yb)
    return (xb @ yb).reshape(m.out_shape())


def seq_half_matmul(B, m, x, y):
    """The CPU contract with Tacc=half (cc/kernels/cpu/matmul_cpu.h): one binary16 accumulator
    per output starting at +0, k ascending, acc = round_binary16(x*y + acc) each step; float64
    array of binary16 values. x, y: binary16 values."""
    xb, yb = _matrices(B, m, x, y)
    acc = B.zeros((m.batch, m.M, m.N), xb)
    for k in range(m.K):
        acc = B.round16(xb[:, :, k : k + 1] * yb[:, k : k + 1, :] + acc)
    return acc.reshape(m.out_shape())


def sampled_matmul(B, m, x, y, idx):
    """float64 values (a list) of the outputs at linear indices `idx` (an integer array of the
    backend) into out [*batch, M, N]; reads only the rows and columns it needs."""
    b, i, j = idx // (m.M * m.N), (idx // m.N) % m.M, idx % m.N
    xm = x.reshape((m.x_matrices,) + tuple(m.x_shape[-2:]))
    ym = y.reshape((m.y_matrices,) + tuple(m.y_shape[-2:]))
    xi, yi = B.ints(m.x_offsets())[b], B.ints(m.y_offsets())[b]
    rows = xm[xi, :, i] if m.adj_x else xm[xi, i, :]  # [n, K]
    cols = ym[yi, j, :] if m.adj_y else ym[yi, :, j]  # [n, K]
    return (B.f64(rows) * B.f64(cols)).sum(-1).tolist()


def float_acc_bound(k: int, absum, exact, t: str):
    """Tacc=float: binary32 accumulation (gamma_K with u = 2^-24 on sum|x*y|), then one rounding
    to T (u_T |exact|, and half the binary16 subnormal spacing, 2^-25, where that rounding is
    subnormal). Elementwise on either backend."""
    u_t = U_HALF if t == "half" else U_FLOAT
    return (
        gamma(k, U_FLOAT) * absum * (1 + u_t)
        + u_t * abs(exact)
        + (2.0**-25 if t == "half" else 0.0)
    )


def half_acc_bound(k: int, absum):
    """Tacc=half: gamma_K with u = 2^-11 on sum|x*y| (Higham, Accuracy and Stability of
    Numerical Algorithms, 2nd ed., sec. 3.1), plus K * 2^-25: each fused step whose result is a
    binary16 subnormal is off by up to half the subnormal spacing, which the relative model does
    not cover. inf (no bound) when K * 2^-11 >= 1, i.e. K >= 2048."""
    return gamma(k, U_HALF) * absum + k * 2.0**-25


def matmul_verdict(B, got, exact, absum, k: int, t: str, tacc: str, seq=None, sequential=False):
    """The matmul section's rule on random data (non-empty results): (ok, recorded fields).
    got: the result (any float dtype); exact, absum: matmul_exact of the data and of its
    absolute values.
      Tacc=float  every |got - exact| <= float_acc_bound, and no inf/NaN;
      Tacc=half   every |got - exact| <= half_acc_bound (no bound when K >= 2048), no inf/NaN,
                  and against the sequential binary16 sum `seq`: bit for bit where the direct
                  kernel ran (`sequential`), else half_error_ok (another summation order, not a
                  permuted or misplaced result: the gamma bound alone is loose, about K/2048 of
                  sum|x*y|).
    Recorded: max and mean error, max and mean error over the bound, relative error norm."""
    g = B.f64(got)
    err = abs(g - exact)
    n = math.prod(err.shape)
    assert n > 0, "matmul_verdict needs a non-empty result"
    u = U_FLOAT if tacc == "float" else U_HALF
    bound = float_acc_bound(k, absum, exact, t) if tacc == "float" else half_acc_bound(k, absum)
    norm_e, norm_x = float((err * err).sum()) ** 0.5, float((exact * exact).sum()) ** 0.5
    row = {
        "K": k,
        "nonfinite": int((~B.isfinite(g)).sum()),
        "max_err": float(err.max()),
        "mean_err": float(err.sum()) / n,
        "rel_err_norm": norm_e / norm_x if norm_x > 0 else norm_e,
        "max_err_over_bound": None,
        "mean_err_over_bound": None,
    }
    ok = row["nonfinite"] == 0
    if math.isfinite(gamma(k, u)):
        ratio = err / (bound + (bound == 0))  # a zero bound (sum|x*y| = 0) demands exact zero
        row["max_err_over_bound"] = float(ratio.max())
        row["mean_err_over_bound"] = float(ratio.sum()) / n
        row["nonzero_where_bound_is_zero"] = int(((bound == 0) & (err != 0)).sum())
        ok = ok and row["max_err_over_bound"] <= 1.0 and row["nonzero_where_bound_is_zero"] == 0
    if tacc == "half" and seq is not None:
        seq_err = abs(seq - exact)
        row.update(seq_max=float(seq_err.max()), seq_mean=float(seq_err.sum()) / n)
        if sequential:
            row["mismatches_vs_sequential"] = int((g != seq).sum())
            ok = ok and row["mismatches_vs_sequential"] == 0
        else:
            ok = ok and half_error_ok(
                row["max_err"], row["mean_err"], row["seq_max"], row["seq_mean"],
                float(abs(exact).max()),
            )  # fmt: skip
    return bool(ok), row
