"""Seeded random fuzz of the three ops (tests/support/fuzz_cases.py): eager and tf.function with
unknown sizes, SAME/VALID/EXPLICIT, strides, dilations, NHWC/NCHW, groups, float16/float32,
Tacc half/float, zero sizes and invalid combinations, in two worker processes.

Every result is checked against tests/support/reference.py (bit-exact for Tacc=half, Higham's bound
for Tacc=float) and its shape against TensorFlow's Conv2D shape function; an error must be
one of TensorFlow's conventional ones, and may only occur where TensorFlow's shape function
rejects the geometry too (or the case was made invalid on purpose). A crashed worker fails the
case it was running. `make fuzz` runs the same with more cases (FUZZ_CASES, FUZZ_SEED).
"""

from __future__ import annotations

import os

import numpy as np

from support import fuzz_cases as F

SEED = int(os.environ.get("FUZZ_SEED", "20261201"))
COUNT = int(os.environ.get("FUZZ_CASES", "4000"))


def test_random_cases():
    cases = F.random_cases(SEED, COUNT)
    results = F.run_cases(cases, workers=int(os.environ.get("FUZZ_WORKERS", "2")), timeout=3600)
    failures = []
    for c in cases:
        why = F.verdict(c, results.get(c["id"], {"status": "crash", "message": "no result"}))
        if why:
            failures.append(f"case {c['id']}: {why}\n  reproducer: {F.reproducer(c)}")
    statuses = [results[c["id"]]["status"] for c in cases]
    assert statuses.count("ok") > COUNT // 2  # most cases compute something
    assert not failures, f"{len(failures)} of {COUNT} cases failed:\n" + "\n".join(failures[:20])


def test_the_check_detects_a_wrong_result():
    # The checker itself: one ulp off in one output of a real case is reported.
    from support import fuzz_worker as W

    case = {
        "id": "0",
        "op": "fprop",
        "mode": "eager",
        "check": True,
        "attrs": {
            "Tacc": "float16",
            "strides": [1, 1, 1, 1],
            "padding": "SAME",
            "explicit_paddings": [],
            "data_format": "NHWC",
            "dilations": [1, 1, 1, 1],
        },
        "args": [
            {"shape": [1, 4, 4, 3], "dtype": "float16", "kind": "random", "seed": 3},
            {"shape": [3, 3, 3, 2], "dtype": "float16", "kind": "random", "seed": 4},
        ],
    }
    tensors = [W.make_tensor(s) for s in case["args"]]
    y = W.run_op(case, tensors)[0].numpy()
    assert W.check(case, tensors, y, list(y.shape), None) == []
    bad = y.copy()
    bad.view(np.uint16)[0, 1, 2, 1] ^= 1
    found = W.check(case, tensors, bad, list(y.shape), None)
    assert "1 outputs differ from the reference" in found[0]
    assert "TensorFlow's Conv2D shape" in W.check(case, tensors, y, [1, 4, 4, 3], None)[0]


MATMUL_COUNT = int(os.environ.get("FUZZ_MATMUL_CASES", "800"))


def test_random_matmul_cases():
    # Fp16MatMul: ranks 2-4, broadcasting, adj_x/adj_y, zero sizes, dtypes, Tacc, unknown sizes
    # in graph mode, invalid shapes; against reference.batch_matmul and BatchMatMulV2's shapes.
    cases = F.random_matmul_cases(SEED, MATMUL_COUNT)
    results = F.run_cases(cases, workers=int(os.environ.get("FUZZ_WORKERS", "2")), timeout=3600)
    failures = []
    for c in cases:
        why = F.verdict(c, results.get(c["id"], {"status": "crash", "message": "no result"}))
        if why:
            failures.append(f"case {c['id']}: {why}\n  reproducer: {F.reproducer(c)}")
    statuses = [results[c["id"]]["status"] for c in cases]
    assert statuses.count("ok") > MATMUL_COUNT // 2
    assert not failures, f"{len(failures)} of {MATMUL_COUNT} cases failed:\n" + "\n".join(
        failures[:20]
    )


def test_the_matmul_check_detects_a_wrong_result():
    from support import fuzz_worker as W

    case = {
        "id": "0",
        "op": "matmul",
        "mode": "eager",
        "check": True,
        "attrs": {"Tacc": "float16", "adj_x": False, "adj_y": True},
        "args": [
            {"shape": [2, 4, 3], "dtype": "float16", "kind": "random", "seed": 3},
            {"shape": [5, 3], "dtype": "float16", "kind": "random", "seed": 4},
        ],
    }
    tensors = [W.make_tensor(s) for s in case["args"]]
    y = W.run_op(case, tensors)[0].numpy()
    assert W.check(case, tensors, y, list(y.shape), None) == []
    bad = y.copy()
    bad.view(np.uint16)[1, 2, 3] ^= 1
    assert "1 outputs differ from the reference" in W.check(case, tensors, bad, [2, 4, 5], None)[0]
    assert "BatchMatMulV2 shape" in W.check(case, tensors, y, [2, 4, 6], None)[0]
