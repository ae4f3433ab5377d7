"""Loaders: files and Python objects -> `LoadedModel`. Reads protos; never executes a model.

Supported:
  * SavedModel directory (saved_model.pb or saved_model.pbtxt): every MetaGraph and signature.
  * GraphDef file: binary .pb or text .pbtxt (frozen graphs included).
  * Keras .keras archive: config.json read statically (see keras_config.py).
  * Python: tf.function (with an input_signature or already traced), ConcreteFunction,
    tf.Graph, GraphDef, keras.Model (traced on its input specs; policies from its layers).
Only regular files inside the model are read, each within `Limits.max_file_bytes` (see
`limits.py`); paths named inside a model (a TFSMLayer's `filepath`) are reported, not read, unless
they lie in `Limits.external_dirs`.
Errors: `AuditInputError` naming the path and the problem.
"""

from __future__ import annotations

import math
import os
import stat
import sys
import zipfile
from typing import Any

from google.protobuf import message as pb_message
from google.protobuf import text_format

from . import protos
from .errors import AuditInputError, MalformedModelError, as_text
from .keras_config import layers_from_config, read_keras_archive, static_graph_from_config
from .limits import DEFAULT, Limits, open_regular, os_reason, read_bounded, read_regular
from .model import GraphUnit, KerasLayer, LoadedModel

_os_reason = os_reason


def load_path(path: str, limits: Limits = DEFAULT) -> LoadedModel:
    """Loads a SavedModel directory, a GraphDef .pb/.pbtxt or a .keras archive from `path`.

    Raises:
      AuditInputError: one line naming the path: missing, not a regular file (a device, FIFO or
        socket), a SavedModel file that is a symlink leaving the directory, a file over
        `limits.max_file_bytes`, or an unreadable or malformed model.
    """
    if "\0" in path:
        raise AuditInputError(f"{ascii(path)[1:-1]}: a path cannot hold a NUL character")
    try:
        st = os.stat(path)
    except OSError as e:  # missing, or a parent directory without search permission, ...
        raise AuditInputError(f"{path}: {_os_reason(e)}") from None
    if stat.S_ISDIR(st.st_mode):
        return _load_saved_model_dir(path, limits)
    name = os.path.basename(path)
    if name in ("saved_model.pb", "saved_model.pbtxt"):
        return _load_saved_model_dir(os.path.dirname(path) or ".", limits)
    with open_regular(path, limits.max_file_bytes) as f:
        is_zip = path.endswith(".keras") or zipfile.is_zipfile(f)
        if not is_zip:
            f.seek(0)
            try:
                data = read_bounded(f, limits.max_file_bytes, path)
            except OSError as e:
                raise AuditInputError(f"{path}: cannot read: {_os_reason(e)}") from None
    if is_zip:
        return _load_keras(path, limits)
    if data.startswith(_HDF5_SIGNATURE):
        raise AuditInputError(
            f"{path}: an HDF5 file (a Keras 2 .h5 model or weights), not a SavedModel, GraphDef or "
            ".keras archive; save the model as .keras or as a SavedModel to audit it"
        )
    return _load_graph_def_file(path, data)


_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"  # the HDF5 format's superblock signature


