"""Keras 3 layers that run their convolution through the Fp16Conv2D op.

`Conv2D` is `keras.layers.Conv2D` with one more argument, `accumulation`; it takes every
other argument of `keras.layers.Conv2D` (filters, kernel_size, strides, padding, data_format,
dilation_rate, groups, activation, use_bias, initializers, regularizers, constraints, dtype,
name, lora_rank, ...), keeps the same weights (kernel HWIO [KH, KW, C / groups, filters],
bias [filters]) under the same names, and is registered serializable as "tf_fp16ops>Conv2D",
so `get_config`/`from_config` and `.keras` files round-trip once `tf_fp16ops` is imported.

Which dtype the convolution runs in (T of the op):
  accumulation="float16": T=half. Inputs and kernel are cast to float16 when the layer's
    compute dtype is float32, and the result is cast back to the compute dtype, so one layer of
    a float32 model can be switched to true fp16 arithmetic.
  accumulation="float32": T = the layer's compute dtype (float16 under the "float16" and
    "mixed_float16" policies, float32 under "float32"), fp32 accumulation.
Under "mixed_float16" the variables stay float32 and are cast to float16 for the call (Keras
autocasting), as for keras.layers.Conv2D. Bias and activation run in the compute dtype.
"""
from __future__ import annotations

import keras
import tensorflow as tf

from tf_fp16ops import ops

_SUPPORTED_COMPUTE_DTYPES = ("float16", "float32")


def canonical_accumulation(accumulation) -> str:
    """'float16' or 'float32' for any name `tf_fp16ops.accumulation_dtype` accepts.

    Raises:
      ValueError: names `accumulation` and the bad value.
    """
    return ops.accumulation_dtype(accumulation).name


@keras.saving.register_keras_serializable(package="tf_fp16ops", name="Conv2D")
class Conv2D(keras.layers.Conv2D):
    """2-D convolution layer with a selectable accumulation precision (Fp16Conv2D op).

    Args:
      accumulation: 'float16' (default; true fp16 accumulation, see `tf_fp16ops.conv2d`) or
        'float32'; also 'half'/'float', tf.float16/tf.float32.
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

    def __init__(self, filters, kernel_size, accumulation="float16", **kwargs):
        self.accumulation = canonical_accumulation(accumulation)
        super().__init__(filters, kernel_size, **kwargs)
        if self.compute_dtype not in _SUPPORTED_COMPUTE_DTYPES:
            raise ValueError(
                f"tf_fp16ops.layers.Conv2D '{self.name}': the dtype policy "
                f"'{self.dtype_policy.name}' has compute dtype {self.compute_dtype}; the Fp16Conv2D "
                f"op computes in float16 or float32 only (use dtype 'float32', 'float16' or "
                f"'mixed_float16')")
        self.supports_jit = False

    def convolution_op(self, inputs, kernel):
        op_dtype = "float16" if self.accumulation == "float16" else self.compute_dtype
        outputs = ops.conv2d(
            tf.cast(inputs, op_dtype),
            tf.cast(kernel, op_dtype),
            strides=list(self.strides),
            padding=self.padding.upper(),
            data_format="NHWC" if self.data_format == "channels_last" else "NCHW",
            dilations=list(self.dilation_rate),
            accumulation=self.accumulation,
        )
        return tf.cast(outputs, self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config["accumulation"] = self.accumulation
        return config
