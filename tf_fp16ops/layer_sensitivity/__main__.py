"""`python -m tf_fp16ops.layer_sensitivity`: the tf-fp16-sensitivity command."""

import sys

from tf_fp16ops.layer_sensitivity.cli import main

sys.exit(main())
