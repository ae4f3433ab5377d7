"""Static reading of Keras configurations: .keras archives, dtype policies, conv layers.

Nothing here imports Keras or builds a model. A `.keras` file is a zip archive whose
`config.json` holds the model config; each layer's `dtype` entry is its dtype policy, serialized
as a plain string ("mixed_float16"), as {"class_name": "Policy", "config": {"name": ...}} (Keras 2)
or as {"module": "keras", "class_name": "DTypePolicy", "config": {"name": ...}} (Keras 3).

`static_graph_from_config` walks the layers and reconstructs each convolution, Dense and
this package's layer with the builders of `keras_build` (no TensorFlow import: protos from
`audit/protos.py`), so the same analysis applies. Those graphs are labelled as reconstructions in
every report.
"""

from __future__ import annotations

import json
import os
import zipfile

from . import keras_build, protos
from .errors import AuditInputError, MalformedModelError
from .keras_build import policy_dtypes, policy_name, scope_name
from .limits import open_regular, read_bounded
from .model import KerasLayer

__all__ = [
    "layers_from_config",
    "policy_dtypes",
    "policy_name",
    "read_keras_archive",
    "scope_name",
    "static_graph_from_config",
]


class _TooManyObjects(Exception):
    """config.json holds more JSON objects than read_keras_archive's bound."""


def read_keras_archive(
    path: str, max_bytes: int = 256 * 2**20, max_objects: int = 1_000_000
) -> dict:
    """The parsed config.json of a .keras archive.

    The archive must be a regular file of at most `max_bytes`, and config.json is read only when
    its declared (uncompressed) size is at most `max_bytes`, in bounded chunks (a member whose
    data runs past its declared size fails zipfile's own check); its JSON may hold at most
    `max_objects` objects (a 242 KB archive of 83 million `{}` would fill 15 GB).
    Raises:
      AuditInputError: one line naming `path` when unreadable, not a zip, without config.json,
        over the size or object limit, or not a Keras model config.
    """
    try:
        with open_regular(path, max_bytes) as f, zipfile.ZipFile(f) as z:
            try:
                info = z.getinfo("config.json")
            except KeyError:
                raise AuditInputError(
                    f"{path}: zip archive without config.json is not a .keras file"
                ) from None
            if info.file_size > max_bytes:
                raise AuditInputError(
                    f"{path}: config.json declares {info.file_size} bytes uncompressed, over the "
                    f"limit of {max_bytes} bytes per input file (raise it with --max-file-size)"
                )
            with z.open(info) as member:
                raw = read_bounded(member, max_bytes, f"{path}: config.json")
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError) as e:
        raise AuditInputError(f"{path}: not a valid .keras (zip) archive: {e}") from None
    except (OSError, RuntimeError) as e:  # RuntimeError: an encrypted member
        raise AuditInputError(f"{path}: cannot read: {e}") from None
    count = 0

    def bounded(obj):
        nonlocal count
        count += 1
        if count > max_objects:
            raise _TooManyObjects
        return obj

    try:
        config = json.loads(raw, object_hook=bounded)
    except _TooManyObjects:
        raise AuditInputError(
            f"{path}: config.json holds more than {max_objects:,} JSON objects, over the node "
            "limit (raise it with --max-nodes)"
        ) from None
    except ValueError as e:
        raise AuditInputError(f"{path}: config.json is not valid JSON: {e}") from None
    except RecursionError:
        raise AuditInputError(f"{path}: config.json is nested too deeply to read") from None
    if not isinstance(config, dict) or "config" not in config:
        raise AuditInputError(f"{path}: config.json does not describe a Keras model")
    if not isinstance(config["config"], dict):
        raise AuditInputError(
            f'{path}: config.json: the model\'s "config" must be an object, '
            f"got {type(config['config']).__name__}"
        )
    return config


def _children(config: dict) -> list[dict]:
    """The layer config dicts directly inside `config`: its "layers", then a wrapper's "layer"."""
    cfg = config.get("config")
    if not isinstance(cfg, dict):
        return []
    layers = cfg.get("layers")
    out = [layer for layer in layers if isinstance(layer, dict)] if isinstance(layers, list) else []
    inner = cfg.get("layer")
    if isinstance(inner, dict):  # wrappers (TimeDistributed, ...)
        out.append(inner)
    return out


def _iter_layers(config: dict):
    """Yields every layer config dict, depth first (nested models included).

    Iterative (an explicit stack), so nesting depth is bounded by the JSON parser alone."""
    stack = [iter(_children(config))]
    while stack:
        layer = next(stack[-1], None)
        if layer is None:
            stack.pop()
            continue
        yield layer
        stack.append(iter(_children(layer)))


