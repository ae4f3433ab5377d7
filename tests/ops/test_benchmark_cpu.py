"""tools/benchmark_cpu.py: the ceiling is the op library's own Tacc=half fprop micro-kernel (the
probe runs the step it claims, on the tile it claims), and a shape above its ceiling is a
benchmark error, never a figure. No timing is asserted."""

import ctypes
import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

from tf_fp16ops import ops
from tf_fp16ops._platform import library as _library

ROOT = Path(__file__).resolve().parents[2]


def _benchmark():
    spec = importlib.util.spec_from_file_location("benchmark_cpu", ROOT / "tools/benchmark_cpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_row_above_the_ceiling_is_an_error_not_a_figure():
    cell = _benchmark().ceiling_cell
    assert cell(0.43) == ("43%", True)
    assert cell(1.0) == ("100%", True)
    text, ok = cell(1.45)
    assert not ok and "benchmark error" in text and "145%" in text
    assert not cell(float("nan"))[1]


def _probe():
    probe = ctypes.CDLL(str(_library.LIBRARY_PATH)).TfFp16opsFpropHalfCeilingProbe
    probe.argtypes = [ctypes.c_int64, ctypes.POINTER(ctypes.c_float), ctypes.c_int]
    probe.restype = ctypes.c_int64
    return probe


def test_ceiling_probe_runs_the_half_step_on_the_tile_of_the_path_in_use():
    isa = ops.cpu_isa()
    probe = _probe()
    sink = ctypes.c_float(-1.0)
    # Tiles (cc/kernels/cpu/conv2d_cpu.h): AVX512-FP16 8 channels x 96 positions; otherwise
    # 8 rows x 16 lanes; 256 terms per run.
    tile = {"avx512fp16": 8 * 96, "avx512": 8 * 16, "avx2": 8 * 16, "scalar": 8 * 16}[isa]
    assert probe(3, ctypes.byref(sink), 0) == 3 * 256 * tile
    # By hand: the fp16 path starts at +0 and adds 1 * 0.25 exactly (768 steps: 192); the others
    # start at 1024, where 1024 + 0.25 rounds back to 1024 (binary16 spacing 1).
    assert sink.value == (192.0 if isa == "avx512fp16" else 1024.0)
    # 4096 steps: from 512 on, 512 + 0.25 is a binary16 tie (spacing 0.5) that rounds to the
    # even 512, so the sum stagnates there (an fp32 sum would reach 1024).
    assert probe(16, ctypes.byref(sink), 0) == 16 * 256 * tile
    assert sink.value == (512.0 if isa == "avx512fp16" else 1024.0)
    assert probe(0, ctypes.byref(sink), 0) == 0


def test_ceiling_probe_second_variant_is_the_32_lane_rows_or_the_register_tile():
    # Variant 1: 8 rows x 32 lanes over 128 terms (AVX2's four-chains-per-row kHalf kernel); on
    # AVX512-FP16 the register tile of the NHWC kernels and Fp16MatMul, 6 rows x 128 lanes over
    # 128 terms, two calls per rep, each from +0.
    isa = ops.cpu_isa()
    probe = _probe()
    sink = ctypes.c_float(-1.0)
    if isa == "avx512fp16":
        assert probe(3, ctypes.byref(sink), 1) == 3 * 2 * 6 * 128 * 128
        assert sink.value == 32.0  # by hand: 128 exact steps of 1 * 0.25 from +0
        return
    assert probe(3, ctypes.byref(sink), 1) == 3 * 8 * 32 * 128
    assert sink.value == 1024.0  # 1024 + 0.25 rounds back to 1024, as in variant 0


@pytest.mark.parametrize("reps, variant", [(-1, 0), (0, 1), (5, 2), (5, -1)])
def test_ceiling_probe_does_nothing_for_no_reps_or_an_unknown_variant(reps, variant):
    sink = ctypes.c_float(-1.0)
    assert _probe()(reps, ctypes.byref(sink), variant) == 0
    assert sink.value == -1.0


@pytest.mark.parametrize("pad", ["SAME", "VALID"])
def test_the_in_graph_float32_peers_compute_the_same_passes(pad):
    """Each (pass, ours) callable of `graph_fp32_peers` returns GRAPH_CALLS results of the shape
    and values of its (pass, tf) peer (float32 sums in either order: within 1e-5 relative to the
    sum of |terms|, here under 3 * 3 * 4 terms of |x*w| <= 0.5), so the table compares like with
    like."""
    import numpy as np
    import tensorflow as tf

    import tf_fp16ops

    bench = _benchmark()
    peers = bench.graph_fp32_peers(tf, tf_fp16ops, (2, 6, 5, 4), (3, 3, 4, 3), pad, calls=3)
    assert sorted(peers) == sorted((ps, who) for ps in bench.PASSES for who in ("ours", "tf"))
    for ps in bench.PASSES:
        ours, theirs = peers[(ps, "ours")](), peers[(ps, "tf")]()
        assert len(ours) == len(theirs) == 3
        for a, b in zip(ours, theirs, strict=True):
            assert a.shape == b.shape
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=0, atol=6e-4)


def test_the_in_graph_callables_trace_without_tensorflows_retracing_warning():
    """The benchmark builds six in-graph float32 callables and one fp16 one per shape, from the
    same Python code: each is traced once into a concrete function, so TensorFlow's warning about
    frequent retracing (it counts traces per code object: 5 within a few calls) never reaches the
    benchmark's output, however many shapes run."""
    import logging

    import numpy as np
    import tensorflow as tf

    import tf_fp16ops

    bench = _benchmark()
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger("tensorflow")
    logger.addHandler(handler)
    try:
        for h in (5, 6, 7):
            x16 = np.ones((1, h, 4, 2), np.float16)
            w16 = np.ones((1, 1, 2, 2), np.float16)
            assert len(bench.graph_fp16acc(tf, tf_fp16ops, x16, w16, "VALID", calls=2)()) == 2
            for peer in bench.graph_fp32_peers(
                tf, tf_fp16ops, (1, h, 4, 2), (1, 1, 2, 2), "VALID", calls=2
            ).values():
                assert len(peer()) == 2
                assert len(peer()) == 2
    finally:
        logger.removeHandler(handler)
    assert not [r.getMessage() for r in records if "retracing" in r.getMessage()]


def test_interleaved_reports_the_time_per_call_of_batches():
    """`interleaved` with calls=C runs each peer C times per timing and reports the time per
    call (a fake clock that each call of peer a moves by 2 and of peer b by 3 gives 2 and 3, not
    2C and 3C), after one untimed warm-up call each."""
    bc = _benchmark()
    clock = [0.0]
    counts = {"a": 0, "b": 0}

    def peer(k, dt):
        def fn():
            counts[k] += 1
            clock[0] += dt

        return fn

    bc.time = SimpleNamespace(perf_counter=lambda: clock[0], process_time=lambda: clock[0])
    got = bc.interleaved({"a": peer("a", 2.0), "b": peer("b", 3.0)}, repeats=3, calls=4)
    assert counts == {"a": 1 + 3 * 4, "b": 1 + 3 * 4}
    assert got == {"a": (2.0, 2.0), "b": (3.0, 3.0)}
