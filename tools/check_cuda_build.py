#!/usr/bin/env python3
"""Checks the libraries built by `make build-cuda` on a machine without a GPU.

- bazel-bin/_fp16ops.so loads into TensorFlow, registers GPU kernels of every op for half and
  float, and still computes case taps49 (49 taps of 0.2*0.1) correctly on the CPU;
- bazel-bin/cc/kernels/gpu/libtf_fp16ops_gpu.so (same objects + the C ABI) reports the build it
  is (CUDA runtime version, SASS list, PTX arch), and a launch without a usable driver fails with
  FailedPrecondition before any kernel runs;
- the CUDA runtime: with the clang toolchain the op library needs libcudart.so.12 (the runtime of
  TensorFlow's GPU wheel, found through its RUNPATH next to the installed package) and holds no
  copy of it; with nvcc it holds the static runtime and needs no libcudart;
- the fatbin of the op library (`cuobjdump -lelf/-lptx`): one cubin per SASS target, sm_90a for
  the Hopper kernels, PTX for the highest target and, when sm_70 is a target, compute_70 PTX of
  the Volta kernels;
- the instructions of each cubin (`nvdisasm`): on every target the direct kernels' binary16 FMA
  (HFMA2); the sm80 kernels' tensor-core MMA with fp16 and fp32 accumulators (HMMA.16816.F16 and
  HMMA.16816.F32) on every target >= sm_80; the Hopper kernels' HGMMA .F16 and .F32 on sm_90a.
  A CUTLASS kernel compiled without its MMA (clang without __CUDACC_VER_MAJOR__, for one) has
  none of these.

cuobjdump and nvdisasm come from PyPI's nvidia-cuda-cuobjdump/nvidia-cuda-nvdisasm 13.2 (no 12.x
release of them is on PyPI, and the CUDA 12.5 nvcc wheel ships neither). That nvdisasm refuses
sm_60 and sm_70 cubins ('CUDA architecture "SM70" is deprecated. Please use CUDA toolkit 13.0 or
earlier'); for those targets the check is weaker and says so (a NOTE line): their cubins must hold
the same direct kernels (by symbol name) as the highest target, and on sm_70 the Volta kernels
(CUTLASS's MmaVoltaTensorOp) must be there; their instructions are checked in the compute_70 PTX
that ptxas compiled them from: mma.sync.aligned.m8n8k4 with f16 accumulators
(.f16.f16.f16.f16) and with f32 accumulators (.f32.f16.f16.f32). The SASS ptxas made of them
(HMMA.884) is not verified here.

Usage: python tools/check_cuda_build.py [--compiler clang|nvcc] [OP_LIB [ABI_LIB]]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile

OPS = ("Fp16Conv2D", "Fp16Conv2DBackpropInput", "Fp16Conv2DBackpropFilter")
HERE = os.path.dirname(os.path.abspath(__file__))
EXPECT_RUNTIME_MAJOR = {"clang": 12, "nvcc": 13}

# Instruction patterns (nvdisasm output) and the targets that must hold them.
HFMA = re.compile(r"\bHFMA2\b")
HMMA_16816 = {
    "F16": re.compile(r"\bHMMA\.16816\.F16\b"),
    "F32": re.compile(r"\bHMMA\.16816\.F32\b"),
}
HGMMA = {"F16": re.compile(r"\bHGMMA\.\S+\.F16\b"), "F32": re.compile(r"\bHGMMA\.\S+\.F32\b")}
MMA_884 = {
    "f16": re.compile(r"mma\.sync\.aligned\.m8n8k4\.row\.col\.f16\.f16\.f16\.f16\b"),
    "f32": re.compile(r"mma\.sync\.aligned\.m8n8k4\.row\.col\.f32\.f16\.f16\.f32\b"),
}
CUBIN_NAME = re.compile(r"\.(sm_\d+a?)\.cubin$")
PTX_NAME = re.compile(r"\.(sm_\d+a?)\.ptx$")
# Kernel symbols of the direct kernels and the layout transforms (not CUTLASS's).
OUR_KERNEL = re.compile(r"tf_fp16ops")


def find_tool(name: str) -> str:
    """cuobjdump/nvdisasm of the venv's nvidia-cuda-* 13.2 wheels, else PATH."""
    try:
        import nvidia  # noqa: PLC0415

        path = os.path.join(os.path.dirname(nvidia.__file__), "cu13", "bin", name)
        if os.access(path, os.X_OK):
            return path
    except ImportError:
        pass
    found = shutil.which(name)
    if not found:
        raise SystemExit(
            f"check_cuda_build: {name} not found (pip install -r requirements-cuda.txt)"
        )
    return found


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def check_op_library(path: str, failures: list) -> None:
    # TensorFlow without its start-up lines (tf_fp16ops/_platform/quiet.py, loaded by path:
    # importing the package would load its own op library and register the ops before this one).
    spec = importlib.util.spec_from_file_location(
        "quiet", os.path.join(os.path.dirname(HERE), "tf_fp16ops", "_platform", "quiet.py")
    )
    quiet = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(quiet)
    tf = quiet.import_tensorflow()
    import numpy as np  # noqa: PLC0415
    from tensorflow.python.framework import kernels  # noqa: PLC0415

    module = tf.load_op_library(path)
    for op in OPS:
        registered = {
            (k.device_type, tf.as_dtype(k.constraint[0].allowed_values.list.type[0]).name)
            for k in kernels.get_registered_kernels_for_op(op).kernel
        }
        for want in (
            ("GPU", "float16"),
            ("GPU", "float32"),
            ("CPU", "float16"),
            ("CPU", "float32"),
        ):
            if want not in registered:
                failures.append(
                    f"{op}: no {want[0]} kernel for T={want[1]} (registered: {sorted(registered)})"
                )
    x = np.full([1, 9, 9, 1], 0.2, np.float16)
    w = np.full([7, 7, 1, 1], 0.1, np.float16)
    with tf.device("/CPU:0"):
        y = module.fp16_conv2d(x, w, Tacc=tf.float16, strides=[1, 1, 1, 1], padding="VALID")
    if not np.all(y.numpy() == np.float16(0.98046875)):
        failures.append(f"taps49 with Tacc=half gave {y.numpy().ravel()[:3]}, expected 0.98046875")


