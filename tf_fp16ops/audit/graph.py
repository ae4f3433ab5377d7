"""The audit graph: a networkx graph over every graph scope of a loaded model.

Nodes:
  * ("scope", key) for each scope: a top-level graph or a FunctionDef of its library.
  * (key, node_name) for each op node the analysis can reach from a convolution: the convolutions,
    call nodes, and the nodes that feed them through value-preserving chains (Identity-like ops,
    Cast, ReadVariableOp) up to the first other op; function arguments appear as
    (key, "_arg:NAME") with op "_Arg".
Edges (a MultiDiGraph):
  * data edges producer -> consumer, keyed by the consumer's input index, with `src_output`;
  * call edges call node -> ("scope", callee) with the callee attr name and its attr bindings.

Only the neighbourhoods of convolutions and calls get data edges, and `AuditGraph.g` is built on
first use: the passes read producers straight from the scope indexes (`producer()`), which give the
same answers as the graph's data edges. Indexing a scope reads each node's name and op once into
plain lists (name -> position, op per position); NodeDefs are touched again only for the nodes the
passes reach. A full data-edge graph of a 200k-node model costs several times the protobuf parse
(measured, see benchmarks/results/audit_scale.md); `scope_dataflow()` builds the full data-edge
graph of one scope on demand. The call graph (scope -> scope) is a small networkx DiGraph built
eagerly (`AuditGraph.calls`); it finds recursion.

Call sites are enumerated by `call_sites()`: one per (call path from a root, convolution), with
function attr placeholders resolved per call path. Recursion is cut at the first repeated scope;
callees that cannot reach a convolution are not walked, and at most MAX_CALL_SITES sites are listed.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import compress
from typing import Any, Iterator

import networkx as nx

from .errors import MalformedModelError
from .model import LoadedModel
from .opsets import CALL_ATTRS, CAST_OPS, CONV_OPS, IDENTITY_LIKE, READ_VARIABLE

_WALK_THROUGH = IDENTITY_LIKE | CAST_OPS | READ_VARIABLE
MAX_CALL_SITES = 200_000  # ~4 s of analysis; a real model has far fewer (ResNet50: 53)


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


@dataclass(frozen=True)
class Scope:
    """One graph scope. `function` is None for a top-level graph.

    `ops` holds the op type of every node by position (`index.pos`); `op_of()` reads it without
    touching the NodeDef.
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
class _Unit:
    label: str
    unit_keys: tuple[str, ...]


@dataclass(frozen=True)
class AuditGraph:
    """Scope indexes, the call graph, and (built on first use) the networkx op graph `g`.

    Build with `build_graph(model)`. `calls` is the call graph: a networkx DiGraph over scope keys
    with an edge caller -> callee per called function.
    """

    scopes: dict[str, Scope]
    roots: tuple[str, ...]
    notes: tuple[str, ...]
    calls: nx.DiGraph
    _callees: dict = field(repr=False, compare=False)  # scope key -> call node -> [(callee, attr, raw)]
    _call_refs: dict = field(repr=False, compare=False)  # scope key -> per call node: [(attr, callee, raw)]
    _units: tuple = field(repr=False, compare=False)
    _conv_reach: frozenset = field(repr=False, compare=False)  # scopes that are or call a conv scope
    _nx: list = field(default_factory=lambda: [None], repr=False, compare=False)

    @property
    def g(self) -> nx.MultiDiGraph:
        """The networkx op graph described in the module doc (built once, on first use)."""
        if self._nx[0] is None:
            self._nx[0] = _op_graph(self.scopes, self._units, self._call_refs)
        return self._nx[0]

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

    def callees(self, scope: str, call_node: str) -> list[tuple[str, str, dict]]:
        """(callee scope key, attr name, raw bindings) for a call node."""
        return list(self._callees.get(scope, {}).get(call_node, ()))

    # ---- call sites --------------------------------------------------------------------------
    def call_sites(self) -> Iterator[CallSite]:
        """Every (call path, convolution) pair, roots first, depth first."""
        count = 0
        reach = self._conv_reach
        for root in self.roots:
            if root not in reach:
                continue
            stack: list[tuple[str, tuple[Frame, ...]]] = [(root, ())]
            while stack:
                key, frames = stack.pop()
                scope = self.scopes[key]
                for conv in scope.convs:
                    count += 1
                    if count > MAX_CALL_SITES:
                        return
                    yield CallSite(root, frames, key, conv)
                if not scope.calls:
                    continue
                outer = frames[-1].bindings if frames else {}
                on_path = {root} | {f.callee for f in frames}
                pending = []
                callees = self._callees.get(key, {})
                for call in scope.calls:
                    op = scope.op_of(call)
                    for callee, attr, raw in callees.get(call, ()):
                        if callee in on_path:
                            continue  # recursion: reported in notes by build_graph
                        if callee not in reach:
                            continue  # no convolution below: its call paths hold no call site
                        frame = Frame(key, call, op, attr, callee, resolve_bindings(raw, outer))
                        pending.append((callee, frames + (frame,)))
                stack.extend(reversed(pending))

    def scope_dataflow(self, scope: str) -> nx.MultiDiGraph:
        """Full data-edge graph of one scope (every node, every data input)."""
        s = self.scopes[scope]
        g = nx.MultiDiGraph()
        for name, nd in s.index.items():
            g.add_node(name, op=nd.op)
            for i, inp in enumerate(nd.input):
                ref = _parse_node_input(s, name, inp)
                if ref is not None:
                    src = ref[0] if ref[0] in s.index else "_arg:" + ref[0]
                    g.add_edge(src, name, key=i, src_output=ref[1])
        return g


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


