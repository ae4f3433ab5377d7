"""Which layers of a model can take fp16 accumulation: a one-layer-at-a-time sweep and a set search.

`sensitivity(model, x, y)` converts the model once (`tf_fp16ops.convert`), then

1. sweep: switches one convertible layer at a time to accumulation='float16' while every other
   convertible layer runs as `others` says ('float32': the Fp16Conv2D ops with float32
   accumulation; 'original': the Keras layer's own kernel, so the baseline is the original
   model), runs the model on `x` (inference mode) and measures the output error against the
   baseline (all layers in the `others` state):
     max_rel  = max |a - b| / max |a|   (infinity-norm relative error, as `tf_fp16ops.compare`)
     mean_rel = mean |a - b| / mean |a|
   each the largest over the model's outputs, and with labels `y` the metric change
   (metric with the layer in fp16 minus the baseline metric; default metric: top-1 accuracy);
2. ranks the layers, rank 1 the most sensitive (largest max_rel; ties by mean_rel);
3. searches the largest set of layers that can all take fp16 accumulation together within
   `tolerance` (max_rel of the combined model) and, with labels, `metric_tolerance` (largest
   allowed metric drop), and returns the converted model for that set.

Search (`search=`):
  'greedy' (default): layers are tried from the least sensitive to the most; each is added if
    the model with the set so far plus it stays within the tolerances (one model run per layer).
    Errors of different layers do not add monotonically (they can cancel or compound), so each
    addition is measured, and the set returned is within the tolerances on `x` by construction.
  'bisect': the longest prefix of the least-sensitive-first order that is within the tolerances,
    found by bisection over the prefix length (about log2(L) model runs, as TensorRT Polygraphy's
    `debug precision` bisects layers). It assumes the error grows with the prefix; where it does
    not, the prefix may be shorter than the greedy set, and it is re-measured, so it is also
    within the tolerances on `x`.
Either way the tolerances hold for the inputs given, not for unseen data.

Passes: the sweep reads the evaluation set once: on each batch the baseline (every convertible
layer in the `others` state) and then each layer alone in fp16, so a Dataset is read once for
all L + 1 sweep runs. The set search reads it once per set it measures (L for 'greedy', about
log2(L) + 1 for 'bisect'). The outputs of every sweep state are kept (L + 1 times the model's
outputs for N samples, as float64) and each layer's errors are computed over all N samples at
once; inputs and activations are held one batch at a time.

Reuse (`reuse=True`, the default, for functional and Sequential models): the baseline run of a
batch keeps every intermediate activation of that batch, and each sweep run on it recomputes
only the graph nodes downstream of the switched layer (those that consume, directly or through
other recomputed nodes, an output of a node calling it or a nested model holding it), in the
graph's own order, with the kept activations for everything else. The results are those of full
runs (the nodes upstream compute exactly what the baseline computed). A sweep run then costs the
layers from the switched one to the outputs, so the sweep costs about half the full runs for a
chain of similar layers; memory grows by one batch's activations (the sum of the layer output
sizes times the batch size). The set search runs the whole model, as several layers change at
once.

reuse='stacked' walks the graph once per batch for all sweep states together (at most
STACK_ROWS = 256 samples per layer call: 256 // batch states at a time): a node runs once on the
inputs of every state in which they differ from the baseline, stacked on axis 0, and once more
for each state whose layer it calls (that layer in fp16, on that state's inputs). The layer calls
are then about one per node per group of states instead of one per downstream node per state,
so the per-call overhead of eager Keras is paid far less often (MobileNetV2, 8 inputs: the sweep
9.0x faster than whole-model runs, reuse=True 2.0x; benchmarks/results/
sensitivity_sweep_2026-12-02.md); memory
grows to the activations of up to STACK_ROWS samples. The results equal full runs where every
layer's per-sample outputs do not depend on how many samples a call holds (tf_fp16ops' kernels:
a fixed summation order per output; tested on convolution, nested, shared-layer and Sequential
models with others='float32'); a kernel that rounds by call size shifts them by its rounding
(Keras's LayerNormalization: up to an fp32 ulp of its outputs between calls of 3 and 18
samples, measured on TF 2.21.0, 2-core Intel Xeon with avx512_fp16; TensorFlow's Eigen
convolution, which others='original' runs with TF_ENABLE_ONEDNN_OPTS=0, also does), which is why
reuse=True stays the default.

Evaluation set: arrays (sliced into `batch_size` batches) or a finite tf.data.Dataset whose
elements are batches, `x` or `(x, y)` as Keras's `evaluate` takes them; a Dataset is iterated
once per pass and never held whole, and its size may be unknown (`cardinality() == UNKNOWN`:
the progress bar learns its total after the first pass).

Distribution (`strategy=`, any tf.distribute.Strategy but ParameterServerStrategy): each global
batch is split into contiguous shares, one per replica (`num_replicas_in_sync`; a replica
whose share is empty computes one sample and drops it), each replica runs the model on its
share (`strategy.run`, eagerly: the sweep switches layers between model calls), and the outputs
are brought together in sample order on every worker with `strategy.gather` (a copy, no
arithmetic). The errors and metrics are then reduced in float64 NumPy on each worker exactly as
on one device, so no cross-replica reduction adds rounding: the results equal the one-device
run bit for bit wherever the model's per-sample outputs do not depend on how many samples a
call holds (true of tf_fp16ops' CPU kernels, whose sums run in a fixed order per output; not of
every TensorFlow kernel: Keras's LayerNormalization differs by up to an fp32 ulp of its outputs
between calls of 3 and 18 samples, and a Keras kernel run with `others='original'` may block its
fp32 sums by batch size; such layers shift the errors by their last-bit rounding). With
MultiWorkerMirroredStrategy every worker calls `sensitivity` with the same model weights and the
same evaluation set (each computes only its replicas' shares) and gets the same result.

Results: `SensitivityResult.table()` (text), `.to_json()`, `.write_summaries(logdir)`
(TensorBoard; tags in `write_summaries`).
"""

