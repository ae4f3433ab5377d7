"""Build script for the parts pyproject.toml cannot state statically (metadata lives there).

* The wheel holds `tf_fp16ops/_fp16ops.so`, a native library, so it is a platform wheel
  (e.g. `cp311-cp311-linux_x86_64`), never `py3-none-any`: the distribution reports extension
  modules, as tensorflow/custom-op's build_pip_pkg does.
* The `[tf]` extra pins the TensorFlow release the library was built against, read from
  `tf_fp16ops/_build_info.json` (written by `make build` / `make wheel`); before a build it falls
  back to the pin in requirements.txt. The install requirements name no TensorFlow version: the
  library checks the installed release when it is first loaded (tf_fp16ops/_library.py).
"""

import json
import re
from pathlib import Path

from setuptools import setup
from setuptools.dist import Distribution

HERE = Path(__file__).resolve().parent


class BinaryDistribution(Distribution):
    """A distribution with a native library: platform-tagged wheel, installed in platlib."""

    def has_ext_modules(self):
        return True


def built_for_tensorflow() -> str:
    """The TensorFlow version of tf_fp16ops/_build_info.json, else requirements.txt's pin.

    Raises:
      RuntimeError: neither file names a TensorFlow version.
    """
    info = HERE / "tf_fp16ops" / "_build_info.json"
    if info.exists():
        return json.loads(info.read_text())["tensorflow_version"]
    requirements = HERE / "requirements.txt"
    if requirements.exists():
        m = re.search(r"^tensorflow==(\S+)", requirements.read_text(), re.M)
        if m:
            return m.group(1)
    raise RuntimeError(
        f"no TensorFlow version: neither {info} nor {requirements} names one; "
        "run `make build` first"
    )


setup(
    distclass=BinaryDistribution,
    extras_require={
        "tf": [f"tensorflow=={built_for_tensorflow()}"],
        # examples/: the digits data set ships inside scikit-learn.
        "examples": ["scikit-learn"],
    },
)
