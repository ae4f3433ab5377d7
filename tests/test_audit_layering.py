"""The audit's own replacements for what it used to ask TensorFlow: the op table, the runtime
context read from the installed files, and its frozen results."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from audit_helpers import CPU, conv_graph
from tf_fp16ops.audit import audit, findings
from tf_fp16ops.audit.graph import build_graph
from tf_fp16ops.audit.loader import load_object
from tf_fp16ops.audit.tf_op_table import OUTPUTS, TF_VERSION

REPO = Path(__file__).resolve().parent.parent


def test_op_table_matches_the_installed_tensorflow_registry():
    """The committed table is what tools/gen_tf_op_table.py writes for this TensorFlow."""
    import tensorflow as tf
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.python.client import pywrap_tf_session

    assert TF_VERSION == tf.__version__, "regenerate: python tools/gen_tf_op_table.py"
    buf = pywrap_tf_session.TF_GetAllOpList()
    ops = op_def_pb2.OpList.FromString(pywrap_tf_session.TF_GetBuffer(buf))
    pywrap_tf_session.TF_DeleteBuffer(buf)
    registered = {od.name: od for od in ops.op}
    assert set(registered) - set(OUTPUTS) == set()
    for name in ("Conv2D", "ReadVariableOp", "Shape", "VarHandleOp"):
        od = registered[name]
        assert len(OUTPUTS[name]) == len(od.output_arg)
    assert OUTPUTS["Conv2D"] == ("@T",) and OUTPUTS["VarHandleOp"] == ("resource",)
    assert OUTPUTS["Shape"] == ("@out_type",)


_CONTEXT = """
import json, sys
from tf_fp16ops.audit import RuntimeContext
c = RuntimeContext.from_process(
    {"CUDA_VISIBLE_DEVICES": "-1", "TF_CONV2D_USE_FP16_ACCUMULATE": "1"}
)
print(json.dumps([c.to_dict(), "tensorflow" in sys.modules]))
"""


def test_context_without_importing_tensorflow_reads_the_installed_files():
    import tensorflow as tf

    r = subprocess.run(
        [sys.executable, "-c", _CONTEXT],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd="/",
    )
    assert r.returncode == 0, r.stderr
    ctx, imported = json.loads(r.stdout)
    assert not imported
    assert ctx["tf_version"] == importlib.metadata.version("tensorflow") == tf.__version__
    assert ctx["origin"] == "process (TensorFlow not imported)"
    assert ctx["device"] == "cpu" and ctx["compute_capability"] is None  # CUDA_VISIBLE_DEVICES=-1
    assert ctx["env"] == {"TF_CONV2D_USE_FP16_ACCUMULATE": "1"}
    build = tf.sysconfig.get_build_info()
    expected_cudnn = (
        [int(p) for p in str(build["cudnn_version"]).split(".")]
        if build.get("is_cuda_build")
        else None
    )
    assert ctx["cudnn_version"] == expected_cudnn
    assert ctx["tf32"] is True and ctx["amp"] is False


def test_findings_are_frozen_and_make_refuses_unfit_classes():
    f = audit(conv_graph(), CPU).findings[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.audit_class = "fp32"

    @dataclasses.dataclass
    class NotFrozen:
        a: int

    @dataclasses.dataclass(frozen=True)
    class WithPostInit:
        a: int

        def __post_init__(self):
            pass

    @dataclasses.dataclass(frozen=True)
    class WithInitVar:
        a: int
        b: dataclasses.InitVar[int] = 0

    for cls in (NotFrozen, WithPostInit, WithInitVar, int):
        with pytest.raises(TypeError, match="findings.make cannot build"):
            findings._makeable(cls)


def test_audit_graph_is_frozen_and_holds_no_op_graph():
    ag = build_graph(load_object(conv_graph()))
    with pytest.raises(dataclasses.FrozenInstanceError):
        ag.calls = None
    assert not hasattr(ag, "g") and not hasattr(ag, "scope_dataflow")
