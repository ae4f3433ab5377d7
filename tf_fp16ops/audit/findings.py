"""Audit results: frozen dataclasses with `to_dict()`; the JSON renderer and other tools reuse them.

SCHEMA_VERSION is the version of the dict/JSON layout produced by `AuditReport.to_dict()`.
Bump the major number on incompatible changes; the minor number when fields are added.
1.1: `ConvFinding.observed` (runtime evidence per call site) and `AuditReport.runtime`
(executed signature, probes, GPU kernels), both None for a static audit.
1.2: `context.cpu_flags`, `context.cpu_onednn_fp16` (true/false/null: whether oneDNN takes T=half
convs on the target CPU) and `context.cpu_onednn_fp16_reason`.
1.3: `AuditReport.partial`: the budgets of `limits.Limits` that ran out, one line each (empty:
the report is complete).
2.0 (incompatible): each entry of `findings[].flags` is an object {"code", "severity",
"fields", "message"} instead of a string (1.x's string is now "message"; codes and fields in
`tf_fp16ops/audit/codes.py`), and call sites in While bodies or If/Case branches carry the flags
`in-loop` / `in-branch`. The matmul family are call sites too: `ConvFinding.kind` ("conv" or
"matmul"; a matmul's `data`/`filter` are its operands a and b, `direction` is "matmul"),
`ConvFinding.xla` (how the site is XLA-compiled, or null), the summary's `by_kind` (count and
FLOP share per kind) and `runtime.switches` (the probe switches set in the executing process).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from .codes import Flag
from .context import RuntimeContext

SCHEMA_VERSION = "2.0"

# Audit classes, from most to least fp16.
CLASSES = (
    "fp16-accumulate",  # products accumulated in fp16
    "fp16-storage",  # T=half tensors, fp32 accumulation (TensorFlow's default for half)
    "fake-fp16",  # T=float conv on values rounded to fp16 on the way in (seed's conv16_32)
    "bf16",  # T=bfloat16, fp32 accumulation
    "fp32",  # T=float
    "fp64",  # T=double
    "unknown",  # dtype or accumulation not determined statically
)
FP16_CLASSES = ("fp16-accumulate", "fp16-storage")


def make(cls, **values):
    """The same object as `cls(**values)` for ConvFinding.

    The generated `__init__` of a frozen dataclass sets each field with `object.__setattr__`
    (about 6 us for a ConvFinding's 28 fields, a quarter of the audit's time per call site on
    large graphs); this fills the instance dict at once. `values` must name every field
    (TypeError otherwise).
    """
    names = _MAKEABLE[cls]
    if values.keys() != names:
        raise TypeError(
            f"make({cls.__name__}): fields {sorted(names ^ values.keys())} missing or unknown"
        )
    obj = object.__new__(cls)
    obj.__dict__.update(values)
    return obj


@dataclass(frozen=True)
class Provenance:
    """Where one conv input comes from, through value-preserving ops and casts.

    Attributes:
      source_op / source_node / source_dtype: the first node that is not Identity-like, Cast or
        ReadVariableOp (a variable handle, Const, Placeholder, function argument at a root, or
        any compute op), and the dtype it produces.
      chain: the collapsed chain from source to conv as "op(dtype)" strings.
      dtypes: the value dtypes along the chain, source first (consecutive repeats collapsed).
      variable: variable name when the value is read from a variable, else None.
      shape: static shape of the value when known (-1 for unknown dims), else None.
      crossed: function boundaries crossed, as "caller_node->function" strings.
    """

    source_op: str
    source_node: str
    source_dtype: str | None
    chain: tuple[str, ...]
    dtypes: tuple[str, ...]
    variable: str | None = None
    shape: tuple[int, ...] | None = None
    crossed: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        # Field by field: asdict() deep-copies every string of the chains (a third of the JSON
        # time of a report whose call paths are deep).
        return {
            "source_op": self.source_op,
            "source_node": self.source_node,
            "source_dtype": self.source_dtype,
            "chain": list(self.chain),
            "dtypes": list(self.dtypes),
            "variable": self.variable,
            "shape": list(self.shape) if self.shape is not None else None,
            "crossed": list(self.crossed),
        }


@dataclass(frozen=True)
class AmpPrediction:
    """What grappler's auto mixed precision would do to one conv. Always a prediction."""

    rewrite: bool
    predicted_T: str
    reason: str
    label: str = "prediction: the rewrite happens at run time"

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Observation:
    """What the runtime did with one conv call site (`tf-fp16-audit --run`, `verify()`).

    Attributes:
      status: "confirmed" (executed as predicted), "contradicted" (see `contradictions`),
        "unverified" (executed, but the accumulation could not be observed) or "not-found"
        (no executed node matched: pruned, folded, or not reached by the call).
      executed_node / executed_op: node name and op type after grappler (e.g. "_FusedConv2D").
      kernel_op: op type in the partitioned graph (e.g. "_MklNativeConv2D"), with its kernel label.
      executed_T / executed_Tacc: dtype attrs as executed; device: the assigned device.
      fused_ops: ops fused into the conv by grappler (e.g. ("BiasAdd", "Relu")).
      observed_accumulation: from the probes of (op, T, Tacc, device) as executed: "fp16",
        "fp32", "inconclusive", "not-probed" or "error"; probe_key names the probe result.
      changes: rewrites seen ("dtype half -> float", "fused into _FusedConv2D(BiasAdd, Relu)",
        "oneDNN kernel _MklNativeConv2D", "cast inserted: ..."); contradictions: static predictions
        the run disproved, as sentences.
    """

    status: str
    executed_node: str | None = None
    executed_op: str | None = None
    kernel_op: str | None = None
    executed_T: str | None = None
    executed_Tacc: str | None = None
    device: str | None = None
    fused_ops: tuple[str, ...] = ()
    observed_accumulation: str | None = None
    probe_key: str | None = None
    changes: tuple[str, ...] = ()
    contradictions: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        d = asdict(self)
        for k in ("fused_ops", "changes", "contradictions"):
            d[k] = list(d[k])
        return d


