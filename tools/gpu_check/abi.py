"""ctypes binding of the C ABI in cc/kernels/gpu/c_api.cc, shared by the GPU check (device
library libtf_fp16ops_gpu.so, torch tensors) and tests/gpu/test_gpu_host.py (host library
libtf_fp16ops_gpu_host.so, NumPy arrays). Needs only the standard library.

Problem sizes are elements; layouts as TensorFlow's: activations NHWC (NCHW when `nchw`), filter
HWIO [KH, KW, C/groups, K]. Pointers are plain integers (device pointers for the device library,
host pointers for the host library).
"""

from __future__ import annotations

import ctypes
import dataclasses
from collections.abc import Sequence

OPS = ("fprop", "dgrad", "wgrad")
PATHS = {"auto": 0, "sm90": 1, "sm80": 2, "simt": 3, "fallback": 4, "sm70": 5}
PATH_NAMES = {v: k for k, v in PATHS.items()}
DTYPES = {"half": 0, "float": 1}
CODES = {
    0: "OK",
    1: "InvalidArgument",
    2: "Internal",
    3: "FailedPrecondition",
    4: "Unimplemented",
    5: "ResourceExhausted",
}


@dataclasses.dataclass(frozen=True)
class Problem:
    """One 2-D convolution. pad = (top, bottom, left, right); P and Q follow from it."""

    name: str
    N: int
    H: int
    W: int
    C: int
    K: int
    KH: int
    KW: int
    stride: tuple = (1, 1)
    dil: tuple = (1, 1)
    pad: tuple = (0, 0, 0, 0)
    groups: int = 1
    nchw: bool = False

    @property
    def P(self) -> int:
        eff = (self.KH - 1) * self.dil[0] + 1
        return (self.H + self.pad[0] + self.pad[1] - eff) // self.stride[0] + 1

    @property
    def Q(self) -> int:
        eff = (self.KW - 1) * self.dil[1] + 1
        return (self.W + self.pad[2] + self.pad[3] - eff) // self.stride[1] + 1

    def dims(self) -> list:
        return [
            self.N,
            self.H,
            self.W,
            self.C,
            self.KH,
            self.KW,
            self.K,
            self.groups,
            self.P,
            self.Q,
            self.stride[0],
            self.stride[1],
            self.dil[0],
            self.dil[1],
            self.pad[0],
            self.pad[2],
        ]

    def flops(self) -> float:
        return 2.0 * self.N * self.P * self.Q * self.K * (self.C // self.groups) * self.KH * self.KW

    def reduction_length(self, op: str) -> int:
        if op == "fprop":
            return self.KH * self.KW * (self.C // self.groups)
        if op == "dgrad":
            return self.KH * self.KW * (self.K // self.groups)
        return self.N * self.P * self.Q

    def shapes(self):
        """(x, w, y) shapes in our layouts."""
        x = (self.N, self.C, self.H, self.W) if self.nchw else (self.N, self.H, self.W, self.C)
        y = (self.N, self.K, self.P, self.Q) if self.nchw else (self.N, self.P, self.Q, self.K)
        return x, (self.KH, self.KW, self.C // self.groups, self.K), y


class AbiError(RuntimeError):
    """A non-OK status from the library; .code is the StatusCode name."""

    def __init__(self, code: int, message: str):
        super().__init__(f"{CODES.get(code, code)}: {message}")
        self.code = CODES.get(code, str(code))
        self.message = message


def _dims(p: Problem):
    return (ctypes.c_int64 * 16)(*p.dims())


def _device(device: Sequence[int] | None):
    if device is None:
        return None
    return (ctypes.c_int * 3)(*[int(v) for v in device])


class Library:
    """The C ABI. `device` arguments: (driver_version, compute_capability, sm90a_code) to fake
    the device, or None for the current one."""

    def __init__(self, path: str):
        self.path = path
        lib = self.lib = ctypes.CDLL(path)
        i, p64, vp = ctypes.c_int, ctypes.POINTER(ctypes.c_int64), ctypes.c_void_p
        ip, u64, u64p, cp = (
            ctypes.POINTER(ctypes.c_int),
            ctypes.c_uint64,
            ctypes.POINTER(ctypes.c_uint64),
            ctypes.c_char_p,
        )
        lib.tfo_select.argtypes = [i, p64, i, i, i, i, ip, ip, u64p, cp, i]
        lib.tfo_launch.argtypes = [i, p64, i, i, i, vp, vp, vp, vp, u64, vp, i, ip, ip, cp, i]
        lib.tfo_query_device.argtypes = [ip, cp, i]
        # Absent from libraries built before it (tools/gpu_check may load an older bundle).
        if hasattr(lib, "tfo_launch_with_allocator"):
            lib.tfo_launch_with_allocator.argtypes = [
                i,
                p64,
                i,
                i,
                i,
                vp,
                vp,
                vp,
                vp,
                u64,
                vp,
                i,
                ip,
                ip,
                ip,
                cp,
                i,
            ]
        lib.tfo_build_info.argtypes = [ip, ip, ip, i, ip]
        lib.tfo_check_device.argtypes = [ip, i, i, ip, i, cp, i]
        lib.tfo_direct_wgrad_splits.argtypes = [p64, i]
        lib.tfo_direct_wgrad_splits.restype = ctypes.c_int64

    def select(
        self,
        op: str,
        p: Problem,
        t: str,
        tacc: str,
        path: str = "auto",
        device: Sequence[int] | None = None,
    ):
        """(implementation name, workspace bytes) the table picks; AbiError if none can run."""
        chosen, nbytes = ctypes.c_int(0), ctypes.c_uint64(0)
        msg = ctypes.create_string_buffer(512)
        rc = self.lib.tfo_select(
            OPS.index(op),
            _dims(p),
            int(p.nchw),
            DTYPES[t],
            DTYPES[tacc],
            PATHS[path],
            _device(device),
            ctypes.byref(chosen),
            ctypes.byref(nbytes),
            msg,
            512,
        )
        if rc != 0:
            raise AbiError(rc, msg.value.decode())
        return PATH_NAMES[chosen.value], int(nbytes.value)

    def launch(
        self,
        op: str,
        p: Problem,
        t: str,
        tacc: str,
        a: int,
        b: int,
        out: int,
        workspace: int,
        workspace_bytes: int,
        stream: int = 0,
        path: str = "auto",
        device: Sequence[int] | None = None,
    ) -> str:
        """Runs one pass; returns the implementation that ran; AbiError on a non-OK status."""
        used = ctypes.c_int(-1)
        msg = ctypes.create_string_buffer(512)
        rc = self.lib.tfo_launch(
            OPS.index(op),
            _dims(p),
            int(p.nchw),
            DTYPES[t],
            DTYPES[tacc],
            a,
            b,
            out,
            workspace,
            workspace_bytes,
            stream,
            PATHS[path],
            _device(device),
            ctypes.byref(used),
            msg,
            512,
        )
        if rc != 0:
            raise AbiError(rc, msg.value.decode())
        return PATH_NAMES.get(used.value, str(used.value))

    def launch_with_allocator(
        self,
        op: str,
        p: Problem,
        t: str,
        tacc: str,
        a: int,
        b: int,
        out: int,
        workspace: int,
        workspace_bytes: int,
        stream: int = 0,
        path: str = "auto",
        device: Sequence[int] | None = None,
    ) -> tuple:
        """Plans once, takes `workspace` if the plan needs at most `workspace_bytes` (else falls
        back to an implementation without workspace) and runs; returns (implementation that ran,
        table selections made); AbiError on a non-OK status."""
        used, selections = ctypes.c_int(-1), ctypes.c_int(0)
        msg = ctypes.create_string_buffer(512)
        rc = self.lib.tfo_launch_with_allocator(
            OPS.index(op),
            _dims(p),
            int(p.nchw),
            DTYPES[t],
            DTYPES[tacc],
            a,
            b,
            out,
            workspace,
            workspace_bytes,
            stream,
            PATHS[path],
            _device(device),
            ctypes.byref(used),
            ctypes.byref(selections),
            msg,
            512,
        )
        if rc != 0:
            raise AbiError(rc, msg.value.decode())
        return PATH_NAMES.get(used.value, str(used.value)), selections.value

    def query_device(self):
        """(driver_version, compute_capability, sm90a_code) of the current device."""
        dev = (ctypes.c_int * 3)()
        msg = ctypes.create_string_buffer(512)
        rc = self.lib.tfo_query_device(dev, msg, 512)
        if rc != 0:
            raise AbiError(rc, msg.value.decode())
        return tuple(dev)

    def build_info(self) -> dict:
        rt, ptx, n = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        archs = (ctypes.c_int * 32)()
        self.lib.tfo_build_info(ctypes.byref(rt), ctypes.byref(ptx), archs, 32, ctypes.byref(n))
        return {
            "runtime_version": rt.value,
            "ptx_arch": ptx.value,
            "sass_archs": list(archs[: n.value]),
        }

    def check_device(
        self, device: Sequence[int], runtime_version: int, ptx_arch: int, archs: Sequence[int]
    ) -> None:
        """CheckDevice on given values; AbiError when the build cannot serve the device."""
        msg = ctypes.create_string_buffer(512)
        arr = (ctypes.c_int * max(1, len(archs)))(*archs)
        rc = self.lib.tfo_check_device(
            _device(device), runtime_version, ptx_arch, arr, len(archs), msg, 512
        )
        if rc != 0:
            raise AbiError(rc, msg.value.decode())

    def direct_wgrad_splits(self, p: Problem, tacc: str) -> int:
        return int(self.lib.tfo_direct_wgrad_splits(_dims(p), DTYPES[tacc]))
