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
# Keras layer, model conversion and SavedModel loading. Importing `layers` registers
# "tf_fp16ops>Conv2D" so `.keras` files load after `import tf_fp16ops`; keras is already imported
# by tensorflow, so these imports add a few milliseconds.
from tf_fp16ops import layers
from tf_fp16ops.comparison import compare
from tf_fp16ops.conversion import convert, convert_with_report
from tf_fp16ops.saved_model import load_saved_model
from tf_fp16ops.sensitivity import sensitivity

__all__ = ["accumulation_dtype", "compare", "conv2d", "conv2d_backprop_filter", "conv2d_backprop_input",
           "convert", "convert_with_report", "layers", "load_saved_model", "sensitivity"]
__version__ = "0.1.0"
