"""Loading SavedModels that contain Fp16Conv2D ops.

A SavedModel stores op names, not kernels: `tf.saved_model.load` (and `keras.layers.TFSMLayer`,
TF Serving, `saved_model_cli run`) fails with NotFoundError or RuntimeError "Op type not registered
'Fp16Conv2D' in binary running on ..." unless the op library was loaded into the process
first. Loading it is what `import tf_fp16ops` does, so the one-liner is

    import tf_fp16ops, tensorflow as tf; model = tf.saved_model.load(path)

or, where the Python package is not installed but the library file is,
`tf.load_op_library(".../tf_fp16ops/_libs/tf<minor>/_fp16ops.so")` (the library of the installed
TensorFlow minor; `tf_fp16ops/_fp16ops.so` in a source tree) before loading. Loading the library
again, or through a symlink to it, is harmless (TensorFlow keeps one registration per op name).
"""

from __future__ import annotations

import os

import tensorflow as tf

from tf_fp16ops._platform import library as _library

_NOT_REGISTERED = "Op type not registered"


def load_saved_model(path: str | os.PathLike, tags=None, options=None):
    """`tf.saved_model.load(path, tags, options)` with the Fp16Conv2D op library loaded first.

    Args:
      path: SavedModel directory (from `tf.saved_model.save` or Keras `model.export`).
      tags, options: as `tf.saved_model.load`.

    Returns:
      The loaded trackable object, as `tf.saved_model.load` returns it.

    Raises:
      tf_fp16ops.OpLibraryError (an ImportError): the op library cannot be loaded (see
        `tf_fp16ops._platform.library.load`).
      tf.errors.NotFoundError or RuntimeError (TensorFlow raises either, depending on whether the
        op sits in the top-level graph or in a function body): the SavedModel needs another op
        that is not registered; the message keeps TensorFlow's and says the Fp16Conv2D library
        is loaded, so the missing op comes from another library.
      OSError / ValueError: as `tf.saved_model.load` (missing or malformed directory).
    """
    _library.load()
    try:
        return tf.saved_model.load(os.fspath(path), tags=tags, options=options)
    except (tf.errors.NotFoundError, RuntimeError) as e:
        if _NOT_REGISTERED not in str(e):
            raise
        hint = (
            f"{e}\ntf_fp16ops: the Fp16Conv2D ops are registered (library "
            f"{_library.loaded().path}); the op named above comes from another library, which must "
            "be loaded with tf.load_op_library before loading this SavedModel."
        )
        if isinstance(e, tf.errors.NotFoundError):
            raise tf.errors.NotFoundError(e.node_def, e.op, hint) from e
        raise RuntimeError(hint) from e
