"""Repository rule that exposes a CUDA toolchain and the CUTLASS headers to Bazel.

TF_FP16OPS_CUDA_COMPILER picks the toolchain:

clang (default): TensorFlow's own CUDA stack, as its `--config=cuda_clang` builds it. The CUDA
  compiler is clang (CLANG_CUDA_COMPILER_PATH, TensorFlow's variable, else clang++-19 on PATH);
  the CUDA 12.5 parts are the pinned PyPI wheels installed for PYTHON_BIN_PATH
  (requirements-cuda.txt): nvidia-cuda-nvcc-cu12 (ptxas, crt/ headers, libdevice),
  nvidia-cuda-runtime-cu12 (headers, libcudart.so.12: the runtime TensorFlow's GPU wheel loads),
  nvidia-cuda-cccl-cu12 (libcu++/CUB), nvidia-curand-cu12 (clang's CUDA wrapper includes
  curand_mtgp32_kernel.h) and nvidia-nvfatbin-cu12. The rule assembles them into one CUDA root
  (cuda/: include/, bin/ptxas, nvvm/libdevice, lib/) for clang's --cuda-path. That root's
  bin/fatbinary is fatbinary.py (nvFatbin), because the nvcc wheel has no fatbinary; clang
  takes it from there before PATH, so a local CUDA 13 fatbinary is never used.
nvcc: a local CUDA toolkit (CUDA 13.0 here): NVCC, else $CUDA_PATH/bin/nvcc, else nvcc on PATH.
  The toolkit root is the directory above nvcc's bin/ (symlinks resolved); from it the rule links
  include/ and lib64/libcudart_static.a (runtime linked statically).

CUTLASS comes from CUTLASS_DIR (a CUTLASS source root holding include/ and tools/util/include/)
or, by default, from the pinned nvidia-cutlass wheel installed for PYTHON_BIN_PATH
(site-packages/cutlass_library/source). TF_FP16OPS_CUDA_ARCHS lists the SASS targets of the
portable kernels (default: clang "60,70,75,80,86,89,90", nvcc "75,80,86,89,90", CUDA 13 having
dropped sm_60/sm_70); PTX for the highest one is embedded too. The CUTLASS 2.x tensor-op kernels
get the listed targets >= 80 (sm80 file) or = 70 (sm70 files); the Hopper kernels sm_90a.

When the chosen toolchain is not found the repository still loads (CUDA_AVAILABLE = False) so
that the default CPU-only build works; a --config=cuda build then fails with a message naming
what was missing (CUDA_MISSING).
"""

_DEFAULT_ARCHS = {"clang": "60,70,75,80,86,89,90", "nvcc": "75,80,86,89,90"}

# The CUDA wheels' folders under site-packages/nvidia (each wheel has its own nvidia/<name>/).
_WHEELS_QUERY = """
import os, sys
import nvidia
root = os.path.dirname(nvidia.__file__)
for name in sys.argv[1:]:
    print(name + "=" + os.path.join(root, name))
"""
_WHEELS = ["cuda_nvcc", "cuda_runtime", "cuda_cccl", "curand", "nvfatbin"]

_CUTLASS_QUERY = """
import os, cutlass_library
print(os.path.join(os.path.dirname(cutlass_library.__file__), "source"))
"""

def _find_nvcc(ctx):
    env = ctx.os.environ
    if env.get("NVCC", ""):
        return ctx.path(env["NVCC"])
    if env.get("CUDA_PATH", ""):
        p = ctx.path(env["CUDA_PATH"] + "/bin/nvcc")
        if p.exists:
            return p
    return ctx.which("nvcc")

def _find_cutlass(ctx):
    env = ctx.os.environ
    if env.get("CUTLASS_DIR", ""):
        return env["CUTLASS_DIR"]
    python = env.get("PYTHON_BIN_PATH", "") or str(ctx.which("python3"))
    res = ctx.execute([python, "-c", _CUTLASS_QUERY], quiet = True)
    if res.return_code != 0:
        return ""
    return res.stdout.strip().splitlines()[-1]