def _exists(path: str) -> bool:
    """Whether `path` exists; an `AuditInputError` when that cannot be checked (permission
    denied)."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return False
    except NotADirectoryError:
        return False
    except OSError as e:
        raise AuditInputError(f"{path}: {_os_reason(e)}") from None
    return True


def _parse_binary(msg, data: bytes, path: str, what: str):
    try:
        msg.ParseFromString(data)
    except (pb_message.DecodeError, RuntimeError, ValueError) as e:
        raise AuditInputError(
            f"{path}: not a valid binary {what} (truncated or malformed protobuf: {e})"
        ) from None
    return msg


def _parse_text(msg, data: bytes, path: str, what: str):
    try:
        text_format.Parse(data.decode("utf-8"), msg, allow_unknown_extension=True)
    except (text_format.ParseError, UnicodeDecodeError) as e:
        raise AuditInputError(f"{path}: not a valid text {what}: {e}") from None
    except RecursionError:  # the pure-Python text parser recurses once per nested message
        raise AuditInputError(
            f"{path}: not a valid text {what}: messages nested too deeply "
            f"(over Python's recursion limit of {sys.getrecursionlimit()})"
        ) from None
    return msg


def _load_saved_model_dir(path: str, limits: Limits = DEFAULT) -> LoadedModel:
    pb = os.path.join(path, "saved_model.pb")
    pbtxt = os.path.join(path, "saved_model.pbtxt")
    sm = protos.SavedModel()
    limit = limits.max_file_bytes
    if _exists(pb):
        _parse_binary(sm, read_regular(pb, limit, inside=path), pb, "SavedModel")
    elif _exists(pbtxt):
        _parse_text(sm, read_regular(pbtxt, limit, inside=path), pbtxt, "SavedModel")
    else:
        raise AuditInputError(
            f"{path}: a directory without saved_model.pb or saved_model.pbtxt is not a SavedModel"
        )
    if not sm.meta_graphs:
        raise AuditInputError(
            f"{path}: SavedModel has no MetaGraph (truncated or not a SavedModel)"
        )
    units = []
    for i, mg in enumerate(sm.meta_graphs):
        tags = ",".join(mg.meta_info_def.tags) or "-"
        sigs: dict[str, set[str]] = {}  # one name per signature, however many outputs it has
        shapes: dict[str, tuple[int, ...]] = {}
        for sname, sdef in mg.signature_def.items():
            if sname == "__saved_model_init_op":  # the restore-time initializer, not a signature
                continue
            for t in sdef.outputs.values():
                if t.name:
                    sigs.setdefault(t.name.split(":")[0], set()).add(sname)
            for t in sdef.inputs.values():
                if t.name and not t.tensor_shape.unknown_rank:
                    shapes[t.name.split(":")[0]] = tuple(d.size for d in t.tensor_shape.dim)
        label = (
            f"meta_graph[{i}] tags={tags}"
            if len(sm.meta_graphs) > 1
            else f"saved_model tags={tags}"
        )
        units.append(
            GraphUnit(label, mg.graph_def, {k: tuple(sorted(v)) for k, v in sigs.items()}, shapes)
        )
    layers, notes = _keras_metadata(path, limits)
    return LoadedModel(path, "saved_model", tuple(units), layers, None, notes)


def _keras_metadata(
    path: str, limits: Limits = DEFAULT
) -> tuple[tuple[KerasLayer, ...], tuple[str, ...]]:
    """Layers and policies from a Keras-2 SavedModel's keras_metadata.pb, when present.

    Unreadable metadata does not stop the audit (the graph holds the convolutions): it is skipped
    with a note saying why."""
    meta = os.path.join(path, "keras_metadata.pb")
    if not _exists(meta):
        return (), ()
    import json

    try:
        data = read_regular(meta, limits.max_file_bytes, inside=path)
        sm = _parse_binary(protos.SavedMetadata(), data, meta, "Keras metadata")
    except AuditInputError as e:
        return (), (f"keras_metadata.pb not read ({e}); Keras layer policies unknown",)
    layers = []
    for node in sm.nodes:
        try:
            md = json.loads(node.metadata)
        except (ValueError, RecursionError):
            continue
        if isinstance(md, dict) and "name" in md:
            layers.extend(
                layers_from_config({"class_name": md.get("class_name", "?"), "config": md})
            )
    return tuple(layers), ("layer policies read from keras_metadata.pb",)


def _load_graph_def_file(path: str, data: bytes) -> LoadedModel:
    gd = protos.GraphDef()
    if path.endswith(".pbtxt") or path.endswith(".txt"):
        _parse_text(gd, data, path, "GraphDef")
    else:
        _parse_binary(gd, data, path, "GraphDef")
        if not data:
            raise AuditInputError(f"{path}: empty file is not a GraphDef")
    if not gd.node and not gd.library.function:
        raise AuditInputError(
            f"{path}: parsed as a GraphDef but holds no nodes and no functions (wrong format?)"
        )
    for n in gd.node:
        if not n.op:
            raise AuditInputError(f"{path}: node {n.name!r} has no op type: not a GraphDef")
        break
    return LoadedModel(path, "graph_def", (GraphUnit("graph", gd),))


def _load_keras(path: str, limits: Limits = DEFAULT) -> LoadedModel:
    config = read_keras_archive(path, limits.max_file_bytes, limits.max_nodes)
    try:
        layers = tuple(layers_from_config(config))
        gd, notes = static_graph_from_config(
            config,
            base_dir=os.path.dirname(os.path.abspath(path)),
            max_nodes=limits.max_nodes,
            max_layers=limits.max_sites,
        )
    except MalformedModelError as e:
        raise e.at(path) from None
    except (TypeError, ValueError, AttributeError, KeyError, RecursionError) as e:
        # Field checks above name the usual culprits; anything else malformed lands here.
        raise AuditInputError(
            f"{path}: config.json is malformed ({type(e).__name__}: {e})"
        ) from None
    units = [GraphUnit("keras config (static reconstruction)", gd)]
    for sub_path, layer in notes.saved_models:
        if not limits.allows_external(sub_path):
            notes.messages.append(
                f"layer {layer!r} (TFSMLayer) is an external reference to {sub_path}: not read "
                "(the audit reads only the model file; --allow-external-dir DIR lets it read "
                "SavedModels under DIR)"
            )
            continue
        try:
            sub = _load_saved_model_dir(sub_path, limits)
        except AuditInputError as e:
            notes.messages.append(f"layer {layer!r} wraps {sub_path}, which could not be read: {e}")
            continue
        for u in sub.units:
            units.append(
                GraphUnit(
                    f"layer {layer} -> {as_text(sub_path)} {u.label}",
                    u.graph_def,
                    u.signatures,
                    u.arg_shapes,
                    owner_layer=layer,
                )
            )
    name = config["config"].get("name")
    return LoadedModel(
        path,
        "keras",
        tuple(units),
        layers,
        name if isinstance(name, str) else None,
        tuple(notes.messages),
        tuple(notes.partial),
    )


class _WeightBudget:
    """Counts the elements of the weights Keras creates while loading a model (every weight goes
    through `keras.layers.Layer.add_weight`, wrapped here for the duration of the load) and
    refuses one that takes the total past `limit` before it is allocated."""

    def __init__(self, limit: int):
        self.limit = limit
        self.total = 0
        self.refused: str | None = None

    def __enter__(self):
        import keras

        self.cls = keras.layers.Layer
        self.original = original = self.cls.add_weight
        budget = self

        def add_weight(layer, *args, shape=None, **kwargs):
            dims = args[0] if args else shape
            try:
                n = math.prod(int(d) for d in (dims or ()))
            except (TypeError, ValueError):
                n = 0  # not a list of ints: Keras itself rejects it
            if budget.total + n > budget.limit:
                budget.refused = (
                    f"layer {layer.name!r} ({type(layer).__name__}) would create a weight of "
                    f"shape {list(dims)} ({n:,} elements): the model's weights would pass the "
                    f"limit of {budget.limit:,} elements (--max-weights)"
                )
                raise AuditInputError(budget.refused)
            budget.total += n
            return original(layer, *args, shape=shape, **kwargs)

        self.cls.add_weight = add_weight
        return self

    def __exit__(self, *exc):
        self.cls.add_weight = self.original
        return False


def load_keras_model(path: str, max_weights: int = DEFAULT.max_weights) -> Any:
    """`keras.saving.load_model(path, compile=False, safe_mode=True)` with this package's layers
    registered (`import tf_fp16ops.layers`, which loads the op library), creating at most
    `max_weights` weight elements in all (`Limits.max_weights`): Keras allocates each weight as
    the layer's config sizes it, so a small file can ask for gigabytes.

    Raises AuditInputError (one line naming `path`) when Keras cannot build the model, or when a
    layer's weight would take the total past `max_weights` (naming the layer and the limit; checked
    before the weight is allocated)."""
    import keras

    import tf_fp16ops.layers  # noqa: F401 - registers "tf_fp16ops>Conv2D", ... with Keras

    budget = _WeightBudget(max_weights)
    try:
        with budget:
            return keras.saving.load_model(path, compile=False, safe_mode=True)
    except Exception as e:  # noqa: BLE001 - any load failure is an input problem here
        if budget.refused is not None:  # however Keras re-raised it
            raise AuditInputError(f"{path}: {budget.refused}") from None
        # Keras' message spans many lines (the whole layer config); its first line names the cause.
        first = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), "")
        raise AuditInputError(
            f"{path}: keras could not build the model in safe mode ({type(e).__name__}: {first})"
        ) from None


def build_keras(path: str, limits: Limits = DEFAULT) -> LoadedModel:
    """Opt-in: loads a .keras file with `keras.saving.load_model(safe_mode=True)` and traces it.

    This runs Keras' own layer code (safe mode refuses Lambda layers and arbitrary code), with
    the weights bounded by `limits.max_weights` (see `load_keras_model`).
    """
    loaded = load_object(load_keras_model(path, limits.max_weights))
    return LoadedModel(
        path,
        "keras-built",
        loaded.units,
        loaded.keras_layers,
        loaded.keras_model_name,
        loaded.notes,
    )


def load_object(obj: Any) -> LoadedModel:
    """Loads a tf.function, ConcreteFunction, tf.Graph, GraphDef or keras.Model (traced, not run).

    A GraphDef message (TensorFlow's or `protos.GraphDef`) is read as it is; the other objects
    are TensorFlow's, so TensorFlow is imported for them."""
    desc = f"{type(obj).__module__}.{type(obj).__qualname__}"
    if protos.is_graph_def(obj):
        return LoadedModel(desc, "python", (GraphUnit("graph", obj),))
    import tensorflow as tf

    layers: tuple[KerasLayer, ...] = ()
    model_name = None
    if isinstance(obj, tf.Graph):
        gd = obj.as_graph_def(add_shapes=True)
    elif _is_keras_model(obj):
        layers = tuple(_layers_of_model(obj))
        model_name = obj.name
        desc = f"keras.Model {obj.name!r}"
        specs = _keras_input_specs(obj, desc)
        fn = tf.function(lambda *a: obj(list(a) if len(a) > 1 else a[0], training=False))
        try:
            gd = fn.get_concrete_function(*specs).graph.as_graph_def(add_shapes=True)
        except (ValueError, TypeError) as e:
            msg = str(e).strip().splitlines()[-1].strip() if str(e).strip() else type(e).__name__
            raise AuditInputError(f"{desc}: tracing the model on {specs} failed: {msg}") from None
    elif hasattr(obj, "graph") and hasattr(obj, "structured_input_signature"):  # ConcreteFunction
        name = getattr(obj, "name", "?")
        name = name.decode(errors="replace") if isinstance(name, bytes) else str(name)
        # One header line whatever the name holds (newlines, escapes): non-printables escaped.
        desc = "ConcreteFunction " + (name if name.isprintable() else ascii(name)[1:-1])
        gd = obj.graph.as_graph_def(add_shapes=True)
    elif hasattr(obj, "get_concrete_function"):  # tf.function
        desc = f"tf.function {getattr(obj, '__name__', '?')!r}"
        concrete = _concrete_functions(obj)
        if not concrete:
            raise AuditInputError(
                f"{desc}: tf.function has no input_signature and was never traced; "
                "pass a ConcreteFunction (fn.get_concrete_function(...))"
            )
        units = tuple(
            GraphUnit(f"trace[{i}]", c.graph.as_graph_def(add_shapes=True))
            for i, c in enumerate(concrete)
        )
        return LoadedModel(desc, "python", units)
    else:
        raise AuditInputError(
            f"cannot audit an object of type {desc}: expected a path, tf.function, "
            "ConcreteFunction, tf.Graph, GraphDef or keras.Model"
        )
    return LoadedModel(desc, "python", (GraphUnit("graph", gd),), layers, model_name)


def _keras_input_specs(model, desc: str) -> list:
    """TensorSpecs to trace `model` on: its symbolic inputs (Functional, Sequential with an Input),
    else the input shape recorded when a subclassed model was built or first called (batch
    dimension left unknown). Raises AuditInputError for a model that was never built."""
    import tensorflow as tf

    try:
        inputs = model.inputs
    except AttributeError:  # subclassed models have no symbolic inputs
        inputs = None
    if inputs:
        return [tf.TensorSpec(t.shape, t.dtype) for t in inputs]
    shapes = getattr(model, "_build_shapes_dict", None)
    if not getattr(model, "built", False) or not shapes:
        raise AuditInputError(
            f"{desc}: the model is not built, so its input shapes are unknown; build it "
            "(model.build(input_shape)) or call it once on data before auditing it"
        )
    shape = shapes.get("input_shape") if len(shapes) == 1 else None
    if not isinstance(shape, (tuple, list)) or not all(
        d is None or isinstance(d, int) for d in shape
    ):
        raise AuditInputError(
            f"{desc}: cannot tell the model's input specs from its build shapes {shapes!r}; "
            "audit a tf.function with an input_signature that calls it instead"
        )
    dtype = (
        getattr(model, "input_dtype", None) or getattr(model, "compute_dtype", None) or "float32"
    )
    return [tf.TensorSpec((None,) + tuple(shape[1:]) if shape else (), dtype)]


def _concrete_functions(fn) -> list:
    try:
        return [fn.get_concrete_function()]
    except (TypeError, ValueError):
        pass
    lister = getattr(fn, "_list_all_concrete_functions_for_serialization", None)
    return list(lister()) if lister else []


def _is_keras_model(obj) -> bool:
    try:
        import keras
    except ImportError:
        return False
    return isinstance(obj, keras.Model)


def _layers_of_model(model) -> list[KerasLayer]:
    from .keras_config import policy_dtypes

    out = []
    for layer in model._flatten_layers(include_self=False, recursive=True):
        policy = getattr(getattr(layer, "dtype_policy", None), "name", None)
        var, comp = policy_dtypes(policy)
        out.append(KerasLayer(layer.name, type(layer).__name__, policy, var, comp))
    return out
