"""`python -m tf_fp16ops.audit` runs the `tf-fp16-audit` command."""

import sys

from .cli import main

sys.exit(main())