def _toolkit_root(ctx, nvcc):
    """The toolkit root as nvcc itself reports it (`#$ TOP=...` of a dry run).

    nvcc on PATH may be a wrapper script outside the toolkit.
    """
    res = ctx.execute([str(nvcc), "--dryrun", "-c", "-x", "cu", "/dev/null", "-o", "/dev/null"], quiet = True)
    for line in (res.stderr + res.stdout).splitlines():
        if line.startswith("#$ TOP="):
            top = line[len("#$ TOP="):].strip().strip('"')
            return ctx.path(str(ctx.execute(["readlink", "-f", top]).stdout.strip()))
    return nvcc.dirname.dirname

def _python(ctx):
    return ctx.os.environ.get("PYTHON_BIN_PATH", "") or str(ctx.which("python3"))

def _cuda_version(ctx, cuda_h):
    """CUDA_VERSION of cuda.h (e.g. 12050), 0 when absent."""
    prefix = "#define CUDA_VERSION "
    for line in ctx.read(cuda_h).splitlines():
        if line.startswith(prefix) and line[len(prefix):].strip().isdigit():
            return int(line[len(prefix):].strip())
    return 0

def _link_entries(ctx, src_dir, dst_dir):
    """Symlinks every entry of src_dir (but the wheels' __init__.py) into dst_dir."""
    for entry in ctx.path(src_dir).readdir():
        if entry.basename not in ("__init__.py", "__pycache__"):
            ctx.symlink(entry, dst_dir + "/" + entry.basename)

def _configure_clang(ctx):
    """Assembles cuda/ from the CUDA 12.5 wheels. Returns (clang, version, missing)."""
    env = ctx.os.environ
    clang = env.get("CLANG_CUDA_COMPILER_PATH", "") or ctx.which("clang++-19")
    if not clang or not ctx.path(str(clang)).exists:
        return "", 0, "clang (CLANG_CUDA_COMPILER_PATH or clang++-19 on PATH; apt-get install clang-19)"
    res = ctx.execute([_python(ctx), "-c", _WHEELS_QUERY] + _WHEELS, quiet = True)
    dirs = {}
    for line in res.stdout.splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            dirs[k] = v
    for name in _WHEELS:
        if name not in dirs or not ctx.path(dirs[name]).exists:
            return "", 0, "the CUDA 12.5 wheels of requirements-cuda.txt (nvidia/%s)" % name
    for name in ["cuda_runtime", "cuda_nvcc", "cuda_cccl", "curand"]:
        _link_entries(ctx, dirs[name] + "/include", "cuda/include")
    ctx.symlink(dirs["cuda_nvcc"] + "/bin/ptxas", "cuda/bin/ptxas")
    ctx.symlink(dirs["cuda_nvcc"] + "/nvvm/libdevice", "cuda/nvvm/libdevice")
    ctx.symlink(dirs["cuda_runtime"] + "/lib/libcudart.so.12", "cuda/lib/libcudart.so.12")
    script = ctx.path(Label("//third_party/cuda:fatbinary.py"))
    ctx.file("cuda/bin/fatbinary", "\n".join([
        "#!/bin/sh",
        "# clang's fatbinary step, on NVIDIA's nvFatbin library (third_party/cuda/fatbinary.py).",
        'exec "%s" "%s" --nvfatbin "%s" "$@"' % (
            _python(ctx),
            script,
            dirs["nvfatbin"] + "/lib/libnvfatbin.so.12",
        ),
        "",
    ]), executable = True)
    version = _cuda_version(ctx, ctx.path(dirs["cuda_runtime"] + "/include/cuda.h"))
    return str(ctx.path(str(clang))), version, ""