from __future__ import annotations

import json
import math
import numbers
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields

import keras
import numpy as np

from tf_fp16ops.conversion import LayerSelection, convert_with_report
from tf_fp16ops.layers import KERAS

SUMMARY_PREFIX = "fp16_sensitivity"
_OTHERS = ("float32", "original")
_SEARCHES = ("greedy", "bisect")
# reuse='stacked': at most this many samples (sweep states times batch rows) per layer call.
STACK_ROWS = 256


@dataclass(frozen=True)
class LayerSensitivity:
    """One layer switched alone to fp16 accumulation. Errors are relative (unitless)."""

    name: str
    class_name: str
    rank: int  # 1 = most sensitive
    max_rel: float
    mean_rel: float
    metric: float | None = None  # metric with this layer in fp16 (labels given)
    metric_change: float | None = None  # metric - baseline metric
    in_fp16_set: bool = False
    # Keras path "model/.../layer" (through nested models and layers inside layers) and the
    # 1-based position of the layer, depth first from `model.layers` (the layers inside a layer
    # or nested model follow it; input layers count).
    path: str = ""
    position: int = 0


@dataclass(frozen=True)
class SensitivityResult:
    """What `sensitivity` found; `model` is the converted model for `fp16_set`."""

    layers: tuple[LayerSensitivity, ...]  # by rank
    fp16_set: tuple[str, ...]  # in model order
    set_max_rel: float
    set_mean_rel: float
    baseline_metric: float | None
    set_metric: float | None
    tolerance: float
    metric_tolerance: float | None
    others: str
    search: str
    num_samples: int
    model: keras.Model | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict:
        """All fields but `model` (asdict would deep-copy the Keras model)."""
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "model"}
        d["layers"] = [asdict(layer) for layer in self.layers]
        d["fp16_set"] = list(self.fp16_set)
        return d

    def to_json(self, indent: int = 2) -> str:
        """All fields but `model`, as JSON (NaN/inf written as null)."""

        def clean(v):
            if isinstance(v, float) and not math.isfinite(v):
                return None
            if isinstance(v, dict):
                return {k: clean(x) for k, x in v.items()}
            if isinstance(v, (list, tuple)):
                return [clean(x) for x in v]
            return v

        return json.dumps(clean(self.to_dict()), indent=indent)

    def table(self, markdown: bool = False) -> str:
        """One row per layer, by rank: its position in the model and its Keras path
        (`LayerSensitivity.path`, `position`), class, errors, metric change (with labels) and
        set membership; then a line on the fp16 set. `markdown=True` for a Markdown table
        (TensorBoard text)."""
        with_metric = self.baseline_metric is not None
        head = ["rank", "position", "layer", "class", "max_rel", "mean_rel"] + (
            ["metric_change"] if with_metric else []
        )
        head.append("fp16 set")
        rows = [
            [
                str(e.rank),
                str(e.position) if e.position else "-",
                e.path or e.name,
                e.class_name,
                f"{e.max_rel:.3e}",
                f"{e.mean_rel:.3e}",
            ]
            + ([f"{e.metric_change:+.4f}"] if with_metric else [])
            + (["yes" if e.in_fp16_set else "no"])
            for e in self.layers
        ]
        summary = (
            f"fp16 set: {len(self.fp16_set)} of {len(self.layers)} layers ({self.search}, "
            f"tolerance {self.tolerance:g}"
            + (
                f", metric tolerance {self.metric_tolerance:g}"
                if self.metric_tolerance is not None
                else ""
            )
            + f"); max_rel {self.set_max_rel:.3e}, mean_rel {self.set_mean_rel:.3e}"
            + (
                f"; metric {self.baseline_metric:.4f} -> {self.set_metric:.4f}"
                if with_metric
                else ""
            )
        )
        if markdown:
            lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            lines += ["| " + " | ".join(r) + " |" for r in rows]
            return "\n".join(lines) + "\n\n" + summary
        widths = [
            max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)
        ]

        def fmt(r):
            return "  ".join(
                v.ljust(w) if i in (2, 3) else v.rjust(w)
                for i, (v, w) in enumerate(zip(r, widths, strict=True))
            )

        return "\n".join([fmt(head)] + [fmt(r) for r in rows] + [summary])

    def write_summaries(self, logdir: str, step: int = 0) -> None:
        """Writes TensorBoard summaries with tf.summary to an event file under `logdir`.

        Tags (all at `step`):
          fp16_sensitivity/max_rel/<layer>, fp16_sensitivity/mean_rel/<layer>: scalars, the
            sweep's errors of each layer; fp16_sensitivity/metric_change/<layer> with labels;
          fp16_sensitivity/set_size, fp16_sensitivity/set_max_rel: scalars of the set found;
          fp16_sensitivity/table: text, the Markdown table of `table(markdown=True)`;
          fp16_sensitivity/result_json: text, `to_json()` (layer order, ranks, set membership).

        Raises:
          ValueError: `logdir` is not a non-empty string or path.
        """
        import os

        import tensorflow as tf

        if not isinstance(logdir, (str, os.PathLike)) or not str(logdir):
            raise ValueError(f"logdir must be a directory path, got {logdir!r}")
        writer = tf.summary.create_file_writer(os.fspath(logdir))
        with writer.as_default():
            for layer in self.layers:
                tf.summary.scalar(
                    f"{SUMMARY_PREFIX}/max_rel/{layer.name}", layer.max_rel, step=step
                )
                tf.summary.scalar(
                    f"{SUMMARY_PREFIX}/mean_rel/{layer.name}", layer.mean_rel, step=step
                )
                if layer.metric_change is not None:
                    tf.summary.scalar(
                        f"{SUMMARY_PREFIX}/metric_change/{layer.name}",
                        layer.metric_change,
                        step=step,
                    )
            tf.summary.scalar(f"{SUMMARY_PREFIX}/set_size", len(self.fp16_set), step=step)
            tf.summary.scalar(f"{SUMMARY_PREFIX}/set_max_rel", self.set_max_rel, step=step)
            tf.summary.text(f"{SUMMARY_PREFIX}/table", self.table(markdown=True), step=step)
            tf.summary.text(f"{SUMMARY_PREFIX}/result_json", self.to_json(), step=step)
        writer.flush()
        writer.close()


