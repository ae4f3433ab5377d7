"""tf_fp16ops: TensorFlow convolutions whose accumulation precision is an op attribute.

`conv2d(..., accumulation="float16")` accumulates in IEEE binary16 with one rounding per
fused multiply-add step; `accumulation="float32"` accumulates in binary32 and rounds once.
See README "Numerics" for the exact contract and `tf_fp16ops.audit` for the graph audit.

Importing this package loads the compiled op library; it raises ImportError naming the
TensorFlow version the library was built for, the installed one, and `make build`.
"""
from tf_fp16ops.ops import (
    accumulation_dtype,
    conv2d,
    conv2d_backprop_filter,
    conv2d_backprop_input,
)

__all__ = ["accumulation_dtype", "conv2d", "conv2d_backprop_filter", "conv2d_backprop_input"]
__version__ = "0.1.0"
