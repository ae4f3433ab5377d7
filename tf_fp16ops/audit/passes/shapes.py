"""FLOPs and shape-based risk flags.

FLOPs = 2 * |Y| * R, where Y is the fprop output (for dgrad/wgrad: the output gradient, same
size) and R = product of the filter's spatial sizes times its input-channel dim (per group;
depthwise: R = spatial product). Unknown batch (-1) counts as 1 and is noted "per example".
Risk: with fp16 accumulation a reduction longer than 2048 terms can stagnate (2048 + 1 rounds to
2048 in fp16) or overflow (docs/design.md "Numerics contract"); tensor cores want channels that are
multiples of 8 and groups = 1 (NVIDIA, cuDNN developer guide, "Tensor Core operations").
Impossible attrs (TensorFlow's conv kernels, tensorflow/core/kernels/conv_ops.cc, reject them:
strides/dilations not spatial_dims + 2 positive ints of int32 range, padding not SAME, VALID or
EXPLICIT, explicit_paddings not 2 * (spatial_dims + 2) non-negative ints with zero batch and
channel pads, and any of them, or data_format, set as a value of another type, such as strides
as a string or dilations as floats), and a VALID/EXPLICIT window whose output size TensorFlow's
shape function finds negative (`negative_outputs`), give the flag "invalid-attrs(...)" and
unknown FLOPs; element counts or FLOPs beyond int64 give "size-overflow" and unknown FLOPs. The
matmul family gets the same codes (`invalid_matmul_attrs`, `analyse_matmul`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..codes import Flag, flag
from ..opsets import ConvOpInfo

FP16_ACC_SAFE_TERMS = 2048
INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class ShapeFacts:
    input_shape: tuple[int, ...] | None
    filter_shape: tuple[int, ...] | None
    output_shape: tuple[int, ...] | None
    flops: int | None
    note: str
    flags: tuple[Flag, ...]


def _channels_last(fmt: str | None) -> bool:
    return not fmt or fmt.endswith("C") or fmt == "NHWC"


def output_size(size: int, k: int, stride: int, dilation: int, padding: str) -> int:
    """One spatial output size of a forward conv, TensorFlow's rule (GetWindowedOutputSize,
    tensorflow/core/framework/kernel_shape_util.cc) in exact integer arithmetic: SAME gives
    ceil(size / stride), VALID (and EXPLICIT, on the padded size) ceil((size - (k - 1) * dilation)
    / stride), at least 0; -1 (unknown) stays -1. `stride` and `dilation` must be positive.

    Raises:
      ValueError: a padding other than SAME, VALID or EXPLICIT.
    """
    if size < 0:
        return -1
    if padding == "SAME":
        return -(-size // stride)
    if padding in ("VALID", "EXPLICIT"):
        return max(0, -(-(size - (k - 1) * dilation) // stride))
    raise ValueError(f"padding must be SAME, VALID or EXPLICIT, got {padding!r}")


def _windows(in_shape, filt, attrs, info: ConvOpInfo):
    """(channels_last, spatial input sizes (explicit pads added), filter spatial sizes, strides,
    dilations, padding) of a forward conv, or None when they are not all defined (see
    `fprop_output`)."""
    sd = info.spatial_dims
    if not in_shape or not filt or len(in_shape) != sd + 2 or len(filt) != sd + 2:
        return None
    strides = attrs.ints("strides")
    dilations = attrs.ints("dilations")
    padding = attrs.str("padding")
    fmt = attrs.str("data_format")
    cl = _channels_last(fmt)
    sp = in_shape[1:-1] if cl else in_shape[2:]
    st = (strides[1:-1] if cl else strides[2:]) if strides and len(strides) == sd + 2 else (1,) * sd
    dl = (
        (dilations[1:-1] if cl else dilations[2:])
        if dilations and len(dilations) == sd + 2
        else (1,) * sd
    )
    if any(s <= 0 for s in st) or any(d <= 0 for d in dl):
        return None
    pads = attrs.ints("explicit_paddings") if padding == "EXPLICIT" else None
    if padding == "EXPLICIT":
        if not pads or len(pads) != 2 * (sd + 2) or any(p < 0 for p in pads):
            return None
        pairs = list(zip(pads[::2], pads[1::2], strict=True))
        pairs = pairs[1:-1] if cl else pairs[2:]
        sp = [-1 if n < 0 else n + a + b for n, (a, b) in zip(sp, pairs, strict=True)]
    if padding not in ("SAME", "VALID", "EXPLICIT"):
        return None
    return cl, tuple(sp), tuple(filt[:sd]), tuple(st), tuple(dl), padding


def fprop_output(in_shape, filt, attrs, info: ConvOpInfo):
    """Output shape of a forward conv from its input and filter shapes, or None.

    `attrs` reads the conv's attrs on demand (`.ints(key)`, `.str(key)`): strides, dilations,
    padding, explicit_paddings, data_format (see `passes.attrs.NodeAttrs`). None also when a
    spatial stride or dilation is not positive (no output size is defined; TensorFlow rejects
    such a conv)."""
    w = _windows(in_shape, filt, attrs, info)
    if w is None:
        return None
    cl, sp, ks, st, dl, padding = w
    sd = info.spatial_dims
    out = [
        output_size(size, k, s, d, padding) for size, k, s, d in zip(sp, ks, st, dl, strict=True)
    ]
    cout = filt[sd] * filt[sd + 1] if info.family == "depthwise" else filt[sd + 1]
    return (in_shape[0],) + tuple(out) + (cout,) if cl else (in_shape[0], cout) + tuple(out)


def negative_outputs(in_shape, filt, attrs, info: ConvOpInfo) -> list[str]:
    """The spatial axes of a forward conv whose output size TensorFlow's shape function rejects
    as negative (GetWindowedOutputSizeVerbose, tensorflow/core/framework/kernel_shape_util.cc:
    VALID/EXPLICIT output (input - effective_filter + stride) / stride, truncated, must be >= 0,
    effective_filter = (filter - 1) * dilation + 1, input with the explicit pads), each as words
    for the "invalid-attrs" flag; [] when none (or when a size is unknown)."""
    w = _windows(in_shape, filt, attrs, info)
    if w is None or w[5] == "SAME":
        return []
    _, sp, ks, st, dl, padding = w
    bad = []
    for size, k, s, d in zip(sp, ks, st, dl, strict=True):
        if size < 0 or k < 0:
            continue
        eff = (k - 1) * d + 1
        # C++ division truncates toward 0: (size - eff + s) / s < 0 exactly when the numerator
        # is <= -s.
        if size - eff + s <= -s:
            bad.append(
                f"padding={padding!r}: filter {k} (dilation {d}, stride {s}) on input size "
                f"{size} gives a negative output size"
            )
    return bad


def _channel_problems(cin: int, cout: int) -> dict[str, int]:
    """The sides of a conv whose channel count is not a multiple of 8 (tensor-core tile width
    for fp16 in cuDNN's Tensor Core guidance), as fields {"input_channels": 3} (a side whose
    count is a multiple is left out)."""
    return {f"{side}_channels": n for side, n in (("input", cin), ("output", cout)) if n % 8}


_SHOWN_VALUES = 8  # list items an invalid-attrs flag quotes (a hostile list holds millions)
_SHOWN_CHARS = 60  # characters of a string it quotes


def _shown_list(v) -> str:
    """`v` as a list, its first _SHOWN_VALUES items then the count of the rest."""
    if len(v) <= _SHOWN_VALUES:
        return str(list(v))
    head = ", ".join(str(x) for x in list(v[:_SHOWN_VALUES]))
    return f"[{head}, ... ({len(v):,} values)]"


def _shown_str(s: str) -> str:
    """repr of `s`, cut to _SHOWN_CHARS characters with the length of the whole."""
    if len(s) <= _SHOWN_CHARS:
        return repr(s)
    return f"{s[:_SHOWN_CHARS]!r}... ({len(s):,} characters)"


def invalid_attrs(attrs, info: ConvOpInfo) -> list[str]:
    """The conv attrs no TensorFlow kernel accepts, each as "key=value" or, for a value of the
    wrong type, "key is KIND, not a list of ints/a string" (e.g. "strides=[1, -5, 2, 1]",
    "padding='WEIRD'", "strides is string, not a list of ints"); [] when all present ones are
    well formed."""
    rank = info.spatial_dims + 2
    bad = []
    wrong_type = set()
    for key, expected in (
        ("strides", "ints"),
        ("dilations", "ints"),
        ("explicit_paddings", "ints"),
        ("padding", "string"),
        ("data_format", "string"),
    ):
        kind = attrs.kind(key)
        # An empty explicit_paddings list is TensorFlow's default for SAME/VALID.
        if kind is not None and kind != expected:
            if key == "explicit_paddings" and kind == "an empty list":
                continue
            wrong_type.add(key)
            what = "a list of ints" if expected == "ints" else "a string"
            bad.append(f"{key} is {kind}, not {what}")
    for key in ("strides", "dilations"):
        v = attrs.ints(key)
        if v is not None and (len(v) != rank or any(not 1 <= x <= INT32_MAX for x in v)):
            bad.append(f"{key}={_shown_list(v)}")
    padding = attrs.str("padding")
    if padding is not None and padding not in ("SAME", "VALID", "EXPLICIT"):
        bad.append(f"padding={_shown_str(padding)}")
    pads = attrs.ints("explicit_paddings")
    if "explicit_paddings" in wrong_type:
        pass
    elif padding == "EXPLICIT" or pads is not None:
        p = list(pads or ())
        cl = _channels_last(attrs.str("data_format"))
        outer = (0, 1, 2 * rank - 2, 2 * rank - 1) if cl else (0, 1, 2, 3)
        if (
            padding != "EXPLICIT"
            or len(p) != 2 * rank
            or any(not 0 <= x <= INT32_MAX for x in p)
            or any(p[i] for i in outer)
        ):
            bad.append(f"explicit_paddings={_shown_list(p)}")
    return bad


def _too_big(shape) -> bool:
    """True when a shape's element count (unknown sizes counted as 1) exceeds int64."""
    return bool(shape) and math.prod(max(d, 1) for d in shape) > INT64_MAX