@dataclass(frozen=True)
class ConvFinding:
    """One call site: a convolution or an op of the matmul family (`kind`).

    Attributes:
      site_id: unique within a report: "unit | call path | node".
      unit: the top-level graph (MetaGraph / GraphDef) label.
      function_path: functions from the outermost call to the function holding the conv.
      call_nodes: the call node names, one per entry of function_path.
      signatures: SavedModel signatures whose outputs the outermost call produces (may be empty).
      node / op / direction: conv node name, op type, "fprop"/"dgrad"/"wgrad".
      device: the node's device field ("" when unplaced); target_device: "gpu"/"cpu" assumed.
      T / Tacc: storage dtype and, for this package's ops, the accumulator dtype attr.
      data / filter: provenance of the activation (or output-gradient) input and of the filter.
      keras_layer / keras_policy: owning Keras layer and its dtype policy when known.
      accumulation: "fp16", "fp32", "fp64" or "unknown"; accumulation_reason says why.
      audit_class: one of CLASSES.
      amp: auto mixed precision prediction, or None when the rewrite is not requested.
      flops: 2 * MACs of this conv for the known batch size (per example when the batch is
        unknown, see flops_note); None when shapes are unknown. Inside a While body they count
        one iteration, inside an If/Case branch that branch ("per iteration of While 'w'",
        "per branch: then_branch of If 'c'" in flops_note).
      input_shape / filter_shape / output_shape: fprop-equivalent shapes when known.
      flags: risk and consistency flags, `codes.Flag`s (code, severity, fields; the table of codes
        is in codes.py); `flag_texts` gives their words, `codes` their codes.
      observed: runtime evidence (schema 1.1), None for a static audit.
      kind: "conv" or "matmul" (MatMul, BatchMatMul*, Einsum, _FusedMatMul, Fp16MatMul); for a
        matmul, data / filter are the operands a and b, input_shape / filter_shape their shapes,
        direction is "matmul" and FLOPs are 2 * M * N * K per batch entry.
      xla: how the site is compiled by XLA (a function with _XlaMustCompile=true, an auto-jit
        cluster), None when TensorFlow's own kernels run it; XLA then decides the accumulation.
    """

    site_id: str
    unit: str
    function_path: tuple[str, ...]
    call_nodes: tuple[str, ...]
    signatures: tuple[str, ...]
    node: str
    op: str
    direction: str
    device: str
    target_device: str
    T: str | None
    Tacc: str | None
    data: Provenance | None
    filter: Provenance | None
    keras_layer: str | None
    keras_policy: str | None
    accumulation: str
    accumulation_reason: str
    audit_class: str
    amp: AmpPrediction | None
    flops: int | None
    flops_note: str
    input_shape: tuple[int, ...] | None
    filter_shape: tuple[int, ...] | None
    output_shape: tuple[int, ...] | None
    flags: tuple[Flag, ...]
    observed: Observation | None = None
    kind: str = "conv"
    xla: str | None = None

    @property
    def codes(self) -> tuple[str, ...]:
        """The codes of `flags`, in order."""
        return tuple(f.code for f in self.flags)

    @property
    def flag_texts(self) -> tuple[str, ...]:
        """The words of `flags`, in order (the strings of schema 1.x)."""
        return tuple(f.message for f in self.flags)

    def to_dict(self) -> dict:
        # Field by field, in declaration order (the JSON key order): a generic loop over
        # __dataclass_fields__ with hasattr() was a fifth of the audit of a 20,000-site model.
        def opt(v):
            return v.to_dict() if v is not None else None

        def seq(v):
            return list(v) if v is not None else None

        return {
            "site_id": self.site_id,
            "unit": self.unit,
            "function_path": list(self.function_path),
            "call_nodes": list(self.call_nodes),
            "signatures": list(self.signatures),
            "node": self.node,
            "op": self.op,
            "direction": self.direction,
            "device": self.device,
            "target_device": self.target_device,
            "T": self.T,
            "Tacc": self.Tacc,
            "data": opt(self.data),
            "filter": opt(self.filter),
            "keras_layer": self.keras_layer,
            "keras_policy": self.keras_policy,
            "accumulation": self.accumulation,
            "accumulation_reason": self.accumulation_reason,
            "audit_class": self.audit_class,
            "amp": opt(self.amp),
            "flops": self.flops,
            "flops_note": self.flops_note,
            "input_shape": seq(self.input_shape),
            "filter_shape": seq(self.filter_shape),
            "output_shape": seq(self.output_shape),
            "flags": [f.to_dict() for f in self.flags],
            "observed": opt(self.observed),
            "kind": self.kind,
            "xla": self.xla,
        }


