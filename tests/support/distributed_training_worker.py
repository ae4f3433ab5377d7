"""Subprocess entry point for tests/models/test_training.py: runs
examples/train_digits.replica_losses under a tf.distribute strategy and writes the losses of each
accumulation as JSON.

  --strategy mirrored     MirroredStrategy over two logical CPU devices of this process.
  --strategy multiworker  MultiWorkerMirroredStrategy; the cluster comes from TF_CONFIG.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

# Run as a script (sys.path[0] is tests/support): tests/ on the path, for the support package,
# and examples/ for train_digits.
TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [TESTS, os.path.join(os.path.dirname(TESTS), "examples")]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--strategy", choices=["mirrored", "multiworker", "single"], required=True)
    parser.add_argument("--accumulations", nargs="+", default=["float32", "float16"])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    from support.local_cluster import strategy as make_strategy

    strategy = make_strategy(args.strategy)

    import train_digits

    losses = {
        a: train_digits.replica_losses(strategy, a, steps=args.steps) for a in args.accumulations
    }
    with open(args.out, "w") as f:
        json.dump({"replicas": strategy.num_replicas_in_sync, "losses": losses}, f)


if __name__ == "__main__":
    main()
