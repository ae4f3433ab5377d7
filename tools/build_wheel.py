"""Builds the tf_fp16ops wheel (`make wheel`): the package, the op library and its build info.

    python tools/build_wheel.py --library tf_fp16ops/_fp16ops.so \
        --build-info tf_fp16ops/_build_info.json [--cuda] [--dist dist]

The package is staged in build/wheel/src (the sources of tf_fp16ops/ plus the given library, so a
CUDA build never replaces the CPU library of the source tree) and built with
`pip wheel --no-build-isolation --no-deps` (setuptools from the virtualenv, nothing downloaded).
SOURCE_DATE_EPOCH fixes the archive timestamps, so the same inputs give the same wheel bytes
(tests/test_wheel.py keys its virtualenv cache by the wheel's hash). Old tf_fp16ops wheels in
--dist are removed first; the path of the new one is printed.

Errors: a missing library or build info, or a failed `pip wheel`, exit with status 1 and one
line on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# 1980-01-01, the earliest time a zip archive can hold.
SOURCE_DATE_EPOCH = "315532800"
_IGNORE = shutil.ignore_patterns(
    "__pycache__", "*.pyc", "*.egg-info", "_fp16ops.so*", "_build_info.json"
)


def stage(library: Path, build_info: dict, staging: Path) -> None:
    """Copies pyproject.toml, setup.py, README.md, requirements.txt and tf_fp16ops/ into `staging`,
    with `library` as tf_fp16ops/_fp16ops.so and `build_info` as tf_fp16ops/_build_info.json."""
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    for name in ("pyproject.toml", "setup.py", "README.md", "requirements.txt"):
        shutil.copy2(ROOT / name, staging / name)
    shutil.copytree(ROOT / "tf_fp16ops", staging / "tf_fp16ops", ignore=_IGNORE)
    shutil.copy(library, staging / "tf_fp16ops" / "_fp16ops.so")
    os.chmod(staging / "tf_fp16ops" / "_fp16ops.so", 0o755)
    (staging / "tf_fp16ops" / "_build_info.json").write_text(json.dumps(build_info, sort_keys=True))


def build(library: Path, build_info_path: Path, cuda: bool, dist: Path, staging: Path) -> Path:
    """Builds the wheel into `dist` and returns its path.

    Raises:
      FileNotFoundError: `library` or `build_info_path` does not exist.
      ValueError: the build info names no TensorFlow version.
      subprocess.CalledProcessError: `pip wheel` failed.
    """
    if not library.is_file():
        raise FileNotFoundError(f"op library {library} not found (run `make build` first)")
    try:
        version = json.loads(build_info_path.read_text())["tensorflow_version"]
    except OSError:
        raise FileNotFoundError(
            f"build info {build_info_path} not found (run `make build` first)"
        ) from None
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"build info {build_info_path} names no tensorflow_version") from None
    stage(library, {"tensorflow_version": version, "cuda": cuda}, staging)
    dist.mkdir(parents=True, exist_ok=True)
    for old in dist.glob("tf_fp16ops-*.whl"):
        old.unlink()
    env = dict(os.environ, SOURCE_DATE_EPOCH=SOURCE_DATE_EPOCH, PIP_DISABLE_PIP_VERSION_CHECK="1")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(dist),
            str(staging),
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        sys.stderr.write(r.stdout + r.stderr)
        raise subprocess.CalledProcessError(r.returncode, r.args)
    (wheel,) = dist.glob("tf_fp16ops-*.whl")
    return wheel


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--library",
        type=Path,
        default=ROOT / "tf_fp16ops" / "_fp16ops.so",
        help="the op library to ship (default: tf_fp16ops/_fp16ops.so)",
    )
    parser.add_argument(
        "--build-info",
        type=Path,
        default=ROOT / "tf_fp16ops" / "_build_info.json",
        help="JSON naming the TensorFlow version the library was built for",
    )
    parser.add_argument("--cuda", action="store_true", help="the library is a --config=cuda build")
    parser.add_argument("--dist", type=Path, default=ROOT / "dist", help="output directory")
    parser.add_argument(
        "--staging",
        type=Path,
        default=ROOT / "build" / "wheel" / "src",
        help="staging directory (replaced)",
    )
    args = parser.parse_args(argv)
    try:
        wheel = build(args.library, args.build_info, args.cuda, args.dist, args.staging)
    except (OSError, ValueError, subprocess.CalledProcessError) as e:
        print(f"build_wheel: {e}", file=sys.stderr)
        return 1
    print(f"{wheel} ({wheel.stat().st_size / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
