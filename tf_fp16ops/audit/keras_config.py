"""Static reading of Keras configurations: .keras archives, dtype policies, conv layers.

Nothing here imports Keras or builds a model. A `.keras` file is a zip archive whose
`config.json` holds the model config; each layer's `dtype` entry is its dtype policy, serialized
as a plain string ("mixed_float16"), as {"class_name": "Policy", "config": {"name": ...}} (Keras 2)
or as {"module": "keras", "class_name": "DTypePolicy", "config": {"name": ...}} (Keras 3).

`static_graph_from_config` reconstructs, for each convolution layer, the nodes Keras' TensorFlow
backend emits for it (seen in SavedModels exported by Keras 3.15 with TF 2.21: variable of the
policy's variable dtype -> ReadVariableOp -> Cast to the compute dtype when they differ ->
Conv2D/DepthwiseConv2dNative/Conv3D/Conv2DBackpropInput with T = compute dtype), so the same
analysis applies. Those graphs are labelled as reconstructions in every report.
"""

from __future__ import annotations

import json
import math
import os
import re
import zipfile
from dataclasses import dataclass, field

from . import keras_ours, protos
from .errors import AuditInputError, MalformedModelError
from .model import KerasLayer

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


def read_keras_archive(path: str) -> dict:
    """The parsed config.json of a .keras archive. Raises AuditInputError when unreadable."""
    try:
        with zipfile.ZipFile(path) as z:
            if "config.json" not in z.namelist():
                raise AuditInputError(
                    f"{path}: zip archive without config.json is not a .keras file"
                )
            raw = z.read("config.json")
    except zipfile.BadZipFile as e:
        raise AuditInputError(f"{path}: not a valid .keras (zip) archive: {e}") from None
    except OSError as e:
        raise AuditInputError(f"{path}: cannot read: {e}") from None
    try:
        config = json.loads(raw)
    except ValueError as e:
        raise AuditInputError(f"{path}: config.json is not valid JSON: {e}") from None
    except RecursionError:
        raise AuditInputError(f"{path}: config.json is nested too deeply to read") from None
    if not isinstance(config, dict) or "config" not in config:
        raise AuditInputError(f"{path}: config.json does not describe a Keras model")
    if not isinstance(config["config"], dict):
        raise AuditInputError(
            f'{path}: config.json: the model\'s "config" must be an object, '
            f"got {type(config['config']).__name__}"
        )
    return config


# TensorFlow's op/scope name alphabet (tf.name_scope: ^[A-Za-z0-9_.\\/>-]*$); ':' separates output
# indices in node inputs, so a layer name outside it cannot be used verbatim in a node name.
_NOT_IN_SCOPE_NAME = re.compile(r"[^A-Za-z0-9_./>-]")


def scope_name(name: str) -> str:
    """`name` with every character outside TensorFlow's scope-name alphabet replaced by "_".

    Valid names are returned unchanged ("blk:conv" -> "blk_conv"); Keras' TF backend refuses
    such names when tracing, so only statically reconstructed graphs ever use this form.
    """
    return _NOT_IN_SCOPE_NAME.sub("_", name)


def _children(config: dict) -> list[dict]:
    """The layer config dicts directly inside `config`: its "layers", then a wrapper's "layer"."""
    cfg = config.get("config")
    if not isinstance(cfg, dict):
        return []
    layers = cfg.get("layers")
    out = [layer for layer in layers if isinstance(layer, dict)] if isinstance(layers, list) else []
    inner = cfg.get("layer")
    if isinstance(inner, dict):  # wrappers (TimeDistributed, ...)
        out.append(inner)
    return out


def _iter_layers(config: dict):
    """Yields every layer config dict, depth first (nested models included).

    Iterative (an explicit stack), so nesting depth is bounded by the JSON parser alone."""
    stack = [iter(_children(config))]
    while stack:
        layer = next(stack[-1], None)
        if layer is None:
            stack.pop()
            continue
        yield layer
        stack.append(iter(_children(layer)))


def layers_from_config(config: dict) -> list[KerasLayer]:
    out = []
    top = config.get("config")
    for layer in _iter_layers(config) if isinstance(top, dict) and "layers" in top else [config]:
        cfg = layer.get("config", {})
        if not isinstance(cfg, dict):
            continue
        p = policy_name(cfg.get("dtype"))
        var, comp = policy_dtypes(p)
        out.append(
            KerasLayer(
                str(cfg.get("name", layer.get("name", "?"))),
                str(layer.get("class_name", "?")),
                p,
                var,
                comp,
            )
        )
    return out


