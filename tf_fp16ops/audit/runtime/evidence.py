"""The runtime pipeline: static findings + one executed call + probes -> AuditReport with evidence.

`verify()` (Python objects) and `verify_path()` (SavedModel directory, .keras archive) execute
the model once; everything else is analysis of what TensorFlow reported back. Prints nothing.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..analyze import analyze
from ..context import RuntimeContext
from ..errors import AuditInputError
from ..findings import AuditReport, RuntimeEvidence
from ..graph import build_graph
from ..limits import DEFAULT
from ..model import LoadedModel
from .executed import collect
from .match import fusion_names, match, match_xla, observe, probe_config
from .probes import (
    ProbeConfig,
    ProbeResult,
    ProbeWorker,
    process_switches,
    run_probes,
    run_probes_subprocess,
)

_worker: ProbeWorker | None = None


def guarded_probes(config: ProbeConfig) -> ProbeResult:
    """The probes of `config` as `tf-fp16-audit --run` takes them: CPU configurations in this
    process's `ProbeWorker` (memory and time limits; a child with this process's environment),
    GPU ones in this process (the GPU memory is this process's)."""
    global _worker
    if config.device == "gpu":
        return run_probes(config)
    if _worker is None:
        _worker = ProbeWorker()
    return _worker.run(config)


@dataclass(frozen=True)
class Call:
    """What to execute: `fn(*inputs)`, described for the report.

    levels_above: static call levels above the executed function (see match.py).
    """

    fn: Callable
    inputs: tuple
    input_desc: tuple[tuple[str, str, tuple[int, ...]], ...]
    description: str
    levels_above: int
    seed: int | None


def evidence_report(
    model: LoadedModel,
    ctx: RuntimeContext,
    call: Call,
    *,
    signature: str | None = None,
    switch_envs: tuple[Mapping[str, str], ...] = (),
    profile_gpu: bool = True,
    probe_cache: dict | None = None,
) -> AuditReport:
    """Static audit of `model`, then runs `call` once and attaches the runtime evidence.

    Args:
      signature: keep only the call sites of this SavedModel signature (the executed one).
      switch_envs: for each mapping, the probes are re-run in a subprocess with those
        environment variables set (switches are read once per process).
      profile_gpu: when a GPU is visible, profile a second call and decode its kernel names.
      probe_cache: ProbeResults by configuration key, shared between calls of one process.
    Raises:
      AuditInputError: bad signature; tf.errors.OpError from the model itself.
    """
    ag = build_graph(model)
    full = analyze(model, ctx, graph=ag)
    consumers: dict = {}
    names = {
        f.site_id: fusion_names(ag, site, consumers)
        for site, f in zip(ag.call_sites(), full.findings, strict=True)
    }
    report = analyze(model, ctx, graph=ag, signature=signature) if signature else full
    import tensorflow as tf

    try:
        run = collect(call.fn, call.inputs)
    except (tf.errors.OpError, ValueError, TypeError) as e:
        # The model's own refusal (e.g. an input too small for a VALID conv): one line with
        # the inputs and the cause (the last line of TensorFlow's "in user code" message).
        shapes = ", ".join(str(list(getattr(t, "shape", ()))) for t in call.inputs)
        lines = [ln.strip() for ln in str(getattr(e, "message", e)).splitlines() if ln.strip()]
        cause = lines[-1] if lines else type(e).__name__
        raise AuditInputError(
            f"{model.source}: running the model on inputs of shape {shapes} failed: {cause[:300]}"
        ) from None
    executed = run.executed_conv_nodes()
    matched = match([(f, names[f.site_id]) for f in report.findings], executed, call.levels_above)
    in_xla = match_xla(
        [f for f in report.findings if f.site_id not in matched],
        run.executed_xla_calls(),
        call.levels_above,
    )
    matched.update(in_xla)
    configs: dict[str, ProbeConfig] = {}
    for node in executed + list(in_xla.values()):
        c = probe_config(node)
        configs.setdefault(c.key(), c)
    cache = probe_cache if probe_cache is not None else {}
    for k, c in configs.items():
        if k not in cache:
            cache[k] = guarded_probes(c)
    probes = {k: cache[k] for k in configs}
    switch_probes = []
    for env in switch_envs:
        switch_probes.extend(run_probes_subprocess(list(configs.values()), dict(env)))
    findings = []
    for f in report.findings:
        node = matched.get(f.site_id)
        probe = probes.get(probe_config(node).key()) if node is not None else None
        findings.append(replace(f, observed=observe(f, node, probe)))
    counts = collections.Counter(f.observed.status for f in findings)
    notes = []
    unmatched = len(executed) - len(
        {(n.graph_index, n.name) for k, n in matched.items() if k not in in_xla}
    )
    if unmatched:
        notes.append(
            f"{unmatched} executed conv or matmul node(s) matched no static call site "
            "(created at run time, or reached from another signature)"
        )
    if in_xla:
        notes.append(
            f"{len(in_xla)} call site(s) ran inside XLA-compiled functions (one cluster each; "
            "probed under jit_compile=True)"
        )
    devices = sorted({n.device for n in executed})
    if devices:
        notes.append("executed convs placed on " + ", ".join(devices))
    gpu_kernels: tuple = ()
    if profile_gpu:
        from .kernels import gpu_visible, profile_kernels

        if gpu_visible():
            gpu_kernels = tuple(profile_kernels(call.fn, call.inputs))
        else:
            notes.append(
                "no GPU visible: no CUDA kernel evidence (probes and executed graphs only)"
            )
    evidence = RuntimeEvidence(
        call.description,
        call.input_desc,
        call.seed,
        len(run.function_graphs),
        len(executed),
        tuple(probes.values()),
        tuple(switch_probes),
        gpu_kernels,
        tuple(sorted(counts.items())),
        tuple(notes),
        process_switches(),
    )
    return replace(report, findings=tuple(findings), runtime=evidence)


def _desc(name: str, t) -> tuple[str, str, tuple[int, ...]]:
    return (name, t.dtype.name, tuple(int(d) for d in t.shape))


def load_saved_model_for_run(path: str):
    """Loads the SavedModel at `path` with TensorFlow (this package's op library loaded first).

    Raises AuditInputError naming the problem (e.g. an op type not registered)."""
    import tensorflow as tf

    from ..._platform import library as _library

    _library.load()
    try:
        return tf.saved_model.load(path)
    except (tf.errors.OpError, ValueError, OSError) as e:
        raise AuditInputError(
            f"{path}: TensorFlow could not load the SavedModel to run it: "
            f"{str(e).strip().splitlines()[0] if str(e).strip() else e}"
        ) from None


def saved_model_call(
    loaded, path: str, name: str, input_shapes: Mapping[str, tuple[int, ...]], seed: int = 0
) -> Call:
    """A call of signature `name` of a loaded SavedModel on random inputs built from its
    TensorSpecs.

    Raises AuditInputError naming the problem."""
    from .inputs import random_inputs

    sigs = dict(loaded.signatures)
    if name not in sigs:
        raise AuditInputError(
            f"{path}: no signature {name!r} (has: {', '.join(sorted(sigs)) or 'none'})"
        )
    fn = sigs[name]
    specs = sorted(fn.structured_input_signature[1].items())
    try:
        named = random_inputs(specs, input_shapes, seed)
    except ValueError as e:
        raise AuditInputError(f"{path}: signature {name!r}: {e}") from None
    keys = [n for n, _ in named]

    def call(*args, _fn=fn, _keys=tuple(keys), _keep=loaded):  # _keep holds the loaded object alive
        return _fn(**dict(zip(_keys, args, strict=False)))

    return Call(
        call,
        tuple(t for _, t in named),
        tuple(_desc(n, t) for n, t in named),
        f"SavedModel signature {name!r}",
        1,
        seed,
    )


def merge_reports(base: AuditReport, parts: list[AuditReport]) -> AuditReport:
    """One report from per-signature evidence reports: findings of each part replace the static ones
    with the same site_id; runtime evidence is concatenated (probes deduplicated)."""
    from ..passes.summary import summarize

    observed = {f.site_id: f for r in parts for f in r.findings}
    findings = tuple(observed.get(f.site_id, f) for f in base.findings)
    findings = tuple(f if f.observed is not None else replace(f, observed=None) for f in findings)
    rts = [r.runtime for r in parts]
    probes, switch = {}, {}
    for rt in rts:
        for p in rt.probes:
            probes.setdefault(p.config.key(), p)
        for p in rt.switch_probes:
            switch.setdefault((p.config.key(), p.process), p)
    counts = collections.Counter(f.observed.status for f in findings if f.observed is not None)
    not_run = sum(1 for f in findings if f.observed is None)
    notes = []
    for rt in rts:
        notes.extend(n for n in rt.notes if n not in notes)
    if not_run:
        notes.append(f"{not_run} call site(s) not reached by the executed signatures")
    rt = RuntimeEvidence(
        "; ".join(r.executed for r in rts),
        tuple(i for r in rts for i in r.inputs),
        rts[0].seed if rts else None,
        sum(r.function_graphs for r in rts),
        sum(r.executed_convs for r in rts),
        tuple(probes.values()),
        tuple(switch.values()),
        tuple(k for r in rts for k in r.gpu_kernels),
        tuple(sorted(counts.items())),
        tuple(notes),
        rts[0].switches if rts else (),
    )
    return replace(base, findings=findings, summary=summarize(findings), runtime=rt)


def keras_call(
    model, input_shapes: Mapping[str, tuple[int, ...]], seed: int = 0, inputs: tuple = ()
) -> Call:
    """Prepares a call of a keras.Model (inference mode) on `inputs` or random inputs from its
    specs."""
    import tensorflow as tf

    from .inputs import random_inputs

    fn = tf.function(lambda *a: model(list(a) if len(a) > 1 else a[0], training=False))
    if inputs:
        ts = tuple(tf.convert_to_tensor(x) for x in inputs)
        return Call(
            fn,
            ts,
            tuple(_desc(f"input{i}", t) for i, t in enumerate(ts)),
            f"keras.Model {model.name!r}",
            0,
            None,
        )
    specs = [
        (getattr(t, "name", f"input{i}") or f"input{i}", tf.TensorSpec(t.shape, t.dtype))
        for i, t in enumerate(model.inputs)
    ]
    named = random_inputs(specs, input_shapes, seed)
    return Call(
        fn,
        tuple(t for _, t in named),
        tuple(_desc(n, t) for n, t in named),
        f"keras.Model {model.name!r}",
        0,
        seed,
    )


def verify_path(
    path: str,
    ctx: RuntimeContext,
    *,
    signature: str | None = None,
    input_shapes: Mapping[str, tuple[int, ...]] | None = None,
    seed: int = 0,
    switch_envs: tuple[Mapping[str, str], ...] = (),
    max_weights: int = DEFAULT.max_weights,
) -> AuditReport:
    """`tf-fp16-audit --run` for one path: SavedModel directory (every signature, or `signature`)
    or .keras archive (built with at most `max_weights` weight elements, see
    `loader.load_keras_model`)."""
    from ..limits import Limits
    from ..loader import build_keras, load_keras_model, load_path

    shapes = dict(input_shapes or {})
    if not os.path.exists(path):
        raise AuditInputError(f"{path}: no such file or directory")
    if os.path.isdir(path):
        model = load_path(path)
        loaded = load_saved_model_for_run(path)
        names = [signature] if signature else sorted(loaded.signatures)
        if not names:
            raise AuditInputError(f"{path}: the SavedModel has no signatures to run")
        cache: dict = {}
        parts = [
            evidence_report(
                model,
                ctx,
                saved_model_call(loaded, path, n, shapes, seed),
                signature=n,
                probe_cache=cache,
            )
            for n in names
        ]
        report = parts[0] if signature else merge_reports(analyze(model, ctx), parts)
        if switch_envs:
            configs = [p.config for p in report.runtime.probes]
            extra = tuple(
                r for env in switch_envs for r in run_probes_subprocess(configs, dict(env))
            )
            report = replace(report, runtime=replace(report.runtime, switch_probes=extra))
        return report
    if path.endswith(".keras"):
        model = build_keras(path, Limits(max_weights=max_weights))
        km = load_keras_model(path, max_weights)
        try:
            call = keras_call(km, shapes, seed)
        except ValueError as e:
            raise AuditInputError(f"{path}: {e}") from None
        return evidence_report(model, ctx, call, switch_envs=switch_envs)
    raise AuditInputError(
        f"{path}: --run executes SavedModel directories and .keras archives; "
        "a GraphDef file can only be audited statically"
    )


def verify_object(
    obj: Any, inputs: tuple, ctx: RuntimeContext, *, switch_envs: tuple[Mapping[str, str], ...] = ()
) -> AuditReport:
    """`tf_fp16ops.audit.verify()` for a tf.function, ConcreteFunction or keras.Model."""
    import tensorflow as tf

    from ..loader import _is_keras_model, load_object

    if _is_keras_model(obj):
        model = load_object(obj)
        return evidence_report(model, ctx, keras_call(obj, {}, 0, inputs), switch_envs=switch_envs)
    ts = tuple(tf.convert_to_tensor(x) for x in inputs)
    if hasattr(obj, "get_concrete_function"):
        concrete = obj.get_concrete_function(*ts)
    elif hasattr(obj, "graph") and hasattr(obj, "structured_input_signature"):
        concrete = obj
    else:
        raise AuditInputError(
            f"verify() runs a tf.function, ConcreteFunction or keras.Model, got "
            f"{type(obj).__module__}.{type(obj).__qualname__}"
        )
    if not ts:
        from .inputs import random_inputs

        specs = [
            (s.name or f"input{i}", s)
            for i, s in enumerate(tf.nest.flatten(concrete.structured_input_signature))
        ]
        ts = tuple(t for _, t in random_inputs(specs, {}, 0))
    model = load_object(concrete)
    call = Call(
        concrete,
        ts,
        tuple(_desc(f"input{i}", t) for i, t in enumerate(ts)),
        f"function {getattr(obj, '__name__', None) or type(obj).__name__}",
        0,
        None,
    )
    return evidence_report(model, ctx, call, switch_envs=switch_envs)
