"""What the test areas share: the NumPy references (reference.py), CPU feature checks
(cpu_features.py), Keras stock-layer runners (keras_reference.py), audit graph builders
(audit_helpers.py, callgraph_models.py), a Transformer encoder (transformer.py), the .keras files
of an earlier release (keras_files.py), the bounded runner of hostile cases (hostile.py), the
fuzz cases and their worker (fuzz_cases.py, fuzz_worker.py), a local tf.distribute cluster
(local_cluster.py) and its worker scripts (distributed_*_worker.py).

Imported as `support` (tests/conftest.py puts tests/ on sys.path): `from support import
reference as R`. Worker scripts run as `python tests/support/<name>.py`.
"""
