"""The audit graph: indexes of every graph scope of a loaded model and its networkx call graph.

Scopes: a top-level graph (one per graph unit: MetaGraph, GraphDef) or a FunctionDef of its
library. Indexing a scope reads each node's name and op once into plain lists (name -> position,
op per position); NodeDefs are touched again only for the nodes the passes reach, and the passes
read producers straight from the scope indexes (`producer()`, `Scope.input_refs()`).

The call graph `AuditGraph.calls` is a networkx MultiDiGraph over scope keys: one edge caller ->
callee per function named by a call node's attrs, keyed by (call node, attr, order), with the op,
the raw function attr bindings and `order`, the edge's position in the caller's node order.
networkx finds recursion (`strongly_connected_components`) and the scopes that can reach a
convolution (a reverse `edge_bfs`), and its edges are what `call_sites()` walks.

Call sites are enumerated by `call_sites()`: one per (call path from a root, convolution), with
function attr placeholders resolved per call path. Recursion is cut at the first repeated scope;
callees that cannot reach a convolution are not walked, and the walk stops at the budget of
`limits.Limits` (sites, call edges followed; nodes indexed in `build_graph`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from itertools import compress, islice
from typing import Any

import networkx as nx

from .errors import MalformedModelError
from .limits import DEFAULT, Budget
from .model import LoadedModel
from .opsets import CALL_ATTRS, SITE_OPS


class NodeIndex(Mapping):
    """Read-only mapping node name -> NodeDef over a repeated NodeDef field.

    Only the names are indexed (name -> position, the last node wins on duplicate names, as in a
    dict built in node order); a NodeDef is fetched from the field when asked for, so nodes the
    analysis never reaches cost no Python object.
    """

    __slots__ = ("_nodes", "pos")

    def __init__(self, nodes, pos: dict[str, int]):
        self._nodes = nodes
        self.pos = pos

    def __getitem__(self, name: str):
        return self._nodes[self.pos[name]]

    def get(self, name, default=None):
        i = self.pos.get(name)
        return default if i is None else self._nodes[i]

    def __contains__(self, name) -> bool:
        return name in self.pos

    def __iter__(self):
        return iter(self.pos)

    def __len__(self) -> int:
        return len(self.pos)


@dataclass(eq=False)
class Scope:
    """One graph scope. `function` is None for a top-level graph.

    `ops` holds the op type of every node by position (`index.pos`); `op_of()` reads it without
    touching the NodeDef. Not frozen: `input_refs()` fills a cache (`_refs`) on first use; the
    other fields are not changed after `build_graph`.
    """

    key: str
    unit: str
    function: str | None
    index: NodeIndex  # node name -> NodeDef
    fdef: Any  # FunctionDef or None
    convs: tuple[str, ...]
    calls: tuple[str, ...]
    args: dict  # arg name -> (position, ArgDef)
    arg_attrs: dict  # position -> {attr name: AttrValue}
    rets: tuple[str, ...]  # output tensors in signature order (function scopes)
    signatures: dict  # top-level node name -> signature names
    arg_shapes: dict  # top-level placeholder name -> shape tuple
    op_counts: dict  # op type -> (count, first node name)
    owner_layer: str | None = None
    ops: list = field(default_factory=list, repr=False, compare=False)
    call_set: frozenset = field(default=frozenset(), repr=False, compare=False)  # = set(calls)
    _refs: dict = field(default_factory=dict, repr=False, compare=False)

    def op_of(self, name: str) -> str | None:
        i = self.index.pos.get(name)
        return None if i is None else self.ops[i]

    def input_refs(self, name: str) -> tuple | None:
        """Per input of node `name`: (producer name, output index) when the producer is a node or
        argument of this scope, None for control inputs and dangling names. None if no such node."""
        refs = self._refs.get(name)
        if refs is None:
            nd = self.index.get(name)
            if nd is None:
                return None
            pos, args = self.index.pos, self.args
            out = []
            for inp in nd.input:
                ref = _parse_node_input(self, name, inp)
                out.append(ref if ref is not None and (ref[0] in pos or ref[0] in args) else None)
            refs = self._refs[name] = tuple(out)
        return refs


@dataclass(frozen=True)
class Frame:
    """One call on a call path: `call_node` in scope `caller` calls function scope `callee`."""

    caller: str
    call_node: str
    call_op: str
    attr: str
    callee: str
    bindings: dict  # attr name -> AttrValue, placeholders already resolved


@dataclass(frozen=True)
class CallSite:
    """A convolution reached through `frames` (outermost call first) from root scope `root`."""

    root: str
    frames: tuple[Frame, ...]
    scope: str
    node: str

    @property
    def bindings(self) -> dict:
        return self.frames[-1].bindings if self.frames else {}


@dataclass(frozen=True)
class AuditGraph:
    """Scope indexes and the call graph. Build with `build_graph(model)`.

    `calls` is the call graph (networkx MultiDiGraph over scope keys, see the module doc); it is
    not changed after `build_graph`. `conv_reach` holds the scopes that hold a convolution or call,
    directly or transitively, one that does.
    """

    scopes: dict[str, Scope]
    roots: tuple[str, ...]
    notes: tuple[str, ...]
    calls: nx.MultiDiGraph
    conv_reach: frozenset
    out_calls: dict = field(default_factory=dict)  # caller -> call_edges(caller), precomputed

    # ---- node access -------------------------------------------------------------------------
    def nodedef(self, scope: str, name: str):
        return self.scopes[scope].index.get(name)

    def producer(self, node_id: tuple, input_index: int) -> tuple[tuple, int] | None:
        """(producer node id, its output index) feeding `input_index` of `node_id`, or None."""
        s = self.scopes.get(node_id[0])
        if s is None:
            return None
        refs = s.input_refs(node_id[1])
        if refs is None or not 0 <= input_index < len(refs):
            return None
        ref = refs[input_index]
        return None if ref is None else ((node_id[0], ref[0]), ref[1])

    def call_edges(self, scope: str) -> list[tuple[str, str, str, str, dict]]:
        """(call node, op, attr, callee scope key, raw bindings) of every call edge out of `scope`,
        in the scope's node order (then the order of the call op's function attrs)."""
        if self.out_calls:
            return list(self.out_calls.get(scope, ()))
        if scope not in self.calls:
            return []
        edges = self.calls.out_edges(scope, keys=True, data=True)
        edges = sorted(edges, key=lambda e: e[3]["order"])
        return [(k[0], d["op"], k[1], v, d["bindings"]) for _, v, k, d in edges]

    def callees(self, scope: str, call_node: str) -> list[tuple[str, str, dict]]:
        """(callee scope key, attr name, raw bindings) for a call node, in attr order ([] for a node
        that calls nothing)."""
        s = self.scopes.get(scope)
        if s is None or call_node not in s.call_set or scope not in self.calls:
            return []
        out = [
            (d["order"], callee, key[1], d["bindings"])
            for callee, by_key in self.calls.adj[scope].items()
            for key, d in by_key.items()
            if key[0] == call_node
        ]
        return [(callee, attr, raw) for _, callee, attr, raw in sorted(out, key=lambda e: e[0])]

    # ---- call sites --------------------------------------------------------------------------
    def call_sites(self, budget: Budget | None = None) -> Iterator[CallSite]:
        """Every (call path, op) pair (a convolution or a matmul-family op), roots first, depth
        first.

        One depth-first walk over the call graph with the current path kept as a stack (a path
        of depth d costs O(1) per step, not O(d)): time and memory are linear in the number of
        call edges followed plus the size of the sites yielded. Recursion is cut at the first
        repeated scope on a path. `budget` (default: `Limits()`): stops after `max_sites` sites,
        `max_path_frames` calls in the call paths of the sites reported (what their findings
        hold: a site d calls deep lists d calls and d functions) or `max_expansions` call edges
        followed, recording why in `budget.partial`."""
        if budget is None:
            budget = Budget(DEFAULT)
        max_sites = budget.limits.max_sites
        max_expansions = budget.limits.max_expansions
        max_path_frames = budget.limits.max_path_frames
        count = expansions = path_frames = 0
        reach = self.conv_reach
        edges_of: dict[str, list] = {}  # per scope: its call edges into `reach`, in node order
        for root in self.roots:
            if root not in reach:
                continue
            path: list[Frame] = []  # frames of the current call path, outermost first
            on_path: set[str] = {root}  # root and the callee of every frame in `path`
            # (depth of the frame, frame or None for the root)
            stack: list[tuple[int, Frame | None]] = [(0, None)]
            while stack:
                depth, frame = stack.pop()
                while len(path) > depth - (frame is not None):
                    on_path.discard(path.pop().callee)
                if frame is not None:
                    path.append(frame)
                    on_path.add(frame.callee)
                key = frame.callee if frame is not None else root
                scope = self.scopes[key]
                if scope.convs:
                    frames = tuple(path)
                    for conv in scope.convs:
                        if count >= max_sites:
                            budget.over(
                                f"call sites: the first {max_sites} (call path, op) pairs are "
                                "reported (ops: convolutions and the matmul family); the call "
                                "graph has more (--max-sites)"
                            )
                            return
                        path_frames += len(frames)
                        if path_frames > max_path_frames:
                            budget.over(
                                f"call paths: the first {count} call sites are reported, whose "
                                f"call paths hold at most {max_path_frames} calls in all; the "
                                "call graph has more (--max-path-frames)"
                            )
                            return
                        count += 1
                        yield CallSite(root, frames, key, conv)
                edges = edges_of.get(key)
                if edges is None:
                    # Callees outside `reach` hold no convolution on any path: never walked.
                    edges = edges_of[key] = [e for e in self.call_edges(key) if e[3] in reach]
                if not edges:
                    continue
                outer = path[-1].bindings if path else {}
                pending = []
                for call, op, attr, callee, raw in edges:
                    if callee in on_path:
                        continue  # recursion: reported in notes by build_graph
                    expansions += 1
                    if expansions > max_expansions:
                        budget.over(
                            f"call graph: walk stopped after {max_expansions} call edges "
                            "(--max-expansions); later call paths are not reported"
                        )
                        return
                    bindings = resolve_bindings(raw, outer) if raw else raw
                    pending.append((len(path) + 1, Frame(key, call, op, attr, callee, bindings)))
                stack.extend(reversed(pending))


def resolve_attr(attr, bindings: dict):
    """An AttrValue with a function-attr placeholder replaced from `bindings` (None if unbound)."""
    if attr is None:
        return None
    if attr.placeholder:
        return bindings.get(attr.placeholder)
    return attr


def resolve_bindings(raw: dict, outer: dict) -> dict:
    out = {}
    for k, v in raw.items():
        out[k] = resolve_attr(v, outer) if v.placeholder else v
    return out


def parse_input(text: str, in_function: bool) -> tuple[str, int] | None:
    """("node", output index) for a data input string; None for a control input.

    GraphDef: "node" or "node:2". FunctionDef: "arg" or "node:out_arg:2" (index within the
    output arg; call ops and value-preserving ops have one output arg, so it is the flat index).
    Raises:
      MalformedModelError: an empty node name, a non-decimal index or too many ':' parts
        (e.g. "", "x:abc", "x:-1", "b:out:zz"), naming the input string.
    """
    if text.startswith("^"):
        return None
    parts = text.split(":")
    n = len(parts)
    if n == 1 and text:
        return text, 0
    if parts[0]:
        if in_function:
            if n == 2 and parts[1]:
                return parts[0], 0
            if n == 3 and parts[1] and _is_index(parts[2]):
                return parts[0], int(parts[2])
        elif n == 2 and _is_index(parts[1]):
            return parts[0], int(parts[1])
    form = "'arg' or 'node:output_arg:INDEX'" if in_function else "'node' or 'node:INDEX'"
    raise MalformedModelError(f"malformed node input {text!r} (expected {form})")


def _is_index(s: str) -> bool:
    return s.isascii() and s.isdigit()


def _parse_node_input(scope: Scope, node: str, text: str) -> tuple[str, int] | None:
    """`parse_input` for input `text` of node `node` of `scope`; errors name the scope and node."""
    try:
        return parse_input(text, scope.fdef is not None)
    except MalformedModelError as e:
        raise MalformedModelError(f"{_where(scope)}: node {node!r} has a {e}") from None


def parse_ret(scope: Scope, text: str) -> tuple[str, int] | None:
    """`parse_input` for a return value of function scope `scope`; errors name the function."""
    try:
        return parse_input(text, True)
    except MalformedModelError as e:
        raise MalformedModelError(f"{_where(scope)}: return value has a {e}") from None


def _where(scope: Scope) -> str:
    return f"function {scope.function!r}" if scope.function else f"graph {scope.unit!r}"


def _index_scope(
    key,
    unit,
    function,
    nodes,
    fdef,
    fnames,
    signatures=None,
    arg_shapes=None,
    owner_layer=None,
    budget: Budget | None = None,
) -> Scope:
    # One read of each node's op and name into plain lists; everything else is derived from them.
    n_nodes = len(nodes)
    if budget is not None:
        n_nodes = budget.take_nodes(n_nodes, f"function {function!r}" if function else repr(unit))
    if n_nodes < len(nodes):
        nodes_read = list(islice(nodes, n_nodes))
        ops = [n.op for n in nodes_read]
        names = [n.name for n in nodes_read]
        del nodes_read
    else:
        ops = [n.op for n in nodes]
        names = [n.name for n in nodes]
    pos = dict(zip(names, range(len(names)), strict=True))
    counts: dict[str, int] = {}  # not collections.Counter: its per-call Mapping check was a
    for op in ops:  # quarter of the audit of a 50,000-deep chain of one-node functions
        counts[op] = counts.get(op, 0) + 1
    first = dict(
        zip(reversed(ops), range(len(ops) - 1, -1, -1), strict=True)
    )  # op -> first position
    op_counts = {op: (c, names[first[op]]) for op, c in counts.items()}
    convs = []
    calls = []
    wanted = {op for op in counts if op in SITE_OPS or op in CALL_ATTRS or op in fnames}
    if wanted:
        # `convs` holds every call-site op: convolutions and the matmul family (opsets.SITE_OPS)
        for i in compress(range(len(ops)), map(wanted.__contains__, ops)):
            (convs if ops[i] in SITE_OPS else calls).append(names[i])
    args = {}
    arg_attrs = {}
    rets: tuple[str, ...] = ()
    if fdef is not None:
        for i, a in enumerate(fdef.signature.input_arg):
            args[a.name] = (i, a)
        if len(fdef.arg_attr):
            for i, aa in fdef.arg_attr.items():
                arg_attrs[i] = aa.attr
        rets = tuple(fdef.ret[o.name] for o in fdef.signature.output_arg if o.name in fdef.ret)
    return Scope(
        key,
        unit,
        function,
        NodeIndex(nodes, pos),
        fdef,
        tuple(convs),
        tuple(calls),
        args,
        arg_attrs,
        rets,
        signatures or {},
        arg_shapes or {},
        op_counts,
        owner_layer,
        ops,
        frozenset(calls),
    )


def build_graph(model: LoadedModel, budget: Budget | None = None) -> AuditGraph:
    """Indexes every scope of `model`, resolves call edges and builds the call graph.

    `budget` (default: `Limits()`): nodes past `max_nodes` are not indexed (their scopes are
    empty), recorded in `budget.partial`."""
    if budget is None:
        budget = Budget(DEFAULT)
    scopes: dict[str, Scope] = {}
    roots: list[str] = []
    notes: list[str] = []
    calls = nx.MultiDiGraph()
    out_calls: dict[str, list] = {}  # caller -> [(call, op, attr, callee, raw)] in edge order
    unit_of: dict[str, int] = {}
    unit_notes: list[list[str]] = []
    multi = len(model.units) > 1
    order = 0
    for ui, unit in enumerate(model.units):
        notes = []
        unit_notes.append(notes)
        prefix = f"{ui}:" if multi else ""
        gd = unit.graph_def
        functions = {f.signature.name: f for f in gd.library.function}
        fnames = set(functions)
        top_key = prefix + "<graph>"
        scopes[top_key] = _index_scope(
            top_key,
            unit.label,
            None,
            gd.node,
            None,
            fnames,
            unit.signatures,
            unit.arg_shapes,
            unit.owner_layer,
            budget,
        )
        for fname, fdef in functions.items():
            key = prefix + fname
            scopes[key] = _index_scope(
                key,
                unit.label,
                fname,
                fdef.node_def,
                fdef,
                fnames,
                owner_layer=unit.owner_layer,
                budget=budget,
            )
        unit_keys = [top_key] + [prefix + f for f in functions]
        calls.add_nodes_from(unit_keys)
        unit_of.update(dict.fromkeys(unit_keys, ui))
        called: set[str] = set()
        for key in unit_keys:
            s = scopes[key]
            for call in s.calls:
                nd = s.index[call]
                for attr, callee, raw in _callee_refs(nd, fnames):
                    ckey = prefix + callee
                    if ckey not in scopes:
                        notes.append(
                            f"{s.function or 'graph'}: call node {call!r} names function "
                            f"{callee!r}, which the library does not define"
                        )
                        continue
                    called.add(ckey)
                    calls.add_edge(
                        key, ckey, key=(call, attr, order), op=nd.op, bindings=raw, order=order
                    )
                    out_calls.setdefault(key, []).append((call, nd.op, attr, ckey, raw))
                    order += 1
        roots.append(top_key)
        roots.extend(k for k in unit_keys[1:] if k not in called)
    # Units share no call edges: one pass over the whole call graph finds each unit's cycles.
    for ui, note in _recursion_notes(calls, unit_of):
        unit_notes[ui].append(note)
    notes = [n for per_unit in unit_notes for n in per_unit]
    # Scopes that are or call (transitively) a scope with a convolution: one reverse
    # breadth-first search from all of them (linear in the call graph; cycles visited once).
    reach = {k for k, s in scopes.items() if s.convs}
    if reach:
        reach.update(e[0] for e in nx.edge_bfs(calls, list(reach), orientation="reverse"))
    return AuditGraph(scopes, tuple(roots), tuple(notes), calls, frozenset(reach), out_calls)


def _callee_refs(nd, fnames: set) -> list[tuple[str, str, dict]]:
    op = nd.op
    out = []
    if op in CALL_ATTRS:
        for attr in CALL_ATTRS[op][0]:
            if attr not in nd.attr:
                continue
            v = nd.attr[attr]
            funcs = list(v.list.func) if v.HasField("list") else [v.func]
            for f in funcs:
                if f.name:
                    out.append((attr, f.name, dict(f.attr)))
    elif op in fnames:
        out.append(("op", op, dict(nd.attr)))
    return out


def _recursion_notes(cg, unit_of: dict) -> list[tuple[int, str]]:
    """(unit, note) per call cycle (strongly connected component with a cycle) of call graph
    `cg`."""
    notes = []
    for comp in nx.strongly_connected_components(cg):
        if len(comp) > 1 or any(cg.has_edge(k, k) for k in comp):
            notes.append(
                (
                    unit_of[next(iter(comp))],
                    "recursive functions (call cycle cut at the first repeat on each path): "
                    + ", ".join(sorted(comp)),
                )
            )
    return notes