def _check_logdir(logdir) -> None:
    """ValueError naming `logdir` when summaries cannot be written there: checked before the run,
    which it would otherwise end after all the work with TensorFlow's own error."""
    if not isinstance(logdir, (str, os.PathLike)) or not str(logdir):
        raise ValueError(f"logdir must be a directory path, got {logdir!r}")
    path = os.fspath(logdir)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise ValueError(f"logdir {path!r} cannot be created: {e.strerror or e}") from None
    if not os.path.isdir(path) or not os.access(path, os.W_OK | os.X_OK):
        raise ValueError(f"logdir {path!r} is not a writable directory")


def top1_accuracy(y_true, y_pred) -> float:
    """Fraction of rows whose argmax of y_pred [N, K] is the label; y_true: class ids [N] or
    one-hot [N, K]."""
    y_true = np.asarray(y_true)
    y_pred = np.asarray(y_pred)
    if y_pred.ndim != 2:
        raise ValueError(
            f"the default metric (top-1 accuracy) needs a model output [N, classes], got shape "
            f"{y_pred.shape}; pass metric="
        )
    if not np.issubdtype(y_true.dtype, np.number) or np.issubdtype(
        y_true.dtype, np.complexfloating
    ):
        raise ValueError(f"y must hold class ids or one-hot rows, got dtype {y_true.dtype}")
    bad = ~np.isfinite(y_true).reshape(len(y_true), -1).all(axis=1) if y_true.size else []
    if np.any(bad):
        i = int(np.argmax(bad))
        raise ValueError(f"y holds a non-finite label at row {i}: {y_true[i].tolist()}")
    labels = y_true.argmax(-1) if y_true.ndim == 2 else y_true.reshape(-1)
    if labels.shape[0] != y_pred.shape[0]:
        raise ValueError(f"y has {labels.shape[0]} labels for {y_pred.shape[0]} model outputs")
    classes = y_pred.shape[1]
    wrong = (labels < 0) | (labels >= classes) | (labels != np.round(labels))
    if np.any(wrong):
        i = int(np.argmax(wrong))
        raise ValueError(
            f"y holds class id {labels[i].tolist()} at row {i}; the model has {classes} classes "
            f"(ids 0..{classes - 1})"
        )
    return float(np.mean(labels == y_pred.argmax(-1)))


def _errors(base: list, outs: list) -> tuple[float, float]:
    """(max_rel, mean_rel) of the module docstring, the largest over the outputs. Elements equal
    in both (NaN included) differ by 0; a non-finite difference counts as inf."""
    max_rel = mean_rel = 0.0
    for a, b in zip(base, outs, strict=False):
        with np.errstate(invalid="ignore", over="ignore"):
            d = np.abs(a - b)
        equal = (a == b) | (np.isnan(a) & np.isnan(b))
        d = np.where(equal, 0.0, np.where(np.isfinite(d), d, np.inf))
        if d.size == 0:
            continue
        scale = np.abs(np.where(np.isfinite(a), a, 0.0))
        for value, ref, acc in ((d.max(), scale.max(), 0), (d.mean(), scale.mean(), 1)):
            rel = value / ref if ref > 0 else (0.0 if value == 0 else math.inf)
            if acc == 0:
                max_rel = max(max_rel, float(rel))
            else:
                mean_rel = max(mean_rel, float(rel))
    return max_rel, mean_rel


def _check_x(model, x):
    """`x` as arrays whose ranks and fixed dimensions match the model's inputs (a leading batch
    axis); raises ValueError naming `x` and its shape otherwise."""
    specs = keras.tree.flatten(model.inputs) if getattr(model, "inputs", None) else []
    if len(specs) == 1 and isinstance(x, (list, tuple)) and len(x) == 1 and hasattr(x[0], "shape"):
        x = x[0]
    if len(specs) == 1 and not isinstance(x, dict):
        arrays = [x]
    else:
        arrays = keras.tree.flatten(x)
        if specs and len(arrays) != len(specs):
            raise ValueError(f"x holds {len(arrays)} arrays; the model takes {len(specs)} inputs")
    checked = []
    for a, spec in zip(arrays, specs or [None] * len(arrays), strict=True):
        try:
            arr = a if hasattr(a, "shape") and hasattr(a, "dtype") else np.asarray(a)
            kind = np.asarray(arr).dtype.kind
        except (TypeError, ValueError) as e:
            raise ValueError(
                f"x must be an array-like of numbers, got {type(a).__name__}: {e}"
            ) from None
        shape = tuple(arr.shape)
        if kind not in "biuf":
            raise ValueError(f"x must hold numbers, got dtype {arr.dtype} (shape {shape})")
        if spec is not None:
            want = tuple(spec.shape)
            if len(shape) != len(want) or any(
                w is not None and w != d for w, d in zip(want[1:], shape[1:], strict=True)
            ):
                want_txt = "(N, " + ", ".join(str(d) for d in want[1:]) + ")"
                raise ValueError(
                    f"x has shape {shape}; the model's input {spec.name!r} takes {want_txt} "
                    "(N samples on axis 0)"
                )
        checked.append(arr)
    if len(specs) == 1 and not isinstance(x, dict):
        return checked[0]
    return keras.tree.pack_sequence_as(x, checked)


