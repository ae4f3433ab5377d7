package(default_visibility = ["//visibility:public"])

load(":tf_flags.bzl", "TF_COPTS")

cc_library(
    name = "tf_header_lib",
    hdrs = glob(["include/**/*"], exclude = ["include/**/*.py"]),
    includes = ["include"],
    copts = TF_COPTS,
)

cc_library(
    name = "libtensorflow_framework",
    srcs = ["%{LIBNAME}"],
)
