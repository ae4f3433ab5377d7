"""Which op types exist and what dtype their outputs have, without importing TensorFlow.

Reads `tf_op_table` (TensorFlow's op registry recorded by tools/gen_tf_op_table.py). When the
auditing process has imported TensorFlow anyway (an audit of a Python object), TensorFlow's live
registry is asked too, so ops of libraries loaded into the process (`tf.load_op_library`) count
as known.
"""

from __future__ import annotations

import sys

from .tf_op_table import OUTPUTS, TF_VERSION

__all__ = ["TF_VERSION", "is_known", "output_arg_type"]


def _live_op_def(op: str):
    if "tensorflow" not in sys.modules:
        return None
    from tensorflow.python.framework import op_def_registry

    return op_def_registry.get(op)


def is_known(op: str) -> bool:
    """Whether TensorFlow (or a library loaded into this process) registers op type `op`."""
    return op in OUTPUTS or _live_op_def(op) is not None


def output_arg_type(op: str, out: int) -> tuple[str, str] | None:
    """How the dtype of output arg `out` of `op` is set: ("type", "float") for a fixed DataType,
    ("attr", "T") for a type attr; None when unknown (no such op or arg, lists)."""
    outs = OUTPUTS.get(op)
    if outs is not None:
        if out >= len(outs) or not outs[out]:
            return None
        entry = outs[out]
        return ("attr", entry[1:]) if entry.startswith("@") else ("type", entry)
    od = _live_op_def(op)
    if od is None or out >= len(od.output_arg):
        return None
    arg = od.output_arg[out]
    if arg.type:
        from .passes.attrs import dtype_name

        name = dtype_name(arg.type)
        return ("type", name) if name else None
    return ("attr", arg.type_attr) if arg.type_attr else None
