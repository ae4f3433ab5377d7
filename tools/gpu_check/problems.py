"""The shapes of the GPU check and benchmark (convolutions and Fp16MatMul), and which
implementations must run them on an H200 (compute capability 9.0, sm_90a code present). Standard
library only: imported by check.py on the GPU machine and by tests/gpu/test_gpu_host.py, which
checks on a CPU that the implementation table of cc/kernels/gpu/conv2d_gpu.cu.cc (with CUTLASS's own
can_implement) agrees with h200_paths() and h200_matmul_paths() for every shape here, so that a
silent fallback to the direct kernel is caught before a GPU is involved."""

from __future__ import annotations

try:  # as a package module (tests) or next to check.py (the bundle)
    from .abi import MatMul, Problem
except ImportError:  # pragma: no cover - script use
    from abi import MatMul, Problem

# Integer-data exactness (partial sums within +-2048): odd shapes, strides, dilations, explicit
# and asymmetric padding, NCHW, groups, depthwise, leftover rows.
EXACT_PROBLEMS = [
    Problem("aligned_3x3_same", 2, 9, 11, 16, 24, 3, 3, pad=(1, 1, 1, 1)),
    Problem("odd_channels_valid", 3, 7, 5, 3, 5, 3, 3),
    Problem("stride2_same_asym", 2, 10, 10, 8, 16, 3, 3, stride=(2, 2), pad=(0, 1, 0, 1)),
    Problem("dilation2", 2, 12, 12, 16, 8, 3, 3, dil=(2, 2), pad=(2, 2, 2, 2)),
    Problem("1x1_stride2", 2, 8, 8, 32, 64, 1, 1, stride=(2, 2)),
    Problem("nchw_3x3", 2, 9, 11, 16, 24, 3, 3, pad=(1, 1, 1, 1), nchw=True),
    Problem("groups2", 2, 6, 7, 16, 16, 3, 3, pad=(1, 1, 1, 1), groups=2),
    Problem("depthwise_x2", 2, 8, 8, 8, 16, 3, 3, stride=(2, 2), pad=(0, 1, 0, 1), groups=8),
    Problem("valid_leftover_rows", 2, 10, 11, 8, 8, 3, 3, stride=(2, 2)),
    Problem("7x7_stride2_pad3", 2, 16, 16, 8, 16, 7, 7, stride=(2, 2), pad=(3, 3, 3, 3)),
    Problem("resnet_like_64", 4, 14, 14, 64, 64, 3, 3, pad=(1, 1, 1, 1)),
    Problem("explicit_asym_pad", 2, 9, 8, 8, 16, 3, 2, pad=(2, 1, 0, 3)),
    Problem("channels4", 2, 6, 6, 4, 12, 3, 3, pad=(1, 1, 1, 1)),
    Problem(
        "stride_1x2_dil_2x1", 2, 9, 12, 8, 8, 3, 3, stride=(1, 2), dil=(2, 1), pad=(1, 2, 0, 1)
    ),
    Problem("wgrad_long_reduction", 2, 32, 32, 8, 8, 3, 3, pad=(1, 1, 1, 1)),  # 2048 terms
]

# Random data against float64 and against the sequential fp16 sum.
RANDOM_PROBLEMS = [
    Problem("r50_56x56_64_n4", 4, 56, 56, 64, 64, 3, 3, pad=(1, 1, 1, 1)),
    Problem("r50_28x28_128_n4", 4, 28, 28, 128, 128, 3, 3, pad=(1, 1, 1, 1)),
    Problem("r50_14x14_256_n4", 4, 14, 14, 256, 256, 3, 3, pad=(1, 1, 1, 1)),
    Problem("r50_7x7_512_n4", 4, 7, 7, 512, 512, 3, 3, pad=(1, 1, 1, 1)),
    Problem("odd_5x5_s2_c3", 4, 33, 31, 3, 10, 5, 5, stride=(2, 2), pad=(2, 2, 2, 2)),
]