class _Reuse:
    """The kept activations of the baseline run and the downstream recomputation of the sweep
    (module docstring, "Reuse"). Works by standing in for the functional model's
    `_run_through_graph` (the loop of keras.src.ops.function.Function, whose order it keeps)
    during one `probe(xb, training=False)` call, so Keras's call context is unchanged."""

    def __init__(self, probe):
        from keras.src.models.functional import Functional

        self.probe = probe
        # A Sequential model runs the functional model it builds (`_functional`).
        graph = (
            getattr(probe, "_functional", None) if isinstance(probe, keras.Sequential) else probe
        )
        self.graph = graph
        self.usable = isinstance(graph, Functional) and hasattr(graph, "_nodes_by_depth")

    def downstream(self, layer) -> set | None:
        """ids of the nodes to recompute when `layer` changes, or None (not found: run all)."""
        probe = self.graph
        changed: set = set()
        produced: set = set()
        for depth in sorted(probe._nodes_by_depth, reverse=True):
            for node in probe._nodes_by_depth[depth]:
                op = node.operation
                if op is None or node.is_input:
                    continue
                holds = op is layer or (
                    hasattr(op, "_flatten_layers")
                    and any(inner is layer for inner in op._flatten_layers(include_self=False))
                )
                if holds or any(id(t) in produced for t in node.input_tensors):
                    changed.add(id(node))
                    produced.update(id(t) for t in node.outputs)
        return changed or None

    def holders(self, layer) -> set:
        """ids of the nodes that call `layer` or a nested model holding it."""
        out = set()
        for nodes in self.graph._nodes_by_depth.values():
            for node in nodes:
                op = node.operation
                if op is None or node.is_input:
                    continue
                if op is layer or (
                    hasattr(op, "_flatten_layers")
                    and any(inner is layer for inner in op._flatten_layers(include_self=False))
                ):
                    out.add(id(node))
        return out

    def run_stacked(self, batch, kept: dict, owners: list[set], set_state, names: list[str]):
        """The sweep states `names` of one batch in one graph walk (module docstring, "Reuse",
        reuse='stacked'): `owners[s]` are the nodes that call the layer of state s; a node whose
        inputs differ from the baseline in some states runs once on those states' inputs
        stacked on axis 0 (baseline accumulation), and once more per state whose layer it
        calls (that layer in fp16). Returns the flat outputs of each state."""
        probe = self.graph
        rows = len(keras.tree.flatten(batch)[0])
        results: list = []

        def run_graph(inputs, operation_fn=lambda op: op, call_fn=None):
            # tensor id -> (states, their outputs stacked on axis 0), where they differ from
            # the baseline's `kept` value
            diverged: dict = {}

            def stack(i, states):
                got = diverged.get(i)
                if got is not None and got[0] == states:
                    return got[1]
                parts = []
                for s in states:
                    if got is not None and s in got[0]:
                        k = got[0].index(s)
                        parts.append(got[1][k * rows : (k + 1) * rows])
                    else:
                        parts.append(kept[i])
                return parts[0] if len(parts) == 1 else keras.ops.concatenate(parts, axis=0)

            for depth in sorted(probe._nodes_by_depth, reverse=True):
                for node in probe._nodes_by_depth[depth]:
                    if not node.operation or node.is_input:
                        continue
                    ins = [id(t) for t in node.input_tensors]
                    if any(i not in kept for i in ins):
                        continue
                    own = [s for s in range(len(names)) if id(node) in owners[s]]
                    seen = {s for i in ins if i in diverged for s in diverged[i][0]}
                    others = sorted(seen - set(own))
                    calls = ([(others, set())] if others else []) + [([s], {names[s]}) for s in own]
                    if not calls:
                        continue
                    parts = []
                    for states, fp16 in calls:
                        set_state(fp16)
                        args, kwargs = node.arguments.fill_in({i: stack(i, states) for i in ins})
                        op = operation_fn(probe._get_operation_for_node(node))
                        parts.append((states, keras.tree.flatten(op(*args, **kwargs))))
                    states = [s for st, _ in parts for s in st]
                    for j, t in enumerate(node.outputs):
                        pieces = [p[j] for _, p in parts]
                        value = (
                            pieces[0] if len(pieces) == 1 else keras.ops.concatenate(pieces, axis=0)
                        )
                        diverged[id(t)] = (states, value)
            set_state(set())
            for s in range(len(names)):
                results.append([stack(id(x), [s]) for x in probe.outputs])
            return keras.tree.pack_sequence_as(
                probe._outputs_struct, [kept[id(x)] for x in probe.outputs]
            )

        probe.__dict__["_run_through_graph"] = run_graph
        try:
            self.probe(batch, training=False)
        finally:
            del probe.__dict__["_run_through_graph"]
        return results

    def run(self, batch, fill: dict | None = None, only: set | None = None):
        """(outputs, activations) of `batch`: a whole run when `only` is None (the activations
        returned are every node's outputs, to pass as `fill`), else only the nodes in `only`
        recomputed and the rest taken from `fill`."""
        probe = self.graph
        kept: dict = {}

        def run_graph(inputs, operation_fn=lambda op: op, call_fn=None):
            tensor_dict = dict(fill) if only is not None else {}
            for x, y in zip(probe.inputs, keras.tree.flatten(inputs), strict=True):
                tensor_dict[id(x)] = y
            for depth in sorted(probe._nodes_by_depth, reverse=True):
                for node in probe._nodes_by_depth[depth]:
                    if not node.operation or node.is_input:
                        continue
                    if only is not None and id(node) not in only:
                        continue
                    if any(id(x) not in tensor_dict for x in node.input_tensors):
                        continue
                    args, kwargs = node.arguments.fill_in(tensor_dict)
                    outputs = operation_fn(probe._get_operation_for_node(node))(*args, **kwargs)
                    for x, y in zip(node.outputs, keras.tree.flatten(outputs), strict=False):
                        tensor_dict[id(x)] = y
            if only is None:
                kept.update(tensor_dict)
            return keras.tree.pack_sequence_as(
                probe._outputs_struct, [tensor_dict[id(x)] for x in probe.outputs]
            )

        probe.__dict__["_run_through_graph"] = run_graph
        try:
            return self.probe(batch, training=False), kept
        finally:
            del probe.__dict__["_run_through_graph"]