@dataclass
class StaticNotes:
    messages: list[str] = field(default_factory=list)
    saved_models: list[tuple[str, str]] = field(default_factory=list)  # (path, layer name)


_CONV_LAYERS = {
    "Conv1D": ("Conv2D", 1),
    "Conv2D": ("Conv2D", 2),
    "Conv3D": ("Conv3D", 3),
    "DepthwiseConv2D": ("DepthwiseConv2dNative", 2),
    "SeparableConv2D": ("separable", 2),
    "Conv2DTranspose": ("Conv2DBackpropInput", 2),
}


def static_graph_from_config(config: dict, base_dir: str = "."):
    """A GraphDef reconstructing each convolution layer of a Keras config (see module doc)."""
    gd = protos.GraphDef()
    notes = StaticNotes()
    for position, layer in enumerate(_iter_layers(config)):
        cls = layer.get("class_name")
        cfg = layer.get("config", {})
        conv_like = isinstance(cls, str) and (cls in _CONV_LAYERS or cls == "TFSMLayer")
        if conv_like and not isinstance(cfg, dict):
            # A conv layer whose config cannot be read would silently drop out of the audit.
            label = layer.get("name")
            label = label if isinstance(label, str) else f"#{position} (unnamed)"
            raise MalformedModelError(
                f"config.json: layer {label!r} ({cls}): its config must be "
                f"an object, got {type(cfg).__name__} {cfg!r:.60}"
            )
        if not isinstance(cfg, dict) or not isinstance(cls, str):
            continue
        name = cfg.get("name", "?")
        if not isinstance(name, str):
            raise MalformedModelError(
                f"config.json: a {cls} layer's config.name must be a string, "
                f"got {type(name).__name__} {name!r:.60}"
            )
        if cls == "TFSMLayer" and isinstance(cfg.get("filepath"), str):
            fp = cfg["filepath"]
            fp = fp if os.path.isabs(fp) else os.path.join(base_dir, fp)
            notes.saved_models.append((fp, name))
            notes.messages.append(
                f"layer {name!r} (TFSMLayer, policy {policy_name(cfg.get('dtype'))}) "
                f"wraps the SavedModel {fp}: its convolutions are audited from that file"
            )
            continue
        ours = keras_ours.our_layer_name(layer)
        if ours is not None:  # tf_fp16ops' other registered layers (audit/keras_ours.py)
            keras_ours.add_our_layer(
                gd, name, ours, cfg, notes, layer.get("build_config"), _our_accumulation(layer)
            )
            continue
        if cls == "Dense":
            _add_dense_layer(gd, name, cfg, notes, layer.get("build_config"))
            continue
        if cls in ("EinsumDense", "MultiHeadAttention"):
            notes.messages.append(
                f"layer {name!r} ({cls}): its einsum products are not reconstructed from the "
                "config; audit the exported SavedModel or use --build-keras to see them"
            )
            continue
        if cls not in _CONV_LAYERS:
            continue
        _add_conv_layer(
            gd, name, cls, cfg, notes, layer.get("build_config"), _our_accumulation(layer)
        )
    return gd, notes


def _add_dense_layer(gd, name: str, cfg: dict, notes: StaticNotes, build_config=None) -> None:
    """Keras' Dense on a rank-2 input as its TF backend runs it: MatMul(input, kernel) with the
    kernel variable cast to the compute dtype under a mixed policy. Inputs of another rank are
    noted and skipped (their product's op depends on the backend's reshapes)."""
    p = policy_name(cfg.get("dtype")) or "float32"
    var, comp = policy_dtypes(p)
    if comp not in _DTYPES or var not in _DTYPES:
        notes.messages.append(f"layer {name!r}: policy {p!r} has no TensorFlow dtype; skipped")
        return
    field = _FieldReader(name, "Dense")
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


def _our_accumulation(layer: dict) -> str | None:
    """'half' or 'float' for a tf_fp16ops.layers.Conv2D (registered as "tf_fp16ops>Conv2D"), else
    None."""
    registered = str(layer.get("registered_name") or "")
    if not (
        registered.startswith("tf_fp16ops>")
        or str(layer.get("module") or "").startswith("tf_fp16ops")
    ):
        return None
    cfg = layer.get("config")
    acc = str(cfg.get("accumulation", "float16") if isinstance(cfg, dict) else "float16").lower()
    return "half" if acc in ("float16", "half", "fp16") else "float"