def analyse(
    info: ConvOpInfo,
    T: str | None,
    accumulation: str,
    data_shape,
    filter_shape,
    node_out_shape,
    grad_shape,
    attrs,
) -> ShapeFacts:
    """Shapes, FLOPs and shape flags of one conv.

    `attrs` reads the conv's layout attrs on demand (`.ints(key)`, `.str(key)`: strides,
    dilations, padding, data_format, filter_format); only the attrs the result depends on are
    read, so the result is a function of the shapes and of the attrs actually read.
    """
    sd = info.spatial_dims
    filt = filter_shape if info.direction != "wgrad" else node_out_shape
    if filt and len(filt) == 4 and attrs.str("filter_format") == "OIHW":
        filt = (filt[2], filt[3], filt[1], filt[0])
    flops, note = None, "shapes unknown"
    flags: list[Flag] = []
    invalid = invalid_attrs(attrs, info)
    if not invalid and info.direction == "fprop":
        invalid = negative_outputs(data_shape, filt, attrs, info)
    if invalid:
        flags.append(flag("invalid-attrs", attrs=tuple(invalid)))
    if info.direction == "fprop":
        y = node_out_shape or (None if invalid else fprop_output(data_shape, filt, attrs, info))
        x = data_shape
    else:
        y = grad_shape
        x = data_shape if info.direction == "wgrad" else node_out_shape
    if (
        y
        and filt
        and len(filt) == sd + 2
        and all(d >= 0 for d in y[1:])
        and all(d >= 0 for d in filt)
    ):
        per_group_in = 1 if info.family == "depthwise" else filt[sd]
        r = math.prod(filt[:sd]) * per_group_in
        batch = y[0]
        note = "for the graph's batch size"
        if batch < 0:
            batch, note = 1, "per example (batch size unknown)"
        flops = 2 * batch * math.prod(y[1:]) * r
    overflow = any(_too_big(t) for t in (x, filt, y)) or (flops is not None and flops > INT64_MAX)
    if overflow:
        flags.append(flag("size-overflow"))
        flops, note = None, "element counts or FLOPs beyond int64"
    if invalid:
        flops, note = None, "output shape undefined: " + "; ".join(invalid)
    if filt and len(filt) == sd + 2 and all(d >= 0 for d in filt):
        if info.direction == "fprop":
            terms = math.prod(filt[:sd]) * (1 if info.family == "depthwise" else filt[sd])
        elif info.direction == "dgrad":
            terms = math.prod(filt[:sd]) * filt[sd + 1]
        else:
            terms = math.prod(y[:-1]) if y and all(d >= 0 for d in y) else None
        if accumulation == "fp16" and terms is not None and terms > FP16_ACC_SAFE_TERMS:
            flags.append(flag("fp16-acc-long-reduction", terms=terms, limit=FP16_ACC_SAFE_TERMS))
        if T == "half":
            cin = filt[sd]
            cout = filt[sd + 1]
            groups = None
            if info.family == "depthwise":
                # filter [kh, kw, channels, multiplier]: one group per input channel, and
                # channels * multiplier output channels
                groups, cout = cin, cin * cout
            elif x and len(x) == sd + 2:
                c_total = x[-1] if _channels_last(attrs.str("data_format")) else x[1]
                if c_total > 0 and cin > 0:
                    groups = c_total // cin
            bad = _channel_problems(cin, cout)
            if info.family == "depthwise":
                bad["groups"], bad["depthwise"] = groups, True
            elif groups and groups > 1:
                bad["groups"] = groups
            if bad:
                flags.append(flag("tensor-core-unfriendly", **bad))
    return ShapeFacts(x, filt, y, flops, note, tuple(flags))