def _layer_paths(model) -> dict[str, tuple[str, int]]:
    """layer name -> (Keras path 'model/inner/layer', 1-based depth-first position).

    Depth first from `model`: a model's `layers` in order, and after each layer the layers
    inside it (a nested model's `layers`; the sublayers another layer tracks, in the order it
    created them, as Keras's `_flatten_layers` gives them), each path one component longer."""
    out: dict[str, tuple[str, int]] = {}
    position = 0

    def inside(layer):
        if isinstance(layer, keras.Model):
            return layer.layers
        flatten = getattr(layer, "_flatten_layers", None)
        return list(flatten(include_self=False, recursive=False)) if flatten else []

    def walk(container, prefix):
        nonlocal position
        for layer in inside(container):
            position += 1
            path = f"{prefix}/{layer.name}"
            out.setdefault(layer.name, (path, position))
            walk(layer, path)

    walk(model, model.name)
    return out


class _Source:
    """The evaluation set as batches `(x, y or None)`, read again for each pass: slices of
    arrays (`batch_size` samples) or the elements of a tf.data.Dataset, streamed."""

    def __init__(self, model, x, y, batch_size: int | None):
        import tensorflow as tf

        self.model = model
        self.dataset = x if isinstance(x, tf.data.Dataset) else None
        if self.dataset is not None:
            if y is not None:
                raise ValueError(
                    "y must be None when x is a tf.data.Dataset (its elements give the labels: "
                    "(x, y) pairs)"
                )
            if batch_size is not None:
                raise ValueError(
                    f"batch_size must be None when x is a tf.data.Dataset (its elements are the "
                    f"batches), got {batch_size!r}"
                )
            card = int(self.dataset.cardinality())
            if card == tf.data.INFINITE_CARDINALITY:
                raise ValueError("x is an infinite tf.data.Dataset; pass a finite one (.take(n))")
            self.num_batches = card if card >= 0 else None  # None: UNKNOWN until read once
            self.labelled: bool | None = None  # known after the first batch
            self.x = self.y = None
            return
        self.batch_size = 32 if batch_size is None else batch_size
        self.x = _check_x(model, x)
        n = len(keras.tree.flatten(self.x)[0])
        if n == 0:
            raise ValueError("x must hold at least one sample")
        if y is not None and len(y) != n:
            raise ValueError(f"y has {len(y)} labels for {n} samples of x")
        self.y = None if y is None else np.asarray(y)
        self.labelled = y is not None
        self.num_batches = math.ceil(n / self.batch_size)

    def __iter__(self):
        if self.dataset is None:
            n = len(keras.tree.flatten(self.x)[0])
            for start in range(0, n, self.batch_size):
                stop = start + self.batch_size
                yield (
                    keras.tree.map_structure(lambda a, s=start, e=stop: a[s:e], self.x),
                    None if self.y is None else self.y[start:stop],
                )
            return
        count = 0
        for element in self.dataset:
            xb, yb, weights = keras.utils.unpack_x_y_sample_weight(element)
            if weights is not None:
                raise ValueError(
                    "x: the dataset's elements are (x, y, sample_weight); sensitivity takes x or "
                    "(x, y) elements"
                )
            if self.labelled is None:
                self.labelled = yb is not None
            elif self.labelled != (yb is not None):
                raise ValueError(f"x: batch {count} of the dataset differs in having labels")
            xb = _check_x(self.model, xb)
            count += 1
            yield xb, None if yb is None else keras.ops.convert_to_numpy(yb)
        if self.num_batches is None:
            self.num_batches = count


def _check_strategy(strategy):
    """`strategy` itself when it is a usable tf.distribute.Strategy (None: one device)."""
    if strategy is None:
        return None
    import tensorflow as tf

    if isinstance(strategy, type):
        raise TypeError(
            f"strategy must be a tf.distribute.Strategy instance, got the class "
            f"{strategy.__name__} (create one: {strategy.__name__}(...))"
        )
    if not isinstance(strategy, tf.distribute.Strategy):
        raise TypeError(f"strategy must be a tf.distribute.Strategy, got {type(strategy).__name__}")
    if isinstance(strategy, tf.distribute.experimental.ParameterServerStrategy):
        raise ValueError(
            "strategy: ParameterServerStrategy is not supported (its replicas run through a "
            "ClusterCoordinator); use MirroredStrategy or MultiWorkerMirroredStrategy"
        )
    return strategy


