"""tests/support/reference.py's binary16 step against an independent oracle: Berkeley SoftFloat's
f16_mulAdd (PyPI softfloatpy), which computes x*w + acc exactly and rounds once, to nearest even
(SoftFloat's softfloat_round_near_even; default tininess after rounding, which does not change
results, only the underflow flag). docs/numerics.md gives the argument why the reference's
float64 route equals it; this test checks it on every edge class and on random triples.

Compared bit for bit, except that any NaN equals any NaN (payloads are not part of the contract).
SOFTFLOAT_RANDOM sets the random count (`make fuzz` uses a larger one).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from support import reference as R

sf = pytest.importorskip("softfloatpy")
RANDOM = int(os.environ.get("SOFTFLOAT_RANDOM", "2000000"))


def softfloat_fma(x, w, acc):
    """f16_mulAdd(x, w, acc) per element, on uint16 bit patterns."""
    f16, fma = sf.Float16.from_bytes, sf.f16_mul_add
    sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)
    xb, wb, ab = (np.asarray(v, ">u2").tobytes() for v in (x, w, acc))
    out = bytearray(len(xb))
    for i in range(0, len(xb), 2):
        out[i : i + 2] = fma(f16(xb[i : i + 2]), f16(wb[i : i + 2]), f16(ab[i : i + 2])).to_bytes()
    return np.frombuffer(bytes(out), ">u2").astype(np.uint16)


def compare(x_bits, w_bits, acc_bits):
    x_bits, w_bits, acc_bits = np.broadcast_arrays(
        *(np.asarray(v, np.uint16) for v in (x_bits, w_bits, acc_bits))
    )
    x_bits, w_bits, acc_bits = (v.ravel() for v in (x_bits, w_bits, acc_bits))
    ours = R.fma_half(
        x_bits.view(np.float16), w_bits.view(np.float16), acc_bits.view(np.float16)
    ).view(np.uint16)
    oracle = softfloat_fma(x_bits, w_bits, acc_bits)
    nan = lambda b: ((b & 0x7C00) == 0x7C00) & ((b & 0x03FF) != 0)  # noqa: E731
    same = (ours == oracle) | (nan(ours) & nan(oracle))
    bad = np.flatnonzero(~same)
    assert bad.size == 0, (
        f"{bad.size} of {same.size} differ; first: x={x_bits[bad[0]]:#06x} "
        f"w={w_bits[bad[0]]:#06x} acc={acc_bits[bad[0]]:#06x}: reference {ours[bad[0]]:#06x}, "
        f"SoftFloat {oracle[bad[0]]:#06x}"
    )
    return same.size


def bits(v):
    return np.asarray(v, np.float16).view(np.uint16)


ALL = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)  # every binary16 bit pattern
FINITE = ALL[(ALL & 0x7C00) != 0x7C00]


def tie_products(acc_bits):
    """For each acc, (x, w) pairs (bit patterns, shape [len(acc), 18]) whose exact product is
    +-2^e * m with 2^e = ulp(acc) / 4, / 2 (the tie: acc + x*w is a binary16 midpoint) and ulp,
    and m in {1, 1 + 2^-10, 1 - 2^-11} (just beside it)."""
    e_acc = np.maximum((acc_bits.astype(np.int64) >> 10) & 0x1F, 1) - 25  # log2 ulp(acc)
    e = np.clip(e_acc[:, None] + np.array([-2, -1, 0])[None, :], -48, 15)
    e = np.repeat(e, 6, axis=1)
    m = np.tile(np.repeat([1.0, 1.0 + 2**-10, 1.0 - 2**-11], 2), 3)[None, :]
    sign = np.tile([1.0, -1.0], 9)[None, :]
    b = np.maximum(-24, e - 15)  # w = 2^b, x = sign * m * 2^a: x normal (m exact) if a >= -14
    a = e - b
    m = np.where(a >= -14, m, 1.0)
    x, w = sign * m * 2.0**a, 2.0**b + 0 * a
    assert np.all(x.astype(np.float16).astype(np.float64) * w.astype(np.float16) == x * w)
    return bits(x), bits(w)


def test_ties_at_every_exponent():
    # Every finite acc (all exponents, even and odd significands), with products that put
    # acc + x*w on a binary16 midpoint, and just beside it.
    x, w = tie_products(FINITE)
    n = compare(x, w, FINITE[:, None])
    assert n == FINITE.size * 18


def test_subnormal_products_and_sums():
    rng = np.random.default_rng(1)
    small = ALL[(ALL & 0x7FFF) < 0x0400]  # +-0 and the subnormals
    tiny_norm = ALL[((ALL & 0x7FFF) >= 0x0400) & ((ALL & 0x7FFF) < 0x1400)]
    acc = np.concatenate([small, tiny_norm])
    x = rng.choice(
        np.concatenate([small, tiny_norm, bits([1.0, -1.0, 0.5, 2.0**-12])]), (acc.size, 24)
    )
    w = rng.choice(
        np.concatenate([tiny_norm, bits([1.0, -0.75, 2.0**10, 2.0**-5])]), (acc.size, 24)
    )
    compare(x, w, acc[:, None])


def test_overflow_at_65520():
    acc = bits([65504.0, -65504.0, 65472.0, -65472.0, 65440.0, 32768.0, 0.0])
    # products 16 (65504 + 16 = 65520: the tie that rounds to inf), 16 - 2^-7, 15.5, 32, 1, 2^-8
    x = bits([16.0, 15.9921875, 15.5, 32.0, 1.0, 2.0**-8, 65504.0, 8.0])
    w = bits([1.0, -1.0, 2.0, 0.5, 4096.0, 2.0**-1])
    compare(x[:, None, None], w[None, :, None], acc[None, None, :])
    inf = R.fma_half(np.float16(16), np.float16(1), np.float16(65504))
    assert np.isinf(inf) and inf > 0
    assert R.fma_half(np.float16(15.9921875), np.float16(1), np.float16(65504)) == 65504


def test_signed_zeros_and_specials():
    special = bits(
        [
            0.0,
            -0.0,
            np.inf,
            -np.inf,
            np.nan,
            1.0,
            -1.0,
            65504.0,
            -65504.0,
            2.0**-24,
            -(2.0**-24),
            2.0**-14,
        ]
    )
    n = compare(special[:, None, None], special[None, :, None], special[None, None, :])
    assert n == special.size**3
    # +0 + (-0 * 1) is +0 under round to nearest (IEEE 754-2019, 6.3); -0 + -0 is -0.
    assert bits(R.fma_half(np.float16(-0.0), np.float16(1), np.float16(0.0))) == 0x0000
    assert bits(R.fma_half(np.float16(-0.0), np.float16(1), np.float16(-0.0))) == 0x8000
    assert bits(R.fma_half(np.float16(1), np.float16(-1), np.float16(1))) == 0x0000


def test_random_triples():
    rng = np.random.default_rng(2026)
    n = RANDOM
    x = rng.integers(0, 1 << 16, n, dtype=np.uint32).astype(np.uint16)
    w = rng.integers(0, 1 << 16, n, dtype=np.uint32).astype(np.uint16)
    acc = rng.integers(0, 1 << 16, n, dtype=np.uint32).astype(np.uint16)
    # Half of them with exponents drawn so that x*w is near acc (where rounding matters).
    near = rng.random(n) < 0.5
    e_acc = (acc >> 10) & 0x1F
    e_x = rng.integers(1, 31, n)
    e_w = np.clip(e_acc.astype(np.int64) - e_x + 15 + rng.integers(-3, 4, n), 0, 30)
    x = np.where(near, (x & 0x83FF) | (e_x.astype(np.uint16) << 10), x).astype(np.uint16)
    w = np.where(near, (w & 0x83FF) | (e_w.astype(np.uint16) << 10), w).astype(np.uint16)
    assert compare(x, w, acc) == n


def test_the_oracle_tells_double_rounding_apart():
    # An fp32 sum rounded again to binary16 (two roundings) must fail on products with 22-bit
    # significands half an ulp below acc (README: acc 2050, x = 1 + 2^-10, w = 1 - 2^-10 gives
    # 2050 once rounded, 2052 twice): the comparison can fail.
    acc = FINITE[(FINITE & 0x7C00) >= 0x0800]  # exponents -13 .. 15
    e = ((acc.astype(np.int64) >> 10) & 0x1F) - 26  # log2(ulp(acc) / 2)
    x = bits((1 + 2.0**-10) * 2.0 ** np.clip(e, -14, 15))
    w = bits((1 - 2.0**-10) * 2.0 ** (e - np.clip(e, -14, 15)))
    f32 = lambda b: b.view(np.float16).astype(np.float32)  # noqa: E731
    with np.errstate(invalid="ignore", over="ignore"):
        double = (f32(x) * f32(w) + f32(acc)).astype(np.float16).view(np.uint16)
    oracle = softfloat_fma(x, w, acc)
    assert np.count_nonzero(double != oracle) > 1000
    compare(x, w, acc)