def _parse_node_input(scope: "Scope", node: str, text: str) -> tuple[str, int] | None:
    """`parse_input` for input `text` of node `node` of `scope`; errors name the scope and node."""
    try:
        return parse_input(text, scope.fdef is not None)
    except MalformedModelError as e:
        raise MalformedModelError(f"{_where(scope)}: node {node!r} has a {e}") from None


def parse_ret(scope: "Scope", text: str) -> tuple[str, int] | None:
    """`parse_input` for a return value of function scope `scope`; errors name the function."""
    try:
        return parse_input(text, True)
    except MalformedModelError as e:
        raise MalformedModelError(f"{_where(scope)}: return value has a {e}") from None


def _where(scope: "Scope") -> str:
    return f"function {scope.function!r}" if scope.function else f"graph {scope.unit!r}"


def _index_scope(key, unit, function, nodes, fdef, fnames, signatures=None, arg_shapes=None,
                 owner_layer=None) -> Scope:
    # One read of each node's op and name into plain lists; everything else is derived from them.
    ops = [n.op for n in nodes]
    names = [n.name for n in nodes]
    pos = dict(zip(names, range(len(names))))
    counts = Counter(ops)
    first = dict(zip(reversed(ops), range(len(ops) - 1, -1, -1)))  # op -> first position
    op_counts = {op: (c, names[first[op]]) for op, c in counts.items()}
    convs = []
    calls = []
    wanted = {op for op in counts if op in CONV_OPS or op in CALL_ATTRS or op in fnames}
    if wanted:
        for i in compress(range(len(ops)), map(wanted.__contains__, ops)):
            (convs if ops[i] in CONV_OPS else calls).append(names[i])
    args = {}
    arg_attrs = {}
    rets: tuple[str, ...] = ()
    if fdef is not None:
        for i, a in enumerate(fdef.signature.input_arg):
            args[a.name] = (i, a)
        for i, aa in fdef.arg_attr.items():
            arg_attrs[i] = aa.attr
        rets = tuple(fdef.ret[o.name] for o in fdef.signature.output_arg if o.name in fdef.ret)
    return Scope(key, unit, function, NodeIndex(nodes, pos), fdef, tuple(convs), tuple(calls), args,
                 arg_attrs, rets, signatures or {}, arg_shapes or {}, op_counts, owner_layer, ops)


def _add_op_node(g: nx.MultiDiGraph, scope: Scope, name: str) -> tuple:
    nid = (scope.key, name)
    if nid not in g:
        nd = scope.index.get(name)
        if nd is None and name in scope.args:
            g.add_node(nid, kind="op", op="_Arg", scope=scope.key, name=name, arg_index=scope.args[name][0])
        else:
            g.add_node(nid, kind="op", op=nd.op if nd is not None else "?", scope=scope.key, name=name)
    return nid


def _walk_back(g: nx.MultiDiGraph, scope: Scope, consumer: str, seen: set) -> None:
    """Adds data edges from the inputs of `consumer` back through value-preserving ops."""
    todo = [consumer]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        nd = scope.index.get(name)
        if nd is None:
            continue
        dst = _add_op_node(g, scope, name)
        for i, inp in enumerate(nd.input):
            ref = _parse_node_input(scope, name, inp)
            if ref is None:
                continue
            src_name, out_idx = ref
            if src_name not in scope.index and src_name not in scope.args:
                g.nodes[dst].setdefault("dangling", []).append(inp)
                continue
            src = _add_op_node(g, scope, src_name)
            g.add_edge(src, dst, key=i, kind="data", src_output=out_idx)
            src_nd = scope.index.get(src_name)
            if src_nd is not None and src_nd.op in _WALK_THROUGH:
                todo.append(src_name)


