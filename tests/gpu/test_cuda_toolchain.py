"""The CUDA 12.5 toolchain's own parts that run without a GPU and without a CUDA compile:
third_party/cuda/fatbinary.py (clang's `fatbinary` step on NVIDIA's nvFatbin library) and the
fatbin it writes, read back by cuobjdump. Needs the pinned wheels of requirements-cuda.txt."""

from __future__ import annotations

import os
import struct
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "third_party", "cuda", "fatbinary.py")
nvidia = pytest.importorskip("nvidia", reason="the CUDA wheels of requirements-cuda.txt")
NVIDIA = os.path.dirname(nvidia.__file__)
NVFATBIN = os.path.join(NVIDIA, "nvfatbin", "lib", "libnvfatbin.so.12")
CUOBJDUMP = os.path.join(NVIDIA, "cu13", "bin", "cuobjdump")
# The first word of fatbin data as NVIDIA's own fatbinary writes it (seen here on CUDA 13.0's; not
# declared in the 12.5 wheels' headers, whose FATBINC_MAGIC is the host wrapper's). cuobjdump
# reading the file back is the independent check.
FATBIN_MAGIC = 0xBA55ED50
PTX = b""".version 8.5
.target sm_70
.address_size 64
.visible .entry k()
{
\tret;
}
"""


def fatbinary(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, SCRIPT, "--nvfatbin", NVFATBIN, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def ptx(tmp_path):
    if not os.path.exists(NVFATBIN):
        pytest.skip("nvidia-nvfatbin-cu12 not installed")
    path = tmp_path / "k.ptx"
    path.write_bytes(PTX)
    return path


def test_ptx_image_makes_a_fatbin_cuobjdump_reads(ptx, tmp_path):
    out = tmp_path / "k.fatbin"
    r = fatbinary("-64", "--create", str(out), f"--image=profile=compute_70,file={ptx}")
    assert r.returncode == 0 and r.stderr == "" and r.stdout == ""
    data = out.read_bytes()
    assert struct.unpack_from("<I", data)[0] == FATBIN_MAGIC
    if os.access(CUOBJDUMP, os.X_OK):
        listing = subprocess.run([CUOBJDUMP, "-lptx", str(out)], capture_output=True, text=True)
        assert listing.stdout.strip().endswith("k.sm_70.ptx"), listing.stdout


@pytest.mark.parametrize(
    "image, words",
    [
        ("profile=sm_75,file={ptx}", ["nvFatbinAddCubin(sm_75", "k.ptx", "failed"]),
        ("profile=lto_70,file={ptx}", ["--image=profile=lto_70", "expected profile=sm_XY"]),
        ("profile=sm_70", ["expected profile=sm_XY|compute_XY,file=PATH"]),
        ("profile=compute_70,file={ptx},opt=1", ["expected profile="]),
    ],
)
def test_bad_image_is_one_line_naming_it(ptx, tmp_path, image, words):
    out = tmp_path / "k.fatbin"
    r = fatbinary("-64", "--create", str(out), "--image=" + image.format(ptx=ptx))
    assert r.returncode == 1 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fatbinary: "), r.stderr
    for word in words:
        assert word in lines[0]
    assert not out.exists()


def test_missing_input_and_unknown_option(ptx, tmp_path):
    r = fatbinary("-64", "--create", str(tmp_path / "o"), "--image=profile=sm_70,file=/nonexistent")
    assert r.returncode == 1 and "/nonexistent" in r.stderr
    r = fatbinary("-64", "--create", str(tmp_path / "o"), "--compress-all")
    assert r.returncode == 2 and "--compress-all" in r.stderr
