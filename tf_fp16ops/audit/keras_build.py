"""Static builders of Keras layers: for each layer config, the nodes Keras' TensorFlow backend (or
this package's layer `call`) emits, as `protos.GraphDef` nodes, so that the audit analyses them
like a traced graph. No TensorFlow, no Keras: protos come from `audit/protos.py`.

Keras' own layers (seen in SavedModels exported by Keras 3.15 with TF 2.21): variable of the
policy's variable dtype -> ReadVariableOp -> Cast to the compute dtype when they differ ->
Conv2D/DepthwiseConv2dNative/Conv3D/Conv2DBackpropInput (`add_conv_layer`) or MatMul (Dense on
rank-2 inputs, `add_dense_layer`) with T = compute dtype.

This package's registered layers ("tf_fp16ops>NAME" in a .keras config; Conv2D through
`add_conv_layer` with `our_accumulation`, the others through `add_our_layer`), NHWC, with
T = float16 under accumulation='float16' (input and kernels cast to half when the compute dtype is
float32) and T = the compute dtype under 'float32'; Tacc = the accumulation choice. DepthwiseConv2D
and DepthwiseConv1D take T = the compute dtype under both (the op rounds float32 operands to
float16 itself); channels_last with more than one output channel, their bias is the op's third
input (left out here, as the bias adds of the other layers are):

  DepthwiseConv2D   Fp16DepthwiseConv2D(x, kernel [KH, KW, C, M])
  SeparableConv2D   Fp16DepthwiseConv2D, then the 1x1 Fp16Conv2D (pointwise [1, 1, C*M, F])
  Conv2DTranspose   Fp16Conv2DBackpropInput(input_sizes, kernel [KH, KW, F, C], x)
  Conv1D            Fp16Conv2D on height 1: x [N, 1, L, C], kernel [1, K, C/groups, F]
  DepthwiseConv1D   Fp16DepthwiseConv2D on height 1, kernel [1, K, C, M]
  SeparableConv1D   SeparableConv2D on height 1
  Conv1DTranspose   Fp16Conv2DBackpropInput on height 1, kernel [1, K, F, C]
  Dense             Fp16Conv2D 1x1 (`tf_fp16ops.layers.dense_matmul`): x [..., Cin] as
                    [N, 1, prod(other leading dims), Cin], kernel [1, 1, Cin, units]

Shapes come from the layer's build_config when it has one (FLOPs then follow); output sizes
follow `passes.shapes.output_size`, the rule of TensorFlow's conv shape functions that the
analysis uses too. The reconstructed graphs are labelled as such in every report.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from . import protos
from .errors import MalformedModelError
from .passes.shapes import output_size

_DTYPES = {"float16": "half", "float32": "float", "float64": "double", "bfloat16": "bfloat16"}


def policy_name(dtype_entry) -> str | None:
    """The policy name of a layer config's `dtype` entry, in any of the three serializations."""
    if dtype_entry is None:
        return None
    if isinstance(dtype_entry, str):
        return dtype_entry
    if isinstance(dtype_entry, dict):
        cfg = dtype_entry.get("config")
        if isinstance(cfg, dict) and isinstance(cfg.get("name"), str):
            return cfg["name"]
        if isinstance(dtype_entry.get("name"), str):
            return dtype_entry["name"]
    return None


def policy_dtypes(name: str | None) -> tuple[str | None, str | None]:
    """(variable dtype, compute dtype) of a policy name; "mixed_X" -> ("float32", X)."""
    if not name:
        return None, None
    if name.startswith("mixed_"):
        return "float32", name[len("mixed_") :]
    return name, name


# TensorFlow's op/scope name alphabet (tf.name_scope: ^[A-Za-z0-9_.\\/>-]*$); ':' separates output
# indices in node inputs, so a layer name outside it cannot be used verbatim in a node name.
_NOT_IN_SCOPE_NAME = re.compile(r"[^A-Za-z0-9_./>-]")


def scope_name(name: str) -> str:
    """`name` with every character outside TensorFlow's scope-name alphabet replaced by "_".

    Valid names are returned unchanged ("blk:conv" -> "blk_conv"); Keras' TF backend refuses
    such names when tracing, so only statically reconstructed graphs ever use this form.
    """
    return _NOT_IN_SCOPE_NAME.sub("_", name)


