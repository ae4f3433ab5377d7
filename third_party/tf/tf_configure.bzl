"""Repository rule that exposes the installed TensorFlow wheel to Bazel.

Runs the Python interpreter named by PYTHON_BIN_PATH (default: python3 on PATH) and asks
tf.sysconfig for the include directory, the framework library and the compile flags, the
way tensorflow/custom-op's tf_configure.bzl does. The flags (C++ standard, the
_GLIBCXX_USE_CXX11_ABI value, EIGEN_MAX_ALIGN_BYTES, ...) are copied verbatim into
TF_COPTS so that the op library always matches the installed framework's ABI.
"""

_PY_QUERY = """
import json, os, tensorflow as tf
inc = tf.sysconfig.get_include()
lib = tf.sysconfig.get_lib()
flags = [f for f in tf.sysconfig.get_compile_flags() if not f.startswith("-I")]
link = [f for f in tf.sysconfig.get_link_flags() if f.startswith("-l")]
name = link[0][len("-l:"):] if link and link[0].startswith("-l:") else "libtensorflow_framework.so.2"
print(json.dumps({"include": inc, "lib": lib, "flags": flags, "libname": name, "version": tf.__version__}))
"""

def _tf_configure_impl(ctx):
    python = ctx.os.environ.get("PYTHON_BIN_PATH", "")
    if not python:
        python = str(ctx.which("python3"))
    res = ctx.execute([python, "-c", _PY_QUERY], quiet = True)
    if res.return_code != 0:
        fail("tf_configure: cannot import tensorflow with %s (set PYTHON_BIN_PATH):\n%s" % (python, res.stderr))
    info = json.decode(res.stdout.strip().splitlines()[-1])
    ctx.symlink(info["include"], "include")
    ctx.symlink(info["lib"] + "/" + info["libname"], info["libname"])
    ctx.file("tf_flags.bzl", "TF_COPTS = %s\nTF_VERSION = \"%s\"\n" % (
        repr(info["flags"]),
        info["version"],
    ))
    ctx.template("BUILD", ctx.attr._build_tpl, {"%{LIBNAME}": info["libname"]})

tf_configure = repository_rule(
    implementation = _tf_configure_impl,
    environ = ["PYTHON_BIN_PATH"],
    local = True,
    attrs = {"_build_tpl": attr.label(default = Label("//third_party/tf:BUILD.tpl"))},
)