def check_abi_library(path: str, compiler: str, archs: list[int] | None, failures: list) -> dict:
    sys.path.insert(0, os.path.join(HERE, "gpu_check"))
    from abi import AbiError, Library, Problem  # noqa: PLC0415

    lib = Library(path)
    info = lib.build_info()
    if (
        info["runtime_version"] // 1000 != EXPECT_RUNTIME_MAJOR[compiler]
        or (archs is not None and info["sass_archs"] != archs)
        or info["ptx_arch"] != info["sass_archs"][-1]
    ):
        failures.append(f"{path}: unexpected build info {info} for the {compiler} toolchain")
    driver = lib.query_device()[0]
    if driver >= info["runtime_version"] // 1000 * 1000:
        return info  # a usable driver here: nothing more to check without running kernels
    p = Problem("c1", 1, 9, 9, 1, 1, 7, 7)
    try:
        lib.launch("fprop", p, "half", "half", 1, 1, 1, 0, 0)
        failures.append(f"{path}: a launch without a usable driver did not fail")
    except AbiError as e:
        if e.code != "FailedPrecondition" or "CPU" not in e.message:
            failures.append(f"{path}: launch without a driver gave {e}")
    return info


def check_runtime_linkage(path: str, compiler: str, failures: list) -> None:
    dyn = run(["readelf", "-d", path]).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dyn)
    runpath = " ".join(
        re.findall(r"\((?:RUNPATH|RPATH)\)\s+Library (?:runpath|rpath): \[([^\]]+)\]", dyn)
    )
    syms = run(["readelf", "--dyn-syms", "-W", path]).stdout
    defines_cudart = re.search(r"\sFUNC\s+\S+\s+\S+\s+\d+\s+cudaLaunchKernel\b", syms) is not None
    if compiler == "clang":
        if "libcudart.so.12" not in needed:
            failures.append(f"{path}: does not need libcudart.so.12 (NEEDED: {needed})")
        if "$ORIGIN/../nvidia/cuda_runtime/lib" not in runpath:
            failures.append(f"{path}: RUNPATH {runpath!r} lacks $ORIGIN/../nvidia/cuda_runtime/lib")
        if defines_cudart:
            failures.append(f"{path}: defines cudaLaunchKernel (a second, static CUDA runtime)")
    elif any(n.startswith("libcudart") for n in needed):
        failures.append(f"{path}: the nvcc build should link the runtime statically: {needed}")


