#!/usr/bin/env python3
"""Writes .bazelrc.user: the Python interpreter whose TensorFlow the op library builds
against and, for Debian's packaged Bazel 4.2.3 (offline), the repository overrides it needs.

Usage: python tools/configure.py [--python PATH] [--bazel PATH]
A stock Bazel (6 or newer, with network) needs no overrides; the WORKSPACE stays standard.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Folders installed by Debian's bazel-rules-java and bazel-platforms packages.
DEBIAN_RULES_JAVA = Path("/usr/share/bazel/rules/java")
DEBIAN_PLATFORMS = Path("/usr/share/bazel/tools/platforms")


def is_debian_bazel(bazel: str) -> bool:
    """Debian's bazel-bootstrap reports 'bazel no_version'."""
    try:
        out = subprocess.run(
            [bazel, "--version"], capture_output=True, text=True, timeout=300
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "no_version" in out or out.strip().startswith("bazel 4.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--python", default=sys.executable, help="interpreter with TensorFlow installed"
    )
    parser.add_argument("--bazel", default=shutil.which("bazel") or "bazel", help="bazel binary")
    args = parser.parse_args(argv)

    python = os.path.abspath(args.python)
    lines = [
        "# Written by tools/configure.py; do not commit.",
        f"build --repo_env=PYTHON_BIN_PATH={python}",
        f"fetch --repo_env=PYTHON_BIN_PATH={python}",
        f"query --repo_env=PYTHON_BIN_PATH={python}",
    ]
    if is_debian_bazel(args.bazel):
        overrides = {
            "rules_java": DEBIAN_RULES_JAVA,
            "platforms": DEBIAN_PLATFORMS,
            "rules_cc": ROOT / "third_party" / "rules_cc_compat",
        }
        for name, path in overrides.items():
            if not path.is_dir():
                print(
                    f"configure: {path} is missing; install it with: "
                    "apt-get install bazel-bootstrap bazel-rules-java bazel-platforms",
                    file=sys.stderr,
                )
                return 1
            for cmd in ("build", "fetch", "query"):
                lines.append(f"{cmd} --override_repository={name}={path}")
        # Debian's linux-sandbox prints its debug trace on every action; run actions locally.
        lines.append("build --spawn_strategy=local")
    (ROOT / ".bazelrc.user").write_text("\n".join(lines) + "\n")
    print(
        f"configure: wrote .bazelrc.user (python={python}, "
        f"debian_bazel={is_debian_bazel(args.bazel)})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