def _op_graph(scopes: dict[str, Scope], units: tuple[_Unit, ...], call_refs: dict) -> nx.MultiDiGraph:
    """The networkx op graph of the module doc: scope nodes, conv/call neighbourhoods, call edges."""
    g = nx.MultiDiGraph()
    for unit in units:
        for key in unit.unit_keys:
            s = scopes[key]
            g.add_node(("scope", key), kind="scope", unit=unit.label, function=s.function)
        for key in unit.unit_keys:
            s = scopes[key]
            seen: set = set()
            for conv in s.convs:
                _walk_back(g, s, conv, seen)
            refs = call_refs.get(key) or [()] * len(s.calls)
            for call, call_edges in zip(s.calls, refs):
                _walk_back(g, s, call, seen)
                for attr, ckey, raw in call_edges:
                    g.add_edge((s.key, call), ("scope", ckey), kind="call", attr=attr, bindings=raw)
            for r in s.rets:
                ref = parse_ret(s, r)
                if ref and ref[0] in s.index:
                    _add_op_node(g, s, ref[0])
                    if s.index[ref[0]].op in _WALK_THROUGH:
                        _walk_back(g, s, ref[0], seen)
    return g


def build_graph(model: LoadedModel) -> AuditGraph:
    """Indexes every scope of `model`, resolves call edges and builds the call graph; the networkx
    op graph (`AuditGraph.g`) is built on first use."""
    scopes: dict[str, Scope] = {}
    roots: list[str] = []
    notes: list[str] = []
    units: list[_Unit] = []
    callees: dict[str, dict] = {}
    call_refs: dict[str, dict] = {}
    calls = nx.DiGraph()
    multi = len(model.units) > 1
    for ui, unit in enumerate(model.units):
        prefix = f"{ui}:" if multi else ""
        gd = unit.graph_def
        functions = {f.signature.name: f for f in gd.library.function}
        fnames = set(functions)
        top_key = prefix + "<graph>"
        scopes[top_key] = _index_scope(top_key, unit.label, None, gd.node, None, fnames,
                                       unit.signatures, unit.arg_shapes, unit.owner_layer)
        for fname, fdef in functions.items():
            key = prefix + fname
            scopes[key] = _index_scope(key, unit.label, fname, fdef.node_def, fdef, fnames,
                                       owner_layer=unit.owner_layer)
        unit_keys = [top_key] + [prefix + f for f in functions]
        called: set[str] = set()
        cg = nx.DiGraph()
        cg.add_nodes_from(unit_keys)
        for key in unit_keys:
            s = scopes[key]
            per_call: dict[str, dict[str, list]] = {}
            refs_of: list[list] = []  # per entry of s.calls: [(attr, callee key, raw bindings)]
            for call in s.calls:
                nd = s.index[call]
                refs_of.append([])
                for attr, callee, raw in _callee_refs(nd, fnames):
                    ckey = prefix + callee
                    if ckey not in scopes:
                        notes.append(f"{s.function or 'graph'}: call node {call!r} names function "
                                     f"{callee!r}, which the library does not define")
                        continue
                    called.add(ckey)
                    cg.add_edge(key, ckey)
                    # networkx's adjacency order: edges grouped by callee, first callee first.
                    per_call.setdefault(call, {}).setdefault(ckey, []).append((attr, raw))
                    refs_of[-1].append((attr, ckey, raw))
            if per_call:
                callees[key] = {c: tuple((ck, a, r) for ck, lst in d.items() for a, r in lst)
                                for c, d in per_call.items()}
                call_refs[key] = refs_of
        roots.append(top_key)
        roots.extend(k for k in unit_keys[1:] if k not in called)
        units.append(_Unit(unit.label, tuple(unit_keys)))
        calls.update(cg)
        if not nx.is_directed_acyclic_graph(cg):
            # Component order follows the op graph's edge order, as the report always did.
            notes.extend(_recursion_notes(_op_graph(scopes, (units[-1],), call_refs), unit_keys))
    return AuditGraph(scopes, tuple(roots), tuple(notes), calls, callees, call_refs, tuple(units),
                      _conv_reach(scopes, calls))


def _conv_reach(scopes: dict[str, Scope], calls: nx.DiGraph) -> frozenset:
    """Scope keys holding a convolution or calling, directly or transitively, one that does.

    One backward search over the call graph from the scopes with convolutions (linear in its
    size; cycles are visited once). `call_sites` never walks into a callee outside this set, so
    call paths that cannot reach a convolution cost nothing, however many there are (n functions
    each calling the next twice have 2**n of them)."""
    reach = {k for k, s in scopes.items() if s.convs}
    todo = list(reach)
    while todo:
        for caller in calls.predecessors(todo.pop()):
            if caller not in reach:
                reach.add(caller)
                todo.append(caller)
    return frozenset(reach)


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


def _recursion_notes(g: nx.MultiDiGraph, unit_keys: list[str]) -> list[str]:
    cg = nx.DiGraph()
    for key in unit_keys:
        cg.add_node(key)
    for u, v, data in g.edges(data=True):
        if data.get("kind") == "call" and u[0] in cg:
            cg.add_edge(u[0], v[1])
    notes = []
    for comp in nx.strongly_connected_components(cg):
        if len(comp) > 1 or any(cg.has_edge(k, k) for k in comp):
            notes.append("recursive functions (call cycle cut at the first repeat on each path): "
                         + ", ".join(sorted(comp)))
    return notes
