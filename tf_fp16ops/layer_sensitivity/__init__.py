"""Which layers of a model can take fp16 accumulation: the `tf_fp16ops.sensitivity` function and
the `tf-fp16-sensitivity` command.

  analysis.py  `sensitivity(model, x, y, ...)`: the one-layer-at-a-time sweep, the ranking and
               the set search
  result.py    `SensitivityResult` and `LayerSensitivity`: its table, JSON and TensorBoard summaries
  source.py    the evaluation set: `x` checked against the model, read as batches once per pass
  reuse.py     the sweep's reuse of the baseline's activations; each layer's path in the model
  replicas.py  one device or the replicas of a tf.distribute strategy
  cli.py       `tf-fp16-sensitivity MODEL.keras --inputs X.npy ...`: checks its flags and files
               before importing TensorFlow, then runs `analysis.sensitivity`

The family is called `layer_sensitivity` and not `sensitivity`: `tf_fp16ops.sensitivity` is the
public function, and a subpackage of that name would be set as the package attribute
`tf_fp16ops.sensitivity` on its first import, hiding the function. Importing this package
imports nothing (the command must not import TensorFlow before its checks).
"""
