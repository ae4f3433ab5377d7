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
as a string or dilations as floats) give the flag "invalid-attrs(...)" and unknown FLOPs;
element counts or FLOPs beyond int64 give "size-overflow" and unknown FLOPs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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
    flags: tuple[str, ...]


def _channels_last(fmt: str | None) -> bool:
    return not fmt or fmt.endswith("C") or fmt == "NHWC"


def fprop_output(in_shape, filt, attrs, info: ConvOpInfo):
    """Output shape of a forward conv from its input and filter shapes, or None.

    `attrs` reads the conv's attrs on demand (`.ints(key)`, `.str(key)`): strides, dilations,
    padding, explicit_paddings, data_format (see `passes.attrs.NodeAttrs`). None also when a
    spatial stride or dilation is not positive (no output size is defined; TensorFlow rejects
    such a conv)."""
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
    out = []
    for size, k, s, d in zip(sp, filt[:sd], st, dl, strict=True):
        if size < 0:
            out.append(-1)
        elif padding == "SAME":
            out.append(-(-size // s))  # integer ceil: exact for any size
        elif padding in ("VALID", "EXPLICIT"):
            out.append(max(0, -(-(size - (k - 1) * d) // s)))
        else:
            return None
    cout = filt[sd] * filt[sd + 1] if info.family == "depthwise" else filt[sd + 1]
    return (in_shape[0],) + tuple(out) + (cout,) if cl else (in_shape[0], cout) + tuple(out)


def _channel_problems(cin: int, cout: int) -> list[str]:
    """The sides of a conv whose channel count is not a multiple of 8 (tensor-core tile width
    for fp16 in cuDNN's Tensor Core guidance), each named with its count: "input channels 3 not
    a multiple of 8" (the output side is not mentioned when it is a multiple)."""
    bad = [f"{side} channels {n}" for side, n in (("input", cin), ("output", cout)) if n % 8]
    if not bad:
        return []
    return [" and ".join(bad) + (" not multiples of 8" if len(bad) > 1 else " not a multiple of 8")]


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
            bad.append(f"{key}={list(v)}")
    padding = attrs.str("padding")
    if padding is not None and padding not in ("SAME", "VALID", "EXPLICIT"):
        bad.append(f"padding={padding!r}")
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
            bad.append(f"explicit_paddings={p}")
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
    flags: list[str] = []
    invalid = invalid_attrs(attrs, info)
    if invalid:
        flags.append("invalid-attrs(" + "; ".join(invalid) + ")")
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
        flags.append("size-overflow")
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
            flags.append(f"fp16-acc-long-reduction({terms}>{FP16_ACC_SAFE_TERMS})")
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
            bad = []
            bad.extend(_channel_problems(cin, cout))
            if info.family == "depthwise":
                bad.append(f"depthwise: groups={groups}, one per input channel")
            elif groups and groups > 1:
                bad.append(f"groups={groups}")
            if bad:
                flags.append("tensor-core-unfriendly(" + "; ".join(bad) + ")")
    return ShapeFacts(x, filt, y, flops, note, tuple(flags))