@dataclass
class StaticNotes:
    messages: list[str] = field(default_factory=list)
    partial: list[str] = field(default_factory=list)  # budgets that ran out (see limits.Budget)
    saved_models: list[tuple[str, str]] = field(default_factory=list)  # (path, layer name)


CONV_LAYERS = {
    "Conv1D": ("Conv2D", 1),
    "Conv2D": ("Conv2D", 2),
    "Conv3D": ("Conv3D", 3),
    "DepthwiseConv2D": ("DepthwiseConv2dNative", 2),
    "SeparableConv2D": ("separable", 2),
    "Conv2DTranspose": ("Conv2DBackpropInput", 2),
}


def add_dense_layer(gd, name: str, cfg: dict, notes: StaticNotes, build_config=None) -> None:
    """Keras' Dense on a rank-2 input as its TF backend runs it: MatMul(input, kernel) with the
    kernel variable cast to the compute dtype under a mixed policy. Inputs of another rank are
    noted and skipped (their product's op depends on the backend's reshapes)."""
    p = policy_name(cfg.get("dtype")) or "float32"
    var, comp = policy_dtypes(p)
    if comp not in _DTYPES or var not in _DTYPES:
        notes.messages.append(f"layer {name!r}: policy {p!r} has no TensorFlow dtype; skipped")
        return
    field = FieldReader(name, "Dense")
    bc = build_config if build_config is not None else cfg.get("build_config")
    if bc is not None and not isinstance(bc, dict):
        raise field.error("build_config", bc, "an object")
    raw = (bc or {}).get("input_shape")
    shape = field.shape(raw, len(raw)) if isinstance(raw, list) and raw else None
    if shape is None or len(shape) != 2:
        notes.messages.append(
            f"layer {name!r} (Dense): input of rank {len(shape) if shape else 'unknown'} is not "
            "reconstructed (only rank 2, a MatMul)"
        )
        return
    units = field.count("units", cfg.get("units"))
    tv = protos.DataType.Value("DT_" + _DTYPES[var].upper())
    tc = protos.DataType.Value("DT_" + _DTYPES[comp].upper())
    scope = scope_name(name)
    in_shape = tuple(-1 if d is None else d for d in shape)

    def add(nname, nop, inputs=(), **attrs):
        n = gd.node.add()
        n.name, n.op = f"{scope}/{nname}", nop
        n.input.extend(f"{scope}/{i}" for i in inputs)
        for k, v in attrs.items():
            if k in ("T", "dtype", "SrcT", "DstT"):
                n.attr[k].type = v
            elif k in ("shape", "_output_shapes"):
                dims = n.attr["shape"].shape if k == "shape" else n.attr[k].list.shape.add()
                for d in v:
                    dims.dim.add().size = d
        return n

    add("input", "Placeholder", dtype=tc, shape=in_shape)
    add("kernel", "VarHandleOp", dtype=tv, shape=(in_shape[1], units))
    add("kernel/Read", "ReadVariableOp", ["kernel"], dtype=tv)
    k = "kernel/Read"
    if tv != tc:
        add("kernel/Cast", "Cast", [k], SrcT=tv, DstT=tc)
        k = "kernel/Cast"
    add("MatMul", "MatMul", ["input", k], T=tc, _output_shapes=(in_shape[0], units))


def our_accumulation(layer: dict) -> str | None:
    """'half' or 'float' for a tf_fp16ops.layers.Conv2D (registered as "tf_fp16ops>Conv2D"), else
    None (also for accumulation "keras": the stock Conv2D runs)."""
    registered = str(layer.get("registered_name") or "")
    if not (
        registered.startswith("tf_fp16ops>")
        or str(layer.get("module") or "").startswith("tf_fp16ops")
    ):
        return None
    acc = _accumulation_field(layer)
    if acc == "keras":  # the Keras class's own computation: reconstructed as the stock layer
        return None
    return "half" if acc in ("float16", "half", "fp16") else "float"