def _cuda_configure_impl(ctx):
    compiler = ctx.os.environ.get("TF_FP16OPS_CUDA_COMPILER", "") or "clang"
    if compiler not in _DEFAULT_ARCHS:
        fail("TF_FP16OPS_CUDA_COMPILER = %r: expected clang or nvcc" % compiler)
    cutlass = _find_cutlass(ctx)
    archs = ctx.os.environ.get("TF_FP16OPS_CUDA_ARCHS", "") or _DEFAULT_ARCHS[compiler]
    missing = ""
    if cutlass == "" or not ctx.path(cutlass + "/include/cutlass/cutlass.h").exists:
        missing = "the CUTLASS headers (CUTLASS_DIR, or nvidia-cutlass for PYTHON_BIN_PATH)"
    if compiler == "clang":
        clang, version, why = ("", 0, "") if missing else _configure_clang(ctx)
        missing = missing or why
        available = missing == ""
        if available:
            ctx.symlink(cutlass + "/include", "cutlass/include")
            ctx.symlink(cutlass + "/tools/util/include", "cutlass/util_include")
        else:
            for d in ["cuda/include", "cutlass/include", "cutlass/util_include", "cuda/lib"]:
                ctx.file(d + "/.empty", "")
        ctx.file("cuda_config.bzl", "\n".join([
            "CUDA_AVAILABLE = %s" % available,
            "CUDA_COMPILER = 'clang'",
            "CUDA_MISSING = %r" % missing,
            "CLANG = %r" % clang,
            "CUDA_ROOT = %r" % str(ctx.path("cuda")),
            "CUDA_VERSION = %d" % version,
            "NVCC = ''",
            "CUDA_ARCHS = %r" % [a.strip() for a in archs.split(",") if a.strip()],
            "CUTLASS_DIR = %r" % cutlass,
            "",
        ]))
        ctx.template("BUILD", ctx.attr._build_tpl, {
            "%{CUDART}": '["cuda/lib/libcudart.so.12"]' if available else "[]",
            "%{CUDART_LINKOPTS}": repr([
                "-Wl,-rpath,'$$ORIGIN/../nvidia/cuda_runtime/lib'",
                "-Wl,-rpath,'$$ORIGIN'",
            ]),
        })
        return
    nvcc = _find_nvcc(ctx)
    if nvcc == None or not nvcc.exists:
        missing = missing or "nvcc (NVCC, CUDA_PATH or nvcc on PATH)"
    available = missing == ""
    if available:
        real_nvcc = ctx.path(str(ctx.execute(["readlink", "-f", str(nvcc)]).stdout.strip()))
        root = _toolkit_root(ctx, real_nvcc)
        ctx.symlink(str(root) + "/include", "cuda/include")
        lib = ctx.path(str(root) + "/lib64/libcudart_static.a")
        if not lib.exists:
            lib = ctx.path(str(root) + "/targets/x86_64-linux/lib/libcudart_static.a")
        ctx.symlink(lib, "cuda/lib/libcudart_static.a")
        ctx.symlink(cutlass + "/include", "cutlass/include")
        ctx.symlink(cutlass + "/tools/util/include", "cutlass/util_include")
        nvcc_str = str(root) + "/bin/nvcc"
    else:
        ctx.file("cuda/include/.empty", "")
        ctx.file("cutlass/include/.empty", "")
        ctx.file("cutlass/util_include/.empty", "")
        ctx.file("cuda/lib/.empty", "")
        nvcc_str = ""
    ctx.file("cuda_config.bzl", "\n".join([
        "CUDA_AVAILABLE = %s" % available,
        "CUDA_COMPILER = 'nvcc'",
        "CUDA_MISSING = %r" % missing,
        "CLANG = ''",
        "CUDA_ROOT = ''",
        "CUDA_VERSION = 0",
        "NVCC = %r" % nvcc_str,
        "CUDA_ARCHS = %r" % [a.strip() for a in archs.split(",") if a.strip()],
        "CUTLASS_DIR = %r" % cutlass,
        "",
    ]))
    ctx.template("BUILD", ctx.attr._build_tpl, {
        "%{CUDART}": '["cuda/lib/libcudart_static.a"]' if available else "[]",
        "%{CUDART_LINKOPTS}": '["-ldl", "-lpthread", "-lrt"]',
    })

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = [
        "NVCC",
        "CUDA_PATH",
        "CUTLASS_DIR",
        "PYTHON_BIN_PATH",
        "PATH",
        "TF_FP16OPS_CUDA_ARCHS",
        "TF_FP16OPS_CUDA_COMPILER",
        "CLANG_CUDA_COMPILER_PATH",
    ],
    local = True,
    attrs = {"_build_tpl": attr.label(default = Label("//third_party/cuda:BUILD.tpl"))},
)
