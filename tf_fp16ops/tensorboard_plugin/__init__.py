"""TensorBoard "fp16 audit" dashboard for `tf-fp16-audit --logdir` output.

`plugin.Fp16AuditPlugin` is registered through the `tensorboard_plugins` entry point;
`summary.write_audit_summary` writes the data it shows; `metadata` documents the layout.
Nothing here imports TensorFlow at module load.
"""

from .metadata import FINDINGS_TAG, PLUGIN_DATA_VERSION, PLUGIN_NAME, REPORT_TAG

__all__ = ["FINDINGS_TAG", "PLUGIN_DATA_VERSION", "PLUGIN_NAME", "REPORT_TAG"]
