"""The GPU path's logic on a CPU: the direct kernels, layout transforms and the implementation
table of cc/kernels/gpu, compiled as host C++ (TF_FP16OPS_HOST_BUILD: each kernel body runs as a
loop over its grid on the calling thread) into build/gpu_host/libtf_fp16ops_gpu_host.so by
`make gpu-host-lib`, driven through the C ABI (cc/kernels/gpu/c_api.cc) and checked against the
NumPy references of tests/support/reference.py and hand-computed values. CUTLASS's can_implement is
compiled into that library when nvcc is present; the table tests need it."""

from __future__ import annotations

import ctypes
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from support import reference as ref

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "gpu_check"))
import problems  # noqa: E402
from abi import AbiError, Library, MatMul, Problem  # noqa: E402

LIB = os.path.join(ROOT, "build", "gpu_host", "libtf_fp16ops_gpu_host.so")
# Made-up devices: (driver_version, compute_capability, sm90a_code).
TURING = (13000, 75, 0)  # no implicit-GEMM path: every launch takes the direct kernels
AMPERE = (13000, 80, 0)
H200 = (13000, 90, 1)
# A V100 (compute capability 7.0) on an R525 driver (CUDA 12.0), and a T4 (7.5).
VOLTA = (12000, 70, 0)
XAVIER = (12000, 72, 0)
PAIRS = (("half", "half"), ("half", "float"), ("float", "float"))
NP_T = {"half": np.float16, "float": np.float32}