class _Replicas:
    """Runs `fn(xb) -> [outputs of state 0, outputs of state 1, ...]` (each a flat list of
    tensors) on one global batch and returns NumPy float64 arrays [state][output]: directly on
    one device, or with each replica of `strategy` taking its contiguous share of the batch
    (`strategy.run`), the outputs brought together in sample order with `strategy.gather`
    (a copy: no arithmetic). In eager mode MirroredStrategy runs its replicas' threads in turn; a
    lock makes that explicit, since `fn` switches the shared layers' accumulation."""

    def __init__(self, strategy):
        import threading

        self.strategy = strategy
        self.lock = threading.Lock()

    def __call__(self, fn, xb) -> list[list[np.ndarray]]:
        import tensorflow as tf

        def np64(t):
            return keras.ops.convert_to_numpy(t).astype(np.float64)

        if self.strategy is None:
            return [[np64(o) for o in outs] for outs in fn(xb)]
        strategy = self.strategy
        leaves = keras.tree.flatten(xb)
        n = len(leaves[0])
        replicas = strategy.num_replicas_in_sync
        bounds = [n * r // replicas for r in range(replicas + 1)]

        def share(ctx):
            i = ctx.replica_id_in_sync_group
            lo, hi = bounds[i], bounds[i + 1]
            # A replica without samples runs one (the batch's first) and keeps none of it.
            lo, hi, keep = (lo, hi, hi - lo) if hi > lo else (0, 1, 0)
            part = keras.tree.map_structure(lambda a: tf.convert_to_tensor(a[lo:hi]), xb)
            return part, tf.constant(keep)

        def replica_fn(part, keep):
            with self.lock:
                states = fn(part)
            k = int(keep)
            # One tensor per output: the states stacked on axis 1, samples on axis 0.
            return [tf.stack([s[i] for s in states], axis=1)[:k] for i in range(len(states[0]))]

        with _quiet_eager_strategy_warning():
            values = strategy.experimental_distribute_values_from_function(share)
            per_replica = strategy.run(replica_fn, args=values)
            gathered = [np64(strategy.gather(o, axis=0)) for o in per_replica]
        states = gathered[0].shape[1]
        return [[g[:, s] for g in gathered] for s in range(states)]


class _quiet_eager_strategy_warning:
    """Drops TensorFlow's 'Using MirroredStrategy eagerly has significant overhead' warning (the
    sweep switches layers between model calls, so its replica functions run eagerly by design);
    other TensorFlow log records pass."""

    def __enter__(self):
        import logging

        class Drop(logging.Filter):
            def filter(self, record):
                return "eagerly has significant overhead" not in record.getMessage()

        self.logger = logging.getLogger("tensorflow")
        self.filter = Drop()
        self.logger.addFilter(self.filter)
        return self

    def __exit__(self, *exc):
        self.logger.removeFilter(self.filter)
        return False


def sensitivity(
    model: keras.Model,
    x,
    y=None,
    *,
    tolerance: float = 1e-2,
    metric: Callable | None = None,
    metric_tolerance: float | None = None,
    others: str = "float32",
    layers: LayerSelection = None,
    search: str = "greedy",
    batch_size: int | None = None,
    progress: bool = True,
    logdir: str | None = None,
    reuse: bool = True,
    strategy=None,
) -> SensitivityResult:
    """Ranks the convertible layers of `model` by their sensitivity to fp16 accumulation and finds
    the largest set that can take it (module docstring: measures, ranking, search, evaluation
    set, distribution).

    Args:
      model: a built Sequential or functional keras.Model (as `tf_fp16ops.convert` takes).
      x: the inputs: an array (or list/dict of arrays) with N samples on axis 0, as the model
        takes; or a finite tf.data.Dataset of batches whose elements are `x` or `(x, y)` (as
        Keras's `evaluate` takes them), read once per pass and never held whole.
      y: optional labels for `metric` (class ids [N] or one-hot [N, K] for the default metric);
        None when `x` is a Dataset (its `(x, y)` elements give them).
      tolerance: largest max_rel of the combined model's outputs for the fp16 set (> 0).
      metric: callable (y_true, y_pred) -> float, higher is better; default top-1 accuracy;
        used only with labels. For a model with several outputs it gets the first one.
      metric_tolerance: largest allowed metric drop (baseline - set metric, >= 0) for the set;
        with labels, default 0.01; ignored without them.
      others: 'float32' or 'original': how the layers not switched to fp16 run ('original':
        Keras layers with their Keras kernels, tf_fp16ops layers with their own accumulation).
      layers: which layers take part (as `convert`'s `layers`); default every convertible layer.
      search: 'greedy' (default) or 'bisect' (see the module docstring).
      batch_size: samples per global batch for arrays (default 32; with a strategy each replica
        takes its share); None for a Dataset, whose elements are the batches.
      progress: show a keras.utils.Progbar counting batches over all passes (on stdout; its
        total is unknown until a Dataset of unknown cardinality has been read once).
      logdir: if given, `write_summaries(logdir)` is called on the result.
      reuse: True: keep the baseline's activations of the batch and recompute only downstream
        of the switched layer in the sweep (module docstring, "Reuse"); the results equal full
        runs. 'stacked': the sweep states of a batch run together, stacked on axis 0 (faster;
        equal to full runs where no kernel rounds by call size). False: whole-model runs.
      strategy: None (this device) or a tf.distribute.Strategy (MirroredStrategy,
        MultiWorkerMirroredStrategy, ...): each global batch is split over its replicas
        (module docstring, "Distribution").

    Returns:
      SensitivityResult; `.model` is `model` converted with `fp16_set` at float16 and the other
      convertible layers at float32 ('float32') or left as they are ('original').

    Raises:
      ValueError: bad `tolerance`, `metric_tolerance` (or one given without labels), `others`,
        `search`, `batch_size` (or one given with a Dataset), `reuse`; `x` empty, not numeric,
        not of the model's input rank and fixed dimensions, an infinite Dataset, or a Dataset
        with `y`;
        non-finite model outputs on `x` (no reference to compare with); labels whose count
        differs from the samples, and for the default metric labels that are not finite or not
        class ids of the model's output; a `logdir` that cannot be written (checked before the
        run); `layers=[]`; a model without convertible layers, and what `convert` raises for
        `model` and `layers`; a ParameterServerStrategy as `strategy`.
      TypeError: `model` is not a keras.Model, `metric` not callable, `strategy` not a
        tf.distribute.Strategy instance.
    """
    # numbers.Real: Python and NumPy scalars (np.float32(0.01) as well as 0.01)
    if not isinstance(tolerance, numbers.Real) or isinstance(tolerance, bool) or not tolerance > 0:
        raise ValueError(f"tolerance must be a positive number, got {tolerance!r}")
    tolerance = float(tolerance)
    if metric_tolerance is not None and (
        not isinstance(metric_tolerance, numbers.Real)
        or isinstance(metric_tolerance, bool)
        or not metric_tolerance >= 0
    ):
        raise ValueError(f"metric_tolerance must be a number >= 0, got {metric_tolerance!r}")
    if metric_tolerance is not None:
        metric_tolerance = float(metric_tolerance)
    if logdir is not None:
        _check_logdir(logdir)
    if others not in _OTHERS:
        raise ValueError(f"others must be one of {_OTHERS}, got {others!r}")
    if search not in _SEARCHES:
        raise ValueError(f"search must be one of {_SEARCHES}, got {search!r}")
    if batch_size is not None and (
        not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1
    ):
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    if not (isinstance(reuse, bool) or (isinstance(reuse, str) and reuse == "stacked")):
        raise ValueError(f"reuse must be True, False or 'stacked', got {reuse!r}")
    if metric is not None and not callable(metric):
        raise TypeError(
            f"metric must be a callable (y_true, y_pred) -> float, got {type(metric).__name__}"
        )
    strategy = _check_strategy(strategy)
    source = _Source(model, x, y, batch_size)
    if metric_tolerance is not None and source.labelled is False:
        raise ValueError("metric_tolerance needs labels y; got metric_tolerance without y")
    if layers is not None and not callable(layers) and not isinstance(layers, str):
        layers = list(layers)
        if not layers:
            raise ValueError("layers selects no layer: got an empty list")
    metric = metric or top1_accuracy

    probe_conv = convert_with_report(model, "float32", layers)
    names = list(probe_conv.report.converted)
    if not names:
        raise ValueError(
            f"model '{model.name}' has no layer convert can switch to fp16 accumulation"
        )
    by_name = {
        layer.name: layer
        for layer in probe_conv.model._flatten_layers(include_self=False, recursive=True)
        if layer.name in set(names)
    }
    probe = probe_conv.model
    paths = _layer_paths(model)

    # The layers not in fp16: with others='original', a Keras layer in the KERAS state (its own
    # Keras computation) and a layer that already was a tf_fp16ops layer with the accumulation
    # it had; with others='float32', float32.
    original = {
        layer.name: getattr(layer, "accumulation", KERAS)
        for layer in model._flatten_layers(include_self=False, recursive=True)
        if layer.name in by_name
    }

    def set_state(fp16: set):
        for name, layer in by_name.items():
            if name in fp16:
                layer.accumulation = "float16"
            else:
                layer.accumulation = original[name] if others == "original" else "float32"

    reuser = _Reuse(probe) if reuse else None
    if reuser is not None and not reuser.usable:
        reuser = None
    stacked = reuser is not None and reuse == "stacked"
    downstream = (
        {nm: reuser.downstream(by_name[nm]) for nm in names} if reuser and not stacked else {}
    )
    owners = {nm: reuser.holders(by_name[nm]) for nm in names} if stacked else {}
    replicas = _Replicas(strategy)

    set_runs = len(names) if search == "greedy" else math.ceil(math.log2(len(names) + 1)) + 1

    def target():
        return None if source.num_batches is None else source.num_batches * (1 + set_runs)

    bar = keras.utils.Progbar(target(), unit_name="batch") if progress else None
    done = 0

    def tick():
        nonlocal done
        done += 1
        if bar is not None:
            total = bar.target
            bar.update(done if total is None else min(done, total), finalize=False)

    def flat(result):
        return keras.tree.flatten(result)

    def sweep_fn(xb):
        # The baseline (no layer in fp16), then each layer alone in fp16, on one batch.
        set_state(set())
        if reuser is not None:
            base_out, kept = reuser.run(xb)
        else:
            base_out = probe(xb, training=False)
        states = [flat(base_out)]
        if stacked:
            rows = len(keras.tree.flatten(xb)[0])
            group = max(1, STACK_ROWS // max(rows, 1))
            for g in range(0, len(names), group):
                part = names[g : g + group]
                states += reuser.run_stacked(xb, kept, [owners[nm] for nm in part], set_state, part)
            return states
        for name in names:
            set_state({name})
            if reuser is not None:
                out, _ = reuser.run(xb, kept, downstream[name])
            else:
                out = probe(xb, training=False)
            states.append(flat(out))
        set_state(set())
        return states

    # Sweep: one pass over the batches; per state, the outputs of every batch (in sample order).
    swept: list[list[list[np.ndarray]]] = [[] for _ in range(1 + len(names))]
    labels = []
    for xb, yb in source:
        for s, outs in enumerate(replicas(sweep_fn, xb)):
            swept[s].append(outs)
        if yb is not None:
            labels.append(yb)
        tick()
    if bar is not None and bar.target is None:
        bar.target = target()
    if not swept[0]:
        raise ValueError("x must hold at least one sample (the dataset gave no batch)")

    def joined(batches):
        return [np.concatenate([b[i] for b in batches]) for i in range(len(batches[0]))]

    base = joined(swept[0])
    n = len(base[0])
    y_all = None
    if source.labelled:
        y_all = np.concatenate(labels) if source.dataset is not None else source.y
        if len(y_all) != n:
            raise ValueError(f"y has {len(y_all)} labels for {n} samples of x")
    if metric_tolerance is None and y_all is not None:
        metric_tolerance = 0.01
    elif metric_tolerance is not None and y_all is None:
        raise ValueError("metric_tolerance needs labels y; got metric_tolerance without y")
    bad = sum(int(np.size(o) - np.count_nonzero(np.isfinite(o))) for o in base)
    if bad:
        # Every error against a non-finite reference would read 0 (every layer "fp16-safe").
        orig = [
            keras.ops.convert_to_numpy(o)
            for xb, _ in source
            for o in keras.tree.flatten(model(xb, training=False))
        ]
        orig_bad = sum(int(np.size(o) - np.count_nonzero(np.isfinite(o))) for o in orig)
        total_values = sum(int(np.size(o)) for o in base)
        if orig_bad:
            raise ValueError(
                f"x: the model's outputs on x are not all finite ({orig_bad} of "
                f"{sum(int(np.size(o)) for o in orig)} values are NaN or Inf); "
                "sensitivity needs a finite reference"
            )
        raise ValueError(
            f"x: the reference run (others={others!r}) gives {bad} of {total_values} non-finite "
            "output values on x, though the model's own outputs are finite"
        )

    def score(outs):
        return None if y_all is None else float(metric(y_all, outs[0]))

    base_metric = score(base)
    sweep = {}
    for s, name in enumerate(names, start=1):
        outs = joined(swept[s])
        swept[s] = []  # each state's outputs are dropped once measured
        sweep[name] = (*_errors(base, outs), score(outs))
    swept.clear()

    def within(fp16: set):
        def set_fn(xb):
            set_state(fp16)
            return [flat(probe(xb, training=False))]

        batches = []
        for xb, _ in source:
            batches.append(replicas(set_fn, xb)[0])
            tick()
        outs = joined(batches)
        max_rel, mean_rel = _errors(base, outs)
        m = score(outs)
        ok = max_rel <= tolerance and (m is None or base_metric - m <= metric_tolerance)
        return ok, max_rel, mean_rel, m

    order = sorted(names, key=lambda nm: (sweep[nm][0], sweep[nm][1]))  # least sensitive first
    chosen: set = set()
    best = (0.0, 0.0, base_metric)
    if search == "greedy":
        for name in order:
            ok, max_rel, mean_rel, m = within(chosen | {name})
            if ok:
                chosen.add(name)
                best = (max_rel, mean_rel, m)
    else:
        lo, hi = 0, len(order)  # prefix length lo is known to be within tolerance
        while lo < hi:
            mid = (lo + hi + 1) // 2
            ok, max_rel, mean_rel, m = within(set(order[:mid]))
            if ok:
                lo = mid
            else:
                hi = mid - 1
        chosen = set(order[:lo])
        _, *best = within(chosen)
        best = tuple(best)
    if bar is not None:
        bar.update(bar.target, finalize=True)
    set_state(set())

    ranked = sorted(names, key=lambda nm: (-sweep[nm][0], -sweep[nm][1]))
    classes = dict(
        zip(probe_conv.report.converted, probe_conv.report.converted_classes, strict=False)
    )
    entries = tuple(
        LayerSensitivity(
            name=nm,
            class_name=classes[nm],
            rank=i + 1,
            max_rel=sweep[nm][0],
            mean_rel=sweep[nm][1],
            metric=sweep[nm][2],
            metric_change=None if base_metric is None else sweep[nm][2] - base_metric,
            in_fp16_set=nm in chosen,
            path=paths.get(nm, ("", 0))[0],
            position=paths.get(nm, ("", 0))[1],
        )
        for i, nm in enumerate(ranked)
    )
    fp16_set = tuple(nm for nm in names if nm in chosen)

    base_model = probe_conv.model if others == "float32" else model
    if fp16_set:
        final = convert_with_report(base_model, "float16", list(fp16_set)).model
    else:
        final = convert_with_report(
            base_model, "float32", [] if others == "original" else None
        ).model
    result = SensitivityResult(
        layers=entries,
        fp16_set=fp16_set,
        set_max_rel=float(best[0]),
        set_mean_rel=float(best[1]),
        baseline_metric=base_metric,
        set_metric=best[2],
        tolerance=float(tolerance),
        metric_tolerance=None if y_all is None else float(metric_tolerance),
        others=others,
        search=search,
        num_samples=n,
        model=final,
    )
    if logdir is not None:
        result.write_summaries(logdir)
    return result
