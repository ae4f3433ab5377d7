"""Repository rule that exposes a local CUDA toolkit and the CUTLASS headers to Bazel.

nvcc is taken from, in order: the NVCC environment variable, $CUDA_PATH/bin/nvcc, nvcc on PATH.
The toolkit root is the directory above nvcc's bin/ (symlinks resolved); from it the rule links
include/ (CUDA headers) and lib64/libcudart_static.a. CUTLASS comes from CUTLASS_DIR (a CUTLASS
source root holding include/ and tools/util/include/) or, by default, from the pinned
nvidia-cutlass wheel installed for PYTHON_BIN_PATH (site-packages/cutlass_library/source).
TF_FP16OPS_CUDA_ARCHS (default "75,80,86,89,90") lists the SASS targets of the portable kernels;
PTX for the highest one is embedded too. The Hopper kernels are always built for sm_90a.

When no nvcc is found the repository still loads (CUDA_AVAILABLE = False) so that the default
CPU-only build works; a --config=cuda build then fails with a message naming the variables above.
"""

_DEFAULT_ARCHS = "75,80,86,89,90"

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

def _cuda_configure_impl(ctx):
    nvcc = _find_nvcc(ctx)
    cutlass = _find_cutlass(ctx)
    archs = ctx.os.environ.get("TF_FP16OPS_CUDA_ARCHS", "") or _DEFAULT_ARCHS
    available = nvcc != None and nvcc.exists and cutlass != "" and \
                ctx.path(cutlass + "/include/cutlass/cutlass.h").exists
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
        "NVCC = %r" % nvcc_str,
        "CUDA_ARCHS = %r" % [a.strip() for a in archs.split(",") if a.strip()],
        "CUTLASS_DIR = %r" % cutlass,
        "",
    ]))
    ctx.template("BUILD", ctx.attr._build_tpl, {
        "%{CUDART}": '["cuda/lib/libcudart_static.a"]' if available else "[]",
    })

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["NVCC", "CUDA_PATH", "CUTLASS_DIR", "PYTHON_BIN_PATH", "PATH", "TF_FP16OPS_CUDA_ARCHS"],
    local = True,
    attrs = {"_build_tpl": attr.label(default = Label("//third_party/cuda:BUILD.tpl"))},
)
