"""A small bundled example SavedModel for `make demo`, generated on first use."""

from __future__ import annotations

import os


def demo_example(path: str) -> str:
    """Writes (once) an example SavedModel at `path` and returns `path`.

    Signatures: "conv16" (TF Conv2D, T=half), "conv32" (T=float), "conv16_32" (fp16 inputs cast
    to float, Conv2D T=float, result cast back: the seed's fake fp16), and, when this package's op
    library loads, "ours_half" / "ours_float" (Fp16Conv2D with Tacc=half / float).
    Shapes: x [1, 32, 32, 16], w [3, 3, 16, 16], VALID, NHWC/HWIO.
    """
    if os.path.exists(os.path.join(path, "saved_model.pb")):
        return path
    import tensorflow as tf

    try:
        import tf_fp16ops  # noqa: F401 - needs the compiled op library

        conv_ours = getattr(tf_fp16ops, "conv2d", None)
    except ImportError:
        conv_ours = None
    x16 = tf.TensorSpec([1, 32, 32, 16], tf.float16)
    x32 = tf.TensorSpec([1, 32, 32, 16], tf.float32)

    class Demo(tf.Module):
        def __init__(self):
            super().__init__()
            rng = tf.random.stateless_uniform([3, 3, 16, 16], seed=[1, 2])
            self.w32 = tf.Variable(rng, name="w32")
            self.w16 = tf.Variable(tf.cast(rng, tf.float16), name="w16")

        @tf.function(input_signature=[x16])
        def conv16(self, x):
            return tf.nn.conv2d(x, self.w16, 1, "VALID")

        @tf.function(input_signature=[x32])
        def conv32(self, x):
            return tf.nn.conv2d(x, self.w32, 1, "VALID")

        @tf.function(input_signature=[x16])
        def conv16_32(self, x):
            y = tf.nn.conv2d(tf.cast(x, tf.float32), tf.cast(self.w16, tf.float32), 1, "VALID")
            return tf.cast(y, tf.float16)

    m = Demo()
    sigs = {"conv16": m.conv16, "conv32": m.conv32, "conv16_32": m.conv16_32}
    if conv_ours is not None:
        m.ours_half = tf.function(
            lambda x: conv_ours(x, m.w16, [1, 1, 1, 1], "VALID", accumulation="float16"),
            input_signature=[x16],
        )
        m.ours_float = tf.function(
            lambda x: conv_ours(x, m.w16, [1, 1, 1, 1], "VALID", accumulation="float32"),
            input_signature=[x16],
        )
        sigs.update(ours_half=m.ours_half, ours_float=m.ours_float)
    tf.saved_model.save(m, path, signatures=sigs)
    return path
