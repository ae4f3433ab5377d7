"""Keras 3 layers that run their convolution or matrix product through the tf_fp16ops ops.

Layers (each registered serializable as "tf_fp16ops>Name"; same arguments, weights and config as
the keras.layers class of the same name, plus `accumulation`):
  Conv2D           Fp16Conv2D; sum over (kh, kw, in_channel) ascending.
  DepthwiseConv2D  Fp16DepthwiseConv2D (= grouped Fp16Conv2D, groups = C); sum over (kh, kw);
                   the bias added by the op.
  SeparableConv2D  DepthwiseConv2D then a 1x1 Fp16Conv2D; sums over (kh, kw), then C*M channels.
  Conv2DTranspose  Fp16Conv2DBackpropInput; sum in the dgrad order (kh, kw, in_channel).
  Conv1D           Fp16Conv2D with height 1 (causal padding included); sum over (k, in_channel).
  DepthwiseConv1D, SeparableConv1D, Conv1DTranspose: their 2-D twins with height 1.
  Dense            1x1 Fp16Conv2D on the flattened rows; sum over the input features ascending.
  EinsumDense      tf_fp16ops.einsum (one Fp16MatMul); sum over the contracted labels.
  MultiHeadAttention  its projections as EinsumDense, both attention products through
                   tf_fp16ops.einsum; softmax as Keras computes it.
Gradients are those registered for the ops (tf_fp16ops.ops), with the same accumulation.

Each class is the keras.layers class with one more argument, `accumulation` (keyword only; every
other argument, positional ones included, is the Keras class's: filters, kernel_size, strides,
padding, data_format, dilation_rate, groups, activation, use_bias, initializers, regularizers,
constraints, dtype, name, lora_rank, ...). It keeps the same weights (e.g. Conv2D's kernel HWIO
[KH, KW, C / groups, filters] and bias [filters]) under the same names and is registered
serializable, so `get_config`/`from_config` and `.keras` files round-trip once `tf_fp16ops` is
imported. What every class adds is one mixin, `_Fp16AccumulationMixin`.

`accumulation` is the layer's state, set at construction, saved in its config and changeable at
any time (`layer.accumulation = ...`):
  "float16": T=half. Inputs and kernel are cast to float16 when the layer's compute dtype is
    float32, and the result is cast back to the compute dtype, so one layer of a float32 model
    can be switched to true fp16 arithmetic (DepthwiseConv2D/1D: the op does the casts, same
    bits).
  "float32": T = the layer's compute dtype (float16 under the "float16" and "mixed_float16"
    policies, float32 under "float32"), fp32 accumulation.
  "keras" (KERAS): the Keras class's own computation, TensorFlow's stock kernels with their
    accumulation, as the original layer computes it; `tf_fp16ops.sensitivity` puts the layers it
    is not measuring in this state for others='original'.
The constructor and the setter take 'float16'/'float32' (or tf.float16/tf.float32,
np.float16/np.float32, saved as the name) and "keras". Under "mixed_float16" the variables stay
float32 and are cast to float16 for the call (Keras autocasting), as for the Keras layers. Bias
and activation run in the compute dtype.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from tf_fp16ops import matmul_ops, ops
from tf_fp16ops._platform import stock_conv

_SUPPORTED_COMPUTE_DTYPES = ("float16", "float32")
# The accumulation state that runs the Keras class's own computation (module docstring).
KERAS = "keras"


def canonical_accumulation(accumulation) -> str:
    """'float16' or 'float32' for any name `tf_fp16ops.accumulation_dtype` accepts.

    Raises:
      ValueError: names `accumulation` and the bad value.
    """
    return ops.accumulation_dtype(accumulation).name


def layer_accumulation(accumulation) -> str:
    """A layer's accumulation state: KERAS for "keras", else `canonical_accumulation`'s name.

    Raises:
      ValueError: names `accumulation`, the states a layer takes ('keras' among them) and the
        bad value.
    """
    if isinstance(accumulation, str) and accumulation == KERAS:
        return KERAS
    try:
        return canonical_accumulation(accumulation)
    except ValueError:
        raise ValueError(
            "accumulation must be 'float16', 'float32' (or tf.float16, tf.float32, np.float16, "
            f"np.float32) or {KERAS!r} (the Keras class's own computation), got "
            f"{ops._shown(accumulation)}"
        ) from None


class _Fp16AccumulationMixin:
    """What every layer of this module adds to its Keras class (see the module docstring).

    - `accumulation`, a keyword argument and a state (float16, float32 or KERAS), in the config;
    - the check that the compute dtype is float16 or float32, and no XLA: `supports_jit` is
      False, so Keras compiles models that hold the layer with `jit_compile=False` (an explicit
      `tf.function(jit_compile=True)` raises the ValueError of the ops);
    - `call`: the Keras class's call in the KERAS state, else the class's `_fp16_call(inputs)`,
      its computation through the ops (MultiHeadAttention keeps Keras's call and switches in
      `_compute_attention` and its EinsumDense projections);
    - the casts around the op and the bias and activation after it (`_cast_in`, `_finish`).

    Raises (constructor):
      ValueError: `accumulation` not one of the states; a dtype policy whose compute dtype is not
        float16 or float32 (e.g. "bfloat16", "float64"); any argument the Keras class rejects.
    """

    # The op the layer's products run through, for messages.
    _OP = "Fp16Conv2D"
    # True: the op library's own kernels always, even where a float32 layer with
    # accumulation='float32' would run TensorFlow's op (tf_fp16ops/_platform/stock_conv.py), so
    # that each output is summed in one fixed order whatever the batch. The sensitivity sweep
    # sets it on its own converted copy of the model (tf_fp16ops/layer_sensitivity/analysis.py).
    _fixed_order = False

    def __init__(self, *args, accumulation="float16", **kwargs):
        self.accumulation = accumulation
        super().__init__(*args, **kwargs)
        if self.compute_dtype not in _SUPPORTED_COMPUTE_DTYPES:
            raise ValueError(
                f"tf_fp16ops.layers.{type(self).__name__} '{self.name}': the dtype policy "
                f"'{self.dtype_policy.name}' has compute dtype {self.compute_dtype}; the "
                f"{self._OP} op computes in float16 or float32 only (use dtype 'float32', "
                f"'float16' or 'mixed_float16')"
            )
        self.supports_jit = False

    @property
    def accumulation(self) -> str:
        """'float16', 'float32' or 'keras' (KERAS); see the module docstring."""
        return self._accumulation

    @accumulation.setter
    def accumulation(self, value) -> None:
        self._accumulation = layer_accumulation(value)
        self._share_accumulation()

    def _share_accumulation(self) -> None:
        """Passes the state on to sublayers that follow it (none but MultiHeadAttention's)."""

    def call(self, inputs, **kwargs):
        """The Keras class's call in the KERAS state (with `kwargs`), else `_fp16_call(inputs)`."""
        if self.accumulation == KERAS:
            return super().call(inputs, **kwargs)
        return self._fp16_call(inputs)

    def _op_dtype(self) -> str:
        return "float16" if self.accumulation == "float16" else self.compute_dtype

    def _cast_in(self, *tensors):
        dtype = self._op_dtype()
        return [tf.cast(t, dtype) for t in tensors]

    def _finish(self, outputs, channels=None, add_bias=True):
        """Cast back to the compute dtype, then bias (unless the op added it: `add_bias` False)
        and activation as the Keras layer does: a convolution's bias [channels] on the channel
        axis of data_format, Dense's and EinsumDense's as it is shaped (channels None).

        The bias is added by `_add_bias`, with the op the Keras layers' `keras.ops.add` writes
        (BiasAdd for a bias on the first or last axis, which is not part of the trees of AddV2
        nodes that Grappler's arithmetic optimizer (AddOpsRewrite) regroups; with `+` (AddV2),
        `residual + (y + bias)` ran as `(y + residual) + bias` in a `tf.function` and rounded
        differently from eager execution) but on the bias's own axis. Either way one rounding
        per element."""
        outputs = tf.cast(outputs, self.compute_dtype)
        if add_bias and self.bias is not None:
            bias = tf.cast(self.bias, self.compute_dtype)
            if channels is not None:
                rank = len(outputs.shape) - 2
                if self.data_format == "channels_last":
                    shape = (1,) * (rank + 1) + (channels,)
                else:
                    shape = (1, channels) + (1,) * rank
                bias = tf.reshape(bias, shape)
            outputs = _add_bias(outputs, bias)
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs

    def _check_not_quantized(self, op_type: str) -> None:
        if getattr(self, "quantization_mode", None):
            raise ValueError(
                f"tf_fp16ops.layers.{type(self).__name__} '{self.name}' is quantized "
                f"({self.quantization_mode}); the {op_type} op runs float kernels only"
            )

    def get_config(self):
        config = super().get_config()
        config["accumulation"] = self.accumulation
        return config


def _add_bias(outputs, bias):
    """outputs + bias (bias broadcast against outputs from the right, one dimension above 1 at
    most): BiasAdd where the bias lies along the last axis ("N...C") or axis 1 ("NC..."), else
    AddV2 -- the ops `keras.ops.add` writes where it finds the right axis. Keras 3.15's
    TensorFlow backend guesses the axis from the bias's length and takes the last one whenever the
    last dimension has that length, so its channels_first layers added the bias along the width
    when width == channels (Conv2D(4, 1, data_format="channels_first") on [1, 4, 3, 4]: bias[w]
    added at width w instead of bias[c] at channel c); this adds it on its own axis."""
    dims = bias.shape.as_list()
    rank = len(outputs.shape)
    big = [i for i, d in enumerate(dims) if d is None or d > 1]
    if rank > 1 and len(big) == 1 and dims[big[0]] is not None:
        axis = rank - len(dims) + big[0]  # the bias's axis in outputs
        if axis in (1, rank - 1):
            fmt = "N...C" if axis == rank - 1 else "NC..."
            return tf.nn.bias_add(outputs, tf.reshape(bias, [-1]), data_format=fmt)
    return tf.add(outputs, bias)


# ----------------------------------------------------------------------------------------------
# The computations of the convolution layers. Each keeps the Keras layer's weights (names,
# shapes, layouts) and routes its reduction through the Fp16Conv2D op family (fprop Fp16Conv2D,
# dgrad Fp16Conv2DBackpropInput) or Fp16DepthwiseConv2D, so its gradients are the registered
# gradients of those ops (tf_fp16ops.ops) with the same accumulation. A rank-1 layer runs the
# 2-D op with height 1.


def _nhwc_or_nchw(data_format) -> str:
    return "NHWC" if data_format == "channels_last" else "NCHW"


def _height_axis(layer) -> int:
    return 2 if layer.data_format == "channels_first" else 1


def _to_2d(layer, x, kernel):
    """Rank 1: x [N, L, C] -> [N, 1, L, C] (or [N, C, L] -> [N, C, 1, L]), kernel [K, ...] ->
    [1, K, ...]; rank 2: as they are."""
    if layer.rank == 1:
        return tf.expand_dims(x, _height_axis(layer)), tf.expand_dims(kernel, 0)
    return x, kernel


def _from_2d(layer, y):
    """The 2-D op's result in the layer's rank (drops the height 1 of a rank-1 layer)."""
    return tf.squeeze(y, _height_axis(layer)) if layer.rank == 1 else y


def _window(values, layer) -> list[int]:
    """`strides` or `dilation_rate` as the 2-D op's [height, width] (rank 1: height 1)."""
    return [1] * (2 - layer.rank) + list(values)


def depthwise_filters(kernel):
    """Keras depthwise kernel [KH, KW, C, M] as the grouped-conv filter [KH, KW, 1, C*M].

    Output channel c*M + m of keras.layers.DepthwiseConv2D (tf.nn.depthwise_conv2d's order) is
    output channel c*M + m of the grouped convolution with groups = C: group c owns output
    channels [c*M, (c+1)*M), which read input channel c (tf_fp16ops.conv2d's grouping).
    """
    kh, kw, c, m = kernel.shape
    return tf.reshape(kernel, [kh, kw, 1, c * m])


def _conv(layer, inputs):
    """Conv2D and Conv1D: Fp16Conv2D; padding 'causal' pads dilation_rate * (K - 1) zeros on the
    left and runs VALID, as keras.layers.Conv1D does."""
    x, w = layer._cast_in(inputs, layer.kernel)
    padding = layer.padding
    if padding == "causal":
        x = tf.pad(x, layer._compute_causal_padding())
        padding = "valid"
    x, w = _to_2d(layer, x, w)
    y = _fp16_conv2d(
        layer,
        x,
        w,
        strides=_window(layer.strides, layer),
        padding=padding.upper(),
        data_format=_nhwc_or_nchw(layer.data_format),
        dilations=_window(layer.dilation_rate, layer),
    )
    return layer._finish(_from_2d(layer, y), layer.filters)


def _use_fixed_order(model) -> None:
    """Puts every tf_fp16ops layer of `model` (nested ones too) on the op library's own kernels
    (`_fixed_order`): one summation order per output whatever the number of samples in a call."""
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if isinstance(layer, _Fp16AccumulationMixin):
            layer._fixed_order = True


def _fp16_conv2d(layer, x, w, strides, padding, data_format, dilations=1):
    """`tf_fp16ops.conv2d` with the layer's accumulation: TensorFlow's op where it takes float32
    with accumulation='float32', unless the layer keeps the op library's (`_fixed_order`)."""
    attrs = ops._conv_attrs(strides, padding, data_format, dilations, layer.accumulation)
    return ops._run_conv_op(
        "Fp16Conv2D", None, attrs, stock=not layer._fixed_order, input=x, filters=w
    )


def _depthwise(layer, inputs, kernel, dtype, bias=None):
    """Fp16DepthwiseConv2D on operands of `dtype` (NHWC; channels_first is transposed around
    it), `bias` (of `dtype`, [C*M]) added by the op. With float32 operands and
    accumulation='float16' the op rounds them to float16 and returns the float16 sum as float32:
    the bits of the casts around a float16 op, without their passes over memory."""
    x, w = _to_2d(layer, tf.cast(inputs, dtype), tf.cast(kernel, dtype))
    nchw = layer.data_format == "channels_first"
    if nchw:
        x = tf.transpose(x, [0, 2, 3, 1])
    ops.check_not_in_xla("Fp16DepthwiseConv2D")
    y = ops._depthwise_op(
        x,
        w,
        bias,
        ops.accumulation_dtype(layer.accumulation),
        ops._window_attr("strides", _window(layer.strides, layer), "NHWC"),
        layer.padding,
        ops._window_attr("dilations", _window(layer.dilation_rate, layer), "NHWC"),
    )
    if nchw:
        y = tf.transpose(y, [0, 3, 1, 2])
    return _from_2d(layer, y)


def _depthwise_conv(layer, inputs):
    """DepthwiseConv2D and DepthwiseConv1D: the op in the compute dtype, then the bias and the
    activation. channels_last with more than one output channel: the bias added by the op (the
    bits of BiasAdd after the cast back, and BiasAddGrad's gradient, as Keras's); otherwise by
    `_finish`, whose op is Keras's there too (BiasAdd NCHW, or AddV2 for one channel, whose
    gradients sum in another order)."""
    dtype = layer.compute_dtype
    channels = layer.depth_multiplier * layer._get_input_channel(inputs.shape)
    fused = layer.bias is not None and layer.data_format == "channels_last" and channels > 1
    bias = tf.cast(layer.bias, dtype) if fused else None
    y = _depthwise(layer, inputs, layer.kernel, dtype, bias)
    return layer._finish(y, channels, add_bias=not fused)


def _separable_conv(layer, inputs):
    """SeparableConv2D and SeparableConv1D: the depthwise step, its result rounded to the op
    dtype, then the pointwise step as a 1x1 Fp16Conv2D."""
    depthwise = _depthwise(layer, inputs, layer.depthwise_kernel, layer._op_dtype())
    (pointwise,) = layer._cast_in(layer.pointwise_kernel)
    depthwise, pointwise = _to_2d(layer, depthwise, pointwise)
    y = _fp16_conv2d(
        layer, depthwise, pointwise, 1, "VALID", data_format=_nhwc_or_nchw(layer.data_format)
    )
    return layer._finish(_from_2d(layer, y), layer.filters)


def _conv_transpose(layer, inputs):
    """Conv2DTranspose and Conv1DTranspose: Fp16Conv2DBackpropInput with Keras's output size."""
    from keras.src.backend.common.backend_utils import compute_conv_transpose_output_shape

    x, w = layer._cast_in(inputs, layer.kernel)
    dynamic = tf.shape(x)
    shape = [dynamic[i] if d is None else d for i, d in enumerate(x.shape)]
    out_shape = list(
        compute_conv_transpose_output_shape(
            shape,
            layer.kernel_size,
            layer.filters,
            layer.strides,
            layer.padding,
            layer.output_padding,
            layer.data_format,
            layer.dilation_rate,
        )
    )
    if layer.rank == 1:
        out_shape.insert(_height_axis(layer), 1)
    x, w = _to_2d(layer, x, w)
    # The op library's dgrad op always (its forward is not handed to TensorFlow's op, whose
    # sum order would then depend on the machine and on whether the batch is known).
    attrs = ops._conv_attrs(
        _window(layer.strides, layer),
        layer.padding.upper(),
        _nhwc_or_nchw(layer.data_format),
        _window(layer.dilation_rate, layer),
        layer.accumulation,
    )
    y = ops._run_conv_op(
        "Fp16Conv2DBackpropInput",
        None,
        attrs,
        stock=False,
        input_sizes=tf.stack([tf.cast(d, tf.int32) for d in out_shape]),
        filters=w,
        out_backprop=x,
    )
    return layer._finish(_from_2d(layer, y), layer.filters)


@keras.saving.register_keras_serializable(package="tf_fp16ops", name="Conv2D")
class Conv2D(_Fp16AccumulationMixin, keras.layers.Conv2D):
    """2-D convolution layer with a selectable accumulation precision (Fp16Conv2D op).

    Args:
      accumulation (keyword): 'float16' (default; true fp16 accumulation, see
        `tf_fp16ops.conv2d`) or 'float32'; or tf.float16/tf.float32, np.float16/np.float32 (saved
        as the name); or 'keras', the Keras layer's own computation (module docstring).
      All other arguments: as `keras.layers.Conv2D`.

    Input/output: as `keras.layers.Conv2D`: [N, H, W, C] ("channels_last") or [N, C, H, W]
    ("channels_first") in, the compute dtype out.

    The layer does not support XLA (`supports_jit = False`): Keras then compiles models that
    contain it with `jit_compile=False`; an explicit `tf.function(jit_compile=True)` raises
    the ValueError of `tf_fp16ops.conv2d`.

    Raises:
      ValueError: `accumulation` not a float16/float32 name; a dtype policy whose compute dtype
        is not float16 or float32 (e.g. "bfloat16", "float64"); any argument
        `keras.layers.Conv2D` rejects.
    """

    _fp16_call = _conv


@keras.saving.register_keras_serializable(package="tf_fp16ops", name="DepthwiseConv2D")
class DepthwiseConv2D(_Fp16AccumulationMixin, keras.layers.DepthwiseConv2D):
    """`keras.layers.DepthwiseConv2D` with a selectable accumulation precision.

    Runs as Fp16DepthwiseConv2D (`tf_fp16ops.depthwise_conv2d`, the Keras kernel [KH, KW, C, M]
    as it is, any `depth_multiplier` M), the same sum as the grouped Fp16Conv2D with groups = C
    and filter [KH, KW, 1, C*M] (`depthwise_filters`), whose dgrad/wgrad ops are its gradients.

    Input/output: [N, H, W, C] -> [N, P, Q, C*M] ("channels_last") or [N, C, H, W] ->
    [N, C*M, P, Q] ("channels_first"); output channel c*M + m is input channel c times filter m.

    Numerics (accumulation='float16'): each output is one binary16 accumulator over the KH*KW
    terms of its channel, (kh, kw) ascending, one rounding per fused step; fprop, dgrad
    (over (kh, kw, m) ascending) and wgrad (over (n, p, q) ascending) as `tf_fp16ops.conv2d`.
    The op takes the compute-dtype operands (a float32 model's are rounded to binary16 by the
    op, as a cast would) and adds the bias as BiasAdd does (in float32, rounded once to the
    compute dtype): the bits of the cast, op, cast back and bias add of the other layers.

    Raises:
      ValueError: as `tf_fp16ops.layers.Conv2D` (accumulation, dtype policy) and
        `keras.layers.DepthwiseConv2D`.
    """

    _fp16_call = _depthwise_conv


@keras.saving.register_keras_serializable(package="tf_fp16ops", name="SeparableConv2D")
class SeparableConv2D(_Fp16AccumulationMixin, keras.layers.SeparableConv2D):
    """`keras.layers.SeparableConv2D` with a selectable accumulation precision.

    The depthwise step (depthwise_kernel [KH, KW, C, M]) runs as `DepthwiseConv2D` does, its
    result is rounded to the op dtype (binary16 under accumulation='float16', as
    tf.nn.separable_conv2d stores it in its dtype), then the pointwise step
    (pointwise_kernel [1, 1, C*M, filters]) is a 1x1 Fp16Conv2D.

    Numerics (accumulation='float16'): depthwise outputs accumulate over (kh, kw) ascending;
    pointwise outputs over the C*M depthwise channels ascending; one binary16 rounding per step.

    Raises:
      ValueError: as `DepthwiseConv2D` and `keras.layers.SeparableConv2D`.
    """

    _fp16_call = _separable_conv


@keras.saving.register_keras_serializable(package="tf_fp16ops", name="Conv2DTranspose")
class Conv2DTranspose(_Fp16AccumulationMixin, keras.layers.Conv2DTranspose):
    """`keras.layers.Conv2DTranspose` with a selectable accumulation precision.

    The transposed convolution is the input gradient of a convolution: it runs as
    Fp16Conv2DBackpropInput (`tf_fp16ops.conv2d_backprop_input`) with the Keras kernel
    [KH, KW, filters, C] as the HWIO filter of that convolution and the output size Keras
    computes (keras backend `compute_conv_transpose_output_shape`: strides, padding,
    output_padding, dilation_rate), exactly as the TensorFlow backend calls
    tf.nn.conv_transpose.

    Input/output: [N, H, W, C] -> [N, H', W', filters] ("channels_last"), or NCHW.

    Numerics (accumulation='float16'): each output accumulates in the dgrad order
    (kh, kw, input_channel) ascending over the input positions that reach it, one binary16
    rounding per fused step.

    Raises:
      ValueError: as `tf_fp16ops.layers.Conv2D` and `keras.layers.Conv2DTranspose`.
    """

    _fp16_call = _conv_transpose


@keras.saving.register_keras_serializable(package="tf_fp16ops", name="Conv1D")
class Conv1D(_Fp16AccumulationMixin, keras.layers.Conv1D):
    """`keras.layers.Conv1D` with a selectable accumulation precision.

    Runs as a 2-D Fp16Conv2D with height 1: input [N, L, C] -> [N, 1, L, C], kernel
    [K, C / groups, filters] -> [1, K, C / groups, filters]; padding 'causal' pads
    dilation_rate * (K - 1) zeros on the left and runs VALID, as keras.layers.Conv1D does.

    Numerics (accumulation='float16'): each output accumulates over (k, in_channel) ascending
    (the (kw, ci) order of the 2-D op), one binary16 rounding per fused step; zero padding
    takes part in the sum.

    Raises:
      ValueError: as `tf_fp16ops.layers.Conv2D` and `keras.layers.Conv1D`.
    """

    _fp16_call = _conv


@keras.saving.register_keras_serializable(package="tf_fp16ops", name="DepthwiseConv1D")
class DepthwiseConv1D(_Fp16AccumulationMixin, keras.layers.DepthwiseConv1D):
    """`keras.layers.DepthwiseConv1D` with a selectable accumulation precision: the
    Fp16DepthwiseConv2D of `DepthwiseConv2D` with height 1 (kernel [K, C, M] -> [1, K, C, M]).

    Numerics (accumulation='float16'): each output accumulates over k ascending.

    Raises:
      ValueError: as `DepthwiseConv2D` and `keras.layers.DepthwiseConv1D`.
    """

    _fp16_call = _depthwise_conv


@keras.saving.register_keras_serializable(package="tf_fp16ops", name="SeparableConv1D")
class SeparableConv1D(_Fp16AccumulationMixin, keras.layers.SeparableConv1D):
    """`keras.layers.SeparableConv1D` with a selectable accumulation precision: `SeparableConv2D`
    with height 1.

    Numerics (accumulation='float16'): depthwise outputs over k ascending (rounded to binary16),
    pointwise outputs over the C*M channels ascending.

    Raises:
      ValueError: as `SeparableConv2D` and `keras.layers.SeparableConv1D`.
    """

    _fp16_call = _separable_conv


@keras.saving.register_keras_serializable(package="tf_fp16ops", name="Conv1DTranspose")
class Conv1DTranspose(_Fp16AccumulationMixin, keras.layers.Conv1DTranspose):
    """`keras.layers.Conv1DTranspose` with a selectable accumulation precision: the
    Fp16Conv2DBackpropInput of `Conv2DTranspose` with height 1 (kernel [K, filters, C] ->
    [1, K, filters, C]; strides, output_padding, dilation as Keras computes them).

    Numerics (accumulation='float16'): each output accumulates in the dgrad order
    (k, input_channel) ascending.

    Raises:
      ValueError: as `Conv2DTranspose` and `keras.layers.Conv1DTranspose`.
    """

    _fp16_call = _conv_transpose


# ----------------------------------------------------------------------------------------------
# Dense, EinsumDense and MultiHeadAttention.


def dense_matmul(x, kernel, accumulation, fixed_order: bool = False):
    """x [..., Cin] @ kernel [Cin, units] through Fp16Conv2D as a 1x1 convolution.

    x [B, d1, ..., Cin] becomes B images of one column of R = d1 * ... rows [B, R, 1, Cin] (R = 1
    for rank 2), so that the audit counts its FLOPs per example of an unknown batch B as for a
    Conv2D (R unknown when the model is traced: FLOPs unknown; rank unknown: [rows, 1, 1, Cin]);
    the kernel is the HWIO filter [1, 1, Cin, units]. The
    layout does not change the sums: output (m, k) accumulates x[m, ci] * kernel[ci, k] over ci
    ascending (fprop), dx over k ascending (dgrad), dkernel over the rows m ascending in
    row-major order (wgrad); the CPU kernels lay the positions of such a 1x1 convolution out as
    one image themselves (cc/kernels/cpu/conv2d_cpu.cc, FoldedPositions). Float32 with
    accumulation='float32', where the op would hand the 1x1 forward to TensorFlow's Conv2D
    (README "Numerics"), runs TensorFlow's MatMul on [M, Cin] instead, as keras.layers.Dense does
    (its gradients TensorFlow's too), unless `fixed_order`: on a Xeon with oneDNN its Conv2D on
    such images ran at 0.15-0.51x of its MatMul's rate (256x512x512, 2048x64x64, 64x768x3072,
    8x1024x1024; benchmarks/results/cpu_xeon_2026-12-06.md).
    """
    cin = kernel.shape[0]
    units = kernel.shape[1]
    lead = tf.shape(x)[:-1]
    if cin == 0:
        # A sum of no terms is +0 (README "Numerics"), as keras.layers.Dense gives; the op
        # itself takes no empty filter.
        out = tf.zeros(tf.concat([lead, [units]], 0), x.dtype)
        if x.shape.rank is not None:
            out.set_shape(x.shape[:-1].concatenate([units]))
        return out
    attrs = ops._conv_attrs(1, "VALID", "NHWC", 1, accumulation)
    w4 = [1, 1, cin, units]
    if (
        not fixed_order
        and x.dtype == tf.float32
        and kernel.dtype == tf.float32
        and stock_conv.stock_wins("fprop", tf.float32, [None, 1, 1, cin], w4, None, attrs)
    ):
        y = tf.matmul(tf.reshape(x, [-1, cin]), kernel)
    else:
        rows = x.shape[1:-1].num_elements() if x.shape.rank is not None else 1
        if rows is None:  # sizes in full: a -1 cannot be inferred for an empty tensor
            shape = tf.shape(x)
            r = tf.reduce_prod(shape[1:-1])  # R = 0: [0, 1, 1, Cin] (the op takes no height 0)
            x4 = tf.reshape(x, tf.stack([tf.where(r > 0, shape[0], 0), tf.maximum(r, 1), 1, cin]))
        else:
            x4 = tf.reshape(x, [-1, max(rows, 1), 1, cin])  # R = 0: the batch takes the 0 rows
        y = ops._run_conv_op(
            "Fp16Conv2D", None, attrs, stock=False, input=x4, filters=tf.reshape(kernel, w4)
        )
    out = tf.reshape(y, tf.concat([lead, [units]], 0))
    if x.shape.rank is not None:
        out.set_shape(x.shape[:-1].concatenate([units]))
    return out


@keras.saving.register_keras_serializable(package="tf_fp16ops", name="Dense")
class Dense(_Fp16AccumulationMixin, keras.layers.Dense):
    """`keras.layers.Dense` with a selectable accumulation precision, on inputs of any rank >= 2.

    y = activation(x @ kernel + bias) with kernel [Cin, units], x [..., Cin] -> [..., units];
    the product runs as a 1x1 Fp16Conv2D (`dense_matmul`). LoRA (`lora_rank`) works as in
    keras.layers.Dense (the effective kernel enters the product); quantized Dense layers
    (`quantize(...)`) are not supported and `convert` leaves them unchanged.

    Numerics (accumulation='float16'): each output is one binary16 accumulator over the Cin
    input features in ascending order, one rounding per fused step; dx accumulates over the
    units ascending, dkernel over the rows of x (leading dims flattened row-major) ascending.

    Raises:
      ValueError: as `tf_fp16ops.layers.Conv2D` and `keras.layers.Dense`.
    """

    def _fp16_call(self, inputs):
        self._check_not_quantized("Fp16Conv2D")
        x, w = self._cast_in(inputs, self.kernel)
        return self._finish(dense_matmul(x, w, self.accumulation, self._fixed_order))


@keras.saving.register_keras_serializable(package="tf_fp16ops", name="EinsumDense")
class EinsumDense(_Fp16AccumulationMixin, keras.layers.EinsumDense):
    """`keras.layers.EinsumDense` with a selectable accumulation precision (Fp16MatMul op).

    y = activation(einsum(equation, x, kernel) + bias), with the layer's equation, kernel
    (shape from the equation and `output_shape`) and bias as in keras.layers.EinsumDense; the
    product runs as `tf_fp16ops.einsum` (one Fp16MatMul with transposes and reshapes around
    it), which takes explicit two-operand equations whose labels are batch, contracted or free
    in one operand: every EinsumDense equation Keras itself builds (Dense-like 'abc,cd->abd',
    MultiHeadAttention's projections 'abc,cde->abde' and 'abcd,cde->abe', '...b,bc->...c').

    Numerics (accumulation='float16'): each output is one binary16 accumulator over the
    contracted labels' flattened index (row-major, in the input's label order) ascending, one
    rounding per fused step; gradients are Fp16MatMul products with the same accumulation.
    Quantized layers (`quantize(...)`) are not supported and `convert` leaves them unchanged.

    Raises:
      ValueError: as `tf_fp16ops.layers.Conv2D` and `keras.layers.EinsumDense`; an equation
        `tf_fp16ops.einsum` does not take (at the first call).
    """

    _OP = "Fp16MatMul"

    def _fp16_call(self, inputs):
        self._check_not_quantized(self._OP)
        x, w = self._cast_in(inputs, self.kernel)
        return self._finish(matmul_ops.einsum(self.equation, x, w, accumulation=self.accumulation))


_MHA_PROJECTIONS = ("_query_dense", "_key_dense", "_value_dense", "_gate_dense", "_output_dense")


@keras.saving.register_keras_serializable(package="tf_fp16ops", name="MultiHeadAttention")
class MultiHeadAttention(_Fp16AccumulationMixin, keras.layers.MultiHeadAttention):
    """`keras.layers.MultiHeadAttention` with a selectable accumulation precision for its four
    (five with `use_gate`) projections and both attention products (Fp16MatMul op).

    Same arguments, weights (names, shapes, order), masks and config as the Keras layer, plus
    `accumulation`. The projections are `tf_fp16ops.layers.EinsumDense` layers (Keras builds
    them; their class is then switched in place, so weights and tracking are Keras's own). The
    attention: query scaled by 1/sqrt(key_dim), scores = einsum(dot_product_equation, key,
    query), a softmax, then einsum(combine_equation, weights, value); both einsums run through
    `tf_fp16ops.einsum`. The softmax follows the path Keras takes for the same call:
      - no dropout, no score output and rank-4 projected inputs (Keras's fused
        `ops.dot_product_attention`): masked logits set to -0.7 * 3.38953e38, softmax in
        float32, cast back; a query row whose every key is masked (e.g. a padded position of
        `Embedding(mask_zero=True)`) gets uniform weights 1/S;
      - otherwise (Keras's explicit path): `_masked_softmax` in the compute dtype, masked
        weights 0 (a fully masked row gets all zeros), then dropout.
    Masks and the causal mask are those of Keras in both. So float32 accumulation matches the
    Keras layer within fp32 rounding, fully masked rows included.

    Input/output shapes: as keras.layers.MultiHeadAttention ([B, T, dim] query, [B, S, dim]
    value/key -> [B, T, output dim], scores [B, heads, T, S]). Numerics (accumulation=
    'float16'): each einsum as `tf_fp16ops.einsum`, the scores over the key dimension
    (key_dim) ascending, the combine over the key positions S ascending; in a float32 model
    operands are rounded to float16 and results cast back before the softmax and the bias (the
    combine's float16 result goes to the output projection as it is, without a gate: Keras's
    autocast would widen it only for the projection to round it back).

    Raises:
      ValueError: as `tf_fp16ops.layers.Conv2D` and `keras.layers.MultiHeadAttention`
        (`flash_attention` with `return_attention_scores`).
    """

    # Keras's own call in every state: its projections are this module's EinsumDense layers,
    # which follow this layer's accumulation (_share_accumulation), and both attention products
    # run in _compute_attention below.
    call = keras.layers.MultiHeadAttention.call
    _OP = "Fp16MatMul"

    def build(self, query_shape, value_shape, key_shape=None):
        super().build(query_shape, value_shape, key_shape)
        for name in _MHA_PROJECTIONS:
            sub = getattr(self, name, None)
            if sub is not None and type(sub) is keras.layers.EinsumDense:
                sub.__class__ = EinsumDense
                sub.supports_jit = False
        if not self._use_gate and self.compute_dtype == self.variable_dtype:
            # The combine's float16 result (float16 accumulation) goes to the output projection
            # as it is: Keras's autocast would widen it to the compute dtype only for the
            # projection to round it back (an exact no-op the audit flags as a round trip).
            # Variables need no autocast when they are in the compute dtype already.
            self._output_dense.autocast = False
        self._share_accumulation()

    def _share_accumulation(self) -> None:
        for name in _MHA_PROJECTIONS:
            sub = getattr(self, name, None)
            if isinstance(sub, EinsumDense):
                sub.accumulation = self.accumulation

    def _einsum(self, equation, a, b, to_output_dense=False):
        """`tf_fp16ops.einsum` on operands rounded as the accumulation needs; the result in the
        compute dtype, or as it is when it goes to an output projection that takes it so."""
        a, b = self._cast_in(a, b)
        out = matmul_ops.einsum(equation, a, b, accumulation=self.accumulation)
        if to_output_dense and not self._output_dense.autocast:
            return out
        return tf.cast(out, self.compute_dtype)

    def _compute_attention(
        self,
        query,
        key,
        value,
        attention_mask=None,
        training=None,
        return_attention_scores=False,
        use_causal_mask=False,
    ):
        if self.accumulation == KERAS:
            return super()._compute_attention(
                query,
                key,
                value,
                attention_mask=attention_mask,
                training=training,
                return_attention_scores=return_attention_scores,
                use_causal_mask=use_causal_mask,
            )
        if self._flash_attention and return_attention_scores:
            raise ValueError(
                "Returning attention scores is not supported when flash attention is enabled. "
                "Please disable flash attention to access attention scores."
            )
        if use_causal_mask:
            causal_mask = self._compute_causal_mask(query, value)
            attention_mask = (
                causal_mask
                if attention_mask is None
                else keras.ops.logical_and(keras.ops.cast(attention_mask, "bool"), causal_mask)
            )
        # Keras's own choice of path (keras.layers.MultiHeadAttention._compute_attention).
        fused = not (self._dropout > 0.0 or return_attention_scores or len(query.shape) != 4)
        query = keras.ops.multiply(query, keras.ops.cast(self._inverse_sqrt_key_dim, query.dtype))
        scores = self._einsum(self._dot_product_equation, key, query)
        if fused:
            probs = self._fused_softmax(scores, attention_mask)
            return self._einsum(self._combine_equation, probs, value, True), None
        scores = self._masked_softmax(scores, attention_mask)
        final = self._dropout_layer(scores, training=training) if self._dropout > 0.0 else scores
        output = self._einsum(self._combine_equation, final, value, True)
        return output, scores

    def _fused_softmax(self, scores, attention_mask):
        """The softmax of Keras's fused path (`keras.ops.dot_product_attention`, TensorFlow
        backend, keras/src/backend/tensorflow/nn.py: `_apply_masks` and
        `_dot_product_attention_xla`) on scores [B, heads, T, S]: masked positions become
        -0.7 * 3.38953e38 in float32, the softmax runs in float32, the result is cast back to
        the scores' dtype. So a query row whose every key is masked gets uniform weights (1/S),
        where `_masked_softmax` (the explicit path) gives zeros."""
        logits = tf.cast(scores, tf.float32)
        if attention_mask is not None:
            mask = keras.ops.cast(attention_mask, "bool")
            # As Keras: the mask [B, T, S] (or lower rank) gains axes before T for the heads.
            axis = -len(self._attention_axes) * 2 - 1
            for _ in range(4 - len(mask.shape)):
                mask = keras.ops.expand_dims(mask, axis=axis)
            logits = tf.where(mask, logits, tf.constant(3.38953e38 * -0.7, tf.float32))
        return tf.cast(tf.nn.softmax(logits, axis=-1), scores.dtype)


# keras class -> tf_fp16ops class, for `convert`.
KERAS_EQUIVALENTS = {
    keras.layers.Conv2D: Conv2D,
    keras.layers.DepthwiseConv2D: DepthwiseConv2D,
    keras.layers.SeparableConv2D: SeparableConv2D,
    keras.layers.Conv2DTranspose: Conv2DTranspose,
    keras.layers.Conv1D: Conv1D,
    keras.layers.DepthwiseConv1D: DepthwiseConv1D,
    keras.layers.SeparableConv1D: SeparableConv1D,
    keras.layers.Conv1DTranspose: Conv1DTranspose,
    keras.layers.Dense: Dense,
    keras.layers.EinsumDense: EinsumDense,
    keras.layers.MultiHeadAttention: MultiHeadAttention,
}
