"""Refuses to build Fp16Conv2D ops inside an XLA compilation, with a message that says why and how
to run.

The op library registers CPU and GPU kernels only; XLA (`tf.function(jit_compile=True)`) needs a
tf2xla kernel for every op of the cluster, so TensorFlow would fail later with "Detected
unsupported operations ... No registered 'Fp16Conv2D' OpKernel for XLA_CPU_JIT devices", which
names neither the cause nor the fix. (Keras' `compile(jit_compile=True)` sees that the layers do
not support XLA, warns and runs without it.)
"""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.ops import control_flow_util  # XLA-context query used by tf.function itself


def check_not_in_xla(op_type: str) -> None:
    """Raises ValueError when the default graph (or one it is nested in) is being traced for XLA.

    Raises:
      ValueError: names `op_type`, says it has no XLA kernel and to use jit_compile=False.
    """
    if tf.executing_eagerly():
        return
    if control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()):
        raise ValueError(
            f"{op_type} has no XLA kernel (the tf_fp16ops op library registers CPU and GPU kernels "
            "only), so it cannot run inside an XLA compilation such as "
            "tf.function(jit_compile=True). Run it with jit_compile=False (the default of "
            "tf.function)."
        )
