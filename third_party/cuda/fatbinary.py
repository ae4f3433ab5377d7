#!/usr/bin/env python3
"""`fatbinary` for clang's CUDA driver, built on NVIDIA's nvFatbin library (libnvfatbin.so.12).

The CUDA 12.5 parts on PyPI (nvidia-cuda-nvcc-cu12) ship ptxas but no `fatbinary` executable;
nvidia-nvfatbin-cu12 ships the library that builds the same fatbin format (nvFatbin.h:
nvFatbinCreate, nvFatbinAddCubin, nvFatbinAddPTX, nvFatbinSize, nvFatbinGet). clang -x cuda
packs each translation unit's device code by running

    fatbinary -64 --create OUT.fatbin --image=profile=sm_70,file=A.cubin \
              --image=profile=compute_90,file=A.ptx ...

(clang's NVPTX::FatBinary job) and embeds OUT.fatbin into the host object; this script takes
exactly that command line. `sm_XY[a]` images are cubins, `compute_XY[a]` images PTX; the
architecture passed to nvFatbin is the XY[a] part. Any other option is an error naming it.
Usage: fatbinary.py --nvfatbin PATH/libnvfatbin.so.12 -64 --create OUT --image=profile=P,file=F...
"""

from __future__ import annotations

import argparse
import ctypes
import re
import sys

_PROFILE = re.compile(r"^(sm|compute)_(\d+a?)$")


class FatbinError(Exception):
    pass


def parse_image(spec: str) -> tuple[str, str, str]:
    """'profile=sm_70,file=a.o' -> ('sm', '70', 'a.o')."""
    fields = dict(part.split("=", 1) for part in spec.split(",") if "=" in part)
    profile, path = fields.get("profile", ""), fields.get("file", "")
    m = _PROFILE.match(profile)
    if m is None or not path or set(fields) - {"profile", "file"}:
        raise FatbinError(f"--image={spec}: expected profile=sm_XY|compute_XY,file=PATH")
    return m.group(1), m.group(2), path


def _check(lib: ctypes.CDLL, result: int, call: str) -> None:
    if result != 0:
        lib.nvFatbinGetErrorString.restype = ctypes.c_char_p
        text = lib.nvFatbinGetErrorString(result) or b"?"
        raise FatbinError(f"{call} failed: {text.decode()} (nvFatbinResult {result})")


def build(lib_path: str, images: list[tuple[str, str, str]], out: str) -> int:
    """Writes the fatbin of `images` to `out`; returns its size in bytes."""
    lib = ctypes.CDLL(lib_path)
    handle = ctypes.c_void_p()
    opts = (ctypes.c_char_p * 1)(b"-64")
    _check(
        lib, lib.nvFatbinCreate(ctypes.byref(handle), opts, ctypes.c_size_t(1)), "nvFatbinCreate"
    )
    try:
        for kind, arch, path in images:
            with open(path, "rb") as f:
                data = f.read()
            ident = path.encode()
            if kind == "sm":
                r = lib.nvFatbinAddCubin(
                    handle, data, ctypes.c_size_t(len(data)), arch.encode(), ident
                )
                _check(lib, r, f"nvFatbinAddCubin(sm_{arch}, {path})")
            else:
                text = data + (b"" if data.endswith(b"\0") else b"\0")
                r = lib.nvFatbinAddPTX(
                    handle, text, ctypes.c_size_t(len(text)), arch.encode(), ident, b""
                )
                _check(lib, r, f"nvFatbinAddPTX(compute_{arch}, {path})")
        size = ctypes.c_size_t()
        _check(lib, lib.nvFatbinSize(handle, ctypes.byref(size)), "nvFatbinSize")
        buf = ctypes.create_string_buffer(size.value)
        _check(lib, lib.nvFatbinGet(handle, buf), "nvFatbinGet")
    finally:
        lib.nvFatbinDestroy(ctypes.byref(handle))
    with open(out, "wb") as f:
        f.write(buf.raw)
    return size.value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="fatbinary", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nvfatbin", required=True, help="path of libnvfatbin.so.12")
    parser.add_argument(
        "-64", dest="m64", action="store_true", help="64-bit images (the only kind)"
    )
    parser.add_argument("--create", required=True, metavar="OUT", help="fatbin to write")
    parser.add_argument("--image", action="append", default=[], metavar="profile=P,file=F")
    args = parser.parse_args(argv)
    try:
        if not args.image:
            raise FatbinError("no --image given")
        build(args.nvfatbin, [parse_image(s) for s in args.image], args.create)
    except (FatbinError, OSError) as e:
        print(f"fatbinary: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