@dataclass(frozen=True)
class UnknownOp:
    """An op type no registry knows (not TensorFlow's, not this package's, not a library
    function)."""

    op: str
    count: int
    example_nodes: tuple[str, ...]
    attrs: tuple[str, ...]
    verdict: str = "unknown op, not a convolution"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["example_nodes"] = list(self.example_nodes)
        d["attrs"] = list(self.attrs)
        return d


@dataclass(frozen=True)
class SwitchStatus:
    """One environment switch relevant to conv precision and what it does in this context."""

    name: str
    value: str | None
    effect: str

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ClassShare:
    audit_class: str
    count: int
    flops: int
    flop_share: float | None  # of known conv FLOPs; None when no FLOPs are known

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class KindShare:
    """Call sites and FLOPs of one kind ("conv", "matmul" or "all"), with the fp16 shares among
    them (same basis rule as Summary: FLOPs when all are known, else call sites)."""

    kind: str
    count: int
    flops: int
    flop_share: float | None  # of all known FLOPs
    share_basis: str
    fp16_share: float
    fp16_accumulate_share: float

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Summary:
    """Counts and FLOP shares per class (all call sites), plus the fp16 share used by CI gates.

    fp16_share: share of conv FLOPs in FP16_CLASSES when every site's FLOPs are known, else the
      share of call sites; `share_basis` says which ("flops" or "count").
    fp16_accumulate_share: the same for class "fp16-accumulate" alone.
    """

    call_sites: int
    conv_nodes: int
    classes: tuple[ClassShare, ...]
    total_flops: int
    flops_known: int
    share_basis: str
    fp16_share: float
    fp16_accumulate_share: float
    amp_predicted_rewrites: int
    by_kind: tuple[KindShare, ...] = ()

    def to_dict(self) -> dict:
        d = asdict(self)
        d["classes"] = [c.to_dict() for c in self.classes]
        d["by_kind"] = [k.to_dict() for k in self.by_kind]
        return d