# Benchmark: the seed shape and the ResNet-50 layers at N=128.
BENCH_PROBLEMS = [
    Problem("seed_16x32x32x16_k16_3x3_valid", 16, 32, 32, 16, 16, 3, 3),
    Problem("r50_56x56_64to64_3x3", 128, 56, 56, 64, 64, 3, 3, pad=(1, 1, 1, 1)),
    Problem("r50_28x28_128to128_3x3", 128, 28, 28, 128, 128, 3, 3, pad=(1, 1, 1, 1)),
    Problem("r50_14x14_256to256_3x3", 128, 14, 14, 256, 256, 3, 3, pad=(1, 1, 1, 1)),
    Problem("r50_7x7_512to512_3x3", 128, 7, 7, 512, 512, 3, 3, pad=(1, 1, 1, 1)),
    Problem("r50_56x56_256to64_1x1", 128, 56, 56, 256, 64, 1, 1),
    Problem("r50_14x14_256to1024_1x1", 128, 14, 14, 256, 1024, 1, 1),
]


def case_problem(channels: int, k_out: int = 8) -> Problem:
    """The 1x1 convolutions of the numerics cases on tensor cores: C zero-padded to 8."""
    return Problem(f"case_1x1_c{channels}", 1, 1, 1, channels, k_out, 1, 1)


CASE_PROBLEMS = [case_problem(c) for c in (8, 4096, 3000)] + [
    Problem("seed_probe_c8", 1, 1, 4, 8, 8, 1, 2)
]

ALL_PROBLEMS = EXACT_PROBLEMS + RANDOM_PROBLEMS + BENCH_PROBLEMS + CASE_PROBLEMS

TILE = 128


def _implied_pad_ok(p: Problem) -> bool:
    bottom = (p.P - 1) * p.stride[0] + (p.KH - 1) * p.dil[0] + 1 - p.H - p.pad[0]
    right = (p.Q - 1) * p.stride[1] + (p.KW - 1) * p.dil[1] + 1 - p.W - p.pad[2]
    return bottom >= 0 and right >= 0