def _add_conv_layer(
    gd,
    name: str,
    cls: str,
    cfg: dict,
    notes: StaticNotes,
    build_config=None,
    our_accumulation: str | None = None,
) -> None:
    op, nd = _CONV_LAYERS[cls]
    p = policy_name(cfg.get("dtype")) or "float32"
    var, comp = policy_dtypes(p)
    if comp not in _DTYPES or var not in _DTYPES:
        notes.messages.append(f"layer {name!r}: policy {p!r} has no TensorFlow dtype; skipped")
        return
    tv = protos.DataType.Value("DT_" + _DTYPES[var].upper())
    tc = protos.DataType.Value("DT_" + _DTYPES[comp].upper())
    field = _FieldReader(name, cls)
    bc = build_config if build_config is not None else cfg.get("build_config")
    if bc is not None and not isinstance(bc, dict):
        raise field.error("build_config", bc, "an object")
    shape = field.shape((bc or {}).get("input_shape"), nd + 2)
    channels_last = cfg.get("data_format", "channels_last") != "channels_first"
    ks = field.ints("kernel_size", cfg.get("kernel_size"), nd)
    strides = field.ints("strides", cfg.get("strides", 1), nd)
    dil = field.ints("dilation_rate", cfg.get("dilation_rate", 1), nd)
    padding = cfg.get("padding", "valid")
    if not isinstance(padding, str):
        raise field.error("padding", padding, 'a string ("valid" or "same")')
    padding = padding.upper()
    if nd == 1:  # Keras' TF backend runs Conv1D as Conv2D over an inserted unit height
        ks, strides, dil = (1,) + ks, (1,) + strides, (1,) + dil
        if shape and len(shape) == 3:
            shape = (
                [shape[0], 1, shape[1], shape[2]]
                if channels_last
                else [shape[0], shape[1], 1, shape[2]]
            )
    in_shape = tuple(-1 if d is None else d for d in shape) if shape else None
    cin = None
    if in_shape:
        cin = in_shape[-1] if channels_last else in_shape[1]
    groups = field.count("groups", cfg.get("groups", 1) or 1)
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
    add("input", "Placeholder", dtype=tc, **({"shape": in_shape} if in_shape else {}))

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
            ["input", dk],
            **conv_attrs,
            **_out(in_shape, ks, strides, dil, padding, cin * dm if cin else None, channels_last),
        )
        pk = kernel("pointwise_kernel", (1, 1, cin * dm, filters) if cin and filters else None)
        mid = _out_shape(
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
            ["input", k],
            **conv_attrs,
            **_out(in_shape, ks, strides, dil, padding, cin * dm if cin else None, channels_last),
        )
    elif op == "Conv2DBackpropInput":
        k = kernel("kernel", ks + (filters, cin) if cin and filters else None)
        add("conv_transpose", op, ["input_sizes", k, "input"], **conv_attrs)
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
            [x, k],
            **dict(conv_attrs, T=t),
            **_out(in_shape, ks, strides, dil, padding, filters, channels_last),
        )
        node.attr["Tacc"].type = protos.DT_HALF if our_accumulation == "half" else protos.DT_FLOAT
    else:
        k = kernel("kernel", ks + (cin // groups, filters) if cin and filters else None)
        add(
            "convolution",
            op,
            ["input", k],
            **conv_attrs,
            **_out(in_shape, ks, strides, dil, padding, filters, channels_last),
        )


# Largest size accepted for a layer's counts and input dims: TensorFlow shapes are int64, and the
# reconstruction multiplies sizes (channels x depth_multiplier, FLOPs), so sizes stay within int32.
_MAX_SIZE = 2**31 - 1


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


class _FieldReader:
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


def _out_shape(in_shape, ks, strides, dil, padding, cout, channels_last):
    if not in_shape or cout is None:
        return None
    sp = in_shape[1:-1] if channels_last else in_shape[2:]
    out = []
    for size, k, s, d in zip(sp, ks, strides, dil, strict=False):
        if size < 0:
            out.append(-1)
        elif padding == "SAME":
            out.append(math.ceil(size / s))
        else:
            out.append(max(0, math.ceil((size - (k - 1) * d) / s)))
    return (
        (in_shape[0],) + tuple(out) + (cout,) if channels_last else (in_shape[0], cout) + tuple(out)
    )


def _out(in_shape, ks, strides, dil, padding, cout, channels_last):
    s = _out_shape(in_shape, ks, strides, dil, padding, cout, channels_last)
    return {"_output_shapes": s} if s else {}
