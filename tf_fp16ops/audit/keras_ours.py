"""Static reconstruction of this package's registered Keras layers (tf_fp16ops/layers.py) other
than Conv2D: the nodes each layer's `call` emits, so that the audit classifies them by `Tacc`.

Registered names ("tf_fp16ops>NAME" in a .keras config) and what their `call` runs, NHWC, with
T = float16 under accumulation='float16' (input and kernels cast to half when the compute dtype is
float32) and T = the compute dtype under 'float32'; Tacc = T's accumulation choice:

  DepthwiseConv2D   Fp16DepthwiseConv2D(x, kernel [KH, KW, C, M])
  SeparableConv2D   Fp16DepthwiseConv2D, then the 1x1 Fp16Conv2D (pointwise [1, 1, C*M, F])
  Conv2DTranspose   Fp16Conv2DBackpropInput(input_sizes, kernel [KH, KW, F, C], x)
  Conv1D            Fp16Conv2D on height 1: x [N, 1, L, C], kernel [1, K, C/groups, F]
  DepthwiseConv1D   Fp16DepthwiseConv2D on height 1, kernel [1, K, C, M]
  SeparableConv1D   SeparableConv2D on height 1
  Conv1DTranspose   Fp16Conv2DBackpropInput on height 1, kernel [1, K, F, C]
  Dense             Fp16Conv2D 1x1 (`tf_fp16ops.layers.dense_matmul`): x [..., Cin] as
                    [N, 1, prod(other leading dims), Cin], kernel [1, 1, Cin, units]

Shapes come from the layer's build_config when it has one (FLOPs then follow); the reconstructed
graph is labelled as such in every report, like the rest of `keras_config`.
"""

from __future__ import annotations

import math

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
    """The registered tf_fp16ops class name of a layer config handled here, else None."""
    registered = str(layer.get("registered_name") or "")
    if not registered.startswith("tf_fp16ops>"):
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
    from tensorflow.core.framework import types_pb2

    from . import keras_config as kc

    kind, nd = OUR_LAYERS[cls]
    p = kc.policy_name(cfg.get("dtype")) or "float32"
    var, comp = kc.policy_dtypes(p)
    if comp not in kc._DTYPES or var not in kc._DTYPES:
        notes.messages.append(f"layer {name!r}: policy {p!r} has no TensorFlow dtype; skipped")
        return
    dt = lambda d: getattr(types_pb2, "DT_" + kc._DTYPES[d].upper())  # noqa: E731
    tv, tc = dt(var), dt(comp)
    t = types_pb2.DT_HALF if acc == "half" else tc
    field = kc._FieldReader(name, cls)
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
    channels_last = cfg.get("data_format", "channels_last") != "channels_first"
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
        padding = cfg.get("padding", "valid")
        if not isinstance(padding, str):
            raise field.error("padding", padding, 'a string ("valid", "same" or "causal")')
        padding = padding.upper()
        if nd == 1:
            ks, strides, dil = (1,) + ks, (1,) + strides, (1,) + dil
    op_padding = padding if padding in ("SAME", "VALID") else "VALID"  # causal: padded, then VALID
    units = cfg.get("units") if kind == "dense" else cfg.get("filters")
    if units is not None:
        units = field.count("units" if kind == "dense" else "filters", units)
    scope = kc.scope_name(name)

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

    tacc = types_pb2.DT_HALF if acc == "half" else types_pb2.DT_FLOAT
    conv = dict(
        T=t,
        Tacc=tacc,
        strides=(1,) + strides + (1,),
        padding=op_padding,
        data_format="NHWC",
        dilations=(1,) + dil + (1,),
    )
    out = lambda s, k, st, d, pad, c: kc._out(s, k, st, d, pad, c, True)  # noqa: E731
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
            mid_shape = kc._out_shape(in_shape, ks, strides, dil, op_padding, mid, True)
            add(
                "pointwise",
                "Fp16Conv2D",
                ["depthwise", pk],
                **dict(conv, strides=(1, 1, 1, 1), padding="VALID", dilations=(1, 1, 1, 1)),
                **out(mid_shape, (1, 1), (1, 1), (1, 1), "VALID", units),
            )
    elif kind == "transpose":
        k = kernel("kernel", ks + (units, cin) if cin and units else None)
        add("input_sizes", "Const", dtype=types_pb2.DT_INT32)
        add("conv_transpose", "Fp16Conv2DBackpropInput", ["input_sizes", k, x], **conv)
    else:  # conv, dense
        groups = field.count("groups", cfg.get("groups", 1) or 1) if kind == "conv" else 1
        k = kernel("kernel", ks + (cin // groups, units) if cin and units else None)
        add(
            "Fp16Conv2D",
            "Fp16Conv2D",
            [x, k],
            **conv,
            **out(in_shape, ks, strides, dil, op_padding, units),
        )