# ---- the matmul family ----------------------------------------------------------------------
# FLOPs = 2 * M * N * K per batch entry (one multiply and one add per term), as for convs: for
# MatMul/BatchMatMul* 2 * |Y| * K with K the contracted size; for a two-operand Einsum
# 2 * (product of the sizes of every label), the ellipsis counting as its broadcast dims; for a
# one-operand Einsum (a sum or transpose) the product of the label sizes (one add per element).
# Tensor cores (cuBLAS, T=half): M, N and K multiples of 8 (NVIDIA, "Matrix Multiplication
# Background User's Guide", Tensor Core requirements).


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """NumPy broadcast of two batch shapes (-1 unknown), or None when they cannot broadcast."""
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(a, b, strict=True):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        elif x < 0 or y < 0:
            out.append(max(x, y))
        else:
            return None
    return tuple(out)


def parse_einsum(equation: str, ranks: list[int]) -> tuple[list[str], str] | None:
    """The labels of each operand and of the output of an einsum `equation` (spaces dropped,
    "..." written as "."; implicit output: the labels seen once, sorted, after the ellipsis), for
    operands of `ranks` (-1 unknown); None when the equation is malformed or does not fit."""
    eq = equation.replace(" ", "")
    if "->" in eq:
        lhs, out = eq.split("->", 1)
    else:
        lhs, out = eq, None
    ins = lhs.split(",")
    if len(ins) != len(ranks) or any(s.count("...") > 1 for s in ins + [out or ""]):
        return None
    ins = [s.replace("...", ".") for s in ins]
    if any(not (c.isalpha() or c == ".") for s in ins for c in s):
        return None
    if out is None:
        counts: dict[str, int] = {}
        for s in ins:
            for c in s:
                counts[c] = counts.get(c, 0) + 1
        out = ("." if any("." in s for s in ins) else "") + "".join(
            sorted(c for c, n in counts.items() if n == 1 and c != ".")
        )
    else:
        out = out.replace("...", ".")
        if any(not (c.isalpha() or c == ".") for c in out) or len(set(out)) != len(out):
            return None
    for s, r in zip(ins, ranks, strict=True):
        if r >= 0 and ("." not in s and len(s) != r or "." in s and len(s) - 1 > r):
            return None
    return ins, out


