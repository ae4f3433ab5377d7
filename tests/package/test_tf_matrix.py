"""tools/tf_matrix.py: the matrix file it reads and the minors it selects (`make matrix`).

Expected values come from tools/tf_matrix.txt as written by hand (one release per TensorFlow minor
2.16-2.21) and from requirements.txt's TensorFlow pin, which must be the matrix's pinned row.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import tf_matrix  # noqa: E402


def test_the_matrix_has_one_release_per_minor_from_2_16_to_2_21_and_the_dev_pin():
    entries = tf_matrix.read_matrix()
    assert [e.minor for e in entries] == ["2.16", "2.17", "2.18", "2.19", "2.20", "2.21"]
    pin = re.search(r"^tensorflow==(\S+)", (ROOT / "requirements.txt").read_text(), re.M)
    assert pin.group(1) in [e.tensorflow for e in entries]
    assert all(e.keras.startswith("3.") for e in entries)  # Keras 3: the layers need it


def test_malformed_lines_and_unknown_minors_are_named(tmp_path):
    bad = tmp_path / "m.txt"
    bad.write_text("# comment\n2.16.2 3.15.1\n2.17 keras\n")
    with pytest.raises(ValueError, match=r"m.txt:3: expected '<tensorflow> <keras>' versions, got"):
        tf_matrix.read_matrix(bad)
    entries = tf_matrix.read_matrix()
    assert [e.minor for e in tf_matrix.select(entries, ["2.21", "2.16"])] == ["2.21", "2.16"]
    assert tf_matrix.select(entries, ["all"]) == entries
    with pytest.raises(ValueError, match=r"--minors 2.15: not in tf_matrix.txt \(supported: 2.16"):
        tf_matrix.select(entries, ["2.16", "2.15"])


def test_cli_refuses_a_missing_wheel_in_one_line(tmp_path):
    r = subprocess.run(
        [sys.executable, ROOT / "tools" / "tf_matrix.py", "test", "--wheel", tmp_path / "no.whl"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.splitlines()[-1] == (
        f"tf_matrix.py: error: --wheel {tmp_path / 'no.whl'}: not a file (build it with "
        "`make wheel`)"
    )
