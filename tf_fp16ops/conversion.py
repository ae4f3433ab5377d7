"""Switches the conv-like and Dense layers of a Keras model to their `tf_fp16ops.layers` twins.

`convert(model, accumulation, layers)` rebuilds a Sequential or functional model (and every
Sequential/functional model nested in it) with `keras.models.clone_model`: each selected layer
of a class in `tf_fp16ops.layers.KERAS_EQUIVALENTS` (keras.layers.Conv2D, DepthwiseConv2D,
SeparableConv2D, Conv2DTranspose, Conv1D, DepthwiseConv1D, SeparableConv1D, Conv1DTranspose,
Dense, EinsumDense, MultiHeadAttention) becomes the tf_fp16ops layer of the same name
built from the same config plus `accumulation`, every other layer a copy from its config, and
then every new layer gets the original layer's weights (kernel, bias, BatchNormalization
statistics, ...). The original model is not modified and shares no variables with the result.

Layers that stay as they are and are listed in the report as not converted, with the reason:
convolutions the ops do not implement (Conv3D, Conv3DTranspose: no 3-D variant of the op
family), EinsumDense layers whose equation `tf_fp16ops.einsum` does not take (a label summed
within one operand, repeated labels), quantized Dense and EinsumDense layers, layers whose dtype
policy computes in neither float16 nor float32 (float64, bfloat16), subclasses of the converted
classes (they may override call()), layers left out by `layers`, and such layers inside custom
layers that cannot be rebuilt from outside.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import keras

from tf_fp16ops.layers import (
    _SUPPORTED_COMPUTE_DTYPES,
    KERAS_EQUIVALENTS,
    canonical_accumulation,
)
from tf_fp16ops.matmul_ops import equation_problem

_LOG = logging.getLogger(__name__)

LayerSelection = None | str | Iterable[str] | Callable[[keras.layers.Layer], bool]


@dataclass(frozen=True)
class NotConverted:
    """A convolution or Dense layer left unchanged, with the reason."""

    name: str
    class_name: str
    reason: str


_NOT_SELECTED = "not selected by `layers`"
_SHOWN_UNSELECTED = 8  # names of unselected layers the summary shows


@dataclass(frozen=True)
class ConversionReport:
    """What `convert` did: `converted` layer names in model order; `not_converted` convolution
    and Dense layers left unchanged; `converted_classes` the Keras class name of each converted
    layer (same order); `float32_layers` the converted layers that compute in float32 in a model
    whose other layers compute in float16 (a mixed-precision model's float32 output layer, say),
    which float16 accumulation runs on float16-rounded inputs and weights."""

    accumulation: str
    converted: tuple[str, ...]
    not_converted: tuple[NotConverted, ...]
    converted_classes: tuple[str, ...] = ()
    float32_layers: tuple[str, ...] = ()

    def counts(self) -> dict[str, int]:
        """Converted layers per Keras class name, e.g. {'Conv2D': 35, 'DepthwiseConv2D': 17}."""
        out: dict[str, int] = {}
        for c in self.converted_classes:
            out[c] = out.get(c, 0) + 1
        return out

    def summary(self) -> str:
        per_class = ", ".join(f"{n} {c}" for c, n in self.counts().items())
        lines = [
            f"{len(self.converted)} layer(s) converted to tf_fp16ops.layers "
            f"(accumulation={self.accumulation})"
            + (f": {per_class}" if per_class else "")
            + f"; {len(self.not_converted)} convolution/Dense layer(s) not converted"
        ]
        unselected = [n.name for n in self.not_converted if n.reason == _NOT_SELECTED]
        lines += [
            f"  not converted: {n.name} ({n.class_name}): {n.reason}"
            for n in self.not_converted
            if n.reason != _NOT_SELECTED
        ]
        if unselected:  # one line: a small selection leaves most of a model's layers out
            shown = ", ".join(unselected[:_SHOWN_UNSELECTED])
            more = len(unselected) - _SHOWN_UNSELECTED
            lines.append(
                f"  not converted ({_NOT_SELECTED}): {len(unselected)} layer(s): {shown}"
                + (f" and {more} more (report.not_converted lists them)" if more > 0 else "")
            )
        if self.float32_layers and self.accumulation == "float16":
            lines.append(
                f"  float32 layer(s) of a float16 model, now on float16-rounded inputs and "
                f"weights: {', '.join(self.float32_layers)} (`layers=` can leave them out)"
            )
        return "\n".join(lines)


@dataclass(frozen=True)
class Conversion:
    """The converted model and its report."""

    model: keras.Model
    report: ConversionReport


_OURS = {ours: ours for ours in KERAS_EQUIVALENTS.values()}


def _target_class(layer):
    """The tf_fp16ops class `layer` converts to, or None. Exact classes only (a Keras class or
    ours, to change its accumulation): other subclasses may override call() and would lose that
    behaviour. Quantized Dense layers have no float kernel to run."""
    cls = KERAS_EQUIVALENTS.get(type(layer)) or _OURS.get(type(layer))
    if cls is not None and getattr(layer, "quantization_mode", None):
        return None
    if isinstance(layer, keras.layers.EinsumDense) and equation_problem(layer.equation):
        return None
    if cls is not None and layer.compute_dtype not in _SUPPORTED_COMPUTE_DTYPES:
        return None
    return cls


def _is_convertible(layer) -> bool:
    return _target_class(layer) is not None


def _is_convolution(layer) -> bool:
    from keras.src.layers.convolutional.base_conv import BaseConv
    from keras.src.layers.convolutional.base_conv_transpose import BaseConvTranspose
    from keras.src.layers.convolutional.base_depthwise_conv import BaseDepthwiseConv
    from keras.src.layers.convolutional.base_separable_conv import BaseSeparableConv

    return isinstance(
        layer,
        (
            BaseConv,
            BaseConvTranspose,
            BaseDepthwiseConv,
            BaseSeparableConv,
            keras.layers.Dense,
            keras.layers.EinsumDense,
            keras.layers.MultiHeadAttention,
        ),
    )


def _not_convertible_reason(layer) -> str:
    if getattr(layer, "quantization_mode", None):
        return f"quantized ({layer.quantization_mode}); the Fp16Conv2D ops run float kernels only"
    if isinstance(layer, keras.layers.EinsumDense) and equation_problem(layer.equation):
        return (
            f"EinsumDense: tf_fp16ops.einsum does not take it ({equation_problem(layer.equation)})"
        )
    if type(layer) in KERAS_EQUIVALENTS or type(layer) in _OURS:
        return (
            f"dtype policy {layer.dtype_policy.name}: the op family takes float16/float32 "
            f"(compute dtype {layer.compute_dtype})"
        )
    for keras_cls in KERAS_EQUIVALENTS:
        if isinstance(layer, keras_cls):
            return f"subclass of {keras_cls.__name__} with its own behaviour"
    return "no 3-D variant of this convolution in the Fp16Conv2D op family; left unchanged"


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
    try:
        names = {layers} if isinstance(layers, str) else set(layers)
    except TypeError:
        raise TypeError(
            f"layers must be None, a layer name, a list of layer names or a predicate "
            f"layer -> bool, got {layers!r}"
        ) from None
    if not all(isinstance(n, str) for n in names):
        raise ValueError(
            f"layers must be None, a layer name, a list of layer names or a predicate "
            f"layer -> bool, got {layers!r}"
        )
    by_name = {layer.name: layer for layer in _all_layers(model)}
    unknown = sorted(names - by_name.keys())
    if unknown:
        raise ValueError(f"layers: no layer named {unknown} in model '{model.name}'")
    wrong_kind = sorted(n for n in names if not _is_convertible(by_name[n]))
    if wrong_kind:
        kinds = ", ".join(f"'{n}' is a {type(by_name[n]).__name__}" for n in wrong_kind)
        classes = ", ".join(c.__name__ for c in KERAS_EQUIVALENTS)
        raise ValueError(
            f"layers names layers that convert cannot convert ({kinds}); only "
            f"{classes} layers can be converted"
        )
    return lambda layer: layer.name in names


def convert_with_report(
    model: keras.Model, accumulation="float16", layers: LayerSelection = None
) -> Conversion:
    """As `convert`, returning `Conversion(model, report)`."""
    accumulation = canonical_accumulation(accumulation)
    if not isinstance(model, keras.Model):
        raise TypeError(
            f"model must be a keras.Model (Sequential or functional), got {type(model).__name__}"
        )
    if not _is_rebuilt_container(model):
        raise ValueError(
            f"model '{model.name}' is a subclassed {type(model).__name__}; convert (and "
            f"sensitivity, which converts) rebuilds Sequential and functional models only (build "
            f"it from tf_fp16ops.layers instead)"
        )
    if not model.layers:
        raise ValueError(f"model '{model.name}' has no layers; there is nothing to convert")
    selected = _selector(layers, model)
    pairs: list[tuple] = []
    converted: list[str] = []
    classes: list[str] = []
    skipped: list[NotConverted] = []

    def clone(layer):
        if _is_convertible(layer) and selected(layer):
            target = _target_class(layer)
            new = target.from_config({**layer.get_config(), "accumulation": accumulation})
            converted.append(layer.name)
            classes.append(target.__name__)
        else:
            new = layer.__class__.from_config(layer.get_config())
            if _is_convolution(layer):
                reason = _NOT_SELECTED if _is_convertible(layer) else _not_convertible_reason(layer)
                skipped.append(NotConverted(layer.name, type(layer).__name__, reason))
            # Keras operations of a functional graph (`x + y`) are not layers: nothing inside. A
            # convertible layer left out by `layers` (MultiHeadAttention) is listed itself above,
            # its own sublayers with it.
            flatten = getattr(layer, "_flatten_layers", None)
            inside = flatten(include_self=False, recursive=True) if flatten else ()
            for inner in () if _is_convertible(layer) else inside:
                if _is_convolution(inner):
                    skipped.append(
                        NotConverted(
                            inner.name,
                            type(inner).__name__,
                            f"inside custom layer '{layer.name}' ({type(layer).__name__}), "
                            "which convert copies from its config without looking inside",
                        )
                    )
        pairs.append((layer, new))
        return new

    new_model = keras.models.clone_model(model, clone_function=clone, recursive=True)
    for old, new in pairs:
        weights = old.get_weights() if isinstance(old, keras.layers.Layer) else []
        if weights:
            if not new.built:
                raise ValueError(
                    f"convert could not build the copy of layer '{old.name}' to give it the "
                    f"original weights; build the model (call it once) before converting"
                )
            new.set_weights(weights)
    mixed = any(getattr(old, "compute_dtype", None) in ("float16", "bfloat16") for old, _ in pairs)
    float32_layers = tuple(
        old.name
        for old, _ in pairs
        if mixed and old.name in converted and getattr(old, "compute_dtype", None) == "float32"
    )
    report = ConversionReport(
        accumulation, tuple(converted), tuple(skipped), tuple(classes), float32_layers
    )
    _LOG.info("%s", report.summary())
    return Conversion(new_model, report)


def convert(
    model: keras.Model, accumulation="float16", layers: LayerSelection = None
) -> keras.Model:
    """Returns a copy of `model` whose conv-like and Dense layers run the Fp16Conv2D ops.

    Args:
      model: a built Sequential or functional keras.Model; nested Sequential/functional models
        are converted too.
      accumulation: 'float16' (true fp16 accumulation; convolutions of a float32 model then run
        on float16-rounded inputs and weights, see `tf_fp16ops.layers`) or 'float32'.
      layers: None (every convertible layer: Conv2D, DepthwiseConv2D, SeparableConv2D,
        Conv2DTranspose, Conv1D, Dense), a layer name or list of names (each must name a
        convertible layer of the model), or a predicate `layer -> bool` called on each
        convertible layer.

    Returns:
      The new keras.Model, same structure, layer names and weights; compiled as `model` was
      (keras.models.clone_model: its compile config, a new optimizer without the original's
      state) when `model` is compiled. `convert_with_report` returns
      the report too (converted names, convolutions not converted and why); it is also logged at
      INFO level on the "tf_fp16ops.conversion" logger. A model without convertible layers gives a
      plain copy with 0 converted.

    Raises:
      ValueError: bad `accumulation`; a subclassed model; `layers` naming layers that are not in
        the model or are not convertible.
      TypeError: `model` is not a keras.Model; `layers` is neither None, a name, an iterable
        of names nor a callable.
    """
    return convert_with_report(model, accumulation, layers).model
