"""The runtime's plumbing, private to the package: what every public module stands on and no user
calls.

  library.py  finds and loads the op library built for the installed TensorFlow (`load()`), or
              raises `tf_fp16ops.OpLibraryError` in one line
  quiet.py    imports TensorFlow with its start-up lines filtered from stderr, and the filter
              process itself (`python -m tf_fp16ops._platform.quiet`)
  cli.py      the tools' argparse parser, whose errors are one line (no usage block)
  xla.py      refuses to build the ops inside an XLA compilation, with a message that says why
  stock_conv.py  decides when a float32 gradient goes to TensorFlow's own op (`stock_wins`)

Importing this package imports nothing: `library`, `xla` and `stock_conv` import TensorFlow,
`quiet` and `cli` do not.
"""
