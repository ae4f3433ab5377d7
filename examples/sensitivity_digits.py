"""Which layers of the digits CNN can take fp16 accumulation (tf_fp16ops.sensitivity).

Trains the model of examples/train_digits.py with float32 accumulation, saves it as a .keras
file, then ranks its layers on the 297 held-out images with their labels and prints the table:

    python examples/sensitivity_digits.py --epochs 3 --tolerance 2e-3 [--out DIR]

DIR (default a temporary directory) receives digits.keras, x_test.npy and y_test.npy, so the
same run is `tf-fp16-sensitivity DIR/digits.keras --inputs DIR/x_test.npy --labels DIR/y_test.npy`.
"""

from __future__ import annotations

import argparse
import os
import tempfile

# isort: off
import train_digits  # first: it imports tf_fp16ops before keras (no TensorFlow start-up lines)
import keras
import numpy as np

import tf_fp16ops

# isort: on


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--tolerance", type=float, default=2e-3)
    parser.add_argument("--metric-tolerance", type=float, default=0.0)
    parser.add_argument("--out", default=None, help="directory for the model and the data")
    args = parser.parse_args(argv)
    # TensorFlow's run-time "oneDNN supports DT_HALF only ..." line (CPUs without avx512_fp16) and
    # its start-up lines are dropped; everything else on stderr passes.
    tf_fp16ops.quiet_stderr()
    train_digits.require_scikit_learn("sensitivity_digits.py")
    x, y, x_test, y_test = train_digits.load_digits_data()
    model = train_digits.build_model("float32")
    model.compile(
        optimizer=keras.optimizers.SGD(0.1, momentum=0.9),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=False,
    )
    model.fit(x, y, batch_size=32, epochs=args.epochs, shuffle=False, verbose=0)
    out = args.out or tempfile.mkdtemp(prefix="digits_sensitivity_")
    os.makedirs(out, exist_ok=True)
    model.save(os.path.join(out, "digits.keras"))
    np.save(os.path.join(out, "x_test.npy"), x_test)
    np.save(os.path.join(out, "y_test.npy"), y_test)
    result = tf_fp16ops.sensitivity(
        model,
        x_test,
        y_test,
        tolerance=args.tolerance,
        metric_tolerance=args.metric_tolerance,
        progress=False,
    )
    print(result.table())
    print(f"model and data in {out}")


if __name__ == "__main__":
    main()
