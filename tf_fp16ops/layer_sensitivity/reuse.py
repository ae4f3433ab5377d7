"""The sweep's reuse of the baseline's activations (`Reuse`: recompute only what is
downstream of the switched layer) and each layer's path and position in the model
(`layer_paths`); analysis.py's docstring, "Reuse", says when and why."""

from __future__ import annotations

import keras
from keras.src.backend.common.masking import get_keras_mask, set_keras_mask


class Kept:
    """One batch's baseline run as the sweep reruns from it: `tensors` (reference tensor id ->
    its value) and `masks` (node id -> {input tensor id -> the Keras mask that node's call saw
    on that input, or None}).

    Keras carries masks between layers as an attribute of the tensors (`_keras_mask`): a layer
    sets it on its outputs (`compute_mask`) and a consumer reads it from its inputs, and may
    clear it there (MultiHeadAttention does, on its query, key and value). A kept tensor
    therefore no longer holds the mask its later consumers saw in the baseline run; the rerun
    puts that mask back on it before each call."""

    __slots__ = ("tensors", "masks")

    def __init__(self):
        self.tensors: dict = {}
        self.masks: dict = {}


class UnstackableMasks(Exception):
    """reuse='stacked' met a mask present in some sweep states of a tensor and absent in others
    (a `compute_mask` whose result depends on the values): the states cannot share one stacked
    mask, so the caller reruns them one at a time."""


class Reuse:
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

    def run_stacked(self, batch, kept: Kept, owners: list[set], set_state, names: list[str]):
        """The sweep states `names` of one batch in one graph walk (module docstring, "Reuse",
        reuse='stacked'): `owners[s]` are the nodes that call the layer of state s; a node whose
        inputs differ from the baseline in some states runs once on those states' inputs
        stacked on axis 0 (baseline accumulation), and once more per state whose layer it
        calls (that layer in fp16). Returns the flat outputs of each state.

        Masks: each stacked input carries the stacked masks of its states: where a node saw no
        mask on an input in the baseline it sees none (Keras attaches and clears masks by the
        graph, not by the values); else a state whose input differs from the baseline gives the
        mask its recomputed producer set, the others the baseline's. Raises UnstackableMasks
        where a recomputed producer's mask is present in some states and not in others."""
        probe = self.graph
        rows = len(keras.tree.flatten(batch)[0])
        results: list = []
        tensors = kept.tensors

        def run_graph(inputs, operation_fn=lambda op: op, call_fn=None):
            # tensor id -> (states, their outputs stacked on axis 0, each state's mask or None),
            # where they differ from the baseline's `kept` value
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
                        parts.append(tensors[i])
                return parts[0] if len(parts) == 1 else keras.ops.concatenate(parts, axis=0)

            def stack_mask(i, states, base_mask):
                if base_mask is None:
                    return None
                got = diverged.get(i)
                masks = [
                    got[2][got[0].index(s)] if got is not None and s in got[0] else base_mask
                    for s in states
                ]
                if all(m is None for m in masks):
                    return None
                if any(m is None for m in masks):
                    raise UnstackableMasks
                return masks[0] if len(masks) == 1 else keras.ops.concatenate(masks, axis=0)

            for depth in sorted(probe._nodes_by_depth, reverse=True):
                for node in probe._nodes_by_depth[depth]:
                    if not node.operation or node.is_input:
                        continue
                    ins = [id(t) for t in node.input_tensors]
                    if any(i not in tensors for i in ins):
                        continue
                    own = [s for s in range(len(names)) if id(node) in owners[s]]
                    seen = {s for i in ins if i in diverged for s in diverged[i][0]}
                    others = sorted(seen - set(own))
                    calls = ([(others, set())] if others else []) + [([s], {names[s]}) for s in own]
                    if not calls:
                        continue
                    base_masks = kept.masks.get(id(node), {})
                    parts = []
                    for states, fp16 in calls:
                        set_state(fp16)
                        values = {i: stack(i, states) for i in ins}
                        for i, v in values.items():
                            set_keras_mask(v, stack_mask(i, states, base_masks.get(i)))
                        args, kwargs = node.arguments.fill_in(values)
                        op = operation_fn(probe._get_operation_for_node(node))
                        outs = keras.tree.flatten(op(*args, **kwargs))
                        # each output's mask as its producer set it, before a consumer clears it
                        masks = [get_keras_mask(o) for o in outs]
                        parts.append((states, outs, masks))
                    states = [s for st, _, _ in parts for s in st]
                    for j, t in enumerate(node.outputs):
                        pieces = [p[j] for _, p, _ in parts]
                        value = (
                            pieces[0] if len(pieces) == 1 else keras.ops.concatenate(pieces, axis=0)
                        )
                        state_masks = [
                            None if m[j] is None else m[j][k * rows : (k + 1) * rows]
                            for st, _, m in parts
                            for k in range(len(st))
                        ]
                        diverged[id(t)] = (states, value, state_masks)
            set_state(set())
            for s in range(len(names)):
                results.append([stack(id(x), [s]) for x in probe.outputs])
            return keras.tree.pack_sequence_as(
                probe._outputs_struct, [tensors[id(x)] for x in probe.outputs]
            )

        probe.__dict__["_run_through_graph"] = run_graph
        try:
            self.probe(batch, training=False)
        finally:
            del probe.__dict__["_run_through_graph"]
        return results

    def run(self, batch, fill: Kept | None = None, only: set | None = None):
        """(outputs, Kept) of `batch`: a whole run when `only` is None (the Kept returned holds
        every node's outputs and the masks each node saw on its inputs, to pass as `fill`),
        else only the nodes in `only` recomputed and the rest taken from `fill`, each with the
        mask the baseline's consumer saw on it (an input recomputed here carries the mask its
        recomputation set, as in a whole run)."""
        probe = self.graph
        kept = Kept()

        def run_graph(inputs, operation_fn=lambda op: op, call_fn=None):
            tensor_dict = dict(fill.tensors) if only is not None else {}
            for x, y in zip(probe.inputs, keras.tree.flatten(inputs), strict=True):
                tensor_dict[id(x)] = y
            fresh: set = set()  # reference tensor ids recomputed in this rerun
            for depth in sorted(probe._nodes_by_depth, reverse=True):
                for node in probe._nodes_by_depth[depth]:
                    if not node.operation or node.is_input:
                        continue
                    if only is not None and id(node) not in only:
                        continue
                    if any(id(x) not in tensor_dict for x in node.input_tensors):
                        continue
                    if only is None:
                        kept.masks[id(node)] = {
                            id(x): get_keras_mask(tensor_dict[id(x)]) for x in node.input_tensors
                        }
                    else:
                        seen = fill.masks.get(id(node), {})
                        for x in node.input_tensors:
                            if id(x) not in fresh:
                                set_keras_mask(tensor_dict[id(x)], seen.get(id(x)))
                    args, kwargs = node.arguments.fill_in(tensor_dict)
                    outputs = operation_fn(probe._get_operation_for_node(node))(*args, **kwargs)
                    for x, y in zip(node.outputs, keras.tree.flatten(outputs), strict=False):
                        tensor_dict[id(x)] = y
                        fresh.add(id(x))
            if only is None:
                kept.tensors.update(tensor_dict)
            return keras.tree.pack_sequence_as(
                probe._outputs_struct, [tensor_dict[id(x)] for x in probe.outputs]
            )

        probe.__dict__["_run_through_graph"] = run_graph
        try:
            return self.probe(batch, training=False), kept
        finally:
            del probe.__dict__["_run_through_graph"]


def layer_paths(model) -> dict[str, tuple[str, int]]:
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
