"""Subprocess entry point for tests/models/test_layer_sensitivity.py: runs tf_fp16ops.sensitivity
under a tf.distribute strategy and writes the result (`SensitivityResult.to_dict()`) as JSON.

  --strategy mirrored     MirroredStrategy over two logical CPU devices of this process (set
                          before TensorFlow initialises its devices, hence a subprocess).
  --strategy multiworker  MultiWorkerMirroredStrategy; the cluster comes from TF_CONFIG.
  --dataset               the inputs as a tf.data.Dataset of (x, y) batches whose cardinality
                          is UNKNOWN (a filter), instead of arrays.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

# Run as a script (sys.path[0] is tests/support): tests/ on the path, for the support package.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--strategy", choices=["mirrored", "multiworker"], required=True)
    parser.add_argument("--model", required=True, help=".keras file")
    parser.add_argument("--inputs", required=True, help=".npy file")
    parser.add_argument("--labels", required=True, help=".npy file")
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--tolerance", type=float, required=True)
    parser.add_argument("--dataset", action="store_true")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    import tensorflow as tf

    from support.local_cluster import strategy as make_strategy

    strategy = make_strategy(args.strategy)

    import keras
    import numpy as np

    import tf_fp16ops.layers  # noqa: F401  (registers the layers so .keras files load)
    from tf_fp16ops.layer_sensitivity.analysis import sensitivity

    model = keras.saving.load_model(args.model)
    x, y = np.load(args.inputs), np.load(args.labels)
    kw = dict(tolerance=args.tolerance, metric_tolerance=1.0, progress=False, strategy=strategy)
    if args.dataset:
        data = (
            tf.data.Dataset.from_tensor_slices((x, y))
            .filter(lambda a, b: True)
            .batch(args.batch_size)
        )
        result = sensitivity(model, data, **kw)
    else:
        result = sensitivity(model, x, y, batch_size=args.batch_size, **kw)
    with open(args.out, "w") as f:
        json.dump({"replicas": strategy.num_replicas_in_sync, "result": result.to_dict()}, f)


if __name__ == "__main__":
    main()
