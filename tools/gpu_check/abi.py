"""ctypes binding of the C ABI in cc/kernels/gpu/c_api.cc, shared by the GPU check (device
library libtf_fp16ops_gpu.so, torch tensors) and tests/gpu/test_gpu_host.py (host library
libtf_fp16ops_gpu_host.so, NumPy arrays). Needs only the standard library.

Problem sizes are elements; layouts as TensorFlow's: activations NHWC (NCHW when `nchw`), filter
HWIO [KH, KW, C/groups, K]; Fp16MatMul's operands row-major as BatchMatMulV2's (MatMul). Pointers
are plain integers (device pointers for the device library, host pointers for the host library).
"""

from __future__ import annotations

import ctypes
import dataclasses
import itertools
import math
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


@dataclasses.dataclass(frozen=True)
class MatMul:
    """One Fp16MatMul, BatchMatMulV2's product: x [..., M, K] ([..., K, M] when adj_x) times
    y [..., K, N] ([..., N, K] when adj_y), the batch dimensions broadcast as NumPy broadcasts
    them; out [*batch_shape, M, N]. Output matrix b reads x matrix x_offsets()[b] and y matrix
    y_offsets()[b] (row-major indices into the matrices each operand holds)."""

    name: str
    x_shape: tuple
    y_shape: tuple
    adj_x: bool = False
    adj_y: bool = False

    @property
    def M(self) -> int:
        return self.x_shape[-1] if self.adj_x else self.x_shape[-2]

    @property
    def K(self) -> int:
        return self.x_shape[-2] if self.adj_x else self.x_shape[-1]

    @property
    def N(self) -> int:
        return self.y_shape[-2] if self.adj_y else self.y_shape[-1]

    @property
    def batch_shape(self) -> tuple:
        xb, yb = tuple(self.x_shape[:-2]), tuple(self.y_shape[:-2])
        n = max(len(xb), len(yb))
        xb, yb = (1,) * (n - len(xb)) + xb, (1,) * (n - len(yb)) + yb
        out = []
        for a, b in zip(xb, yb, strict=True):
            if a != b and 1 not in (a, b):
                raise ValueError(f"{self.name}: batch dimensions {xb} and {yb} do not broadcast")
            out.append(b if a == 1 else a)
        return tuple(out)

    @property
    def batch(self) -> int:
        return math.prod(self.batch_shape)

    @property
    def x_matrices(self) -> int:
        return math.prod(self.x_shape[:-2])

    @property
    def y_matrices(self) -> int:
        return math.prod(self.y_shape[:-2])

    def out_shape(self) -> tuple:
        return self.batch_shape + (self.M, self.N)

    def _offsets(self, dims: tuple) -> list:
        full = self.batch_shape
        dims = (1,) * (len(full) - len(dims)) + tuple(dims)
        offsets = []
        for idx in itertools.product(*(range(d) for d in full)):
            flat = 0
            for i, d in zip(idx, dims, strict=True):
                flat = flat * d + (i if d > 1 else 0)
            offsets.append(flat)
        return offsets

    def x_offsets(self) -> list:
        return self._offsets(self.x_shape[:-2])

    def y_offsets(self) -> list:
        return self._offsets(self.y_shape[:-2])

    def dims(self) -> list:
        """The C ABI's mdims: batch, M, N, K, x_matrices, y_matrices."""
        return [self.batch, self.M, self.N, self.K, self.x_matrices, self.y_matrices]

    def flops(self) -> float:
        return 2.0 * self.batch * self.M * self.N * self.K

    def folded(self) -> bool:
        """One fprop for the whole batch: x matrices in order and one shared y matrix."""
        xo, yo = self.x_offsets(), self.y_offsets()
        return self.batch > 1 and xo == list(range(self.batch)) and len(set(yo)) == 1

    def fprop_problem(self) -> Problem:
        """The 1x1 fprop one launch runs (cc/kernels/gpu/matmul_gpu.h): an NHWC image
        [images, 1, M, K] times an HWIO filter [1, 1, K, N]."""
        images = self.batch if self.folded() else 1
        return Problem(f"{self.name}_as_1x1", images, 1, self.M, self.K, self.N, 1, 1)


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
        # Fp16MatMul (absent from libraries built before it).
        self.has_matmul = hasattr(lib, "tfo_matmul_launch")
        self._matmul_arrays: dict = {}
        if self.has_matmul:
            lib.tfo_matmul_select.argtypes = [p64, i, i, p64, p64, i, i, i, u64, ip, ip, u64p]
            lib.tfo_matmul_select.argtypes += [cp, i]
            lib.tfo_matmul_launch.argtypes = [p64, i, i, p64, p64, i, i, vp, vp, vp, vp, u64]
            lib.tfo_matmul_launch.argtypes += [vp, i, ip, ip, cp, i]

    @staticmethod
    def _call(fn, *args) -> None:
        """Calls a C-ABI function whose last two arguments are (msg, msg_len); AbiError naming
        the status and message unless it returns OK."""
        msg = ctypes.create_string_buffer(512)
        rc = fn(*args, msg, 512)
        if rc != 0:
            raise AbiError(rc, msg.value.decode())

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
        self._call(
            self.lib.tfo_select,
            OPS.index(op),
            _dims(p),
            int(p.nchw),
            DTYPES[t],
            DTYPES[tacc],
            PATHS[path],
            _device(device),
            ctypes.byref(chosen),
            ctypes.byref(nbytes),
        )
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
        self._call(
            self.lib.tfo_launch,
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
        )
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
        self._call(
            self.lib.tfo_launch_with_allocator,
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
        )
        return PATH_NAMES.get(used.value, str(used.value)), selections.value

    def _matmul_args(self, m: MatMul):
        """The C arrays of mdims and offsets, made once per MatMul (a timed launch of a batch of
        192 matrices would otherwise pay for building them in Python)."""
        if not self.has_matmul:
            raise AbiError(4, f"{self.path} has no tfo_matmul_launch (built before Fp16MatMul)")
        args = self._matmul_arrays.get(m)
        if args is None:
            n = max(1, m.batch)
            args = self._matmul_arrays[m] = (
                (ctypes.c_int64 * 6)(*m.dims()),
                (ctypes.c_int64 * n)(*m.x_offsets()),
                (ctypes.c_int64 * n)(*m.y_offsets()),
            )
        return args

    def matmul_select(
        self,
        m: MatMul,
        t: str,
        tacc: str,
        path: str = "auto",
        max_bytes: int = 2**64 - 1,
        device: Sequence[int] | None = None,
    ):
        """(implementation name, workspace bytes) of the matmul's plan within `max_bytes` of
        workspace; AbiError if none can run."""
        mdims, xo, yo = self._matmul_args(m)
        chosen, nbytes = ctypes.c_int(0), ctypes.c_uint64(0)
        self._call(
            self.lib.tfo_matmul_select,
            mdims,
            int(m.adj_x),
            int(m.adj_y),
            xo,
            yo,
            DTYPES[t],
            DTYPES[tacc],
            PATHS[path],
            max_bytes,
            _device(device),
            ctypes.byref(chosen),
            ctypes.byref(nbytes),
        )
        return PATH_NAMES[chosen.value], int(nbytes.value)

    def matmul_launch(
        self,
        m: MatMul,
        t: str,
        tacc: str,
        x: int,
        y: int,
        out: int,
        workspace: int,
        workspace_bytes: int,
        stream: int = 0,
        path: str = "auto",
        device: Sequence[int] | None = None,
    ) -> str:
        """Plans and runs the matmul (x, y, out: pointers to the row-major operands); returns the
        implementation that ran; AbiError on a non-OK status."""
        mdims, xo, yo = self._matmul_args(m)
        used = ctypes.c_int(0)
        self._call(
            self.lib.tfo_matmul_launch,
            mdims,
            int(m.adj_x),
            int(m.adj_y),
            xo,
            yo,
            DTYPES[t],
            DTYPES[tacc],
            x,
            y,
            out,
            workspace,
            workspace_bytes,
            stream,
            PATHS[path],
            _device(device),
            ctypes.byref(used),
        )
        return PATH_NAMES.get(used.value, str(used.value))

    def query_device(self):
        """(driver_version, compute_capability, sm90a_code) of the current device."""
        dev = (ctypes.c_int * 3)()
        self._call(self.lib.tfo_query_device, dev)
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
        arr = (ctypes.c_int * max(1, len(archs)))(*archs)
        self._call(
            self.lib.tfo_check_device, _device(device), runtime_version, ptx_arch, arr, len(archs)
        )

    def direct_wgrad_splits(self, p: Problem, tacc: str) -> int:
        return int(self.lib.tfo_direct_wgrad_splits(_dims(p), DTYPES[tacc]))
