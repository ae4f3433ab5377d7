"""Build script for the parts pyproject.toml cannot state statically (metadata lives there).

* The wheel holds op libraries (`tf_fp16ops/_libs/tf<minor>/_fp16ops.so`, native code), so it is
  a platform wheel (e.g. `cp311-cp311-linux_x86_64`), never `py3-none-any`: the distribution
  reports extension modules, as tensorflow/custom-op's build_pip_pkg does.
* The `[tf]` extra admits exactly the TensorFlow minors the wheel has a library for, read from
  `tf_fp16ops/_libs/*/build_info.json` (staged by tools/build_wheel.py): e.g.
  `tensorflow>=2.16,<2.22` for 2.16-2.21, with `!=2.x.*` for a minor missing in between. Outside
  a wheel build it falls back to `tf_fp16ops/_build_info.json` (`make build`), then to the pin
  in requirements.txt. The install requirements name no TensorFlow version: the package loads
  the library of the installed TensorFlow when it is first used (tf_fp16ops/_platform/library.py).
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


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def built_for_tensorflow() -> list[str]:
    """The TensorFlow versions the staged libraries were built for (else the source tree's
    build, else requirements.txt's pin).

    Raises:
      RuntimeError: no file names a TensorFlow version.
    """
    staged = sorted((HERE / "tf_fp16ops" / "_libs").glob("*/build_info.json"))
    if staged:
        return [json.loads(p.read_text())["tensorflow_version"] for p in staged]
    info = HERE / "tf_fp16ops" / "_build_info.json"
    if info.exists():
        return [json.loads(info.read_text())["tensorflow_version"]]
    requirements = HERE / "requirements.txt"
    if requirements.exists():
        m = re.search(r"^tensorflow==(\S+)", requirements.read_text(), re.M)
        if m:
            return [m.group(1)]
    raise RuntimeError(
        f"no TensorFlow version: neither {info} nor {requirements} names one; "
        "run `make build` first"
    )


def tensorflow_requirement(versions: list[str]) -> str:
    """`tensorflow>=A.B,<A.C[,!=A.x.*]` admitting exactly the minors of `versions`."""
    minors = sorted({_minor(v) for v in versions})
    (lo_major, lo), (hi_major, hi) = minors[0], minors[-1]
    if lo_major != hi_major:
        raise RuntimeError(f"libraries for two TensorFlow major releases: {versions}")
    specs = [f">={lo_major}.{lo}", f"<{lo_major}.{hi + 1}"]
    specs += [f"!={lo_major}.{m}.*" for m in range(lo + 1, hi) if (lo_major, m) not in minors]
    return "tensorflow" + ",".join(specs)


setup(
    distclass=BinaryDistribution,
    extras_require={
        "tf": [tensorflow_requirement(built_for_tensorflow())],
        # examples/: the digits data set ships inside scikit-learn.
        "examples": ["scikit-learn"],
    },
)
