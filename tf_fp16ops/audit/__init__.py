"""Graph audit: which convolutions of a TensorFlow model really run in fp16.

Reads SavedModels, GraphDefs, .keras archives and traced Python functions as protos (never
executes them, never needs this package's op library; files are read without importing
TensorFlow, through TensorBoard's copies of its protos, see `protos`), and reports per
convolution call site the storage dtype, the effective accumulation with its reason, provenance
through casts, the Keras policy, FLOPs and risk flags. See `audit()` and the `tf-fp16-audit`
command. `verify()` and `tf-fp16-audit --run` (opt-in) execute the model and add runtime evidence
(see `runtime/`).
"""

from .api import audit, verify
from .context import RuntimeContext
from .demo import demo_example
from .errors import AuditInputError
from .findings import CLASSES, SCHEMA_VERSION, AuditReport, ConvFinding

__all__ = [
    "audit",
    "verify",
    "RuntimeContext",
    "AuditInputError",
    "AuditReport",
    "ConvFinding",
    "CLASSES",
    "SCHEMA_VERSION",
    "demo_example",
]