@pytest.fixture(scope="module")
def lib() -> Library:
    subprocess.run(["make", "-s", "gpu-host-lib"], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return Library(LIB)


@pytest.fixture(scope="module")
def cutlass(lib) -> Library:
    if not lib.lib.tfo_host_has_cutlass():
        pytest.skip("host library built without nvcc: CUTLASS can_implement not compiled")
    return lib


def ref_padding(p: Problem):
    return ((p.pad[0], p.pad[1]), (p.pad[2], p.pad[3]))


def to_layout(a: np.ndarray, nchw: bool) -> np.ndarray:
    return np.ascontiguousarray(a.transpose(0, 3, 1, 2) if nchw else a)


def from_layout(a: np.ndarray, nchw: bool) -> np.ndarray:
    return a.transpose(0, 2, 3, 1) if nchw else a


def run(lib, op, p: Problem, t, tacc, x, w, dy, path="auto", device=TURING):
    """Runs one pass on the host library; x, dy NHWC, w HWIO; returns (out NHWC/HWIO, used)."""
    xs, ws_, ys = p.shapes()
    xl = to_layout(x.astype(NP_T[t]), p.nchw)
    wl = np.ascontiguousarray(w.astype(NP_T[t]))
    dyl = to_layout(dy.astype(NP_T[t]), p.nchw)
    a, b = {"fprop": (xl, wl), "dgrad": (wl, dyl), "wgrad": (xl, dyl)}[op]
    out = np.full({"fprop": ys, "dgrad": xs, "wgrad": ws_}[op], np.nan, NP_T[t])
    _, nbytes = lib.select(op, p, t, tacc, path, device)
    ws = np.zeros(max(nbytes, 1), np.uint8)
    used = lib.launch(
        op,
        p,
        t,
        tacc,
        a.ctypes.data,
        b.ctypes.data,
        out.ctypes.data,
        ws.ctypes.data,
        nbytes,
        0,
        path,
        device,
    )
    return (out if op == "wgrad" else from_layout(out, p.nchw)), used


def reference(op, p: Problem, x, w, dy, accumulation):
    kw = dict(strides=p.stride, dilations=p.dil, padding=ref_padding(p), accumulation=accumulation)
    if op == "fprop":
        return ref.conv2d(x, w, **kw)
    if op == "dgrad":
        return ref.conv2d_backprop_input(x.shape, w, dy, **kw)
    return ref.conv2d_backprop_filter(x, w.shape, dy, **kw)


def operands(p: Problem, rng, kind: str):
    """NHWC x, HWIO w, NHWC dy as float16 values: integers in [-b, b] with b <= 2 and
    (longest reduction) * b^2 <= 2048, or uniform in [-1, 1]."""
    x_shape = (p.N, p.H, p.W, p.C)
    w_shape = (p.KH, p.KW, p.C // p.groups, p.K)
    y_shape = (p.N, p.P, p.Q, p.K)
    if kind == "int":
        longest = max(p.reduction_length(op) for op in OPS)
        b = max(1, min(2, int(math.sqrt(2048 / longest))))
        assert longest * b * b <= 2048
        draw = lambda s: rng.integers(-b, b + 1, s).astype(np.float16)  # noqa: E731
    else:
        draw = lambda s: rng.uniform(-1, 1, s).astype(np.float16)  # noqa: E731
    return draw(x_shape), draw(w_shape), draw(y_shape)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    a16, b16 = np.asarray(a, np.float16), np.asarray(b, np.float16)
    return a16.shape == b16.shape and np.array_equal(a16.view(np.uint16), b16.view(np.uint16))


# Small shapes covering every index path of the direct kernels (sizes kept small: the
# references loop in Python).
SHAPES = [
    Problem("odd_valid", 2, 7, 5, 3, 5, 3, 3),
    Problem("stride2_same_asym", 2, 10, 10, 4, 6, 3, 3, stride=(2, 2), pad=(0, 1, 0, 1)),
    Problem("dilation2_explicit_asym", 1, 9, 8, 4, 4, 3, 3, dil=(2, 2), pad=(2, 1, 0, 3)),
    Problem(
        "stride_1x2_dil_2x1", 2, 9, 12, 3, 4, 3, 3, stride=(1, 2), dil=(2, 1), pad=(1, 2, 0, 1)
    ),
    Problem("valid_leftover_rows", 1, 10, 11, 2, 3, 3, 3, stride=(2, 2)),
    Problem("1x1_stride2", 2, 6, 6, 5, 7, 1, 1, stride=(2, 2)),
    Problem("groups2", 2, 6, 7, 4, 6, 3, 3, pad=(1, 1, 1, 1), groups=2),
    Problem("depthwise_x2_s2", 2, 7, 7, 4, 8, 3, 3, stride=(2, 2), pad=(0, 1, 0, 1), groups=4),
    Problem("nchw_asym", 2, 7, 6, 3, 5, 2, 3, stride=(2, 1), pad=(1, 0, 2, 1), nchw=True),
    Problem("nchw_groups3", 1, 5, 6, 6, 9, 3, 3, pad=(1, 1, 1, 1), groups=3, nchw=True),
    Problem("wgrad_split_k", 3, 15, 15, 2, 3, 3, 3, pad=(1, 1, 1, 1)),  # slices of 68 terms
]
OPS = ("fprop", "dgrad", "wgrad")


@pytest.mark.parametrize("p", SHAPES, ids=lambda p: p.name)
def test_direct_integer_data_is_exact(lib, p):
    """Integer data with |partial sums| <= 2048: every accumulator gives the exact sum."""
    rng = np.random.default_rng(1)
    x, w, dy = operands(p, rng, "int")
    for op in OPS:
        exact = reference(op, p, x, w, dy, "float64")
        for t, tacc in PAIRS:
            got, used = run(lib, op, p, t, tacc, x, w, dy)
            assert used == "fallback"
            np.testing.assert_array_equal(
                got.astype(np.float64), exact, err_msg=f"{op} T={t} Tacc={tacc}"
            )


@pytest.mark.parametrize("p", SHAPES, ids=lambda p: p.name)
def test_direct_half_accumulation_is_the_sequential_contract(lib, p):
    """Tacc=half on random data: bit for bit the reference's sequential binary16 fused steps
    (fprop over (kh, kw, ci), dgrad over (kh, kw, ko), wgrad over (n, p, q))."""
    rng = np.random.default_rng(2)
    x, w, dy = operands(p, rng, "random")
    for op in OPS:
        want = reference(op, p, x, w, dy, "half")
        got, used = run(lib, op, p, "half", "half", x, w, dy, path="fallback", device=H200)
        assert used == "fallback"
        assert same_bits(got, want), f"{op}: {np.argwhere(got != want)[:5]}"


@pytest.mark.parametrize("p", SHAPES, ids=lambda p: p.name)
def test_direct_float_accumulation_within_gamma_bound(lib, p):
    """Tacc=float: |ours - exact| <= gamma_K(2^-24) * sum|x*w| * (1 + u_T) + u_T * |exact|
    + (half: 2^-25, the largest binary16 subnormal rounding error) -- Higham, Accuracy and
    Stability of Numerical Algorithms, 2nd ed., sec. 3.1 (any summation order, so the split wgrad
    too). A mis-indexed term would exceed it."""
    rng = np.random.default_rng(3)
    x, w, dy = operands(p, rng, "random")
    ax, aw, ady = np.abs(x), np.abs(w), np.abs(dy)
    for op in OPS:
        exact = reference(op, p, x, w, dy, "float64")
        abs_sum = reference(op, p, ax, aw, ady, "float64")
        g = p.reduction_length(op) * 2.0**-24 / (1 - p.reduction_length(op) * 2.0**-24)
        for t, tacc in (("half", "float"), ("float", "float")):
            u_t = 2.0**-11 if t == "half" else 2.0**-24
            got, _ = run(lib, op, p, t, tacc, x, w, dy)
            err = np.abs(got.astype(np.float64) - exact)
            bound = (
                g * abs_sum * (1 + u_t) + u_t * np.abs(exact) + (2.0**-25 if t == "half" else 0.0)
            )
            assert np.all(err <= bound), f"{op} T={t}: max err/bound {np.max(err / bound)}"


def test_wgrad_float_splits_and_half_stays_sequential(lib):
    """Item of the direct wgrad: Tacc=float cuts the (n, p, q) reduction into slices, Tacc=half
    does not (its result is the sequential order, checked bit for bit above)."""
    p = SHAPES[-1]  # 3*15*15 = 675 terms, 54 outputs
    assert lib.direct_wgrad_splits(p, "half") == 1
    splits = lib.direct_wgrad_splits(p, "float")
    assert splits == 675 // 64  # at least 64 terms a slice
    _, nbytes = lib.select("wgrad", p, "half", "float", "fallback", TURING)
    assert nbytes == -(-(splits * 3 * 3 * 2 * 3 * 4) // 256) * 256  # float partials, 256-aligned
    assert lib.select("wgrad", p, "half", "half", "fallback", TURING) == ("fallback", 0)


def test_hand_computed_cases(lib):
    """taps49 (49 taps of 0.2*0.1) and tie ([2050, 1+2^-10] . [1, 1-2^-10]) on the direct kernel:
    Tacc=half rounds every step (taps49 0.98046875, tie 2050), Tacc=float sums in binary32 and
    rounds once (taps49 0.9794921875; tie: 2050.99999905 -> 2051.0 in binary32, a binary16 tie that
    rounds to even, 2052)."""
    p = Problem("c1", 1, 9, 9, 1, 1, 7, 7)
    x = np.full((1, 9, 9, 1), 0.2, np.float16)
    w = np.full((7, 7, 1, 1), 0.1, np.float16)
    for tacc, want in (("half", 0.98046875), ("float", 0.9794921875)):
        got, _ = run(lib, "fprop", p, "half", tacc, x, w, np.zeros((1, 3, 3, 1)))
        assert np.all(got == np.float16(want)), (tacc, got.ravel())
    p2 = Problem("c2", 1, 1, 1, 2, 1, 1, 1)
    x2 = np.array([2050.0, 1 + 2**-10], np.float16).reshape(1, 1, 1, 2)
    w2 = np.array([1.0, 1 - 2**-10], np.float16).reshape(1, 1, 2, 1)
    for tacc, want in (("half", 2050.0), ("float", 2052.0)):
        got, _ = run(lib, "fprop", p2, "half", tacc, x2, w2, np.zeros((1, 1, 1, 1)))
        assert got.ravel()[0] == want, (tacc, got.ravel())


@pytest.mark.parametrize("case", ["N0", "C0", "K0"])
def test_empty_dimensions(lib, case):
    """N=0, C=0 or K=0: outputs that exist are sums over nothing, +0; no out-of-bounds access."""
    sizes = {"N0": (0, 5, 5, 4, 6), "C0": (2, 5, 5, 0, 6), "K0": (2, 5, 5, 4, 0)}[case]
    N, H, W, C, K = sizes
    p = Problem(case, N, H, W, C, K, 3, 3, pad=(1, 1, 1, 1))
    x, w, dy = (
        np.ones((N, H, W, C), np.float16),
        np.ones((3, 3, C, K), np.float16),
        np.ones((N, H, W, K), np.float16),
    )
    for op in OPS:
        for t, tacc in PAIRS:
            got, used = run(lib, op, p, t, tacc, x, w, dy)
            assert used == "fallback"
            assert got.size == 0 or (np.all(got == 0) and not np.any(np.signbit(got))), (op, t)


def test_launch_checks_workspace_and_pointers(lib):
    p = Problem("nchw", 8, 6, 6, 8, 8, 3, 3, pad=(1, 1, 1, 1), nchw=True)
    x = np.ones((8, 8, 6, 6), np.float16)
    w = np.ones((3, 3, 8, 8), np.float16)
    y = np.zeros((8, 8, 6, 6), np.float16)
    _, nbytes = lib.select("wgrad", p, "half", "float", "fallback", TURING)
    assert nbytes > 0
    with pytest.raises(AbiError, match="smaller than"):
        lib.launch(
            "wgrad",
            p,
            "half",
            "float",
            x.ctypes.data,
            y.ctypes.data,
            w.ctypes.data,
            0,
            nbytes - 1,
            device=TURING,
        )
    with pytest.raises(AbiError, match="null device pointer"):
        lib.launch("fprop", p, "half", "half", 0, w.ctypes.data, y.ctypes.data, 0, 0, device=TURING)
    with pytest.raises(AbiError, match="groups = 3 must divide"):
        lib.select("fprop", Problem("g", 1, 4, 4, 8, 8, 3, 3, groups=3), "half", "half")
    with pytest.raises(AbiError, match=r"unsupported \(T, Tacc\) = \(float, half\)"):
        lib.select("fprop", p, "float", "half")


# ---------------------------------------------------------------------------------------------
# Compatibility: CheckDevice on made-up driver and capability values.


def test_build_states_what_it_needs(lib):
    info = lib.build_info()
    assert info == {
        "runtime_version": 12050,
        "ptx_arch": 90,
        "sass_archs": [60, 70, 75, 80, 86, 89, 90],
    }


@pytest.mark.parametrize(
    "device, code, words",
    [
        ((12040, 90, 1), "FailedPrecondition", ["CUDA 12.4", "12040", "CUDA 13.0", "R580", "CPU"]),
        ((0, 0, 0), "FailedPrecondition", ["no CUDA driver", "CPU"]),
        ((13000, 70, 0), "Unimplemented", ["compute capability 7.0", "sm_75", "compute_90", "CPU"]),
        ((13000, 61, 0), "Unimplemented", ["compute capability 6.1", "CPU"]),
    ],
)
def test_device_the_build_cannot_serve(lib, device, code, words):
    with pytest.raises(AbiError) as e:
        lib.check_device(device, 13000, 90, [75, 80, 86, 89, 90])
    assert e.value.code == code
    for word in words:
        assert word in e.value.message


@pytest.mark.parametrize("cc", [75, 80, 86, 87, 89, 90, 100, 120])
def test_devices_the_build_serves(lib, cc):
    """SASS runs on the same major version and a newer minor (8.7 on sm_86); the compute_90 PTX is
    JIT-compiled on 10.0 and 12.0."""
    lib.check_device((13000, cc, 0), 13000, 90, [75, 80, 86, 89, 90])
    with pytest.raises(AbiError, match="Unimplemented"):
        lib.check_device((13000, cc, 0), 13000, 0, [90]) if cc != 90 else lib.check_device(
            (13000, 80, 0), 13000, 0, [90]
        )


CUDA125 = (12050, 90, [60, 70, 75, 80, 86, 89, 90])  # the default build (clang, CUDA 12.5)


@pytest.mark.parametrize("cc", [60, 61, 70, 72, 75, 80, 86, 89, 90])
@pytest.mark.parametrize("driver", [12000, 12020, 12050, 13000])
def test_cuda12_build_runs_on_every_cuda12_driver_given_sass(lib, cc, driver):
    """CUDA's minor version compatibility: the CUDA 12.5 build's SASS runs on any CUDA 12.x
    driver (R525 and later), as TensorFlow's own CUDA 12.5 wheel does."""
    lib.check_device((driver, cc, 0), *CUDA125)


@pytest.mark.parametrize(
    "device, code, words",
    [
        (
            (11080, 70, 0),
            "FailedPrecondition",
            ["CUDA 11.8", "11080", "CUDA 12.5", "CUDA 12.0", "R525", "CPU"],
        ),
        (
            (12000, 100, 0),
            "FailedPrecondition",
            ["compute capability 10.0", "compute_90 PTX", "CUDA 12.5", "R555", "12000", "CPU"],
        ),
        ((12040, 120, 0), "FailedPrecondition", ["compute capability 12.0", "CUDA 12.4", "R555"]),
        ((12050, 53, 0), "Unimplemented", ["compute capability 5.3", "sm_60", "compute_90"]),
    ],
)
def test_cuda12_build_refuses_only_what_cannot_run(lib, device, code, words):
    """A CUDA 11 driver cannot run a CUDA 12 runtime at all; the compute_90 PTX (the only code
    for a Blackwell GPU) needs a driver as new as its CUDA 12.5 writer; sm_53 has no code."""
    with pytest.raises(AbiError) as e:
        lib.check_device(device, *CUDA125)
    assert e.value.code == code
    for word in words:
        assert word in e.value.message, (word, e.value.message)


@pytest.mark.parametrize("cc", [100, 120])
def test_cuda12_build_jits_its_ptx_on_a_new_enough_driver(lib, cc):
    lib.check_device((12050, cc, 0), *CUDA125)
    lib.check_device((12080, cc, 0), *CUDA125)


def test_launch_fails_before_any_kernel_on_an_old_driver(lib):
    p = Problem("small", 1, 4, 4, 2, 2, 3, 3)
    x = np.ones((1, 4, 4, 2), np.float16)
    w = np.ones((3, 3, 2, 2), np.float16)
    y = np.full((1, 2, 2, 2), np.nan, np.float16)
    with pytest.raises(AbiError) as e:
        lib.launch(
            "fprop",
            p,
            "half",
            "half",
            x.ctypes.data,
            w.ctypes.data,
            y.ctypes.data,
            0,
            0,
            device=(11080, 90, 1),
        )
    assert e.value.code == "FailedPrecondition" and "CUDA 11.8" in e.value.message
    assert np.all(np.isnan(y))  # nothing ran


# ---------------------------------------------------------------------------------------------
# The implementation table with CUTLASS's can_implement, for every shape the GPU check and the
# benchmark use.


def all_cases():
    for p in problems.ALL_PROBLEMS:
        for op in OPS:
            for t in ("half", "float"):
                yield p, op, t


@pytest.mark.parametrize("p", problems.ALL_PROBLEMS, ids=lambda p: p.name)
def test_table_agrees_with_the_h200_expectation(cutlass, p):
    """On a made-up H200, every implementation h200_paths() names can run the problem (forced),
    every other one is refused with a reason, and kAuto runs the expected one."""
    for op in OPS:
        for t, tacc in PAIRS:
            paths, auto = problems.h200_paths(p, op, t)
            assert cutlass.select(op, p, t, tacc, "auto", H200)[0] == auto, (op, t, tacc)
            for path in ("sm90", "sm80", "simt", "fallback"):
                if path in paths:
                    assert cutlass.select(op, p, t, tacc, path, H200)[0] == path
                else:
                    with pytest.raises(AbiError, match="cannot run"):
                        cutlass.select(op, p, t, tacc, path, H200)


def test_benchmark_shapes_take_tensor_cores(cutlass):
    """No benchmark shape falls back to the direct kernel on an H200 or an A100."""
    for p in problems.BENCH_PROBLEMS:
        for op in OPS:
            for tacc in ("half", "float"):
                assert cutlass.select(op, p, "half", tacc, "auto", H200)[0] in ("sm90", "sm80")
                assert cutlass.select(op, p, "half", tacc, "auto", AMPERE)[0] == "sm80"
            assert cutlass.select("fprop", p, "half", "half", "auto", H200)[0] == "sm90"
            assert cutlass.select(op, p, "float", "float", "auto", H200)[0] == "simt"


def test_table_workspace_is_what_it_carves(cutlass):
    """Workspace bytes by hand: sm80 fprop NHWC stages the KRSC filter only; NCHW adds NHWC
    copies of x and y; every buffer 256-byte aligned."""
    align = lambda n: -(-n // 256) * 256  # noqa: E731
    p = Problem("ws", 2, 9, 11, 16, 24, 3, 3, pad=(1, 1, 1, 1))
    assert cutlass.select("fprop", p, "half", "half", "sm80", H200) == (
        "sm80",
        align(24 * 9 * 16 * 2),
    )
    pn = Problem("ws_nchw", 2, 9, 11, 16, 24, 3, 3, pad=(1, 1, 1, 1), nchw=True)
    assert cutlass.select("fprop", pn, "half", "half", "sm80", H200) == (
        "sm80",
        align(24 * 9 * 16 * 2) + align(2 * 9 * 11 * 16 * 2) + align(2 * 9 * 11 * 24 * 2),
    )
    assert cutlass.select("fprop", p, "half", "half", "fallback", H200) == ("fallback", 0)


def test_forced_path_that_cannot_run_says_why(cutlass):
    p = Problem("r50", 4, 14, 14, 64, 64, 3, 3, pad=(1, 1, 1, 1))
    with pytest.raises(AbiError, match="compute capability 9.0"):
        cutlass.select("fprop", p, "half", "half", "sm90", AMPERE)
    with pytest.raises(AbiError, match="no sm_90a code"):
        cutlass.select("fprop", p, "half", "half", "sm90", (13000, 90, 0))
    with pytest.raises(AbiError, match="multiple of 8"):
        cutlass.select("fprop", Problem("c3", 1, 8, 8, 3, 8, 3, 3), "half", "half", "sm80", H200)
    with pytest.raises(AbiError, match="compute capability >= 8.0"):
        cutlass.select("fprop", p, "half", "half", "sm80", TURING)


# ---------------------------------------------------------------------------------------------
# The Volta (sm70) implementation: CUTLASS 2.x mma.sync 8x8x4 kernels, CC 7.0 and 7.2, T=half.


def test_volta_takes_tensor_cores_for_the_benchmark_shapes(cutlass):
    """Every benchmark shape runs on the Volta kernels on a V100 (and a Xavier, CC 7.2) for
    T=half with either accumulator; T=float, which they do not serve, takes the direct kernels."""
    for p in problems.BENCH_PROBLEMS:
        for op in OPS:
            for tacc in ("half", "float"):
                for dev in (VOLTA, XAVIER):
                    assert cutlass.select(op, p, "half", tacc, "auto", dev)[0] == "sm70"
            assert cutlass.select(op, p, "float", "float", "auto", VOLTA)[0] == "fallback"


@pytest.mark.parametrize("p", problems.ALL_PROBLEMS, ids=lambda p: p.name)
def test_volta_runs_where_the_rules_say(cutlass, p):
    """On a V100, sm70 runs a T=half problem exactly when the rules of the CUTLASS 2.x tensor-op
    kernels (those h200_paths() states for sm80: same iterators, same 16-byte alignment) allow;
    otherwise kAuto falls back to the direct kernels and the forced sm70 says why."""
    for op in OPS:
        for tacc in ("half", "float"):
            can = "sm80" in problems.h200_paths(p, op, "half")[0]
            assert cutlass.select(op, p, "half", tacc, "auto", VOLTA)[0] == (
                "sm70" if can else "fallback"
            ), (op, tacc)
            if can:
                assert cutlass.select(op, p, "half", tacc, "sm70", VOLTA)[0] == "sm70"
            else:
                with pytest.raises(AbiError, match="cannot run"):
                    cutlass.select(op, p, "half", tacc, "sm70", VOLTA)


def test_volta_kernels_are_for_volta_only(cutlass):
    p = Problem("r50", 4, 14, 14, 64, 64, 3, 3, pad=(1, 1, 1, 1))
    for dev in (TURING, AMPERE, H200):
        assert cutlass.select("fprop", p, "half", "half", "auto", dev)[0] != "sm70"
        with pytest.raises(AbiError, match="compute capability 7.0 and 7.2 only"):
            cutlass.select("fprop", p, "half", "half", "sm70", dev)
    with pytest.raises(AbiError, match="sm70 kernels are for T=half"):
        cutlass.select("fprop", p, "float", "float", "sm70", VOLTA)
    with pytest.raises(AbiError, match="multiple of 8"):
        cutlass.select("fprop", Problem("c3", 1, 8, 8, 3, 8, 3, 3), "half", "half", "sm70", VOLTA)
    # The sm80 and sm90 kernels need compute capability >= 8.0 / 9.0 and never run on a V100.
    with pytest.raises(AbiError, match="compute capability >= 8.0"):
        cutlass.select("fprop", p, "half", "half", "sm80", VOLTA)


def test_volta_workspace_is_what_it_carves(cutlass):
    """fprop NHWC stages the KRSC filter only; wgrad holds `splits` KRSC partials of Tacc (the
    table's split-K rule: >= 264 CTAs of 128x128 tiles, slices of >= 1024 GEMM-K steps, <= 64)."""
    align = lambda n: -(-n // 256) * 256  # noqa: E731
    p = Problem("ws", 2, 9, 11, 16, 24, 3, 3, pad=(1, 1, 1, 1))
    assert cutlass.select("fprop", p, "half", "float", "sm70", VOLTA) == (
        "sm70",
        align(24 * 9 * 16 * 2),
    )
    # wgrad: 1 x 2 tiles (K = 24, KH*KW*C = 144), GEMM-K = N*P*Q = 198 < 1024 -> 1 slice.
    assert cutlass.select("wgrad", p, "half", "float", "sm70", VOLTA) == (
        "sm70",
        align(24 * 3 * 3 * 16 * 4),
    )
    big = Problem("wg", 32, 28, 28, 64, 64, 3, 3, pad=(1, 1, 1, 1))
    # tiles = 1 * ceil(576 / 128) = 5 -> ceil(264 / 5) = 53 slices; GEMM-K 25088 / 1024 = 24.
    assert cutlass.select("wgrad", big, "half", "half", "sm70", VOLTA) == (
        "sm70",
        align(24 * 64 * 3 * 3 * 64 * 2),
    )


def test_volta_launch_reaches_the_kernel_after_the_device_check(cutlass):
    """On a made-up V100 with an R525 driver the CUDA 12.5 build passes CheckDevice and runs the
    sm70 implementation (whose kernels the host build lacks, so it reports that), and a T=half
    problem with C = 3 takes the direct kernels, bit for bit the CPU contract."""
    p = Problem("v", 1, 6, 6, 8, 8, 3, 3)
    rng = np.random.default_rng(7)
    x, w, dy = operands(p, rng, "uniform")
    with pytest.raises(AbiError, match="sm70 .*host build: no GPU kernels"):
        run(cutlass, "fprop", p, "half", "half", x, w, dy, device=VOLTA)
    q = Problem("v3", 1, 6, 6, 3, 8, 3, 3)
    x, w, dy = operands(q, rng, "uniform")
    got, used = run(cutlass, "fprop", q, "half", "half", x, w, dy, device=VOLTA)
    assert used == "fallback"
    assert same_bits(got, reference("fprop", q, x, w, dy, "half"))


# ---------------------------------------------------------------------------------------------
# The GPU check's own logic (tools/gpu_check/refs.py and check.py), with NumPy and no GPU.

import refs  # noqa: E402


@pytest.mark.parametrize("p", SHAPES[:4] + SHAPES[6:8], ids=lambda p: p.name)
def test_check_references_match_tests_reference(p):
    """The check's sequential binary16 sum (round-to-odd detour) is bit for bit
    tests/support/reference.py's, and its sampled float64 outputs equal the full float64
    reference."""
    B = refs.NumpyBackend()
    rng = np.random.default_rng(5)
    x, w, dy = operands(p, rng, "random")
    for op in OPS:
        want = reference(op, p, x, w, dy, "half")
        got = refs.seq_half(B, op, p, x, w, dy)
        assert same_bits(got, want), op
        exact = reference(op, p, x, w, dy, "float64").ravel()
        idx = rng.choice(exact.size, size=min(40, exact.size), replace=False)
        np.testing.assert_allclose(
            refs.sampled(B, op, p, x, w, dy, idx), exact[idx], rtol=1e-12, atol=1e-12, err_msg=op
        )


def test_round16_rounds_once():
    """Values whose binary32 rounding would create a false binary16 tie: 2051 - 2^-30 must go to
    2050, not (via 2051.0, a tie) to 2052; plus random binary64 values against NumPy's direct
    binary64 -> binary16 conversion."""
    B = refs.NumpyBackend()
    d = np.array([2051 - 2.0**-30, 2051 + 2.0**-30, -(2051 - 2.0**-30), 65519.99, 1e-8])
    np.testing.assert_array_equal(B.round16(d), d.astype(np.float16).astype(np.float64))
    assert B.round16(np.array([2051 - 2.0**-30]))[0] == 2050.0
    r = np.random.default_rng(0).standard_normal(100000) * 1000
    np.testing.assert_array_equal(B.round16(r), r.astype(np.float16).astype(np.float64))


def test_half_rule_catches_a_transposed_result():
    """The Tacc=half acceptance rule passes the sequential sum itself and a result in another
    summation order (pairwise), and fails a result whose outputs are permuted."""
    B = refs.NumpyBackend()
    p = Problem("r", 2, 8, 8, 16, 16, 3, 3, pad=(1, 1, 1, 1))
    rng = np.random.default_rng(9)
    x, w, dy = operands(p, rng, "random")
    exact = reference("fprop", p, x, w, dy, "float64")
    seq = refs.seq_half(B, "fprop", p, x, w, dy)
    seq_err = np.abs(seq - exact)
    # Pairwise order: binary16 sums of the two halves of the channels, then added.
    half_a = refs.seq_half(
        B,
        "fprop",
        Problem("a", 2, 8, 8, 8, 16, 3, 3, pad=(1, 1, 1, 1)),
        x[..., :8],
        w[:, :, :8, :],
        dy,
    )
    half_b = refs.seq_half(
        B,
        "fprop",
        Problem("b", 2, 8, 8, 8, 16, 3, 3, pad=(1, 1, 1, 1)),
        x[..., 8:],
        w[:, :, 8:, :],
        dy,
    )
    pairwise = (half_a + half_b).astype(np.float16).astype(np.float64)
    wrong = seq.transpose(0, 2, 1, 3)  # P and Q swapped
    absmax = float(np.abs(exact).max())
    for candidate, ok in ((seq, True), (pairwise, True), (wrong, False)):
        err = np.abs(candidate - exact)
        assert (
            refs.half_error_ok(err.max(), err.mean(), seq_err.max(), seq_err.mean(), absmax) is ok
        )


import check  # noqa: E402  (tools/gpu_check/check.py: its parent process needs no torch)


def test_check_stops_when_the_driver_is_older_than_the_runtime():
    facts = {
        "runtime_version": 13000,
        "driver_version": 12080,
        "compute_capability": 90,
        "sass_archs": [75, 80, 86, 89, 90],
        "ptx_arch": 90,
    }
    msg = check.preflight(facts)
    assert "CUDA 12.8" in msg and "CUDA 13.0" in msg and "Nothing was run" in msg
    assert check.preflight({**facts, "driver_version": 13010}) is None
    # The CUDA 12.5 build on an R525 driver: a V100 runs (SASS), a Blackwell needs the PTX JIT.
    cuda125 = {
        **facts,
        "runtime_version": 12050,
        "driver_version": 12000,
        "sass_archs": [60, 70, 75, 80, 86, 89, 90],
    }
    assert check.preflight({**cuda125, "compute_capability": 70}) is None
    assert "JIT" in check.preflight({**cuda125, "compute_capability": 100})
    assert "no SASS or PTX" in check.preflight({**cuda125, "compute_capability": 53})


def test_check_names_the_kernel_a_dying_section_was_running(tmp_path):
    """A section that faults (abort) or hangs (timeout) still leaves a summary naming the kernel
    that was running; results written before the crash are kept."""
    jsonl = str(tmp_path / "results.jsonl")
    crash = (
        "import json, os, sys; f = open(sys.argv[1], 'a'); "
        "w = lambda o: (f.write(json.dumps(o) + '\\n'), f.flush()); "
        "w({'section': 'crashy', 'event': 'start', 'kernel': 'k1'}); "
        "w({'section': 'crashy', 'event': 'result', 'kernel': 'k1', 'ok': True}); "
        "w({'section': 'crashy', 'event': 'start', 'kernel': 'fprop sm90 r50'}); "
        "os.abort()"
    )
    hang = (
        "import json, sys, time; f = open(sys.argv[1], 'a'); "
        "f.write(json.dumps({'section': 'hangy', 'event': 'start', 'kernel': 'wgrad x'})"
        " + '\\n'); f.flush(); time.sleep(60)"
    )
    sections = [
        check.run_section("crashy", [sys.executable, "-c", crash, jsonl], 30, jsonl),
        check.run_section("hangy", [sys.executable, "-c", hang, jsonl], 2, jsonl),
    ]
    assert sections[0]["verdict"] == "ERROR" and "died" in sections[0]["status"]
    assert sections[0]["running_kernel"] == "fprop sm90 r50" and sections[0]["asserted_ok"] == 1
    assert sections[1]["verdict"] == "ERROR" and "timed out" in sections[1]["status"]
    assert sections[1]["running_kernel"] == "wgrad x"
    summary = check.write_summary(str(tmp_path), {"lib": "x.so"}, sections, None)
    assert summary["verdict"] == "FAIL"
    text = (tmp_path / "summary.md").read_text()
    assert "fprop sm90 r50" in text and "wgrad x" in text


def test_check_end_to_end_without_a_gpu_writes_its_summary(lib, tmp_path):
    """The real parent on the host library (made-up sm_75 device): the facts section cannot run
    here (no GPU, perhaps no PyTorch) and must come back as ERROR in a written summary."""
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            os.path.join(ROOT, "tools", "gpu_check", "check.py"),
            "--lib",
            LIB,
            "--out",
            str(out),
            "--skip",
            "exactness,random,cases,matmul,bench,matmul_bench",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[0].startswith("device facts (library):")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["verdict"] == "FAIL"
    assert summary["facts"]["compute_capability"] == 75
    assert [s["verdict"] for s in summary["sections"]] == ["ERROR"]


def test_failed_tma_descriptor_encode_reaches_the_hook(cutlass):
    """CUTE builds TMA descriptors through CUTLASS_CUDA_DRIVER_WRAPPER_CALL and only assert()s
    the result (compiled out by -DNDEBUG); cc/kernels/gpu/tma_encode_check.h reroutes that call.
    Without a driver the encode fails; the hook must have recorded it (the Hopper launcher turns
    it into an error naming the call)."""
    import ctypes

    name = ctypes.create_string_buffer(64)
    result = cutlass.lib.tfo_host_tma_encode_probe(name, 64)
    assert result != 0  # CUresult of the failed encode (no driver on this machine)
    assert name.value == b"cuTensorMapEncodeTiled"


def test_benchmark_reports_fail_below_its_targets():
    r50 = problems.BENCH_PROBLEMS[1]  # a ResNet-50 3x3 layer
    r50_1x1 = problems.BENCH_PROBLEMS[-1]
    seed = problems.BENCH_PROBLEMS[0]
    fast = {"ours_half_ms": 1.0, "ours_float_ms": 1.0, "torch_ms": 1.0, "cudnn_half_ms": 1.6}
    assert check.targets_met(dict(fast), r50)
    assert not check.targets_met({**fast, "cudnn_half_ms": 1.4}, r50)  # 1.4x < 1.5x
    assert not check.targets_met({**fast, "torch_ms": 0.85}, r50)  # 0.85x < 0.9x
    assert not check.targets_met({k: v for k, v in fast.items() if k != "cudnn_half_ms"}, r50)
    assert check.targets_met({**fast, "cudnn_half_ms": 1.0}, r50_1x1)  # half target: 3x3 only
    assert check.targets_met({**fast, "torch_ms": 0.1}, seed)  # no target on the seed


def test_exactness_problems_keep_partial_sums_exact():
    """The check's integer data (values in [-b, b], b = max(1, min(3, isqrt(2048 / longest))))
    keeps sum|x*w| <= 2048 for every output of every pass, so every accumulator is exact."""
    for p in problems.EXACT_PROBLEMS:
        longest = max(p.reduction_length(op) for op in OPS)
        b = max(1, min(3, int(math.sqrt(2048.0 / longest))))
        assert longest * b * b <= 2048, p.name


@pytest.mark.parametrize("p", SHAPES[:4] + SHAPES[6:8], ids=lambda p: p.name)
def test_check_references_on_the_torch_backend(p):
    """Where PyTorch is installed (CPU is enough): the check's PyTorch backend gives the NumPy
    backend's values bit for bit (the GPU run uses it with device="cuda")."""
    torch = pytest.importorskip("torch")
    B, T = refs.NumpyBackend(), refs.TorchBackend(device="cpu")
    rng = np.random.default_rng(6)
    x, w, dy = operands(p, rng, "random")
    tx, tw, tdy = (torch.from_numpy(a.copy()) for a in (x, w, dy))
    for op in OPS:
        want = refs.seq_half(B, op, p, x, w, dy)
        got = refs.seq_half(T, op, p, tx, tw, tdy).numpy()
        assert same_bits(got, want), op
        n = {
            "fprop": p.N * p.P * p.Q * p.K,
            "dgrad": p.N * p.H * p.W * p.C,
            "wgrad": p.KH * p.KW * (p.C // p.groups) * p.K,
        }[op]
        idx = rng.choice(n, size=min(30, n), replace=False)
        assert refs.sampled(T, op, p, tx, tw, tdy, torch.from_numpy(idx)) == pytest.approx(
            refs.sampled(B, op, p, x, w, dy, idx), rel=1e-12, abs=1e-12
        )


def cpu_dry_run(tmp_path, skip: str) -> dict:
    """check.py --cpu-dry-run on the host library (PyTorch needed: the test skips without it),
    skipping `skip`, into tmp_path/dry; asserts exit status 0 and returns summary.json."""
    pytest.importorskip("torch")
    out = tmp_path / "dry"
    proc = subprocess.run(
        [
            sys.executable,
            os.path.join(ROOT, "tools", "gpu_check", "check.py"),
            "--cpu-dry-run",
            "--lib",
            LIB,
            "--out",
            str(out),
            "--skip",
            skip,
            "--timeout-scale",
            "4",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads((out / "summary.json").read_text())


def test_check_cpu_dry_run(lib, tmp_path):
    """Where PyTorch is installed: check.py --cpu-dry-run runs the check's own PyTorch code on
    the host library and CPU tensors (direct kernels only) and every asserted result passes."""
    summary = cpu_dry_run(tmp_path, "exactness,bench,matmul,matmul_bench")
    assert [s["section"] for s in summary["sections"]] == ["facts", "random", "cases"]
    assert all(s["verdict"] == "PASS" and not s["failed"] for s in summary["sections"])
    assert summary["sections"][1]["asserted_ok"] >= 18


def launch_with_allocator(lib, op, p, t, tacc, x, w, dy, available, device):
    """The op's GPU launch (one plan, workspace from an allocator that gives at most `available`
    bytes, fallback without workspace): (out NHWC/HWIO, implementation that ran, selections)."""
    xs, ws_, ys = p.shapes()
    xl, wl, dyl = to_layout(x, p.nchw), np.ascontiguousarray(w), to_layout(dy, p.nchw)
    a, b = {"fprop": (xl, wl), "dgrad": (wl, dyl), "wgrad": (xl, dyl)}[op]
    out = np.full({"fprop": ys, "dgrad": xs, "wgrad": ws_}[op], np.nan, NP_T[t])
    pool = np.zeros(max(available, 1), np.uint8)
    used, selections = lib.launch_with_allocator(
        op,
        p,
        t,
        tacc,
        a.ctypes.data,
        b.ctypes.data,
        out.ctypes.data,
        pool.ctypes.data,
        available,
        device=device,
    )
    return (out if op == "wgrad" else from_layout(out, p.nchw)), used, selections


def test_one_selection_gives_workspace_and_launch(lib):
    """The direct wgrad with Tacc=float needs a workspace (its split partials): given it, one
    table selection sizes it and runs, and the result is the integer-exact reference; without
    it no implementation can run, which is a ResourceExhausted error naming the bytes. The
    Tacc=half wgrad needs none and runs whatever the allocator can give."""
    p = SHAPES[-1]
    x, w, dy = operands(p, np.random.default_rng(3), "int")
    _, nbytes = lib.select("wgrad", p, "half", "float", "auto", TURING)
    assert nbytes > 0
    want = reference("wgrad", p, x, w, dy, "float64")
    got, used, selections = launch_with_allocator(
        lib, "wgrad", p, "half", "float", x, w, dy, nbytes, TURING
    )
    assert (used, selections) == ("fallback", 1)
    assert same_bits(got, want)
    with pytest.raises(AbiError, match=f"{nbytes}-byte workspace of fallback") as err:
        launch_with_allocator(lib, "wgrad", p, "half", "float", x, w, dy, nbytes - 1, TURING)
    assert err.value.code == "ResourceExhausted"
    got, used, selections = launch_with_allocator(
        lib, "wgrad", p, "half", "half", x, w, dy, 0, TURING
    )
    assert (used, selections) == ("fallback", 1)
    assert same_bits(got, reference("wgrad", p, x, w, dy, "half"))


def test_failed_workspace_falls_back_to_an_implementation_without_one(cutlass):
    """On an sm_80 device the table takes CUTLASS's sm80 fprop, whose workspace holds the KRSC
    filter; when the allocator cannot give it, the launch selects again among implementations
    without workspace, runs the direct kernel (and reports it), bit-exact on integer data."""
    p = Problem("fallback", 2, 9, 11, 16, 24, 3, 3, pad=(1, 1, 1, 1))
    assert cutlass.select("fprop", p, "half", "half", "auto", AMPERE)[0] == "sm80"
    x, w, dy = operands(p, np.random.default_rng(4), "int")
    got, used, selections = launch_with_allocator(
        cutlass, "fprop", p, "half", "half", x, w, dy, 0, AMPERE
    )
    assert (used, selections) == ("fallback", 2)
    assert same_bits(got, reference("fprop", p, x, w, dy, "half"))


# ---------------------------------------------------------------------------------------------
# Fp16MatMul on the fprop table (cc/kernels/gpu/matmul_gpu.h): [M, K] x [K, N] as the 1x1 fprop
# of an NHWC image [1, 1, M, K] with an HWIO filter [1, 1, K, N].


def matmul_problem(x_shape, y_shape, adj_x, adj_y):
    """(mdims, x offsets, y offsets, output shape) of BatchMatMulV2's product, computed here with
    NumPy's broadcasting (independent of cc/kernels/matmul_shape.cc and of abi.MatMul)."""
    M, K = (x_shape[-1], x_shape[-2]) if adj_x else (x_shape[-2], x_shape[-1])
    N = y_shape[-2] if adj_y else y_shape[-1]
    batch = np.broadcast_shapes(tuple(x_shape[:-2]), tuple(y_shape[:-2]))
    xm, ym = int(np.prod(x_shape[:-2], dtype=np.int64)), int(np.prod(y_shape[:-2], dtype=np.int64))
    xo = np.broadcast_to(np.arange(xm).reshape(x_shape[:-2]), batch).ravel()
    yo = np.broadcast_to(np.arange(ym).reshape(y_shape[:-2]), batch).ravel()
    nb = int(np.prod(batch, dtype=np.int64))
    mdims = np.array([nb, M, N, K, xm, ym], np.int64)
    return (
        mdims,
        np.ascontiguousarray(xo, np.int64),
        np.ascontiguousarray(yo, np.int64),
        (batch + (M, N)),
    )


def _p64(a):
    return a.ctypes.data_as(ctypes.POINTER(ctypes.c_int64))


def matmul_select(lib, x_shape, y_shape, t, tacc, path="auto", device=TURING, adj=(False, False),
                  max_bytes=2**64 - 1):  # fmt: skip
    m = MatMul("m", tuple(x_shape), tuple(y_shape), *adj)
    return lib.matmul_select(m, t, tacc, path, max_bytes, device)


def matmul_launch(lib, x, y, t, tacc, adj_x=False, adj_y=False, device=TURING, path="auto"):
    """Runs the matmul on the host library: (out, implementation that ran)."""
    m = MatMul("m", x.shape, y.shape, adj_x, adj_y)
    _, nbytes = lib.matmul_select(m, t, tacc, path, device=device)
    xa, ya = np.ascontiguousarray(x, NP_T[t]), np.ascontiguousarray(y, NP_T[t])
    out = np.full(m.out_shape(), np.nan, NP_T[t])
    ws = np.zeros(max(nbytes, 1), np.uint8)
    used = lib.matmul_launch(
        m, t, tacc, xa.ctypes.data, ya.ctypes.data, out.ctypes.data, ws.ctypes.data, nbytes, 0,
        path, device,
    )  # fmt: skip
    return out, used


MATMUL_CASES = [
    # (x shape, y shape, adj_x, adj_y)
    ((5, 7), (7, 3), False, False),  # odd sizes
    ((7, 5), (7, 3), True, False),
    ((5, 7), (3, 7), False, True),
    ((2, 7, 5), (2, 3, 7), True, True),
    ((3, 1, 4, 6), (2, 6, 5), False, False),  # both operands broadcast: batch (3, 2)
    ((1, 4, 6), (3, 5, 6), False, True),  # x broadcasts
    ((2, 3, 6, 4), (6, 5), True, False),  # y broadcasts: the batch is one fprop
    ((4, 0), (0, 3), False, False),  # K = 0: zeros
    ((2, 0, 4), (2, 3, 0), True, True),  # K = 0 with both transposes
    ((2, 0, 3), (2, 3, 4), False, False),  # M = 0: empty output
    ((2, 19, 33), (33, 9), False, False),  # longest chain, folded batch
]


@pytest.mark.parametrize("case", MATMUL_CASES, ids=lambda c: f"{c[0]}x{c[1]}adj{c[2]:d}{c[3]:d}")
@pytest.mark.parametrize("t,tacc", PAIRS)
def test_matmul_direct_is_the_sequential_contract(lib, case, t, tacc):
    """The host-compiled fallback gives tests/support/reference.py's batch_matmul bit for bit: the
    fp16 chain over k ascending for Tacc=half; the binary32 FMA chain rounded once to T for
    Tacc=float (operands are binary16 values, so each product is exact in float64 and the
    reference's float32 step rounds once). adj_x / adj_y and broadcast batches included."""
    x_shape, y_shape, adj_x, adj_y = case
    rng = np.random.default_rng(sum(x_shape) * 31 + sum(y_shape))
    x = rng.uniform(-1, 1, x_shape).astype(np.float16)
    y = rng.uniform(-1, 1, y_shape).astype(np.float16)
    got, used = matmul_launch(lib, x, y, t, tacc, adj_x, adj_y)
    assert used == "fallback"
    want = ref.batch_matmul(
        x, y, adj_x, adj_y, accumulation="half" if tacc == "half" else "float32"
    ).astype(NP_T[t])
    assert got.shape == want.shape
    if t == "half":
        assert same_bits(got, want)
    else:
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    if x_shape[-1 if not adj_x else -2] == 0 and got.size:
        assert np.all(got == 0) and not np.any(np.signbit(got))


def test_matmul_half_accumulation_rounds_every_step(lib):
    """Hand-computed: K = 3 with x = [2048, 1, 1], y = [1, 1, 1]. Sequential fp16: 2048 + 1 = 2049
    rounds to 2048 (ties to even), twice, so the result is 2048; binary32 gives 2050, which fp16
    holds exactly."""
    x = np.array([[2048, 1, 1]], np.float16)
    y = np.ones((3, 1), np.float16)
    assert matmul_launch(lib, x, y, "half", "half")[0][0, 0] == 2048
    assert matmul_launch(lib, x, y, "half", "float")[0][0, 0] == 2050


def test_matmul_selection_per_device(cutlass):
    """The table's rules for the 1x1 fprop: T=half with K and N multiples of 8 takes the tensor
    cores of each generation (sm90 on an H200, sm80 on an A100, sm70 on a V100) and the direct
    kernel on a T4-class sm_75; T=float the SIMT kernels on CC >= 8.0 and the direct kernel on
    Volta. K or N not a multiple of 8 (CUTLASS's 16-byte access) falls back to the direct kernel."""
    x, y = (3, 40, 64), (64, 24)
    for tacc in ("half", "float"):
        assert matmul_select(cutlass, x, y, "half", tacc, device=H200)[0] == "sm90"
        assert matmul_select(cutlass, x, y, "half", tacc, device=AMPERE)[0] == "sm80"
        assert matmul_select(cutlass, x, y, "half", tacc, device=VOLTA)[0] == "sm70"
        assert matmul_select(cutlass, x, y, "half", tacc, device=TURING)[0] == "fallback"
        for dev in (H200, AMPERE):
            for xs, ys in (((3, 40, 60), (60, 24)), ((3, 40, 64), (64, 20))):
                assert matmul_select(cutlass, xs, ys, "half", tacc, device=dev)[0] == "fallback"
                with pytest.raises(AbiError, match="multiple of 8"):
                    matmul_select(cutlass, xs, ys, "half", tacc, "sm80", dev)
    for dev in (H200, AMPERE):
        assert matmul_select(cutlass, x, y, "float", "float", device=dev)[0] == "simt"
    assert matmul_select(cutlass, x, y, "float", "float", device=VOLTA)[0] == "fallback"
    # adj_x / adj_y and per-matrix batches select the same implementations.
    xb, yb = (2, 3, 64, 40), (3, 24, 64)
    assert matmul_select(cutlass, xb, yb, "half", "half", device=AMPERE, adj=(True, True))[0] == (
        "sm80"
    )


def test_matmul_workspace_is_what_it_carves(cutlass):
    """By hand: the adj_x copy [x_matrices, M, K], the adj_y copy [y_matrices, K, N] and the
    fprop's KRSC filter [N, 1, 1, K] (sm80), each 256-byte aligned; the direct kernel needs the
    copies only. A workspace limit below the sm80 total takes the direct kernel (the op's
    fallback when the allocator cannot give it); below the copies it is ResourceExhausted."""
    align = lambda n: -(-n // 256) * 256  # noqa: E731
    xs, ys, adj = (2, 3, 64, 40), (3, 24, 64), (True, True)
    copies = align(6 * 40 * 64 * 2) + align(3 * 64 * 24 * 2)
    assert matmul_select(cutlass, xs, ys, "half", "half", device=AMPERE, adj=adj) == (
        "sm80",
        copies + align(24 * 64 * 2),
    )
    assert matmul_select(cutlass, xs, ys, "half", "half", "fallback", AMPERE, adj) == (
        "fallback",
        copies,
    )
    assert matmul_select(
        cutlass, xs, ys, "half", "half", device=AMPERE, adj=adj, max_bytes=copies
    ) == ("fallback", copies)
    with pytest.raises(AbiError, match="adj_x / adj_y copies") as err:
        matmul_select(cutlass, xs, ys, "half", "half", device=AMPERE, adj=adj, max_bytes=copies - 1)
    assert err.value.code == "ResourceExhausted"


def test_matmul_rejects_bad_sizes_and_offsets(lib):
    """Negative sizes, offsets outside the operand and overflowing products are InvalidArgument
    errors naming the field and value, before anything runs."""
    abi = lib.lib
    dev = (ctypes.c_int * 3)(*TURING)
    msg = ctypes.create_string_buffer(512)

    def select(mdims, xo=None, yo=None):
        d = np.array(mdims, np.int64)
        rc = abi.tfo_matmul_select(
            _p64(d), 0, 0, None if xo is None else _p64(xo), None if yo is None else _p64(yo),
            0, 0, 0, 2**64 - 1, dev, None, None, msg, 512,
        )  # fmt: skip
        return rc, msg.value.decode()

    assert select([1, -3, 2, 2, 1, 1]) == (1, "M = -3 is out of range [0, 2^31-1]")
    assert select([2, 2, 2, 2, 2, 1], None, np.array([0, 5], np.int64)) == (
        1,
        "y_offsets[1] = 5 is outside [0, y_matrices = 1)",
    )
    assert select([2, 2, 2, 2, 1, 2]) == (1, "x_offsets[1] = 1 is outside [0, x_matrices = 1)")
    rc, text = select([2**31 - 1, 2**31 - 1, 2**31 - 1, 1, 1, 1])
    assert rc == 1 and "too large" in text


def test_matmul_launch_checks_workspace_and_pointers(lib):
    """A workspace smaller than the plan's (adj_x copy of 5 x 7 halves: 256 bytes) or a null
    operand of a non-empty tensor is an InvalidArgument error before anything runs."""
    abi = lib.lib
    mdims = np.array([1, 5, 3, 7, 1, 1], np.int64)
    x = np.ones((7, 5), np.float16)
    y = np.ones((7, 3), np.float16)
    out = np.full((5, 3), np.nan, np.float16)
    ws = np.zeros(256, np.uint8)
    dev = (ctypes.c_int * 3)(*TURING)
    msg = ctypes.create_string_buffer(512)

    def launch(xp, nbytes):
        return abi.tfo_matmul_launch(
            _p64(mdims), 1, 0, None, None, 0, 0, xp, y.ctypes.data, out.ctypes.data,
            ws.ctypes.data, nbytes, None, 0, dev, None, msg, 512,
        )  # fmt: skip

    assert launch(x.ctypes.data, 255) == 1
    assert (
        msg.value.decode() == "workspace_bytes = 255 is smaller than the 256 bytes the plan needs"
    )
    assert launch(None, 256) == 1
    assert "null device pointer" in msg.value.decode()
    assert np.all(np.isnan(out))
    assert launch(x.ctypes.data, 256) == 0
    assert np.all(out == 7)


# ---------------------------------------------------------------------------------------------
# The GPU check's Fp16MatMul sections (tools/gpu_check: abi.MatMul, problems.MATMUL_*, the refs.py
# references and rules, check.py's matmul sections), with NumPy and no GPU.


@pytest.mark.parametrize(
    "m",
    [MatMul("case", *c) for c in MATMUL_CASES] + problems.ALL_MATMULS,
    ids=lambda m: f"{m.name}{m.x_shape}x{m.y_shape}",
)
def test_matmul_problem_matches_numpy_broadcasting(m):
    """abi.MatMul's sizes and broadcast offsets (what the check passes to tfo_matmul_launch) are
    NumPy's broadcasting of the batch dimensions."""
    mdims, xo, yo, out_shape = matmul_problem(m.x_shape, m.y_shape, m.adj_x, m.adj_y)
    assert m.dims() == mdims.tolist()
    assert m.x_offsets() == xo.tolist() and m.y_offsets() == yo.tolist()
    assert m.out_shape() == tuple(out_shape)


def test_matmul_problem_rejects_batches_that_do_not_broadcast():
    with pytest.raises(ValueError, match="do not broadcast"):
        MatMul("bad", (2, 4, 3), (3, 3, 5)).batch_shape  # noqa: B018


def test_matmul_fold_rule_by_hand():
    """One fprop for the batch only when x's matrices are in order and y is one shared matrix."""
    assert MatMul("a", (4, 3, 8, 8), (8, 8)).folded()
    assert MatMul("b", (4, 3, 8, 8), (8, 8)).fprop_problem().N == 12
    assert not MatMul("c", (8, 8), (5, 8, 8)).folded()  # x shared, y batched
    assert not MatMul("d", (3, 1, 8, 8), (4, 8, 8)).folded()
    assert not MatMul("e", (8, 8), (8, 8)).folded()  # batch of one: one fprop anyway
    assert MatMul("e", (8, 8), (8, 8)).fprop_problem().N == 1


@pytest.mark.parametrize("m", problems.ALL_MATMULS, ids=lambda m: m.name)
def test_matmul_table_agrees_with_the_h200_expectation(cutlass, m):
    """On a made-up H200, tfo_matmul_select (the table with CUTLASS's can_implement) plans what
    problems.h200_matmul_paths says for every matmul of the check and the benchmark: kAuto's
    choice, each implementation named there when forced, and a refusal with a reason for the
    others."""
    for t, tacc in PAIRS:
        paths, auto = problems.h200_matmul_paths(m, t)
        assert cutlass.matmul_select(m, t, tacc, device=H200)[0] == auto, (t, tacc)
        for path in ("sm90", "sm80", "simt", "fallback"):
            if path in paths:
                assert cutlass.matmul_select(m, t, tacc, path, device=H200)[0] == path
            else:
                with pytest.raises(AbiError, match="cannot run") as e:
                    cutlass.matmul_select(m, t, tacc, path, device=H200)
                assert e.value.code == "InvalidArgument"


def test_matmul_h200_expectation_by_hand():
    """The expectation itself on hand-picked shapes: tensor cores for T=half need K and N
    multiples of 8 (M is free); T=float takes simt; K = 0 or M = 0 only the direct kernel."""
    exp = problems.h200_matmul_paths
    assert exp(MatMul("a", (37, 64), (64, 40)), "half") == (["sm90", "sm80", "fallback"], "sm90")
    assert exp(MatMul("b", (16, 60), (60, 24)), "half") == (["fallback"], "fallback")
    assert exp(MatMul("c", (16, 64), (64, 20)), "half") == (["fallback"], "fallback")
    assert exp(MatMul("d", (16, 60), (60, 20)), "float") == (["simt", "fallback"], "simt")
    assert exp(MatMul("e", (4, 0), (0, 8)), "half") == (["fallback"], "fallback")
    assert exp(MatMul("f", (2, 0, 8), (8, 16)), "float") == (["fallback"], "fallback")


def test_matmul_benchmark_shapes_take_tensor_cores(cutlass):
    """No matmul benchmark shape falls back to the direct kernel on an H200 or an A100."""
    for m in problems.MATMUL_BENCH:
        for tacc in ("half", "float"):
            assert cutlass.matmul_select(m, "half", tacc, device=H200)[0] == "sm90", m.name
            assert cutlass.matmul_select(m, "half", tacc, device=AMPERE)[0] == "sm80", m.name


def _case_data(m: MatMul, seed: int, kind: str = "random"):
    rng = np.random.default_rng(seed)
    if kind == "int":
        b = check.exact_int_bound(m.K)
        return (
            rng.integers(-b, b + 1, m.x_shape).astype(np.float16),
            rng.integers(-b, b + 1, m.y_shape).astype(np.float16),
        )
    return (
        rng.uniform(-1, 1, m.x_shape).astype(np.float16),
        rng.uniform(-0.5, 0.5, m.y_shape).astype(np.float16),
    )


@pytest.mark.parametrize("case", MATMUL_CASES, ids=lambda c: f"{c[0]}x{c[1]}adj{c[2]:d}{c[3]:d}")
def test_matmul_check_references_match_tests_reference(case):
    """refs.seq_half_matmul is tests/support/reference.py's batch_matmul chain bit for bit;
    refs.matmul_exact is its float64 sum (of |x|, |y| with absolute=True); refs.sampled_matmul
    gives those float64 values at chosen outputs."""
    B = refs.NumpyBackend()
    m = MatMul("case", *case)
    x, y = _case_data(m, sum(m.x_shape) * 7 + sum(m.y_shape))
    want_half = ref.batch_matmul(x, y, m.adj_x, m.adj_y, accumulation="half")
    assert same_bits(refs.seq_half_matmul(B, m, x, y), want_half)
    want = ref.batch_matmul(x, y, m.adj_x, m.adj_y, accumulation="float64")
    np.testing.assert_allclose(refs.matmul_exact(B, m, x, y), want, rtol=1e-12, atol=1e-12)
    absum = ref.batch_matmul(
        np.abs(x), np.abs(y), m.adj_x, m.adj_y, accumulation="float64"
    )  # fmt: skip
    np.testing.assert_allclose(refs.matmul_exact(B, m, x, y, absolute=True), absum, rtol=1e-12)
    if want.size:
        idx = np.random.default_rng(1).choice(want.size, size=min(25, want.size), replace=False)
        np.testing.assert_allclose(
            refs.sampled_matmul(B, m, x, y, idx), want.ravel()[idx], rtol=1e-12, atol=1e-12
        )


def test_matmul_sampled_reference_on_a_benchmark_layout():
    """sampled_matmul reads rows and columns through adj_y and per-matrix offsets correctly on a
    scaled-down attention shape (both operands batched, y transposed)."""
    B = refs.NumpyBackend()
    m = MatMul("scores", (3, 2, 9, 16), (2, 11, 16), adj_y=True)
    x, y = _case_data(m, 4)
    want = np.einsum("abmk,bnk->abmn", x.astype(np.float64), y.astype(np.float64))
    idx = np.arange(want.size)
    np.testing.assert_allclose(refs.sampled_matmul(B, m, x, y, idx), want.ravel(), rtol=1e-12)


def test_matmul_exact_data_keep_partial_sums_exact():
    """The check's integer data keep every partial sum within 2048 in magnitude (K * b^2 <= 2048),
    and the sequential binary16 sum of such data is the float64 product: by hand for the
    2048-term case (b = 1), and on the data of every exactness shape."""
    B = refs.NumpyBackend()
    assert check.exact_int_bound(2048) == 1 and check.exact_int_bound(227) == 3
    assert check.exact_int_bound(0) == 3
    for m in problems.MATMUL_EXACT:
        b = check.exact_int_bound(m.K)
        assert m.K * b * b <= 2048, m.name
        if m.K <= 128:  # the longer ones cost seconds of NumPy here; the check verifies them too
            x, y = _case_data(m, 3, "int")
            np.testing.assert_array_equal(
                refs.seq_half_matmul(B, m, x, y), refs.matmul_exact(B, m, x, y), err_msg=m.name
            )


def _tf32(a: np.ndarray) -> np.ndarray:
    """float32 values rounded to TF32's 10 fraction bits (to nearest, ties away: as cuBLAS
    converts)."""
    bits = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x1000) & 0xFFFFE000).astype(np.uint32)
    return bits.view(np.float32)


def test_matmul_verdict_passes_other_orders_and_fails_wrong_results():
    """refs.matmul_verdict on NumPy data. Tacc=half: the sequential sum passes (bit-exact rule and
    tensor-core rule), a pairwise order passes the tensor-core rule but not the bit-exact one, a
    result with two rows swapped and one with a NaN fail. Tacc=float: binary32 chains pass for
    T=half and T=float; TF32 inputs (10-bit fractions) fail the T=float bound."""
    B = refs.NumpyBackend()
    m = MatMul("v", (2, 24, 96), (96, 16))
    x, y = _case_data(m, 21)
    exact = refs.matmul_exact(B, m, x, y)
    absum = refs.matmul_exact(B, m, x, y, absolute=True)
    seq = refs.seq_half_matmul(B, m, x, y)

    def verdict(got, tacc="half", sequential=False, t="half", ex=exact, ab=absum):
        return refs.matmul_verdict(
            B, got, ex, ab, m.K, t, tacc, seq if tacc == "half" else None, sequential
        )[0]

    assert verdict(seq, sequential=True) and verdict(seq)
    # Pairwise: binary16 sums of the two halves of k, then added and rounded.
    lo = refs.seq_half_matmul(B, MatMul("lo", (2, 24, 48), (48, 16)), x[..., :48], y[:48])
    hi = refs.seq_half_matmul(B, MatMul("hi", (2, 24, 48), (48, 16)), x[..., 48:], y[48:])
    pairwise = (lo + hi).astype(np.float16).astype(np.float64)
    assert not np.array_equal(pairwise, seq)
    assert verdict(pairwise) and not verdict(pairwise, sequential=True)
    swapped = seq.copy()
    swapped[:, [0, 1]] = seq[:, [1, 0]]
    assert not verdict(swapped)
    with_nan = seq.copy()
    with_nan[0, 0, 0] = np.nan
    assert not verdict(with_nan)
    ok, row = refs.matmul_verdict(B, seq, exact, absum, m.K, "half", "half", seq)
    assert row["max_err_over_bound"] <= 1 and row["mean_err"] > 0 and row["rel_err_norm"] > 0
    # Tacc=float: the binary32 FMA chain (reference.py), rounded to T.
    f32 = ref.batch_matmul(x, y, accumulation="float32")
    assert verdict(f32.astype(np.float16), "float") and verdict(f32, "float", t="float")
    # T=float on full binary32 data: a binary32 chain passes (Higham's gamma_K bound holds for
    # separately rounded products and sums too), TF32-rounded inputs do not.
    rng = np.random.default_rng(8)
    xf = rng.uniform(-1, 1, m.x_shape).astype(np.float32)
    yf = rng.uniform(-0.5, 0.5, m.y_shape).astype(np.float32)
    ex_f = refs.matmul_exact(B, m, xf, yf)
    ab_f = refs.matmul_exact(B, m, xf, yf, absolute=True)
    chain = np.zeros((2, 24, 16), np.float32)  # binary32 products and sums, each rounded
    for k in range(m.K):
        chain = chain + xf[:, :, k : k + 1] * yf[k : k + 1, :]
    tf32 = (_tf32(xf).astype(np.float64) @ _tf32(yf).astype(np.float64)).astype(np.float32)
    assert verdict(chain, "float", t="float", ex=ex_f, ab=ab_f)
    assert not verdict(tf32, "float", t="float", ex=ex_f, ab=ab_f)


def test_matmul_half_bound_by_hand():
    """gamma_K(2^-11) = K u / (1 - K u): K = 1024 gives 0.5 / 0.5 = 1; K >= 2048 has no bound."""
    assert refs.half_acc_bound(1024, 2.0) == 2.0 + 1024 * 2.0**-25
    assert refs.half_acc_bound(2048, 1.0) == math.inf
    assert refs.float_acc_bound(0, 0.0, 0.0, "float") == 0.0


def test_matmul_benchmark_reports_fail_below_its_targets():
    bert = problems.MATMUL_BENCH[0]
    dry = problems.MATMUL_BENCH_DRY[0]
    fast = {"ours_half_ms": 1.0, "ours_float_ms": 1.0, "cublas_ms": 0.95, "cublas_fp16acc_ms": 0.9}
    assert check.matmul_targets_met(dict(fast), bert)  # 0.95x and 0.9x
    assert not check.matmul_targets_met({**fast, "cublas_ms": 0.85}, bert)  # float 0.85x
    assert not check.matmul_targets_met({**fast, "cublas_fp16acc_ms": 0.8}, bert)  # half 0.8x
    row = {k: v for k, v in fast.items() if k != "cublas_fp16acc_ms"}
    assert check.matmul_targets_met(row, bert) and row["half_target_peer"] == "half_vs_cublas"
    assert not check.matmul_targets_met({"ours_half_ms": 1.0, "ours_float_ms": 1.0}, bert)
    assert check.matmul_targets_met({**fast, "cublas_ms": 0.1}, dry)  # no target off BERT


def test_check_sections_fit_the_budget():
    """The section timeouts sum to 390 s, under the 405 s budget, under `timeout 420`."""
    assert sum(check.SECTIONS.values()) == 390 and check.BUDGET_S == 405
    assert list(check.SECTIONS)[-3:] == ["matmul", "bench", "matmul_bench"]


def test_check_spent_budget_skips_sections_and_still_writes_the_summary(lib, tmp_path, monkeypatch):
    """With the budget spent, no section starts; each is an ERROR saying so, in a summary."""
    monkeypatch.setattr(check, "BUDGET_S", 0)
    rc = check.main(["--lib", LIB, "--out", str(tmp_path), "--skip", "facts,exactness,random"])
    assert rc == 1
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [s["section"] for s in summary["sections"]] == [
        "cases",
        "matmul",
        "bench",
        "matmul_bench",
    ]
    assert all(s["verdict"] == "ERROR" and "budget" in s["status"] for s in summary["sections"])


def test_check_cpu_dry_run_matmul(lib, tmp_path):
    """Where PyTorch is installed: the matmul sections of check.py --cpu-dry-run on the host
    library and CPU tensors (direct kernel only): every asserted result passes, the exactness
    rows cover every shape, pair and forced implementation, and the benchmark rows carry
    timings."""
    summary = cpu_dry_run(tmp_path, "facts,exactness,random,cases,bench")
    assert [s["section"] for s in summary["sections"]] == ["matmul", "matmul_bench"]
    assert all(s["verdict"] == "PASS" and not s["failed"] for s in summary["sections"])
    rows = [json.loads(x) for x in (tmp_path / "dry" / "results.jsonl").read_text().splitlines()]
    results = [r for r in rows if r["event"] == "result"]
    exact = [r for r in results if r["section"] == "matmul" and "mismatches" in r]
    # Host build: a made-up sm_75, so only auto and the direct kernel run; the CUTLASS paths
    # are refused (recorded, not asserted, off an H200).
    n_exact = len(problems.MATMUL_EXACT) * len(PAIRS)
    assert len(exact) == 2 * n_exact and all(r["used"] == "fallback" for r in exact)
    random_rows = [r for r in results if r["section"] == "matmul" and "max_err" in r]
    assert len(random_rows) == 2 * len(PAIRS) * 2
    assert all(r["ok"] for r in random_rows)
    bench = [r for r in results if r["section"] == "matmul_bench" and "shape" in r]
    assert [r["shape"] for r in bench] == [m.name for m in problems.MATMUL_BENCH_DRY]
    assert all(r["ours_half_ms"] > 0 and r["ours_float_ms"] > 0 for r in bench)
