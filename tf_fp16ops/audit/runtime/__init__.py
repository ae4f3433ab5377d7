"""Runtime evidence for the audit: executes a model (opt-in), collects the graphs TensorFlow really
ran, matches them to the static findings, and probes each (op, T, Tacc, device) configuration for
the accumulation it really uses. GPU kernel names from a profile are decoded in `kernels`.

Nothing here runs unless asked: `tf-fp16-audit --run` or `tf_fp16ops.audit.verify()`.
"""
