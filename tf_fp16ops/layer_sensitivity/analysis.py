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
runs (the nodes upstream compute exactly what the baseline computed). Masks (Embedding's
mask_zero, Masking, ...) travel with the kept activations: Keras passes them between layers as
an attribute of the tensors, which a consumer may clear (MultiHeadAttention does on its inputs),
so the baseline run records the mask each node saw on each input and a rerun puts it back on
the kept tensor before the node's call; a recomputed input carries the mask its recomputation
set, as in a full run. A sweep run then costs the
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
layer's per-sample outputs do not depend on how many samples a call holds (tf_fp16ops' kernels: a
fixed summation order per output; the sweep runs its float32 layers on them, not on the TensorFlow
ops that float32 with accumulation='float32' takes elsewhere, README "Numerics"; tested on
convolution, nested, shared-layer and Sequential models with others='float32'); a kernel that rounds
by call size shifts them by its rounding (Keras's LayerNormalization: up to an fp32 ulp of its
outputs between calls of 3 and 18 samples, measured on TF 2.21.0, 2-core Intel Xeon with
avx512_fp16; TensorFlow's Eigen convolution, which others='original' runs with
TF_ENABLE_ONEDNN_OPTS=0, also does), which is why
reuse=True stays the default. Masks are stacked with the activations (a node that saw no mask on
an input in the baseline sees none in any state); where a recomputed layer gives a mask in some
states and none in others (a `compute_mask` that depends on the values), those states run one at
a time as with reuse=True.

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
between calls of 3 and 18 samples, and a Keras kernel, or a float32 tf_fp16ops layer handed to
TensorFlow's op, run with `others='original'` may block its fp32 sums by batch size; such layers
shift the errors by their last-bit rounding). With
MultiWorkerMirroredStrategy every worker calls `sensitivity` with the same model weights and the
same evaluation set (each computes only its replicas' shares) and gets the same result.

Results: `SensitivityResult.table()` (text), `.to_json()`, `.write_summaries(logdir)`
(TensorBoard; tags in `write_summaries`).
"""

from __future__ import annotations

import math
import numbers
import sys
from collections.abc import Callable

import keras
import numpy as np

from tf_fp16ops.conversion import LayerSelection, convert_with_report
from tf_fp16ops.layer_sensitivity.replicas import Replicas, check_strategy
from tf_fp16ops.layer_sensitivity.result import LayerSensitivity, SensitivityResult, check_logdir
from tf_fp16ops.layer_sensitivity.reuse import Reuse, UnstackableMasks, layer_paths
from tf_fp16ops.layer_sensitivity.source import Source
from tf_fp16ops.layers import KERAS, _use_fixed_order

_OTHERS = ("float32", "original")
_SEARCHES = ("greedy", "bisect")
# reuse='stacked': at most this many samples (sweep states times batch rows) per layer call.
STACK_ROWS = 256


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
    progress: bool | None = None,
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
      metric: callable (y_true, y_pred) -> float, higher is better, finite; default top-1
        accuracy; used only with labels. For a model with several outputs it gets the first one.
      metric_tolerance: largest allowed metric drop (baseline - set metric, >= 0) for the set;
        with labels, default 0.01; ignored without them.
      others: 'float32' or 'original': how the layers not switched to fp16 run ('original':
        Keras layers with their Keras kernels, tf_fp16ops layers with their own accumulation).
        With 'float32' the sweep runs the layers on the op library's fixed-order kernels; the
        returned `.model`'s float32 layers with accumulation='float32' may run TensorFlow's
        own op instead (README "Numerics"), whose float32 sums may differ in the last bits.
      layers: which layers take part (as `convert`'s `layers`); default every convertible layer.
      search: 'greedy' (default) or 'bisect' (see the module docstring).
      batch_size: samples per global batch for arrays (default 32; with a strategy each replica
        takes its share); None for a Dataset, whose elements are the batches.
      progress: show a keras.utils.Progbar counting batches over all passes (on stdout; its
        total is unknown until a Dataset of unknown cardinality has been read once). None
        (default): only when stdout is a terminal, since Keras draws the bar with carriage
        returns and colour codes on any POSIX stdout, which would land in a redirected output.
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
        `search`, `batch_size` (a Python or NumPy int >= 1, not a bool; or one given with a
        Dataset), `reuse`; `x` empty, not numeric, not of the model's input rank and fixed
        dimensions, an infinite Dataset, a Dataset whose elements are not `x` or `(x, y)`, or a
        Dataset with `y`; a `metric` that returns NaN or Inf (for the baseline, a layer or a
        set);
        non-finite model outputs on `x` (no reference to compare with); labels whose count
        differs from the samples, and for the default metric labels that are not finite or not
        class ids of the model's output; a `logdir` that cannot be written (checked before the
        run); `layers=[]`; a model without convertible layers, and what `convert` raises for
        `model` and `layers`; a ParameterServerStrategy as `strategy`.
      TypeError: `model` is not a keras.Model, `metric` not callable or returning something
        that is not a number, `layers` neither None, a name, an iterable of names nor a
        callable, `strategy` not a tf.distribute.Strategy instance.
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
        check_logdir(logdir)
    if others not in _OTHERS:
        raise ValueError(f"others must be one of {_OTHERS}, got {others!r}")
    if search not in _SEARCHES:
        raise ValueError(f"search must be one of {_SEARCHES}, got {search!r}")
    # numbers.Integral: Python and NumPy integers (np.int64(4) as well as 4), not bools
    if batch_size is not None and (
        not isinstance(batch_size, numbers.Integral)
        or isinstance(batch_size, (bool, np.bool_))
        or batch_size < 1
    ):
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    if batch_size is not None:
        batch_size = int(batch_size)
    if progress is not None and not isinstance(progress, bool):
        raise TypeError(f"progress must be True, False or None, got {progress!r}")
    if progress is None:
        progress = sys.stdout.isatty()
    if not (isinstance(reuse, bool) or (isinstance(reuse, str) and reuse == "stacked")):
        raise ValueError(f"reuse must be True, False or 'stacked', got {reuse!r}")
    if metric is not None and not callable(metric):
        raise TypeError(
            f"metric must be a callable (y_true, y_pred) -> float, got {type(metric).__name__}"
        )
    strategy = check_strategy(strategy)
    source = Source(model, x, y, batch_size)
    if metric_tolerance is not None and source.labelled is False:
        raise ValueError("metric_tolerance needs labels y; got metric_tolerance without y")
    if layers is not None and not callable(layers) and not isinstance(layers, str):
        try:
            layers = list(layers)
        except TypeError:
            raise TypeError(
                f"layers must be None, a layer name, a list of layer names or a predicate "
                f"layer -> bool, got {layers!r}"
            ) from None
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
    paths = layer_paths(model)
    # With others='float32' the probe's layers keep the op library's kernels (`_fixed_order`),
    # not TensorFlow's op that float32 with accumulation='float32' may take elsewhere: one
    # summation order per output whatever the number of samples in a call (stacked states,
    # replica shares). With 'original' they run as in the model.
    if others == "float32":
        _use_fixed_order(probe)

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

    reuser = Reuse(probe) if reuse else None
    if reuser is not None and not reuser.usable:
        reuser = None
    stacked = reuser is not None and reuse == "stacked"
    downstream = (
        {nm: reuser.downstream(by_name[nm]) for nm in names} if reuser and not stacked else {}
    )
    owners = {nm: reuser.holders(by_name[nm]) for nm in names} if stacked else {}
    replicas = Replicas(strategy)

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
                try:
                    states += reuser.run_stacked(
                        xb, kept, [owners[nm] for nm in part], set_state, part
                    )
                except UnstackableMasks:
                    # masks present in some states and not in others: one state at a time
                    for name in part:
                        set_state({name})
                        out, _ = reuser.run(xb, kept, reuser.downstream(by_name[name]))
                        states.append(flat(out))
                    set_state(set())
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

    if not any(np.count_nonzero(o) for o in base):
        # Every relative error against an all-zero reference reads 0 or inf: nothing measured.
        # (The reference run is the model with every candidate at float32 accumulation, or as
        # it is: its outputs stand for the model's here.)
        raise ValueError(
            f"x: the model's outputs on x are all zero ({sum(int(np.size(o)) for o in base)} "
            "values); sensitivity needs a reference that is not all zero (inputs at the scale "
            "the model expects?)"
        )

    metric_name = getattr(metric, "__name__", type(metric).__name__)

    def score(outs, state: str):
        if y_all is None:
            return None
        value = metric(y_all, outs[0])
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise TypeError(
                f"metric {metric_name!r} must return a number, got {type(value).__name__} ({state})"
            ) from None
        if not math.isfinite(value):
            # A NaN would compare False with every tolerance: no layer could join the fp16 set.
            raise ValueError(
                f"metric {metric_name!r} returned {value} ({state}); it must return a finite number"
            )
        return value

    base_metric = score(base, "the baseline")
    sweep = {}
    for s, name in enumerate(names, start=1):
        outs = joined(swept[s])
        swept[s] = []  # each state's outputs are dropped once measured
        sweep[name] = (*_errors(base, outs), score(outs, f"layer {name!r} in fp16"))
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
        m = score(outs, f"the fp16 set {sorted(fp16)}")
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