def _einsum_sizes(equation: str, shapes: list[tuple[int, ...]]):
    """(product of every label size, product of the contracted label sizes, output shape, note) of
    an einsum with known operand ranks; None when malformed or inconsistent. Unknown sizes (-1) of
    output labels count as 1 (note "per example"); an unknown contracted size makes both products
    None (the output shape is still known)."""
    parsed = parse_einsum(equation, [len(s) for s in shapes])
    if parsed is None:
        return None
    ins, out = parsed
    sizes: dict[str, int] = {}
    ell: tuple[int, ...] = ()
    for labels, shape in zip(ins, shapes, strict=True):
        if "." in labels:
            i = labels.index(".")
            n_ell = len(shape) - (len(labels) - 1)
            e, shape = shape[i : i + n_ell], shape[:i] + shape[i + n_ell :]
            ell = _broadcast(ell, tuple(e))
            if ell is None:
                return None
            labels = labels.replace(".", "")
        for c, d in zip(labels, shape, strict=True):
            old = sizes.get(c, -1)
            if d >= 0 and old >= 0 and d != old and 1 not in (d, old):
                return None
            sizes[c] = max(old, d)
    if any(c != "." and c not in sizes for c in out):
        return None
    contracted = [d for c, d in sizes.items() if c not in out]
    out_shape = tuple(d for c in out for d in (ell if c == "." else (sizes[c],)))
    if any(d < 0 for d in contracted):
        return None, None, out_shape, "shapes unknown"
    unknown = any(d < 0 for d in sizes.values()) or any(d < 0 for d in ell)
    total = math.prod(max(d, 1) for d in ell) * math.prod(max(d, 1) for d in sizes.values())
    note = "per example (batch size unknown)" if unknown else "for the graph's batch size"
    return total, math.prod(contracted), out_shape, note


