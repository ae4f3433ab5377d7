"""The keras.layers originals as test references on every CPU (`StockLayer`)."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from support.cpu_features import eigen_runs_stock_convs


def _pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


class StockLayer:
    """The keras.layers original as the reference, run on every CPU.

    Where TensorFlow's Eigen CPU kernels run the stock convs of `dtype` here (no oneDNN for that
    dtype: `cpu_features.eigen_runs_stock_convs`), they refuse NCHW and dilated transposed
    convolutions, which oneDNN and tf_fp16ops run. The same layer is then computed on its
    equivalent: channels_last on the transposed input (same kernel layout in Keras), and a
    dilated transposed conv as the undilated one with the kernel's taps spread d apart by zeros
    (the zero taps add exact zeros); its kernel gradient is the spread kernel's at the taps.
    """

    def __init__(self, keras_cls, args, shape, dtype=None):
        self.args, self.dtype = dict(args), dtype
        kw = {} if dtype is None else {"dtype": dtype}
        eigen = eigen_runs_stock_convs(dtype or "float32")
        self.nchw = eigen and args.get("data_format") == "channels_first"
        self.spread = 1
        if eigen and keras_cls in (keras.layers.Conv2DTranspose, keras.layers.Conv1DTranspose):
            self.spread = args.get("dilation_rate", 1)
            assert isinstance(self.spread, int), "equivalent written for one dilation rate"
        self.layer = keras_cls(**args, **kw)  # the original, for its weights
        self.layer.build(shape)
        run_args = dict(args)
        if self.nchw:
            run_args["data_format"] = "channels_last"
        if self.spread > 1:
            k = _pair(args["kernel_size"]) if keras_cls is keras.layers.Conv2DTranspose else None
            d = self.spread
            run_args["dilation_rate"] = 1
            run_args["kernel_size"] = (
                tuple((n - 1) * d + 1 for n in k) if k else (args["kernel_size"] - 1) * d + 1
            )
        self.runner = keras_cls(**run_args, **kw) if (self.nchw or self.spread > 1) else None
        if self.runner is not None:
            self.runner.build(self._to_run(np.zeros(shape, "float32")).shape)

    def _to_run(self, x):
        if not self.nchw:
            return x
        perm = [0, *range(2, len(x.shape)), 1]
        return tf.transpose(x, perm) if tf.is_tensor(x) else np.transpose(x, perm)

    def _from_run(self, y):
        return tf.transpose(y, [0, len(y.shape) - 1, *range(1, len(y.shape) - 1)])

    def _spread(self, kernel):
        d = self.spread
        if d == 1:
            return kernel
        spatial = kernel.shape[:-2]
        out = np.zeros(tuple((n - 1) * d + 1 for n in spatial) + kernel.shape[-2:], kernel.dtype)
        out[tuple(slice(None, None, d) for _ in spatial)] = kernel
        return out

    def get_weights(self):
        return self.layer.get_weights()

    def set_weights(self, weights):
        self.layer.set_weights(weights)
        if self.runner is not None:
            self.runner.set_weights([self._spread(weights[0]), *weights[1:]])

    @property
    def trainable_weights(self):
        return (self.runner or self.layer).trainable_weights

    def __call__(self, x):
        if self.runner is None:
            return self.layer(x)
        return self._from_run(self.runner(self._to_run(x))) if self.nchw else self.runner(x)

    def weight_grads(self, grads):
        """Gradients of `trainable_weights` mapped onto the original's weights."""
        if self.spread == 1:
            return grads
        d = self.spread
        kernel = np.asarray(grads[0])
        return [kernel[tuple(slice(None, None, d) for _ in kernel.shape[:-2])], *grads[1:]]
