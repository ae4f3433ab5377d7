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

from support.audit_helpers import CPU, conv_graph
from tf_fp16ops.audit import audit, findings
from tf_fp16ops.audit.graph import build_graph
from tf_fp16ops.audit.loader import load_object
from tf_fp16ops.audit.tf_op_table import OUTPUTS, TF_VERSION

REPO = Path(__file__).resolve().parents[2]


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


def test_keras_builders_import_no_tensorflow_and_form_no_import_circle():
    """keras_build (the static layer builders) uses audit/protos.py: importing it pulls in no
    TensorFlow, and its source imports nothing of keras_config (keras_config imports it)."""
    import ast

    code = (
        "import sys\n"
        "import tf_fp16ops.audit.keras_build\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras'))\n"
        "assert not bad, bad\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr[-2000:]

    def imported(module: str) -> set[str]:
        tree = ast.parse((REPO / "tf_fp16ops" / "audit" / f"{module}.py").read_text())
        out = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                out.add(node.module or "")
                out.update(f"{node.module or ''}.{a.name}".lstrip(".") for a in node.names)
            elif isinstance(node, ast.Import):
                out.update(a.name for a in node.names)
        return out

    assert not any("keras_config" in m or "tensorflow" in m for m in imported("keras_build"))
    assert "keras_build" in imported("keras_config")
    assert not (REPO / "tf_fp16ops" / "audit" / "keras_ours.py").exists()


@pytest.mark.parametrize(
    "size,k,stride,dil,padding,want",
    [
        (7, 3, 2, 1, "SAME", 4),
        (7, 3, 2, 1, "VALID", 3),
        (2, 3, 1, 1, "VALID", 0),
        (-1, 3, 1, 1, "SAME", -1),
        (2**53 + 1, 1, 2, 1, "SAME", 2**52 + 1),  # a float ceil gives 2**52
        (2**31 - 1, 5, 3, 2, "VALID", (2**31 - 1 - 8 + 2) // 3),
    ],
)
def test_one_output_size_rule(size, k, stride, dil, padding, want):
    """The .keras builders and the conv pass share passes.shapes.output_size (exact integers)."""
    from tf_fp16ops.audit import keras_build
    from tf_fp16ops.audit.passes.shapes import output_size

    assert output_size(size, k, stride, dil, padding) == want
    got = keras_build.out_shape((1, size, 1, 4), (k, 1), (stride, 1), (dil, 1), padding, 8, True)
    assert got == (1, want, 1, 8)