def invalid_matmul_attrs(attrs, info, named_shapes) -> list[str]:
    """What no TensorFlow kernel of a matmul-family op accepts, each as words for the
    "invalid-attrs" flag: an Einsum's `equation` missing, not a string ("equation is an int 3, not
    a string") or not UTF-8; a transpose/adjoint attr (`transpose_a`, `adj_x`, ...) that is not a
    bool; a dimension below -1 (the only negative size a shape may hold is -1, unknown) in one of
    `named_shapes` ((name, shape or None) pairs). [] when all is well formed."""
    bad = []
    if info.family == "einsum":
        kind = attrs.kind("equation")
        if kind is None:
            bad.append("equation missing")
        elif kind != "string":
            bad.append(f"equation is {kind}, not a string")
        else:
            raw = attrs.get("equation").s
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                bad.append(f"equation {raw[:40]!r} is not UTF-8")
    for key in (info.transpose_a, info.transpose_b):
        kind = attrs.kind(key) if key else None
        if kind is not None and not kind.startswith("a bool"):
            bad.append(f"{key} is {kind}, not a bool")
    for name, shape in named_shapes:
        if shape and any(d < -1 for d in shape):
            bad.append(f"{name} shape {list(shape)} has a dimension below -1")
    return bad


def analyse_matmul(
    info, T: str | None, accumulation: str, a_shape, b_shape, out_shape, attrs, a_batch=None
):
    """Shapes, FLOPs and shape flags of one op of the matmul family (see the section comment).

    `attrs` reads the op's attrs (`.ints`, `.str`, `.get`, `.kind`); returns ShapeFacts with
    input_shape = a's shape, filter_shape = b's shape, output_shape = the product's. Attrs or
    shapes no kernel accepts (`invalid_matmul_attrs`) give the flag "invalid-attrs(...)" and
    unknown FLOPs; element counts or FLOPs beyond int64 give "size-overflow" and unknown FLOPs.
    `a_batch` (MatMul, BatchMatMul and Fp16MatMul): the shape a was reshaped from, when its only
    unknown dimension is its first, the batch (`sites.reshaped_batch`). Element counts agree, so
    when a has one unknown dimension (its contracted size taken from b where a leaves it
    unknown) that dimension is the batch times the quotient of the known sizes; when it is the
    output's only unknown dimension (rows M or a batch dimension), the FLOPs are given per
    example, as for a conv with an unknown batch, instead of per row.
    """
    flags: list[Flag] = []
    flops, note, k, n = None, "shapes unknown", None, None
    y = out_shape
    computed = None  # the output shape the operands give (a recorded one may hold unknowns)
    invalid = invalid_matmul_attrs(attrs, info, (("a", a_shape), ("b", b_shape), ("output", y)))
    if invalid:
        flags.append(flag("invalid-attrs", attrs=tuple(invalid)))
        return ShapeFacts(
            a_shape,
            b_shape,
            None,
            None,
            "output shape undefined: " + "; ".join(invalid),
            tuple(flags),
        )
    if info.family == "einsum":
        eq = attrs.str("equation")
        shapes = [s for s in (a_shape, b_shape) if s is not None]
        n_in = attrs.get("N")
        n_in = n_in.i if n_in is not None and n_in.i else len(shapes)
        if eq is not None and len(shapes) == n_in and n_in in (1, 2):
            got = _einsum_sizes(eq, shapes)
            if got is not None:
                total, k, computed, note = got
                y = y or computed
                flops = None if total is None else (2 if n_in == 2 else 1) * total
                n = y[-1] if y else None
    elif a_shape and b_shape and len(a_shape) >= 2 and len(b_shape) >= 2:
        ta = _flag(attrs, info.transpose_a)
        tb = _flag(attrs, info.transpose_b)
        m, ka = (a_shape[-1], a_shape[-2]) if ta else (a_shape[-2], a_shape[-1])
        kb, n = (b_shape[-1], b_shape[-2]) if tb else (b_shape[-2], b_shape[-1])
        k = ka if ka >= 0 else kb
        batch = _broadcast(tuple(a_shape[:-2]), tuple(b_shape[:-2]))
        if info.family == "matmul":
            batch = ()
        if batch is not None:
            computed = batch + (m, n)
            y = y or computed
        if y is not None and k is not None and k >= 0 and y[-1] >= 0:
            # Unknown batch dims or rows (M, e.g. a Tensordot's flattened batch) count as 1.
            note = "for the graph's batch size"
            if any(d < 0 for d in y[:-2]):
                note = "per example (batch size unknown)"
            elif y[-2] < 0:
                note = "per row (M unknown: the row count is a run-time value)"
            flops = 2 * math.prod(max(d, 1) for d in y) * k
            scale = _batch_scale(a_batch, a_shape, ta, k, y)
            if scale is not None:
                note = "per example (batch size unknown)"
                flops *= scale
    if any(_too_big(t) for t in (a_shape, b_shape, y, computed)) or (
        flops is not None and flops > INT64_MAX
    ):
        flags.append(flag("size-overflow"))
        flops, note = None, "element counts or FLOPs beyond int64"
    if accumulation == "fp16" and k is not None and k > FP16_ACC_SAFE_TERMS:
        flags.append(flag("fp16-acc-long-reduction", terms=k, limit=FP16_ACC_SAFE_TERMS))
    if T == "half" and k is not None and k >= 0:
        bad = {name: v for name, v in (("K", k), ("N", n)) if v is not None and v > 0 and v % 8}
        if bad:
            flags.append(flag("tensor-core-unfriendly", **bad))
    return ShapeFacts(a_shape, b_shape, y, flops, note, tuple(flags))


