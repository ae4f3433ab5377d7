load(":tf_flags.bzl", "TF_COPTS")

package(default_visibility = ["//visibility:public"])

cc_library(
    name = "tf_header_lib",
    hdrs = glob(
        ["include/**/*"],
        exclude = ["include/**/*.py"],
    ),
    copts = TF_COPTS,
    includes = ["include"],
)

cc_library(
    name = "libtensorflow_framework",
    srcs = ["%{LIBNAME}"],
)
