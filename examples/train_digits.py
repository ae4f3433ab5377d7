"""Trains a small CNN built from tf_fp16ops.layers.Conv2D on scikit-learn's 8x8 digits.

The digits data set (1797 greyscale 8x8 images, 10 classes) ships inside scikit-learn, so
nothing is downloaded; scikit-learn is the examples' one extra dependency
(`pip install 'tf_fp16ops[examples]'`; without it the scripts say so in one line and exit 2).
The same model is trained with float16 accumulation (the convolutions run in binary16 with an
fp16 accumulator, forward and backward) and with float32 accumulation, from the same initial
weights, and the per-epoch training loss of both is printed.

    python examples/train_digits.py --epochs 3

`replica_losses` runs the same training step under a tf.distribute strategy (the tests use
MirroredStrategy with two logical CPUs and MultiWorkerMirroredStrategy with two processes).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from dataclasses import dataclass

# isort: off
# tf_fp16ops first: its layers module imports TensorFlow without TensorFlow's start-up log lines
# on stderr (keras imports TensorFlow too, so it comes after).
import tf_fp16ops
from tf_fp16ops import layers
import keras
import numpy as np
import tensorflow as tf

# isort: on

Conv2D = layers.Conv2D


@dataclass(frozen=True)
class TrainingResult:
    accumulation: str
    losses: tuple[
        float, ...
    ]  # mean training loss of each epoch (sparse categorical cross-entropy, nats)
    test_accuracy: float  # on the held-out images, after the last epoch


EXTRA_HINT = "pip install 'tf_fp16ops[examples]' (or scikit-learn)"


def require_scikit_learn(prog: str) -> None:
    """Exits with status 2 and one line on stderr when scikit-learn is not installed."""
    if importlib.util.find_spec("sklearn") is None:
        print(
            f"{prog}: error: the digits data set ships inside scikit-learn, which is not "
            f"installed: {EXTRA_HINT}",
            file=sys.stderr,
        )
        sys.exit(2)


def load_digits_data(n_train: int = 1500):
    """Returns (x_train, y_train, x_test, y_test): x float32 [N, 8, 8, 1] in [0, 1], y int32.

    The first `n_train` images (of 1797) are the training set, the rest the test set.
    """
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[..., None]
    y = digits.target.astype(np.int32)
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:]


def build_model(accumulation: str, seed: int = 0) -> keras.Model:
    """Conv(8, 3x3, same) - ReLU - Conv(16, 3x3, stride 2, same) - ReLU - Dense(10) logits.

    Initial weights depend only on `seed`, so models built with different accumulations start equal.
    """

    def init(i):
        return keras.initializers.GlorotUniform(seed=seed + i)

    return keras.Sequential(
        [
            keras.Input((8, 8, 1)),
            Conv2D(
                8,
                3,
                padding="same",
                activation="relu",
                accumulation=accumulation,
                kernel_initializer=init(0),
            ),
            Conv2D(
                16,
                3,
                strides=2,
                padding="same",
                activation="relu",
                accumulation=accumulation,
                kernel_initializer=init(1),
            ),
            keras.layers.Flatten(),
            keras.layers.Dense(10, kernel_initializer=init(2)),
        ],
        name=f"digits_cnn_{accumulation}",
    )


def train(
    accumulation: str,
    epochs: int = 3,
    batch_size: int = 32,
    n_train: int = 1500,
    seed: int = 0,
    learning_rate: float = 0.1,
) -> TrainingResult:
    """Trains with SGD (momentum 0.9) in input order (no shuffling) and returns the losses."""
    x, y, x_test, y_test = load_digits_data(n_train)
    model = build_model(accumulation, seed)
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate, momentum=0.9),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
        jit_compile=False,
    )
    history = model.fit(x, y, batch_size=batch_size, epochs=epochs, shuffle=False, verbose=0)
    accuracy = float(model.evaluate(x_test, y_test, verbose=0)[1]) if len(x_test) else float("nan")
    return TrainingResult(
        tf_fp16ops.layers.canonical_accumulation(accumulation),
        tuple(float(v) for v in history.history["loss"]),
        accuracy,
    )


def replica_losses(
    strategy: tf.distribute.Strategy,
    accumulation: str,
    steps: int = 3,
    global_batch: int = 32,
    seed: int = 0,
    learning_rate: float = 0.1,
) -> list[float]:
    """Runs `steps` SGD steps on the first `steps * global_batch` training images under `strategy`.

    Each replica takes its contiguous slice of the global batch; its loss is the sum of its
    per-example losses divided by the global batch size, and the optimizer sums the gradients
    over replicas, so the step equals the single-device step up to the order of the fp32 sums.

    Returns:
      The loss of each step (mean over the global batch, before that step's update).
    """
    x, y, _, _ = load_digits_data()
    with strategy.scope():
        model = build_model(accumulation, seed)
        optimizer = keras.optimizers.SGD(learning_rate)
        optimizer.build(model.trainable_variables)
    n = strategy.num_replicas_in_sync
    if global_batch % n:
        raise ValueError(f"global_batch {global_batch} must be a multiple of the {n} replicas")
    per_replica = global_batch // n
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="sum")

    def replica_step(xb, yb):
        i = tf.distribute.get_replica_context().replica_id_in_sync_group
        xs, ys = (
            xb[i * per_replica : (i + 1) * per_replica],
            yb[i * per_replica : (i + 1) * per_replica],
        )
        with tf.GradientTape() as tape:
            loss = loss_fn(ys, model(xs, training=True)) / global_batch
        # Keras's TensorFlow optimizer sums the gradients over replicas (all-reduce) in apply().
        optimizer.apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
        return loss

    @tf.function
    def step(xb, yb):
        return strategy.reduce(
            tf.distribute.ReduceOp.SUM, strategy.run(replica_step, args=(xb, yb)), axis=None
        )

    losses = []
    for s in range(steps):
        sl = slice(s * global_batch, (s + 1) * global_batch)
        losses.append(float(step(tf.constant(x[sl]), tf.constant(y[sl]))))
    return losses


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=3, help="training epochs (default 3)")
    parser.add_argument("--batch-size", type=int, default=32, help="batch size (default 32)")
    parser.add_argument(
        "--train-images", type=int, default=1500, help="training images of the 1797 (default 1500)"
    )
    args = parser.parse_args(argv)
    # TensorFlow's run-time "oneDNN supports DT_HALF only ..." line (CPUs without avx512_fp16) and
    # its start-up lines are dropped; everything else on stderr passes.
    tf_fp16ops.quiet_stderr()
    require_scikit_learn("train_digits.py")
    for accumulation in ("float16", "float32"):
        r = train(accumulation, args.epochs, args.batch_size, args.train_images)
        print(
            f"accumulation={r.accumulation}: loss per epoch "
            f"{', '.join(f'{v:.4f}' for v in r.losses)}; test accuracy {r.test_accuracy:.3f}"
        )


if __name__ == "__main__":
    main()
