"""GPU kernel evidence: CUDA kernel names from a TensorFlow profile, decoded to an accumulator type.

Decoding rules (first match wins; only what the name itself encodes, else "unknown"):
  1. XMMA names (cuDNN 8+/cuBLAS/TensorRT), "<A><B>_<C><ACC>_<EPI>": e.g.
     "sm80_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_..." -> fp32 accumulator,
     "..._f16f16_f16f16_f16_..." -> fp16.
  2. CUTLASS 3.x library names "cutlass3x_smXX_tensorop_gemm_<A>_<B>_<ACC>_<C>_<D>_...".
  3. Legacy cuDNN/cuBLAS/CUTLASS-2 names with an instruction-shape token: "h884", "h1688",
     "h16816" (HMMA with fp16 accumulators) vs "s884", "s1688", "s16816" (fp32 accumulators),
     and without tensor cores "hcudnn"/"hgemm" (fp16) vs "scudnn"/"sgemm" (fp32), e.g.
     "volta_fp16_s884cudnn_fp16_..." -> fp32, "volta_h884cudnn_..." -> fp16,
     "cutlass_tensorop_h16816fprop_..." -> fp16.
  4. cuDNN templated engines on float data ("cudnn::detail::dgrad_engine<float, ...>") -> fp32.
A profile is read from TensorFlow's profiler output (XSpace, `*.xplane.pb`): on each
"/device:GPU:N" plane every event is one kernel launch named by its event metadata, and the TF
op that launched it is the "tf_op" or "level 0" stat ("model/conv/Conv2D:Conv2D").
"""

from __future__ import annotations

import glob
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

_T = r"(f16|bf16|tf32|f32|f64|e4m3|e5m2|s8|u8|s4|s32)"
_XMMA = re.compile(r"(?:^|_)" + _T + _T + r"_" + _T + _T + r"_" + _T + r"(?:_|$)")
_CUTLASS3 = re.compile(
    r"cutlass3x_sm\d+_tensorop_(?:s\d+)?(?:gemm|fprop|dgrad|wgrad)\w*?_"
    + _T
    + r"_"
    + _T
    + r"_"
    + _T
    + r"_"
)
_LEGACY = re.compile(
    r"(?:^|_)(h|s|d)(884|1688|16816|16832|1684|)(?:tf32)?(cudnn|gemm|fprop|dgrad|wgrad)"
)
_TEMPLATED_FLOAT = re.compile(r"cudnn::detail::\w+<float\b")
_ACC = {"f16": "fp16", "f32": "fp32", "tf32": "fp32", "f64": "fp64", "s32": "int32", "bf16": "bf16"}


@dataclass(frozen=True)
class KernelDecode:
    accumulator: str  # "fp16" | "fp32" | "fp64" | "int32" | "unknown"
    rule: str


def decode(name: str) -> KernelDecode:
    """Decodes the accumulator type encoded in a CUDA kernel name (see the module docstring)."""
    short = name.split("(", 1)[0]
    m = _XMMA.search(short)
    if m:
        return KernelDecode(
            _ACC.get(m.group(4), "unknown"),
            f"xmma types {m.group(0).strip('_')}: accumulator {m.group(4)}",
        )
    m = _CUTLASS3.search(short)
    if m:
        return KernelDecode(
            _ACC.get(m.group(3), "unknown"), f"cutlass3x element types: accumulator {m.group(3)}"
        )
    m = _LEGACY.search(short)
    if m:
        acc = {"h": "fp16", "s": "fp32", "d": "fp64"}[m.group(1)]
        token = "".join(m.groups())
        kind = f"tensor-core shape {m.group(2)}" if m.group(2) else "no tensor cores"
        return KernelDecode(acc, f"token '{token}' ({kind}, {m.group(1)} = {acc} accumulator)")
    if _TEMPLATED_FLOAT.search(short):
        return KernelDecode("fp32", "cuDNN engine templated on float data")
    return KernelDecode("unknown", "name does not encode the accumulator")


@dataclass(frozen=True)
class KernelEvidence:
    """Kernels one TF op launched during a profiled call.

    Attributes:
      tf_op: TF op name as the profiler recorded it (name part of "name:type").
      op_type: TF op type when recorded ("Conv2D"), else "".
      kernels: distinct kernel names; decoded: their KernelDecode, same order.
      accumulator: "fp16"/"fp32" when every decodable kernel agrees, "mixed" when they disagree,
        "unknown" when none is decodable.
    """

    tf_op: str
    op_type: str
    kernels: tuple[str, ...]
    decoded: tuple[KernelDecode, ...]
    accumulator: str

    def to_dict(self) -> dict:
        return {
            "tf_op": self.tf_op,
            "op_type": self.op_type,
            "kernels": list(self.kernels),
            "decoded": [{"accumulator": d.accumulator, "rule": d.rule} for d in self.decoded],
            "accumulator": self.accumulator,
        }


def _summary(decoded: Sequence[KernelDecode]) -> str:
    known = {d.accumulator for d in decoded if d.accumulator != "unknown"}
    return "unknown" if not known else known.pop() if len(known) == 1 else "mixed"


def kernels_from_xspace(xspace) -> list[KernelEvidence]:
    """Per-TF-op kernel evidence from an XSpace proto
    (`tensorflow.tsl.profiler.protobuf.xplane_pb2`)."""
    by_op: dict[tuple[str, str], list[str]] = {}
    for plane in xspace.planes:
        if not plane.name.startswith("/device:GPU:"):
            continue
        stat_names = {k: v.name for k, v in plane.stat_metadata.items()}
        for line in plane.lines:
            for ev in line.events:
                kname = plane.event_metadata[ev.metadata_id].name
                op = ""
                for st in ev.stats:
                    if stat_names.get(st.metadata_id) in ("tf_op", "level 0"):
                        op = st.str_value or (
                            stat_names.get(st.ref_value, "") if st.ref_value else ""
                        )
                        break
                if not op:
                    continue
                name, _, typ = op.partition(":")
                kernels = by_op.setdefault((name, typ), [])
                if kname not in kernels:
                    kernels.append(kname)
    out = []
    for (name, typ), kernels in by_op.items():
        decoded = tuple(decode(k) for k in kernels)
        out.append(KernelEvidence(name, typ, tuple(kernels), decoded, _summary(decoded)))
    return out


def read_xspace(path: str):
    """Parses an `*.xplane.pb` file (binary) or its text form (`*.pbtxt`)."""
    from google.protobuf import text_format
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    xs = xplane_pb2.XSpace()
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".pbtxt"):
        text_format.Parse(data.decode("utf-8"), xs)
    else:
        xs.ParseFromString(data)
    return xs


def gpu_visible() -> bool:
    import tensorflow as tf

    return bool(tf.config.list_logical_devices("GPU"))


def profile_kernels(
    fn: Callable, inputs: Sequence[Any], logdir: str | None = None
) -> list[KernelEvidence]:
    """Profiles one call of `fn(*inputs)` with `tf.profiler.experimental` and decodes the kernels of
    every TF op that launched any (call it once before, so autotuning is not profiled)."""
    import tensorflow as tf

    fn(*inputs)
    tmp = logdir or tempfile.mkdtemp(prefix="tf_fp16_audit_profile_")
    tf.profiler.experimental.start(tmp)
    try:
        fn(*inputs)
    finally:
        tf.profiler.experimental.stop()
    out: list[KernelEvidence] = []
    for path in glob.glob(os.path.join(tmp, "plugins", "profile", "*", "*.xplane.pb")):
        out.extend(kernels_from_xspace(read_xspace(path)))
    return out
