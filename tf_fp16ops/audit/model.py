"""The loaded model: every graph scope of the input, as parsed protos. No analysis here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class GraphUnit:
    """One top-level graph with its function library: a MetaGraph of a SavedModel, or a GraphDef.

    Attributes:
      label: human-readable name, e.g. "graph" or "meta_graph[0] tags=serve".
      graph_def: a GraphDef message (`protos.GraphDef` read from files; TensorFlow's own for
        Python graph objects), not copied.
      signatures: maps a top-level node name to the names of the signatures whose outputs it
        produces.
      arg_shapes: optional shapes for top-level Placeholders by node name (from signature
        TensorSpecs).
      owner_layer: the Keras layer wrapping this whole graph, when known.
    """

    label: str
    graph_def: Any
    signatures: dict[str, tuple[str, ...]] = field(default_factory=dict)
    arg_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    owner_layer: str | None = None  # Keras layer that wraps this graph (e.g. a TFSMLayer)


@dataclass(frozen=True)
class KerasLayer:
    """A Keras layer found in a model's configuration.

    Attributes:
      name: layer name as configured.
      class_name: Keras class, e.g. "Conv2D".
      policy: dtype policy name ("float32", "float16", "mixed_float16", ...) or None when not
        stated.
      variable_dtype / compute_dtype: derived from the policy name (mixed_X: float32 / X).
    """

    name: str
    class_name: str
    policy: str | None
    variable_dtype: str | None
    compute_dtype: str | None


@dataclass(frozen=True)
class LoadedModel:
    """Everything the audit read from one input.

    Attributes:
      source: the path or a description of the Python object.
      format: "saved_model", "graph_def", "keras" (static config), "keras-built" or "python".
      units: top-level graphs, each with its library.
      keras_layers: layers and policies when the input carried a Keras configuration.
      notes: facts found while loading (e.g. a layer wrapping another SavedModel).
      partial: budgets that ran out while loading (a `.keras` config reconstructed only up to
        `Limits.max_nodes`), one line each; see `AuditReport.partial`.
    """

    source: str
    format: str
    units: tuple[GraphUnit, ...]
    keras_layers: tuple[KerasLayer, ...] = ()
    keras_model_name: str | None = None
    notes: tuple[str, ...] = ()
    partial: tuple[str, ...] = ()
