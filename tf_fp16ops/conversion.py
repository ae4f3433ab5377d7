"""Switches the Conv2D layers of a Keras model to `tf_fp16ops.layers.Conv2D`.

`convert(model, accumulation, layers)` rebuilds a Sequential or functional model (and every
Sequential/functional model nested in it) with `keras.models.clone_model`: each selected
`keras.layers.Conv2D` becomes a `tf_fp16ops.layers.Conv2D` built from the same config plus
`accumulation`, every other layer a copy from its config, and then every new layer gets the
original layer's weights (kernel, bias, BatchNormalization statistics, ...). The original
model is not modified and shares no variables with the result.

Convolutions the op does not implement (DepthwiseConv2D, Conv2DTranspose, SeparableConv2D,
Conv1D, Conv3D, ...) stay as they are and are listed in the report as not converted, as are
Conv2D layers left out by `layers` and Conv2D layers inside custom layers that cannot be
rebuilt from outside.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Iterable, Union

import keras

from tf_fp16ops.layers import Conv2D as Fp16Conv2DLayer
from tf_fp16ops.layers import canonical_accumulation

_LOG = logging.getLogger(__name__)

LayerSelection = Union[None, str, Iterable[str], Callable[[keras.layers.Layer], bool]]


@dataclass(frozen=True)
class NotConverted:
    """A convolution layer left unchanged, with the reason."""
    name: str
    class_name: str
    reason: str


@dataclass(frozen=True)
class ConversionReport:
    """What `convert` did: `converted` layer names in model order; `not_converted` convolutions."""
    accumulation: str
    converted: tuple[str, ...]
    not_converted: tuple[NotConverted, ...]

    def summary(self) -> str:
        lines = [f"{len(self.converted)} Conv2D layer(s) converted to tf_fp16ops.layers.Conv2D "
                 f"(accumulation={self.accumulation}); {len(self.not_converted)} convolution layer(s) "
                 f"not converted"]
        lines += [f"  not converted: {n.name} ({n.class_name}): {n.reason}" for n in self.not_converted]
        return "\n".join(lines)


@dataclass(frozen=True)
class Conversion:
    """The converted model and its report."""
    model: keras.Model
    report: ConversionReport


def _is_convertible(layer) -> bool:
    # Exactly keras.layers.Conv2D (or our subclass, to change its accumulation). Other subclasses
    # of Conv2D may override call() and would lose that behaviour.
    return type(layer) is keras.layers.Conv2D or type(layer) is Fp16Conv2DLayer


def _is_convolution(layer) -> bool:
    from keras.src.layers.convolutional.base_conv import BaseConv
    from keras.src.layers.convolutional.base_conv_transpose import BaseConvTranspose
    from keras.src.layers.convolutional.base_depthwise_conv import BaseDepthwiseConv
    from keras.src.layers.convolutional.base_separable_conv import BaseSeparableConv
    return isinstance(layer, (BaseConv, BaseConvTranspose, BaseDepthwiseConv, BaseSeparableConv))


def _is_rebuilt_container(layer) -> bool:
    """Models that clone_model(recursive=True) rebuilds layer by layer."""
    from keras.src.models.functional import Functional
    return isinstance(layer, (keras.Sequential, Functional))


def _all_layers(model) -> list:
    return list(model._flatten_layers(include_self=False, recursive=True))


def _selector(layers: LayerSelection, model) -> Callable[[keras.layers.Layer], bool]:
    if layers is None:
        return lambda layer: True
    if callable(layers):
        return layers
    names = {layers} if isinstance(layers, str) else set(layers)
    if not all(isinstance(n, str) for n in names):
        raise ValueError(f"layers must be None, a layer name, a list of layer names or a predicate "
                         f"layer -> bool, got {layers!r}")
    by_name = {layer.name: layer for layer in _all_layers(model)}
    unknown = sorted(names - by_name.keys())
    if unknown:
        raise ValueError(f"layers names {unknown} that are not in model '{model.name}'")
    wrong_kind = sorted(n for n in names if not _is_convertible(by_name[n]))
    if wrong_kind:
        kinds = ", ".join(f"'{n}' is a {type(by_name[n]).__name__}" for n in wrong_kind)
        raise ValueError(f"layers names layers that are not keras.layers.Conv2D ({kinds}); only "
                         f"Conv2D layers can be converted")
    return lambda layer: layer.name in names


def convert_with_report(model: keras.Model, accumulation="float16", layers: LayerSelection = None) -> Conversion:
    """As `convert`, returning `Conversion(model, report)`."""
    accumulation = canonical_accumulation(accumulation)
    if not isinstance(model, keras.Model):
        raise TypeError(f"model must be a keras.Model (Sequential or functional), got {type(model).__name__}")
    if not _is_rebuilt_container(model):
        raise ValueError(f"model '{model.name}' is a subclassed {type(model).__name__}; convert rebuilds "
                         f"Sequential and functional models only (build it from tf_fp16ops.layers.Conv2D "
                         f"instead)")
    if not model.layers:
        raise ValueError(f"model '{model.name}' has no layers; there is nothing to convert")
    selected = _selector(layers, model)
    pairs: list[tuple] = []
    converted: list[str] = []
    skipped: list[NotConverted] = []

    def clone(layer):
        if _is_convertible(layer) and selected(layer):
            new = Fp16Conv2DLayer.from_config({**layer.get_config(), "accumulation": accumulation})
            converted.append(layer.name)
        else:
            new = layer.__class__.from_config(layer.get_config())
            if _is_convolution(layer):
                reason = ("not selected by `layers`" if _is_convertible(layer) else
                          "subclass of Conv2D with its own behaviour" if isinstance(layer, keras.layers.Conv2D)
                          else "no Fp16 op for this convolution type; left unchanged")
                skipped.append(NotConverted(layer.name, type(layer).__name__, reason))
            for inner in layer._flatten_layers(include_self=False, recursive=True):
                if _is_convolution(inner):
                    skipped.append(NotConverted(
                        inner.name, type(inner).__name__,
                        f"inside custom layer '{layer.name}' ({type(layer).__name__}), which convert copies "
                        f"from its config without looking inside"))
        pairs.append((layer, new))
        return new

    new_model = keras.models.clone_model(model, clone_function=clone, recursive=True)
    for old, new in pairs:
        weights = old.get_weights()
        if weights:
            if not new.built:
                raise ValueError(f"convert could not build the copy of layer '{old.name}' to give it the "
                                 f"original weights; build the model (call it once) before converting")
            new.set_weights(weights)
    report = ConversionReport(accumulation, tuple(converted), tuple(skipped))
    _LOG.info("%s", report.summary())
    return Conversion(new_model, report)


def convert(model: keras.Model, accumulation="float16", layers: LayerSelection = None) -> keras.Model:
    """Returns a copy of `model` whose keras.layers.Conv2D layers run the Fp16Conv2D op.

    Args:
      model: a built Sequential or functional keras.Model; nested Sequential/functional models
        are converted too.
      accumulation: 'float16' (true fp16 accumulation; convolutions of a float32 model then run
        on float16-rounded inputs and weights, see `tf_fp16ops.layers`) or 'float32'.
      layers: None (all Conv2D layers), a layer name or list of names (each must name a Conv2D
        layer of the model), or a predicate `layer -> bool` called on each Conv2D layer.

    Returns:
      The new keras.Model, same structure, layer names and weights. `convert_with_report` returns
      the report too (converted names, convolutions not converted and why); it is also logged at
      INFO level on the "tf_fp16ops.conversion" logger. A model without Conv2D layers gives a
      plain copy with 0 converted.

    Raises:
      ValueError: bad `accumulation`; a subclassed model; `layers` naming layers that are not in
        the model or are not Conv2D.
      TypeError: `model` is not a keras.Model.
    """
    return convert_with_report(model, accumulation, layers).model
