"""Independent NumPy references for the convolution numerics contract.

Nothing here calls TensorFlow or tf_fp16ops. The binary16 step (fma_half) is computed as
np.float16(float64(x) * float64(w) + float64(acc)): the product of two binary16 numbers is exact
in binary64, the binary64 sum is exact or its rounding cannot move the result across a
binary16 rounding boundary (the double-rounding argument of docs/numerics.md), and NumPy
converts binary64 to binary16 directly with round to nearest even
(numpy/_core/src/npymath/halffloat.cpp, npy_doublebits_to_halfbits).
tests/ops/test_softfloat_oracle.py checks fma_half against Berkeley SoftFloat's f16_mulAdd.
Layouts: activations NHWC, filters HWIO [KH, KW, Cg, K]; NCHW callers transpose first.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Geometry:
    N: int
    H: int
    W: int
    C: int
    KH: int
    KW: int
    Cg: int
    K: int
    P: int
    Q: int
    sh: int
    sw: int
    dh: int
    dw: int
    pt: int
    pb: int
    pl: int
    pr: int

    @property
    def groups(self) -> int:
        return self.C // self.Cg


def geometry(x_shape, w_shape, strides=(1, 1), dilations=(1, 1), padding="VALID") -> Geometry:
    """tf.nn.conv2d's output size and padding rules.

    Source: tensorflow/core/framework/kernel_shape_util.cc.
    """
    N, H, W, C = x_shape
    KH, KW, Cg, K = w_shape
    sh, sw = strides
    dh, dw = dilations
    eh, ew = (KH - 1) * dh + 1, (KW - 1) * dw + 1
    if padding == "VALID":
        pt = pb = pl = pr = 0
    elif padding == "SAME":
        P, Q = -(-H // sh), -(-W // sw)
        th, tw = max((P - 1) * sh + eh - H, 0), max((Q - 1) * sw + ew - W, 0)
        pt, pb, pl, pr = th // 2, th - th // 2, tw // 2, tw - tw // 2
    else:  # ((top, bottom), (left, right))
        (pt, pb), (pl, pr) = padding
    P = (H + pt + pb - eh) // sh + 1
    Q = (W + pl + pr - ew) // sw + 1
    return Geometry(N, H, W, C, KH, KW, Cg, K, P, Q, sh, sw, dh, dw, pt, pb, pl, pr)


def fma_half(x, w, acc):
    """round_binary16(x * w + acc) for binary16 arrays x, w, acc (broadcasting), one rounding to
    nearest even: the __hfma step of the numerics contract."""
    x, w, acc = (np.asarray(v, np.float16) for v in (x, w, acc))
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf, inf * 0: NaN, as IEEE 754
        return (x.astype(np.float64) * w.astype(np.float64) + acc.astype(np.float64)).astype(
            np.float16
        )


def _step(acc, a, b, accumulation):
    if accumulation == "half":
        return fma_half(a, b, acc)
    if accumulation == "float32":
        # fl32(x * w + acc): for binary16 operands the product is exact in float64, and float64
        # rounds the sum of two binary32 numbers so that the cast to float32 rounds it once
        # (53 >= 2 * 24 + 2; Figueroa, "When is double rounding innocuous?", SIGNUM 1995).
        p = a.astype(np.float16).astype(np.float64) * b.astype(np.float16).astype(np.float64)
        return (acc.astype(np.float64) + p).astype(np.float32)
    return acc + a.astype(np.float64) * b.astype(np.float64)  # float64: the exact-sum reference


def _acc_dtype(accumulation):
    return {"half": np.float16, "float32": np.float32}.get(accumulation, np.float64)


def _padded(x, g: Geometry):
    return np.pad(x, ((0, 0), (g.pt, g.pb), (g.pl, g.pr), (0, 0)))


def conv2d(x, w, strides=(1, 1), dilations=(1, 1), padding="VALID", accumulation="half"):
    """Forward convolution. accumulation 'half': sequential binary16 fused steps over
    (kh, kw, ci); 'float32': sequential binary32 fused steps in the same order (binary16-valued
    operands only); 'float64': exact-ish float64 sum (reference for float accumulation)."""
    g = geometry(x.shape, w.shape, strides, dilations, padding)
    xp = _padded(x, g)
    Kg = g.K // g.groups
    group_of_k = np.arange(g.K) // Kg
    acc = np.zeros((g.N, g.P, g.Q, g.K), _acc_dtype(accumulation))
    for kh in range(g.KH):
        for kw in range(g.KW):
            rows = xp[
                :,
                kh * g.dh : kh * g.dh + (g.P - 1) * g.sh + 1 : g.sh,
                kw * g.dw : kw * g.dw + (g.Q - 1) * g.sw + 1 : g.sw,
                :,
            ]
            for ci in range(g.Cg):
                xs = rows[..., group_of_k * g.Cg + ci]  # [N, P, Q, K]
                acc = _step(acc, xs, w[kh, kw, ci, :], accumulation)
    return acc


def conv2d_backprop_input(
    x_shape, w, dy, strides=(1, 1), dilations=(1, 1), padding="VALID", accumulation="half"
):
    """dgrad with the reduction order (kh, kw, ko) for each input element."""
    g = geometry(x_shape, w.shape, strides, dilations, padding)
    Kg = g.K // g.groups
    acc = np.zeros(
        (g.N, g.H + g.pt + g.pb, g.W + g.pl + g.pr, g.C),
        _acc_dtype(accumulation),
    )
    for kh in range(g.KH):
        for kw in range(g.KW):
            hs = slice(kh * g.dh, kh * g.dh + (g.P - 1) * g.sh + 1, g.sh)
            ws = slice(kw * g.dw, kw * g.dw + (g.Q - 1) * g.sw + 1, g.sw)
            for ko in range(Kg):
                for gr in range(g.groups):
                    cs = slice(gr * g.Cg, (gr + 1) * g.Cg)
                    k = gr * Kg + ko
                    acc[:, hs, ws, cs] = _step(
                        acc[:, hs, ws, cs], dy[:, :, :, k : k + 1], w[kh, kw, :, k], accumulation
                    )
    return acc[:, g.pt : g.pt + g.H, g.pl : g.pl + g.W, :]


def conv2d_backprop_filter(
    x, w_shape, dy, strides=(1, 1), dilations=(1, 1), padding="VALID", accumulation="half"
):
    """wgrad with the reduction order (n, p, q) for each filter element; padded zeros take part."""
    g = geometry(x.shape, w_shape, strides, dilations, padding)
    xp = _padded(x, g)
    Kg = g.K // g.groups
    group_of_k = np.arange(g.K) // Kg
    acc = np.zeros((g.KH, g.KW, g.Cg, g.K), _acc_dtype(accumulation))
    kh = np.arange(g.KH)[:, None, None, None]
    kw = np.arange(g.KW)[None, :, None, None]
    ci = np.arange(g.Cg)[None, None, :, None]
    c = group_of_k[None, None, None, :] * g.Cg + ci
    for n in range(g.N):
        for p in range(g.P):
            for q in range(g.Q):
                xs = xp[n, p * g.sh + kh * g.dh, q * g.sw + kw * g.dw, c]  # [KH, KW, Cg, K]
                acc = _step(acc, xs, np.broadcast_to(dy[n, p, q, :], acc.shape), accumulation)
    return acc


def gamma_bound(terms: int, abs_sum, unit_roundoff: float):
    """Higham's bound γ_K·Σ|x·w| with γ_K = K·u / (1 − K·u) (Accuracy and Stability of Numerical
    Algorithms, 2nd ed., §3.1) for a K-term recursive sum."""
    ku = terms * unit_roundoff
    return ku / (1 - ku) * abs_sum


def depthwise_conv2d(x, w, strides=(1, 1), dilations=(1, 1), padding="VALID", accumulation="half"):
    """Depthwise convolution in the Keras/TF layout: x NHWC, w [KH, KW, C, M]; output channel
    c*M + m = sum over (kh, kw) ascending of x[..., c] * w[kh, kw, c, m]
    (tf.nn.depthwise_conv2d's channel order)."""
    KH, KW, C, M = w.shape
    g = geometry(x.shape, (KH, KW, 1, C * M), strides, dilations, padding)
    xp = _padded(x, g)
    acc = np.zeros((g.N, g.P, g.Q, C, M), _acc_dtype(accumulation))
    for kh in range(KH):
        for kw in range(KW):
            rows = xp[
                :,
                kh * g.dh : kh * g.dh + (g.P - 1) * g.sh + 1 : g.sh,
                kw * g.dw : kw * g.dw + (g.Q - 1) * g.sw + 1 : g.sw,
                :,
            ]
            acc = _step(acc, rows[..., :, None], w[kh, kw][None, None, None], accumulation)
    return acc.reshape(g.N, g.P, g.Q, C * M)


def matmul(x, w, accumulation="half"):
    """x [M, Cin] @ w [Cin, K]: one accumulator per (m, k), over ci ascending."""
    acc = np.zeros((x.shape[0], w.shape[1]), _acc_dtype(accumulation))
    for ci in range(x.shape[1]):
        acc = _step(acc, x[:, ci : ci + 1], w[ci : ci + 1, :], accumulation)
    return acc


def matmul_backprop_input(w, dy, accumulation="half"):
    """dx [M, Cin] = dy [M, K] @ w.T: over k ascending."""
    acc = np.zeros((dy.shape[0], w.shape[0]), _acc_dtype(accumulation))
    for k in range(w.shape[1]):
        acc = _step(acc, dy[:, k : k + 1], w[None, :, k], accumulation)
    return acc


def matmul_backprop_filter(x, dy, accumulation="half"):
    """dw [Cin, K] = x.T @ dy: over the rows m ascending."""
    acc = np.zeros((x.shape[1], dy.shape[1]), _acc_dtype(accumulation))
    for m in range(x.shape[0]):
        acc = _step(acc, x[m][:, None], dy[m][None, :], accumulation)
    return acc


def batch_matmul(x, y, adj_x=False, adj_y=False, accumulation="half"):
    """BatchMatMulV2's product: x [..., M, K] (adj_x: [..., K, M]) @ y [..., K, N] (adj_y:
    [..., N, K]), batch dimensions broadcast as NumPy's; one accumulator per output, starting at
    +0, over k ascending (accumulation "half": the fma_half chain; "float64": exact-ish sums)."""
    x, y = np.asarray(x), np.asarray(y)
    if adj_x:
        x = np.swapaxes(x, -1, -2)
    if adj_y:
        y = np.swapaxes(y, -1, -2)
    batch = np.broadcast_shapes(x.shape[:-2], y.shape[:-2])
    x = np.broadcast_to(x, batch + x.shape[-2:])
    y = np.broadcast_to(y, batch + y.shape[-2:])
    dtype = np.float16 if accumulation == "half" else np.float64
    acc = np.zeros(batch + (x.shape[-2], y.shape[-1]), dtype)
    for k in range(x.shape[-1]):
        acc = _step(acc, x[..., :, k : k + 1], y[..., k : k + 1, :], accumulation)
    return acc


def einsum_half(equation, a, b):
    """Independent of the lowering: one binary16 accumulator per output, one rounding per step,
    over the contracted labels' index tuples in row-major order (labels in a's order); each
    step adds the exact float64 product a * b (binary16 products are exact in binary64) to the
    accumulator and rounds once, as fma_half does (labels: letters, no "...")."""
    lhs, rest = equation.split(",")
    rhs, out = rest.split("->")
    con = [c for c in lhs if c in rhs and c not in out]
    at = np.transpose(
        a, [lhs.index(c) for c in con] + [i for i, c in enumerate(lhs) if c not in con]
    )
    bt = np.transpose(
        b, [rhs.index(c) for c in con] + [i for i, c in enumerate(rhs) if c not in con]
    )
    a_rest = "".join(c for c in lhs if c not in con)
    b_rest = "".join(c for c in rhs if c not in con)
    acc = None
    for idx in itertools.product(*[range(a.shape[lhs.index(c)]) for c in con]):
        term = np.einsum(
            f"{a_rest},{b_rest}->{out}", at[idx].astype(np.float64), bt[idx].astype(np.float64)
        )
        acc = np.zeros(term.shape, np.float16) if acc is None else acc
        with np.errstate(invalid="ignore", over="ignore"):
            acc = (acc.astype(np.float64) + term).astype(np.float16)
    return acc
