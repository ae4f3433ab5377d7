"""The sweep's reuse of the baseline's activations (`Reuse`: recompute only what is
downstream of the switched layer) and each layer's path and position in the model
(`layer_paths`); analysis.py's docstring, "Reuse", says when and why."""

from __future__ import annotations

import keras


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
