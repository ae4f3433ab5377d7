"""Where the sweep's model runs: one device, or the replicas of a tf.distribute strategy, each
on its contiguous share of the batch (`check_strategy`, `Replicas`)."""

from __future__ import annotations

import keras
import numpy as np


def check_strategy(strategy):
    """`strategy` itself when it is a usable tf.distribute.Strategy (None: one device)."""
    if strategy is None:
        return None
    import tensorflow as tf

    if isinstance(strategy, type):
        raise TypeError(
            f"strategy must be a tf.distribute.Strategy instance, got the class "
            f"{strategy.__name__} (create one: {strategy.__name__}(...))"
        )
    if not isinstance(strategy, tf.distribute.Strategy):
        raise TypeError(f"strategy must be a tf.distribute.Strategy, got {type(strategy).__name__}")
    if isinstance(strategy, tf.distribute.experimental.ParameterServerStrategy):
        raise ValueError(
            "strategy: ParameterServerStrategy is not supported (its replicas run through a "
            "ClusterCoordinator); use MirroredStrategy or MultiWorkerMirroredStrategy"
        )
    return strategy


class Replicas:
    """Runs `fn(xb) -> [outputs of state 0, outputs of state 1, ...]` (each a flat list of
    tensors) on one global batch and returns NumPy float64 arrays [state][output]: directly on
    one device, or with each replica of `strategy` taking its contiguous share of the batch
    (`strategy.run`), the outputs brought together in sample order with `strategy.gather`
    (a copy: no arithmetic). In eager mode MirroredStrategy runs its replicas' threads in turn; a
    lock makes that explicit, since `fn` switches the shared layers' accumulation."""

    def __init__(self, strategy):
        import threading

        self.strategy = strategy
        self.lock = threading.Lock()

    def __call__(self, fn, xb) -> list[list[np.ndarray]]:
        import tensorflow as tf

        def np64(t):
            return keras.ops.convert_to_numpy(t).astype(np.float64)

        if self.strategy is None:
            return [[np64(o) for o in outs] for outs in fn(xb)]
        strategy = self.strategy
        leaves = keras.tree.flatten(xb)
        n = len(leaves[0])
        replicas = strategy.num_replicas_in_sync
        bounds = [n * r // replicas for r in range(replicas + 1)]

        def share(ctx):
            i = ctx.replica_id_in_sync_group
            lo, hi = bounds[i], bounds[i + 1]
            # A replica without samples runs one (the batch's first) and keeps none of it.
            lo, hi, keep = (lo, hi, hi - lo) if hi > lo else (0, 1, 0)
            part = keras.tree.map_structure(lambda a: tf.convert_to_tensor(a[lo:hi]), xb)
            return part, tf.constant(keep)

        def replica_fn(part, keep):
            with self.lock:
                states = fn(part)
            k = int(keep)
            # One tensor per output: the states stacked on axis 1, samples on axis 0.
            return [tf.stack([s[i] for s in states], axis=1)[:k] for i in range(len(states[0]))]

        with _quiet_eager_strategy_warning():
            values = strategy.experimental_distribute_values_from_function(share)
            per_replica = strategy.run(replica_fn, args=values)
            gathered = [np64(strategy.gather(o, axis=0)) for o in per_replica]
        states = gathered[0].shape[1]
        return [[g[:, s] for g in gathered] for s in range(states)]


class _quiet_eager_strategy_warning:
    """Drops TensorFlow's 'Using MirroredStrategy eagerly has significant overhead' warning (the
    sweep switches layers between model calls, so its replica functions run eagerly by design);
    other TensorFlow log records pass."""

    def __enter__(self):
        import logging

        class Drop(logging.Filter):
            def filter(self, record):
                return "eagerly has significant overhead" not in record.getMessage()

        self.logger = logging.getLogger("tensorflow")
        self.filter = Drop()
        self.logger.addFilter(self.filter)
        return self

    def __exit__(self, *exc):
        self.logger.removeFilter(self.filter)
        return False
