"""Reading node attrs with function-attr placeholders resolved, and dtype names."""
from __future__ import annotations

from tensorflow.core.framework import types_pb2

from ..graph import resolve_attr


def dtype_name(enum_value: int) -> str | None:
    """TensorFlow attr spelling of a DataType enum: DT_HALF -> "half"; None for DT_INVALID."""
    if not enum_value:
        return None
    try:
        return types_pb2.DataType.Name(enum_value)[3:].lower()
    except ValueError:
        return None


def attr(nd, key: str, bindings: dict):
    if nd is None or key not in nd.attr:
        return None
    return resolve_attr(nd.attr[key], bindings)


def type_attr(nd, key: str, bindings: dict) -> str | None:
    a = attr(nd, key, bindings)
    return dtype_name(a.type) if a is not None and a.type else None


def ints_attr(nd, key: str, bindings: dict) -> tuple[int, ...] | None:
    a = attr(nd, key, bindings)
    return tuple(a.list.i) if a is not None and a.HasField("list") and len(a.list.i) else None


def str_attr(nd, key: str, bindings: dict) -> str | None:
    a = attr(nd, key, bindings)
    return a.s.decode("utf-8", "replace") if a is not None and a.s else None


def shape_of(attr_value) -> tuple[int, ...] | None:
    if attr_value is None or attr_value.unknown_rank:
        return None
    return tuple(int(d.size) for d in attr_value.dim)


def output_shape(nd, out: int) -> tuple[int, ...] | None:
    """Static shape of output `out` from `_output_shapes`, Const value, Placeholder/variable shape."""
    if nd is None:
        return None
    if "_output_shapes" in nd.attr:
        shapes = nd.attr["_output_shapes"].list.shape
        if out < len(shapes):
            s = shape_of(shapes[out])
            if s is not None:
                return s
    if nd.op == "Const" and "value" in nd.attr:
        return shape_of(nd.attr["value"].tensor.tensor_shape)
    if "shape" in nd.attr and nd.attr["shape"].HasField("shape"):
        return shape_of(nd.attr["shape"].shape)
    return None


def output_dtype(nd, out: int, bindings: dict) -> str | None:
    """Dtype of output `out` of a node, from its attrs (then the op registry when needed)."""
    op = nd.op
    if op == "Cast":
        return type_attr(nd, "DstT", bindings)
    for key in ("dtype", "T", "out_type"):
        t = type_attr(nd, key, bindings)
        if t:
            return t
    a = attr(nd, "Tout", bindings)
    if a is not None and a.HasField("list") and out < len(a.list.type):
        return dtype_name(a.list.type[out])
    a = attr(nd, "_output_types", bindings) or attr(nd, "output_types", bindings)
    if a is not None and a.HasField("list") and out < len(a.list.type):
        return dtype_name(a.list.type[out])
    from tensorflow.python.framework import op_def_registry

    od = op_def_registry.get(op)
    if od is not None and out < len(od.output_arg):
        arg = od.output_arg[out]
        if arg.type:
            return dtype_name(arg.type)
        if arg.type_attr:
            return type_attr(nd, arg.type_attr, bindings)
    return None