def _accumulation_field(layer: dict) -> str:
    """A tf_fp16ops layer's saved `accumulation` ("float16" when absent), lower-cased."""
    cfg = layer.get("config")
    return str(cfg.get("accumulation", "float16") if isinstance(cfg, dict) else "float16").lower()


def add_conv_layer(
    gd,
    name: str,
    cls: str,
    cfg: dict,
    notes: StaticNotes,
    build_config=None,
    our_accumulation: str | None = None,
) -> None:
    op, nd = CONV_LAYERS[cls]
    p = policy_name(cfg.get("dtype")) or "float32"
    var, comp = policy_dtypes(p)
    if comp not in _DTYPES or var not in _DTYPES:
        notes.messages.append(f"layer {name!r}: policy {p!r} has no TensorFlow dtype; skipped")
        return
    tv = protos.DataType.Value("DT_" + _DTYPES[var].upper())
    tc = protos.DataType.Value("DT_" + _DTYPES[comp].upper())
    field = FieldReader(name, cls)
    bc = build_config if build_config is not None else cfg.get("build_config")
    if bc is not None and not isinstance(bc, dict):
        raise field.error("build_config", bc, "an object")
    shape = field.shape((bc or {}).get("input_shape"), nd + 2)
    channels_last = _channels_last(field, cfg.get("data_format"))
    ks = field.ints("kernel_size", cfg.get("kernel_size"), nd)
    strides = field.ints("strides", cfg.get("strides", 1), nd)
    dil = field.ints("dilation_rate", cfg.get("dilation_rate", 1), nd)
    padding = _padding(
        field,
        cfg.get("padding", "valid"),
        causal_ok=nd == 1
        and op not in ("separable", "DepthwiseConv2dNative", "Conv2DBackpropInput"),
    )
    if nd == 1:  # Keras' TF backend runs Conv1D as Conv2D over an inserted unit height
        ks, strides, dil = (1,) + ks, (1,) + strides, (1,) + dil
        if shape and len(shape) == 3:
            shape = (
                [shape[0], 1, shape[1], shape[2]]
                if channels_last
                else [shape[0], shape[1], 1, shape[2]]
            )
    in_shape = tuple(-1 if d is None else d for d in shape) if shape else None
    layer_in_shape = in_shape
    causal = padding == "CAUSAL"
    if causal:  # Keras pads dilation * (K - 1) zeros on the left of the width, then runs VALID
        in_shape = _causal_padded(in_shape, ks, dil, 2 if channels_last else 3)
        padding = "VALID"
    cin = None
    if in_shape:
        cin = in_shape[-1] if channels_last else in_shape[1]
    groups = field.count("groups", cfg.get("groups", 1))
    if groups > 1 and cin is not None and cin >= 0 and cin % groups:
        raise field.error("groups", groups, f"a divisor of the input channels {cin}")
    if groups > 1 and isinstance(cfg.get("filters"), int) and cfg["filters"] % groups:
        raise field.error("groups", groups, f"a divisor of filters {cfg['filters']}")
    scope = scope_name(name)

    def add(nname, nop, inputs=(), **attrs):
        n = gd.node.add()
        n.name, n.op = f"{scope}/{nname}", nop
        n.input.extend(f"{scope}/{i}" for i in inputs)
        for k, v in attrs.items():
            if k in ("T", "dtype", "SrcT", "DstT"):
                n.attr[k].type = v
            elif k == "shape":
                for d in v:
                    n.attr["shape"].shape.dim.add().size = d
            elif k == "_output_shapes":
                s = n.attr[k].list.shape.add()
                for d in v:
                    s.dim.add().size = d
            elif isinstance(v, str):
                n.attr[k].s = v.encode()
            else:
                n.attr[k].list.i.extend(v)
        return n

    fmt = "NHWC" if channels_last else "NCHW"
    if nd == 3:
        fmt = "NDHWC" if channels_last else "NCDHW"
    full = lambda t: (1,) + t + (1,) if channels_last else (1, 1) + t  # noqa: E731
    add("input", "Placeholder", dtype=tc, **({"shape": layer_in_shape} if layer_in_shape else {}))

    def data(x, t):  # the conv's data input: x, or x padded for causal
        return _add_causal_pad(add, x, t, in_shape) if causal else x

    def kernel(kname, kshape):
        add(kname, "VarHandleOp", dtype=tv, **({"shape": kshape} if kshape else {}))
        add(kname + "/Read", "ReadVariableOp", [kname], dtype=tv)
        if tv != tc:
            add(kname + "/Cast", "Cast", [kname + "/Read"], SrcT=tv, DstT=tc)
            return kname + "/Cast"
        return kname + "/Read"

    filters = cfg.get("filters")
    if filters is not None:
        filters = field.count("filters", filters)
    conv_attrs = dict(
        T=tc,
        strides=full(strides),
        padding=padding if padding in ("SAME", "VALID") else "VALID",
        data_format=fmt,
        dilations=full(dil),
    )
    if op == "separable":
        dm = field.count("depth_multiplier", cfg.get("depth_multiplier", 1))
        dk = kernel("depthwise_kernel", ks + (cin, dm) if cin else None)
        add(
            "depthwise",
            "DepthwiseConv2dNative",
            [data("input", tc), dk],
            **conv_attrs,
            **_out(in_shape, ks, strides, dil, padding, cin * dm if cin else None, channels_last),
        )
        pk = kernel("pointwise_kernel", (1, 1, cin * dm, filters) if cin and filters else None)
        mid = out_shape(
            in_shape, ks, strides, dil, padding, cin * dm if cin else None, channels_last
        )
        add(
            "pointwise",
            "Conv2D",
            ["depthwise", pk],
            T=tc,
            strides=full((1, 1)),
            padding="VALID",
            data_format=fmt,
            dilations=full((1, 1)),
            **_out(mid, (1, 1), (1, 1), (1, 1), "VALID", filters, channels_last),
        )
        return
    if op == "DepthwiseConv2dNative":
        dm = field.count("depth_multiplier", cfg.get("depth_multiplier", 1))
        k = kernel("kernel", ks + (cin, dm) if cin else None)
        add(
            "depthwise",
            op,
            [data("input", tc), k],
            **conv_attrs,
            **_out(in_shape, ks, strides, dil, padding, cin * dm if cin else None, channels_last),
        )
    elif op == "Conv2DBackpropInput":
        k = kernel("kernel", ks + (filters, cin) if cin and filters else None)
        add("conv_transpose", op, ["input_sizes", k, data("input", tc)], **conv_attrs)
        add("input_sizes", "Const", dtype=protos.DT_INT32)
    elif our_accumulation is not None:
        # tf_fp16ops.layers.Conv2D: Fp16Conv2D with Tacc; accumulation float16 in a float32 layer
        # casts input and kernel to half (tf_fp16ops/layers.py).
        k = kernel("kernel", ks + (cin // groups, filters) if cin and filters else None)
        x = "input"
        t = tc
        if our_accumulation == "half" and tc != protos.DT_HALF:
            t = protos.DT_HALF
            add("input/Cast", "Cast", ["input"], SrcT=tc, DstT=t)
            add("kernel/CastHalf", "Cast", [k], SrcT=tc, DstT=t)
            x, k = "input/Cast", "kernel/CastHalf"
        node = add(
            "convolution",
            "Fp16Conv2D",
            [data(x, t), k],
            **dict(conv_attrs, T=t),
            **_out(in_shape, ks, strides, dil, padding, filters, channels_last),
        )
        node.attr["Tacc"].type = protos.DT_HALF if our_accumulation == "half" else protos.DT_FLOAT
    else:
        k = kernel("kernel", ks + (cin // groups, filters) if cin and filters else None)
        add(
            "convolution",
            op,
            [data("input", tc), k],
            **conv_attrs,
            **_out(in_shape, ks, strides, dil, padding, filters, channels_last),
        )


# Largest size accepted for a layer's counts and input dims: TensorFlow shapes are int64, and the
# reconstruction multiplies sizes (channels x depth_multiplier, FLOPs), so sizes stay within int32.
_MAX_SIZE = 2**31 - 1


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


class FieldReader:
    """Checks the fields of one conv layer config; errors name the layer, the field and the
    value."""

    def __init__(self, name: str, cls: str):
        self.where = f"config.json: layer {name!r} ({cls})"

    def error(self, key: str, value, expected: str) -> MalformedModelError:
        return MalformedModelError(f"{self.where}: {key} must be {expected}, got {value!r:.80}")

    def count(self, key: str, v) -> int:
        """A positive int (filters, groups, depth_multiplier)."""
        if not _is_int(v) or not 1 <= v <= _MAX_SIZE:
            raise self.error(key, v, f"a positive integer (at most {_MAX_SIZE})")
        return v

    def ints(self, key: str, v, n: int) -> tuple[int, ...]:
        """kernel_size / strides / dilation_rate: a positive int or a list of `n` of them."""
        vals = tuple(v) if isinstance(v, (list, tuple)) else (v,) * n
        if len(vals) != n or not all(_is_int(x) and 1 <= x <= _MAX_SIZE for x in vals):
            raise self.error(key, v, f"a positive integer or a list of {n} positive integers")
        return vals

    def shape(self, v, rank: int) -> list | None:
        """build_config.input_shape: None, or a list of `rank` dims, each None or an int >= 0."""
        if v is None:
            return None
        if (
            not isinstance(v, (list, tuple))
            or len(v) != rank
            or not all(d is None or (_is_int(d) and 0 <= d <= _MAX_SIZE) for d in v)
        ):
            raise self.error(
                "build_config.input_shape",
                v,
                f"a list of {rank} dimensions (each null or an integer >= 0)",
            )
        return list(v)


def _channels_last(field: FieldReader, data_format) -> bool:
    """A layer's data_format: "channels_last" (also when absent or null) or "channels_first", in any
    case as Keras accepts them."""
    if data_format is None:
        return True
    if not isinstance(data_format, str) or data_format.lower() not in (
        "channels_last",
        "channels_first",
    ):
        raise field.error("data_format", data_format, '"channels_last" or "channels_first"')
    return data_format.lower() == "channels_last"


def _padding(field: FieldReader, padding, causal_ok: bool) -> str:
    """A layer's padding upper-cased: "VALID" or "SAME", or "CAUSAL" where Keras allows it (the
    1-D convolution of its BaseConv family: Conv1D)."""
    allowed = ("valid", "same", "causal") if causal_ok else ("valid", "same")
    if not isinstance(padding, str) or padding.lower() not in allowed:
        raise field.error("padding", padding, "one of " + ", ".join(f'"{a}"' for a in allowed))
    return padding.upper()


def _causal_padded(in_shape, ks, dil, axis: int):
    """`in_shape` with its width (dim `axis`) grown by the causal padding dilation * (K - 1), as
    keras.layers.Conv1D pads it (unknown sizes stay -1; None stays None)."""
    if not in_shape:
        return in_shape
    width = in_shape[axis]
    padded = list(in_shape)
    padded[axis] = width if width < 0 else width + dil[-1] * (ks[-1] - 1)
    return tuple(padded)


def _add_causal_pad(add, x: str, t, padded_shape) -> str:
    """Adds the Pad node of a causal Conv1D (scope/causal_pad, fed by `x` of dtype `t`, and its
    paddings Const) and returns its name."""
    add("causal_pad/paddings", "Const", dtype=protos.DT_INT32)
    add(
        "causal_pad",
        "Pad",
        [x, "causal_pad/paddings"],
        T=t,
        **({"_output_shapes": padded_shape} if padded_shape else {}),
    )
    return "causal_pad"


def out_shape(in_shape, ks, strides, dil, padding, cout, channels_last):
    if not in_shape or cout is None:
        return None
    sp = in_shape[1:-1] if channels_last else in_shape[2:]
    out = []
    for size, k, s, d in zip(sp, ks, strides, dil, strict=False):
        out.append(output_size(size, k, s, d, padding))
    return (
        (in_shape[0],) + tuple(out) + (cout,) if channels_last else (in_shape[0], cout) + tuple(out)
    )


def _out(in_shape, ks, strides, dil, padding, cout, channels_last):
    s = out_shape(in_shape, ks, strides, dil, padding, cout, channels_last)
    return {"_output_shapes": s} if s else {}


# Registered name -> (kind, spatial rank of the Keras layer).
OUR_LAYERS = {
    "DepthwiseConv2D": ("depthwise", 2),
    "SeparableConv2D": ("separable", 2),
    "Conv2DTranspose": ("transpose", 2),
    "Conv1D": ("conv", 1),
    "DepthwiseConv1D": ("depthwise", 1),
    "SeparableConv1D": ("separable", 1),
    "Conv1DTranspose": ("transpose", 1),
    "Dense": ("dense", 1),
}


def our_layer_name(layer: dict) -> str | None:
    """The registered tf_fp16ops class name of a layer config handled here, else None (also for
    accumulation "keras", which runs the stock Keras layer)."""
    registered = str(layer.get("registered_name") or "")
    if not registered.startswith("tf_fp16ops>") or _accumulation_field(layer) == "keras":
        return None
    name = registered.split(">", 1)[1]
    return name if name in OUR_LAYERS else None


def add_our_layer(gd, name: str, cls: str, cfg: dict, notes, build_config, acc: str) -> None:
    """Appends the nodes of one tf_fp16ops layer `cls` (an `OUR_LAYERS` key) to GraphDef `gd`.

    Args:
      acc: "half" (accumulation='float16') or "float" (accumulation='float32').
    Raises:
      MalformedModelError: a config field of the wrong type or range (names layer and field).
    """
    kind, nd = OUR_LAYERS[cls]
    p = policy_name(cfg.get("dtype")) or "float32"
    var, comp = policy_dtypes(p)
    if comp not in _DTYPES or var not in _DTYPES:
        notes.messages.append(f"layer {name!r}: policy {p!r} has no TensorFlow dtype; skipped")
        return
    dt = lambda d: protos.DataType.Value("DT_" + _DTYPES[d].upper())  # noqa: E731
    tv, tc = dt(var), dt(comp)
    # DepthwiseConv2D/1D hand their compute-dtype operands to the op (float32 ones with Tacc=half
    # are rounded to float16 by the op); the others cast them to float16 for accumulation='float16'.
    t = protos.DT_HALF if acc == "half" and kind != "depthwise" else tc
    field = FieldReader(name, cls)
    bc = build_config if build_config is not None else cfg.get("build_config")
    if bc is not None and not isinstance(bc, dict):
        raise field.error("build_config", bc, "an object")
    raw_shape = (bc or {}).get("input_shape")
    if kind == "dense":
        if raw_shape is not None and (
            not isinstance(raw_shape, (list, tuple)) or len(raw_shape) < 2
        ):
            raise field.error("build_config.input_shape", raw_shape, "a list of at least 2 dims")
        shape = field.shape(raw_shape, len(raw_shape)) if raw_shape is not None else None
    else:
        shape = field.shape(raw_shape, nd + 2)
    channels_last = _channels_last(field, cfg.get("data_format"))
    cin = None
    if shape:
        cin = shape[-1] if channels_last or kind == "dense" else shape[1]
    # NHWC input of the op (channels_first layers are transposed around the op; rank 1 gets H=1).
    if not shape:
        in_shape = None
    elif kind == "dense":
        lead = shape[1:-1]
        width = -1 if any(d is None for d in lead) else math.prod(lead)
        in_shape = (-1 if shape[0] is None else shape[0], 1, width, -1 if cin is None else cin)
    else:
        sp = shape[1:-1] if channels_last else shape[2:]
        sp = ([1] if nd == 1 else []) + list(sp)
        in_shape = tuple(-1 if d is None else d for d in [shape[0], *sp, cin])
    cin = cin if isinstance(cin, int) else None
    if kind == "dense":
        ks = strides = dil = (1, 1)
        padding = "VALID"
    else:
        ks = field.ints("kernel_size", cfg.get("kernel_size"), nd)
        strides = field.ints("strides", cfg.get("strides", 1), nd)
        dil = field.ints("dilation_rate", cfg.get("dilation_rate", 1), nd)
        padding = _padding(field, cfg.get("padding", "valid"), causal_ok=nd == 1 and kind == "conv")
        if nd == 1:
            ks, strides, dil = (1,) + ks, (1,) + strides, (1,) + dil
    causal = padding == "CAUSAL"  # Conv1D pads dilation * (K - 1) zeros on the left, then VALID
    op_padding = "VALID" if causal else padding
    conv_in_shape = _causal_padded(in_shape, ks, dil, 2) if causal else in_shape
    units = cfg.get("units") if kind == "dense" else cfg.get("filters")
    if units is not None:
        units = field.count("units" if kind == "dense" else "filters", units)
    scope = scope_name(name)

    def add(nname, nop, inputs=(), **attrs):
        n = gd.node.add()
        n.name, n.op = f"{scope}/{nname}", nop
        n.input.extend(f"{scope}/{i}" for i in inputs)
        for k, v in attrs.items():
            if k in ("T", "Tacc", "dtype", "SrcT", "DstT"):
                n.attr[k].type = v
            elif k in ("shape", "_output_shapes"):
                s = n.attr[k].shape if k == "shape" else n.attr[k].list.shape.add()
                for d in v:
                    s.dim.add().size = d
            elif isinstance(v, str):
                n.attr[k].s = v.encode()
            else:
                n.attr[k].list.i.extend(v)
        return n

    def cast(src, nname):
        if tc == t:
            return src
        add(nname, "Cast", [src], SrcT=tc, DstT=t)
        return nname

    def kernel(kname, kshape):
        add(kname, "VarHandleOp", dtype=tv, **({"shape": kshape} if kshape else {}))
        add(kname + "/Read", "ReadVariableOp", [kname], dtype=tv)
        if tv == t:
            return kname + "/Read"
        add(kname + "/Cast", "Cast", [kname + "/Read"], SrcT=tv, DstT=t)
        return kname + "/Cast"

    tacc = protos.DT_HALF if acc == "half" else protos.DT_FLOAT
    conv = dict(
        T=t,
        Tacc=tacc,
        strides=(1,) + strides + (1,),
        padding=op_padding,
        data_format="NHWC",
        dilations=(1,) + dil + (1,),
    )
    out = lambda s, k, st, d, pad, c: _out(s, k, st, d, pad, c, True)  # noqa: E731
    add("input", "Placeholder", dtype=tc, **({"shape": in_shape} if in_shape else {}))
    x = cast("input", "input/Cast")
    if kind in ("depthwise", "separable"):
        dm = field.count("depth_multiplier", cfg.get("depth_multiplier", 1))
        mid = cin * dm if cin else None
        kname = "kernel" if kind == "depthwise" else "depthwise_kernel"
        k = kernel(kname, ks + (cin, dm) if cin else None)
        add(
            "depthwise",
            "Fp16DepthwiseConv2D",
            [x, k],
            **conv,
            **out(in_shape, ks, strides, dil, op_padding, mid),
        )
        if kind == "separable":
            pk = kernel("pointwise_kernel", (1, 1, mid, units) if mid and units else None)
            mid_shape = out_shape(in_shape, ks, strides, dil, op_padding, mid, True)
            add(
                "pointwise",
                "Fp16Conv2D",
                ["depthwise", pk],
                **dict(conv, strides=(1, 1, 1, 1), padding="VALID", dilations=(1, 1, 1, 1)),
                **out(mid_shape, (1, 1), (1, 1), (1, 1), "VALID", units),
            )
    elif kind == "transpose":
        k = kernel("kernel", ks + (units, cin) if cin and units else None)
        add("input_sizes", "Const", dtype=protos.DT_INT32)
        add("conv_transpose", "Fp16Conv2DBackpropInput", ["input_sizes", k, x], **conv)
    else:  # conv, dense
        groups = field.count("groups", cfg.get("groups", 1) or 1) if kind == "conv" else 1
        k = kernel("kernel", ks + (cin // groups, units) if cin and units else None)
        add(
            "Fp16Conv2D",
            "Fp16Conv2D",
            [_add_causal_pad(add, x, t, conv_in_shape) if causal else x, k],
            **conv,
            **out(conv_in_shape, ks, strides, dil, op_padding, units),
        )