def h200_paths(p: Problem, op: str, t: str) -> list:
    """Implementations that must be able to run (p, op, T=t) on an H200, in the table's order;
    the first is what kAuto runs. The rules, stated independently of the C++ code:
      fallback  always;
      simt      T=float, groups == 1 (alignment 1), dgrad only without dilation (CUTLASS 2.x's
                strided dgrad does not take dilation);
      sm80      T=half, groups == 1, C and K multiples of 8; dgrad with dilation only at unit
                strides (CUTLASS 2.x's unit-stride dgrad takes dilation, its strided one not);
      sm90      T=half, groups == 1, C and K multiples of 8, non-negative implied bottom/right
                padding; dgrad and wgrad with unit strides and dilations only. kAuto takes the
                sm90 wgrad only when its 128x128 output tiles number >= 100 (else sm80 split-K).
    Returns (paths, auto_path)."""
    ig = p.groups == 1 and min(p.N, p.H, p.W, p.C, p.K, p.P, p.Q) > 0
    unit = p.stride == (1, 1) and p.dil == (1, 1)
    no_dil = p.dil == (1, 1)
    paths = []
    auto = None
    if t == "half" and ig and p.C % 8 == 0 and p.K % 8 == 0:
        if _implied_pad_ok(p) and (op == "fprop" or unit):
            paths.append("sm90")
            tiles = -(-p.K // TILE) * -(-(p.KH * p.KW * p.C) // TILE)
            if op != "wgrad" or tiles >= 100:
                auto = "sm90"
        if op != "dgrad" or no_dil or p.stride == (1, 1):
            paths.append("sm80")
    if t == "float" and ig and (op != "dgrad" or no_dil):
        paths.append("simt")
    paths.append("fallback")
    if auto is None:
        auto = next(x for x in paths if x != "sm90")
    return paths, auto


# Fp16MatMul. Integer-data exactness: odd sizes, adj_x / adj_y, broadcast batches (x batched with
# y shared: one fprop; y batched or both broadcast: one fprop per output matrix), K = 0 (zeros),
# M = 0 (empty), T = float (every (T, Tacc) pair runs each), and a 2048-term reduction.
MATMUL_EXACT = [
    MatMul("aligned_64x128x72", (64, 128), (128, 72)),
    MatMul("odd_5x7x3", (5, 7), (7, 3)),
    MatMul("odd_m37_k64_n40", (37, 64), (64, 40)),  # M odd: tensor cores still take it
    MatMul("odd_k60", (16, 60), (60, 24)),  # K not a multiple of 8: direct kernel only
    MatMul("odd_n20", (16, 64), (64, 20)),  # N not a multiple of 8: direct kernel only
    MatMul("adj_x_x3_y_shared", (3, 128, 40), (128, 72), adj_x=True),
    MatMul("adj_y_both_batched", (2, 40, 64), (2, 24, 64), adj_y=True),
    MatMul("adj_xy_odd", (2, 7, 5), (2, 3, 7), adj_x=True, adj_y=True),
    MatMul("adj_xy_aligned", (2, 64, 24), (2, 32, 64), adj_x=True, adj_y=True),
    MatMul("x_batched_y_shared", (4, 3, 24, 32), (32, 16)),
    MatMul("y_batched_x_shared", (24, 32), (5, 32, 16)),
    MatMul("both_broadcast", (3, 1, 16, 32), (4, 32, 24)),
    MatMul("k0", (4, 0), (0, 8)),
    MatMul("k0_adj_xy_batched", (2, 0, 16), (2, 8, 0), adj_x=True, adj_y=True),
    MatMul("m0", (2, 0, 8), (8, 16)),
    MatMul("long_k2048", (16, 2048), (2048, 16)),
]

# Random data against float64 (and, for Tacc=half, against the sequential fp16 sum).
MATMUL_RANDOM = [
    MatMul("bert_proj_s128", (2, 128, 768), (768, 192)),  # folded batch, K = 768
    MatMul("attn_scores_adj_y", (12, 128, 64), (12, 128, 64), adj_y=True),
    MatMul("attn_context", (12, 128, 128), (12, 128, 64)),
    MatMul("adj_x_k512", (512, 96), (512, 64), adj_x=True),
    MatMul("odd_37x61x45_x_batched", (3, 37, 61), (61, 45)),
]

# Benchmark: BERT-base (hidden 768, FFN 3072, 12 heads of 64) at batch 8 x sequence 512.
MATMUL_BENCH = [
    MatMul("bert_ffn_in_4096x768x3072", (4096, 768), (768, 3072)),
    MatMul("bert_ffn_out_4096x3072x768", (4096, 3072), (3072, 768)),
    MatMul("bert_scores_192x512x64x512", (192, 512, 64), (192, 64, 512)),
    MatMul("bert_scores_adj_y", (192, 512, 64), (192, 512, 64), adj_y=True),
    MatMul("bert_context_192x512x512x64", (192, 512, 512), (192, 512, 64)),
]
# The CPU dry run's stand-ins (the host library runs the direct kernel as plain loops).
MATMUL_BENCH_DRY = [
    MatMul("dry_proj_64x96x128", (64, 96), (96, 128)),
    MatMul("dry_scores_adj_y", (4, 32, 16), (4, 32, 16), adj_y=True),
]

ALL_MATMULS = MATMUL_EXACT + MATMUL_RANDOM + MATMUL_BENCH + MATMUL_BENCH_DRY


def h200_matmul_paths(m: MatMul, t: str):
    """(paths, auto) for Fp16MatMul on an H200: the rules of h200_paths for the 1x1 fprop that
    runs it (MatMul.fprop_problem: GEMM M = M, N = N, K = K), i.e. T=half takes sm90 (then sm80)
    when K and N are multiples of 8 and M, N, K > 0; T=float takes simt when M, N, K > 0; the
    direct kernel takes anything."""
    return h200_paths(m.fprop_problem(), "fprop", t)