def layers_from_config(config: dict) -> list[KerasLayer]:
    out = []
    top = config.get("config")
    for layer in _iter_layers(config) if isinstance(top, dict) and "layers" in top else [config]:
        cfg = layer.get("config", {})
        if not isinstance(cfg, dict):
            continue
        p = policy_name(cfg.get("dtype"))
        var, comp = policy_dtypes(p)
        out.append(
            KerasLayer(
                str(cfg.get("name", layer.get("name", "?"))),
                str(layer.get("class_name", "?")),
                p,
                var,
                comp,
            )
        )
    return out


# Layer config fields that hold file paths (TextVectorization/StringLookup vocabularies, ...):
# reported as external references, never opened.
_PATH_KEYS = ("filepath", "vocabulary", "vocabulary_file", "path", "file_path")


def static_graph_from_config(
    config: dict, base_dir: str = ".", max_nodes: int = 1_000_000, max_layers: int = 20_000
):
    """A GraphDef reconstructing each convolution layer of a Keras config (see module doc).

    Stops once the graph holds `max_nodes` nodes or `max_layers` conv layers have been
    reconstructed (each gives at least one call site: `Limits.max_sites`), recording that in
    `notes.partial`."""
    gd = protos.GraphDef()
    notes = keras_build.StaticNotes()
    built = 0
    scopes: set[str] = set()  # node scopes given to layers so far
    suffixes: dict[str, int] = {}  # next "_k" suffix to try per duplicated scope
    for position, layer in enumerate(_iter_layers(config)):
        if len(gd.node) >= max_nodes or built >= max_layers:
            flag, limit, what = (
                ("--max-nodes", max_nodes, "nodes")
                if len(gd.node) >= max_nodes
                else ("--max-sites", max_layers, "layers with call sites")
            )
            notes.partial.append(
                f"layers: the Keras config is reconstructed only up to {limit} {what} "
                f"({flag}); layers from #{position} on are left out"
            )
            break
        n_before = len(gd.node)
        cls = layer.get("class_name")
        cfg = layer.get("config", {})
        conv_like = isinstance(cls, str) and (cls in keras_build.CONV_LAYERS or cls == "TFSMLayer")
        if conv_like and not isinstance(cfg, dict):
            # A conv layer whose config cannot be read would silently drop out of the audit.
            label = layer.get("name")
            label = label if isinstance(label, str) else f"#{position} (unnamed)"
            raise MalformedModelError(
                f"config.json: layer {label!r} ({cls}): its config must be "
                f"an object, got {type(cfg).__name__} {cfg!r:.60}"
            )
        if not isinstance(cfg, dict) or not isinstance(cls, str):
            continue
        name = cfg.get("name", "?")
        if not isinstance(name, str):
            raise MalformedModelError(
                f"config.json: a {cls} layer's config.name must be a string, "
                f"got {type(name).__name__} {name!r:.60}"
            )
        if cls == "TFSMLayer" and isinstance(cfg.get("filepath"), str):
            fp = cfg["filepath"]
            fp = fp if os.path.isabs(fp) else os.path.join(base_dir, fp)
            notes.saved_models.append((fp, name))
            notes.messages.append(
                f"layer {name!r} (TFSMLayer, policy {policy_name(cfg.get('dtype'))}) "
                f"wraps the SavedModel {fp}"
            )
            continue
        for key in _PATH_KEYS:
            if isinstance(cfg.get(key), str) and cfg[key]:
                notes.messages.append(
                    f"layer {name!r} ({cls}) names the path {cfg[key]!r} in {key!r}: an external "
                    "reference, not read"
                )
        # Nested models may reuse a layer name: the nodes of each layer get a scope of their own
        # ("c1", then "c1_1", ...), or the second layer's nodes would replace the first's.
        scope = keras_build.scope_name(name)
        if scope in scopes:
            # The next suffix to try per scope: a config of a million layers of one name would
            # otherwise probe 1, 2, ... for each (quadratic: 20,000 of them took 27 s).
            k = suffixes.get(scope, 1)
            while f"{scope}_{k}" in scopes:
                k += 1
            suffixes[scope] = k + 1
            name, scope = f"{name}_{k}", f"{scope}_{k}"
        scopes.add(scope)
        ours = keras_build.our_layer_name(layer)
        if ours is not None:  # tf_fp16ops' other registered layers (keras_build.py)
            keras_build.add_our_layer(
                gd,
                name,
                ours,
                cfg,
                notes,
                layer.get("build_config"),
                keras_build.our_accumulation(layer),
            )
            continue
        if cls == "Dense":
            keras_build.add_dense_layer(gd, name, cfg, notes, layer.get("build_config"))
            continue
        if cls in ("EinsumDense", "MultiHeadAttention"):
            notes.messages.append(
                f"layer {name!r} ({cls}): its einsum products are not reconstructed from the "
                "config; audit the exported SavedModel or use --build-keras to see them"
            )
            continue
        if cls not in keras_build.CONV_LAYERS:
            continue
        keras_build.add_conv_layer(
            gd,
            name,
            cls,
            cfg,
            notes,
            layer.get("build_config"),
            keras_build.our_accumulation(layer),
        )
        built += len(gd.node) > n_before
    return gd, notes