@dataclass(frozen=True)
class RuntimeEvidence:
    """What `--run` / `verify()` executed and measured (schema 1.1).

    Attributes:
      executed: what was called ("signature 'serve'", "tf.function f", ...).
      inputs: (name, dtype, shape) of the inputs built or given; seed: the random seed used
        (None when the caller gave the inputs).
      function_graphs: number of function graphs collected from RunMetadata.
      executed_convs: conv nodes found in the executed graphs.
      probes: `probes.ProbeResult`s with this process's environment, one per distinct (op, T,
        Tacc, device): CPU ones run in a child process under memory and time limits
        (`probes.ProbeWorker`), GPU ones in this process.
      switch_probes: ProbeResults of the same configurations run in subprocesses with other
        switch values (e.g. TF_CONV2D_USE_FP16_ACCUMULATE=1).
      gpu_kernels: `kernels.KernelEvidence` per conv node when a GPU profile was taken.
      counts: call sites per Observation.status.
      notes: facts about the run (placement, skipped steps).
      switches: the probe switches (runtime.probes.PROBE_ENV) set in the executing process, as
        (name, value) pairs (schema 1.3).
    """

    executed: str
    inputs: tuple[tuple[str, str, tuple[int, ...]], ...]
    seed: int | None
    function_graphs: int
    executed_convs: int
    probes: tuple = ()
    switch_probes: tuple = ()
    gpu_kernels: tuple = ()
    counts: tuple[tuple[str, int], ...] = ()
    notes: tuple[str, ...] = ()
    switches: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict:
        return {
            "switches": dict(self.switches),
            "executed": self.executed,
            "inputs": [{"name": n, "dtype": t, "shape": list(s)} for n, t, s in self.inputs],
            "seed": self.seed,
            "function_graphs": self.function_graphs,
            "executed_convs": self.executed_convs,
            "probes": [p.to_dict() for p in self.probes],
            "switch_probes": [p.to_dict() for p in self.switch_probes],
            "gpu_kernels": [k.to_dict() for k in self.gpu_kernels],
            "counts": dict(self.counts),
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class AuditReport:
    """The full audit of one input.

    `partial`: when non-empty, the report is partial: each line names a budget of
    `limits.Limits` that ran out (sites, call edges, nodes) and what was left out.
    """

    source: str
    source_format: str
    context: RuntimeContext
    findings: tuple[ConvFinding, ...]
    summary: Summary
    switches: tuple[SwitchStatus, ...] = ()
    unknown_ops: tuple[UnknownOp, ...] = ()
    notes: tuple[str, ...] = ()
    schema_version: str = field(default=SCHEMA_VERSION)
    runtime: RuntimeEvidence | None = None
    partial: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {
            "schema_version": self.schema_version,
            "source": self.source,
            "source_format": self.source_format,
            "context": self.context.to_dict(),
            "summary": self.summary.to_dict(),
            "switches": [s.to_dict() for s in self.switches],
            "findings": [f.to_dict() for f in self.findings],
            "unknown_ops": [u.to_dict() for u in self.unknown_ops],
            "notes": list(self.notes),
            "runtime": self.runtime.to_dict() if self.runtime is not None else None,
            "partial": list(self.partial),
        }


def _makeable(*classes) -> dict:
    """Field names of the classes `make` may build: plain frozen dataclasses (no __post_init__,
    no InitVar, no slots), checked here at import, also under `python -O`.

    Raises:
      TypeError: a class that `make` would build wrongly.
    """
    out = {}
    for cls in classes:
        params = getattr(cls, "__dataclass_params__", None)
        if (
            params is None
            or not params.frozen
            or hasattr(cls, "__post_init__")
            or hasattr(cls, "__slots__")
            or {f.name for f in fields(cls)} != cls.__dataclass_fields__.keys()
        ):
            raise TypeError(
                f"findings.make cannot build {cls.__name__}: it must be a frozen dataclass "
                "without __post_init__, InitVar or ClassVar fields and __slots__"
            )
        out[cls] = cls.__dataclass_fields__.keys()
    return out


_MAKEABLE = _makeable(ConvFinding)
