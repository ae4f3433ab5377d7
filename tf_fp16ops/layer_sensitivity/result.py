"""What `tf_fp16ops.sensitivity` returns: one `LayerSensitivity` per layer and the
`SensitivityResult` with its table, JSON and TensorBoard summaries (tags under SUMMARY_PREFIX)."""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field, fields

import keras

SUMMARY_PREFIX = "fp16_sensitivity"


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


def check_logdir(logdir) -> None:
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
