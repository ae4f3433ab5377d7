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

SUMMARY_PREFIX = "fp16_sensitivity"
_OTHERS = ("float32", "original")
_SEARCHES = ("greedy", "bisect")


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
        """One row per layer, by rank; `markdown=True` for a Markdown table (TensorBoard text)."""
        with_metric = self.baseline_metric is not None
        head = ["rank", "layer", "class", "max_rel", "mean_rel"] + (
            ["metric_change"] if with_metric else []
        )
        head.append("fp16 set")
        rows = [
            [str(e.rank), e.name, e.class_name, f"{e.max_rel:.3e}", f"{e.mean_rel:.3e}"]
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
                v.ljust(w) if i in (1, 2) else v.rjust(w)
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


def _batches(x, batch_size: int):
    n = len(keras.tree.flatten(x)[0])
    for start in range(0, n, batch_size):
        yield keras.tree.map_structure(lambda a, start=start: a[start : start + batch_size], x)


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
    batch_size: int = 32,
    progress: bool = True,
    logdir: str | None = None,
) -> SensitivityResult:
    """Ranks the convertible layers of `model` by their sensitivity to fp16 accumulation and finds
    the largest set that can take it (module docstring: measures, ranking, search).

    Args:
      model: a built Sequential or functional keras.Model (as `tf_fp16ops.convert` takes).
      x: the inputs, an array (or list/dict of arrays) with N samples on axis 0, as the model takes.
      y: optional labels for `metric` (class ids [N] or one-hot [N, K] for the default metric).
      tolerance: largest max_rel of the combined model's outputs for the fp16 set (> 0).
      metric: callable (y_true, y_pred) -> float, higher is better; default top-1 accuracy;
        used only with `y`. For a model with several outputs it gets the first one.
      metric_tolerance: largest allowed metric drop (baseline - set metric, >= 0) for the set;
        with `y`, default 0.01; ignored without `y`.
      others: 'float32' or 'original': how the layers not switched to fp16 run ('original':
        Keras layers with their Keras kernels, tf_fp16ops layers with their own accumulation).
      layers: which layers take part (as `convert`'s `layers`); default every convertible layer.
      search: 'greedy' (default) or 'bisect' (see the module docstring).
      batch_size: samples per model call.
      progress: show a keras.utils.Progbar over the model runs (on stdout).
      logdir: if given, `write_summaries(logdir)` is called on the result.

    Returns:
      SensitivityResult; `.model` is `model` converted with `fp16_set` at float16 and the other
      convertible layers at float32 ('float32') or left as they are ('original').

    Raises:
      ValueError: bad `tolerance`, `metric_tolerance` (or one given without `y`), `others`,
        `search`, `batch_size`; `x` empty, not numeric, or not of the model's input rank and
        fixed dimensions; non-finite model outputs on `x` (no reference to compare with);
        labels whose count differs from the samples, and for the default metric labels that are
        not finite or not class ids of the model's output; a `logdir` that cannot be written
        (checked before the run); `layers=[]`; a model without convertible layers, and what
        `convert` raises for `model` and `layers`.
      TypeError: `model` is not a keras.Model, `metric` not callable.
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
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    if metric is not None and not callable(metric):
        raise TypeError(
            f"metric must be a callable (y_true, y_pred) -> float, got {type(metric).__name__}"
        )
    x = _check_x(model, x)
    leaves = keras.tree.flatten(x)
    if len(leaves[0]) == 0:
        raise ValueError("x must hold at least one sample")
    n = len(leaves[0])
    if y is not None and len(y) != n:
        raise ValueError(f"y has {len(y)} labels for {n} samples of x")
    if metric_tolerance is not None and y is None:
        raise ValueError("metric_tolerance needs labels y; got metric_tolerance without y")
    if layers is not None and not callable(layers) and not isinstance(layers, str):
        layers = list(layers)
        if not layers:
            raise ValueError("layers selects no layer: got an empty list")
    metric = metric or top1_accuracy
    if y is not None and metric_tolerance is None:
        metric_tolerance = 0.01

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

    # 'original': a Keras layer runs its Keras kernel; a layer that already was a tf_fp16ops
    # layer runs with the accumulation it had.
    own_accumulation = {
        layer.name: getattr(layer, "accumulation", None)
        for layer in model._flatten_layers(include_self=False, recursive=True)
        if layer.name in by_name
    }

    def set_state(fp16: set):
        for name, layer in by_name.items():
            half = name in fp16
            own = own_accumulation.get(name) if others == "original" else None
            layer.accumulation = "float16" if half else (own or "float32")
            layer._keras_path = not half and others == "original" and own is None

    def run():
        outs = [[] for _ in keras.tree.flatten(probe.outputs)]
        for xb in _batches(x, batch_size):
            for i, o in enumerate(keras.tree.flatten(probe(xb, training=False))):
                outs[i].append(keras.ops.convert_to_numpy(o).astype(np.float64))
        return [np.concatenate(o) for o in outs]

    def score(outs):
        return None if y is None else float(metric(np.asarray(y), outs[0]))

    total = (
        1
        + len(names)
        + (len(names) if search == "greedy" else max(1, math.ceil(math.log2(len(names) + 1))) + 1)
    )
    bar = keras.utils.Progbar(total, unit_name="model run") if progress else None
    done = 0

    def tick(what):
        nonlocal done
        done += 1
        if bar is not None:
            bar.update(min(done, total), values=None, finalize=done >= total)

    set_state(set())
    base = run()
    bad = sum(int(np.size(o) - np.count_nonzero(np.isfinite(o))) for o in base)
    if bad:
        # Every error against a non-finite reference would read 0 (every layer "fp16-safe").
        orig = [
            keras.ops.convert_to_numpy(o)
            for xb in _batches(x, batch_size)
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
    base_metric = score(base)
    tick("baseline")
    sweep = {}
    for name in names:
        set_state({name})
        outs = run()
        m = score(outs)
        sweep[name] = (*_errors(base, outs), m)
        tick(name)

    def within(fp16: set):
        set_state(fp16)
        outs = run()
        tick("set")
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
    if bar is not None and done < total:
        bar.update(total, finalize=True)
    set_state(set())
    for layer in by_name.values():
        layer._keras_path = False

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
        metric_tolerance=None if y is None else float(metric_tolerance),
        others=others,
        search=search,
        num_samples=n,
        model=final,
    )
    if logdir is not None:
        result.write_summaries(logdir)
    return result
