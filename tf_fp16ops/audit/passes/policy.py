"""Keras policy pass: the owning layer of a conv, found by name scope along its call path."""

from __future__ import annotations

import re

from ..model import KerasLayer

_SUFFIX = re.compile(r"_\d+$")


def owning_layer(
    names: list[str], layers: dict[str, KerasLayer], model_name: str | None
) -> KerasLayer | None:
    """The first layer named by a scope component, outermost call first (then the conv node).

    Keras' TF backend names ops "model/layer/op" and adds "_N" suffixes on retracing; a component
    matches a layer exactly or after dropping one "_N" suffix. The model's own name is skipped.
    """
    if not layers:
        return None
    for full in names:
        for comp in full.split("/"):
            for cand in (comp, _SUFFIX.sub("", comp)):
                if cand in layers and cand != model_name:
                    return layers[cand]
    return None