def list_images(cuobjdump: str, path: str) -> tuple[dict, list]:
    """{sm_XX: [cubin names]} and the PTX targets of the library's fatbins."""
    res = run([cuobjdump, "-lelf", "-lptx", path])
    cubins: dict[str, list[str]] = {}
    ptx = []
    for line in res.stdout.splitlines():
        name = line.split(":", 1)[-1].strip()
        if line.startswith("ELF file") and (m := CUBIN_NAME.search(name)):
            cubins.setdefault(m.group(1), []).append(name)
        elif line.startswith("PTX file") and (m := PTX_NAME.search(name)):
            ptx.append(m.group(1))
    return cubins, ptx


def disassemble(nvdisasm: str, cubin: str) -> tuple[str, str]:
    """(SASS text, '') or ('', the refusal line) for one cubin."""
    res = run([nvdisasm, cubin])
    if res.returncode != 0:
        err = [ln for ln in res.stderr.splitlines() if "fatal" in ln or "error" in ln]
        return "", (err or res.stderr.splitlines() or [f"exit {res.returncode}"])[-1].strip()
    return res.stdout, ""


def kernel_symbols(cubin: str) -> list[str]:
    """Demangled names of the cubin's functions (binutils readelf reads CUDA ELF)."""
    out = run(["readelf", "-s", "-W", cubin]).stdout
    names = [ln.split()[-1] for ln in out.splitlines() if " FUNC " in ln]
    demangled = run(["c++filt"] + names).stdout.splitlines() if names else []
    return demangled


