"""Reading node attrs with function-attr placeholders resolved, and dtype names."""

from __future__ import annotations

from ..protos import DataType

# DataType enum value -> TensorFlow attr spelling ("half", "float", "resource", "half_ref", ...).
_DTYPE_NAMES = {v: n[3:].lower() for n, v in DataType.items() if v}


def dtype_name(enum_value: int) -> str | None:
    """TensorFlow attr spelling of a DataType enum: DT_HALF -> "half"; None for DT_INVALID."""
    if not enum_value:
        return None
    return _DTYPE_NAMES.get(enum_value)


class NodeAttrs:
    """The attrs of one NodeDef, read on demand with placeholders resolved from `bindings`.

    Reads the attr map once per object; `placeholder` becomes True when a read went through a
    function-attr placeholder, i.e. when the value depends on the call site.
    """

    __slots__ = ("nd", "attr_map", "bindings", "placeholder")

    def __init__(self, nd, bindings: dict):
        self.nd = nd
        self.attr_map = nd.attr
        self.bindings = bindings
        self.placeholder = False

    def get(self, key: str):
        """The AttrValue of `key` with its placeholder resolved, or None."""
        a = self.attr_map
        if key not in a:
            return None
        v = a[key]
        if v.placeholder:
            self.placeholder = True
            return self.bindings.get(v.placeholder)
        return v

    def type(self, key: str) -> str | None:
        a = self.get(key)
        return dtype_name(a.type) if a is not None and a.type else None

    def ints(self, key: str) -> tuple[int, ...] | None:
        a = self.get(key)
        return tuple(a.list.i) if a is not None and a.HasField("list") and len(a.list.i) else None

    def str(self, key: str) -> str | None:
        a = self.get(key)
        return a.s.decode("utf-8", "replace") if a is not None and a.s else None

    def kind(self, key: str) -> str | None:
        """How attr `key` is set: None when absent (or an unbound placeholder), "ints" for a
        non-empty list of ints, "string" for a string, else a description of the value naming
        its type ("a list of floats [1.0, 2.0]", "a string list", "an empty list", "an int 2")."""
        a = self.get(key)
        return None if a is None else attr_kind(a)

    def output_shape(self, op: str, out: int) -> tuple[int, ...] | None:
        """Static shape of output `out` from `_output_shapes`, a Const's value or a Placeholder /
        variable `shape` attr (placeholders play no part there); None when unknown."""
        a = self.attr_map
        if "_output_shapes" in a:
            shapes = a["_output_shapes"].list.shape
            if out < len(shapes):
                s = shape_of(shapes[out])
                if s is not None:
                    return s
        if op == "Const" and "value" in a:
            return shape_of(a["value"].tensor.tensor_shape)
        if "shape" in a:
            v = a["shape"]
            if v.HasField("shape"):
                return shape_of(v.shape)
        return None

    def output_dtype(self, op: str, out: int) -> str | None:
        """Dtype of output `out`: from the node's attrs, else from the op's output arg (its fixed
        DataType or the type attr that sets it, see `optable`); None when unknown."""
        if op == "Cast":
            return self.type("DstT")
        for key in ("dtype", "T", "out_type"):
            t = self.type(key)
            if t:
                return t
        a = self.get("Tout")
        if a is not None and a.HasField("list") and out < len(a.list.type):
            return dtype_name(a.list.type[out])
        a = self.get("_output_types") or self.get("output_types")
        if a is not None and a.HasField("list") and out < len(a.list.type):
            return dtype_name(a.list.type[out])
        from ..optable import output_arg_type

        how = output_arg_type(op, out)
        if how is None:
            return None
        kind, value = how
        return value if kind == "type" else self.type(value)


def shape_of(attr_value) -> tuple[int, ...] | None:
    if attr_value is None or attr_value.unknown_rank:
        return None
    return tuple([d.size for d in attr_value.dim])  # int64 fields read as Python ints


_LIST_FIELDS = (
    ("i", "ints"),
    ("s", "strings"),
    ("f", "floats"),
    ("b", "bools"),
    ("type", "types"),
    ("shape", "shapes"),
    ("tensor", "tensors"),
    ("func", "functions"),
)


def attr_kind(a) -> str:
    """See `NodeAttrs.kind`."""
    which = a.WhichOneof("value")
    if which == "list":
        present = [(f, name) for f, name in _LIST_FIELDS if len(getattr(a.list, f))]
        if not present:
            return "an empty list"
        if [f for f, _ in present] == ["i"]:
            return "ints"
        f, name = present[0]
        values = list(getattr(a.list, f))[:8] if f in ("i", "s", "f", "b") else None
        mixed = " and ".join(n for _, n in present)
        return f"a list of {mixed}" + (f" {values}" if values is not None else "")
    if which == "s":
        return "string"
    if which in ("i", "f", "b"):
        value = getattr(a, which)
        return {"i": f"an int {value}", "f": f"a float {value!r}", "b": f"a bool {value}"}[which]
    return f"a {which or 'value-less attr'}"