def _batch_scale(pre, a_shape, ta: bool, k: int | None, y) -> int | None:
    """The batch factor of `analyse_matmul`'s `a_batch`, or None: a's one unknown dimension
    (after its contracted size is filled in from `k`) is the batch times prod(pre[1:]) / the
    product of a's known sizes when that quotient is a whole number, and counts only when it is
    the output's one unknown dimension (a's rows M -> the output's rows, a's batch dimensions ->
    the output's, right-aligned)."""
    if pre is None or a_shape is None or len(a_shape) < 2:
        return None
    a = list(a_shape)
    kpos = len(a) - 2 if ta else len(a) - 1
    if a[kpos] < 0 and k is not None and k >= 0:
        a[kpos] = k
    unknown = [i for i, d in enumerate(a) if d < 0]
    if len(unknown) != 1:
        return None
    known_pre = math.prod(pre[1:])
    known_a = math.prod(d for d in a if d >= 0)
    if known_a <= 0 or 0 < known_pre < known_a or known_pre % known_a:
        return None  # (known_pre 0: examples of no elements, no rows: the factor is 0)
    pos = unknown[0]
    if pos == (len(a) - 1 if ta else len(a) - 2):
        at = len(y) - 2
    elif pos < len(a) - 2:
        at = len(y) - 2 - (len(a) - 2 - pos)
    else:
        return None  # the contracted dimension
    return known_pre // known_a if [i for i, d in enumerate(y) if d < 0] == [at] else None


def _flag(attrs, key: str | None) -> bool:
    if key is None:
        return False
    a = attrs.get(key)
    return bool(a is not None and a.b)