def check_sass(
    path: str, archs: list[int], cuobjdump: str, nvdisasm: str, failures: list, notes: list
) -> None:
    cubins, ptx = list_images(cuobjdump, path)
    want = [f"sm_{a}" for a in archs] + ["sm_90a"]
    for target in want:
        if target not in cubins:
            failures.append(f"{path}: no {target} cubin (cubins: {sorted(cubins)})")
    extra = sorted(set(cubins) - set(want))
    if extra:
        failures.append(f"{path}: cubins for targets not asked for: {extra}")
    want_ptx = {f"sm_{archs[-1]}"} | ({"sm_70"} if 70 in archs else set())
    if set(ptx) != want_ptx:
        failures.append(
            f"{path}: PTX for {sorted(set(ptx))}, expected {sorted(want_ptx)} (as compute_XY)"
        )
    with tempfile.TemporaryDirectory() as tmp:
        res = subprocess.run(
            [cuobjdump, "-xelf", "all", os.path.abspath(path)],
            cwd=tmp,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if res.returncode != 0:
            failures.append(f"cuobjdump -xelf failed: {res.stderr.strip()}")
            return
        if 70 in archs:
            subprocess.run(
                [cuobjdump, "-xptx", "all", os.path.abspath(path)],
                cwd=tmp,
                capture_output=True,
                timeout=600,
            )
        files = sorted(os.listdir(tmp))
        ptx70 = ""
        for f in files:
            if f.endswith(".sm_70.ptx"):
                with open(os.path.join(tmp, f), encoding="utf-8", errors="replace") as fh:
                    ptx70 += fh.read()
        sass: dict[str, str] = {}
        refused: dict[str, str] = {}
        symbols: dict[str, list[str]] = {}
        for f in files:
            m = CUBIN_NAME.search(f)
            if not m:
                continue
            text, why = disassemble(nvdisasm, os.path.join(tmp, f))
            sass[m.group(1)] = sass.get(m.group(1), "") + text
            if why:
                refused[m.group(1)] = why
            symbols.setdefault(m.group(1), []).extend(kernel_symbols(os.path.join(tmp, f)))
    top = f"sm_{archs[-1]}"
    direct_names = {s for s in symbols.get(top, []) if OUR_KERNEL.search(s)}
    for target in want:
        if target not in cubins:
            continue
        if target in refused:
            notes.append(
                f"{target}: SASS not disassembled ({refused[target]}); kernel symbols checked"
            )
            names = set(symbols.get(target, []))
            if target != "sm_90a" and not direct_names <= names:
                failures.append(
                    f"{target}: missing direct kernels {sorted(direct_names - names)[:3]}"
                )
            if target == "sm_70":
                if not any("MmaVoltaTensorOp" in n for n in names):
                    failures.append("sm_70: no CUTLASS Volta tensor-op kernel (MmaVoltaTensorOp)")
                for acc, pattern in MMA_884.items():
                    if not pattern.search(ptx70):
                        failures.append(
                            f"compute_70 PTX: no {pattern.pattern} ({acc} accumulators)"
                        )
            continue
        text = sass.get(target, "")
        if target != "sm_90a" and not HFMA.search(text):
            failures.append(f"{target}: no HFMA2 (the direct kernels' binary16 FMA)")
        if target == "sm_90a":
            for acc, pattern in HGMMA.items():
                if not pattern.search(text):
                    failures.append(f"sm_90a: no HGMMA with {acc} accumulators")
        elif int(target[3:]) >= 80:
            for acc, pattern in HMMA_16816.items():
                if not pattern.search(text):
                    failures.append(f"{target}: no HMMA.16816.{acc} (the sm80 kernels' MMA)")
    if 70 in archs:
        print(
            "check_cuda_build: compute_70 PTX: "
            + ", ".join(f"mma.m8n8k4 {k} {len(p.findall(ptx70))}" for k, p in MMA_884.items())
        )
    for target in want:
        if target in cubins and target not in refused:
            counts = {
                "HFMA2": len(HFMA.findall(sass.get(target, ""))),
                "HMMA.16816.F16": len(HMMA_16816["F16"].findall(sass.get(target, ""))),
                "HMMA.16816.F32": len(HMMA_16816["F32"].findall(sass.get(target, ""))),
                "HGMMA.F16": len(HGMMA["F16"].findall(sass.get(target, ""))),
                "HGMMA.F32": len(HGMMA["F32"].findall(sass.get(target, ""))),
            }
            print(
                f"check_cuda_build: {target}: "
                + ", ".join(f"{k} {v}" for k, v in counts.items() if v)
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--compiler", choices=sorted(EXPECT_RUNTIME_MAJOR), default="clang")
    parser.add_argument("op_lib", nargs="?", default="bazel-bin/_fp16ops.so")
    parser.add_argument(
        "abi_lib", nargs="?", default="bazel-bin/cc/kernels/gpu/libtf_fp16ops_gpu.so"
    )
    args = parser.parse_args(argv)
    failures: list[str] = []
    notes: list[str] = []
    check_op_library(args.op_lib, failures)
    info = check_abi_library(args.abi_lib, args.compiler, None, failures)
    check_runtime_linkage(args.op_lib, args.compiler, failures)
    check_sass(
        args.op_lib,
        info["sass_archs"],
        find_tool("cuobjdump"),
        find_tool("nvdisasm"),
        failures,
        notes,
    )
    for n in notes:
        print("check_cuda_build: NOTE", n)
    for f in failures:
        print("check_cuda_build:", f, file=sys.stderr)
    print(
        f"check_cuda_build: {args.op_lib}, {args.abi_lib} ({args.compiler}, CUDA "
        f"{info['runtime_version'] // 1000}.{info['runtime_version'] % 1000 // 10}, SASS "
        f"{', '.join(f'sm_{a}' for a in info['sass_archs'])} + sm_90a, PTX "
        f"compute_{info['ptx_arch']}): {'FAILED' if failures else 'ok'}"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
