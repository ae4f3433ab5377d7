# The README's two commands: `make demo` and `make test`. Both set everything up on a fresh
# Debian 12 machine: system packages (as root; else the apt command is printed), a virtualenv
# with pinned dependencies, the Bazel build of the op library, and the package install.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
PY     := $(VENV)/bin/python
BAZEL  ?= bazel
PYTEST_ARGS ?=
# TensorFlow's C++ start-up logging is noise for the demo and the tests.
export TF_CPP_MIN_LOG_LEVEL ?= 2

# `make wheel CUDA=1` packs the --config=cuda build instead of the CPU one.
CUDA ?= 0
# Pinned buildifier (npm's @bazel/buildifier), installed into build/tools by `make lint`.
BUILDIFIER_VERSION := 8.2.1
BUILDIFIER := build/tools/node_modules/.bin/buildifier
CLANG_FORMAT ?= clang-format
RUFF := $(VENV)/bin/ruff

.PHONY: demo test test-eigen fuzz build install venv system-deps configure benchmark build-cuda build-cuda-ci \
	gpu-check-lib gpu-check gpu-bundle gpu-host-lib clean wheel lint format matrix matrix-libs release

demo: install
	$(PY) -m tf_fp16ops.demo

# The host test of the size rules (cc/kernels/conv_shape_test.cc), the suite
# (tests/package/test_wheel.py installs the wheel just built into a fresh virtualenv), then the style check.
test: install wheel gpu-host-lib
	$(BAZEL) run //:conv_shape_test
	TF_FP16OPS_WHEEL="$$(ls dist/tf_fp16ops-*.whl)" $(PY) -m pytest $(PYTEST_ARGS)
	$(MAKE) --no-print-directory lint

# The suite again with TensorFlow's oneDNN CPU kernels off, so that its Eigen kernels take every
# stock conv (what a CPU without avx512_fp16/amx_fp16/avx_ne_convert does for T=half): CI covers
# both TensorFlow CPU paths on whatever CPU it runs. Left out: the tests that run no stock kernel
# (our own ISA paths are covered by TF_FP16OPS_CPU_ISA caps in the first run).
ONEDNN_INDEPENDENT_TESTS := package/test_wheel.py package/test_no_tensorflow.py \
	package/test_tf_matrix.py gpu/test_gpu_host.py gpu/test_cuda_toolchain.py \
	ops/test_softfloat_oracle.py ops/test_fuzz.py ops/test_isa_paths.py ops/test_subnormals.py \
	ops/test_float_order.py ops/test_benchmark_cpu.py tensorboard_plugin/test_tb_plugin_browser.py \
	tensorboard_plugin/test_tb_plugin_routes.py audit/test_audit_malformed.py \
	audit/test_audit_layering.py
# Also left out: the multi-process tf.distribute runs (-k), which compare a sharded run with the
# one-device run of the same kernels: ~2 min of CI for no kernel choice of their own.
# Where TensorFlow's oneDNN is already off in this environment (IsMklEnabled() False: its default
# on CPUs without avx512_vnni/avx512_bf16/avx_vnni/AMX, e.g. a Zen 1-3), `make test` has just run
# every stock conv on Eigen and this run would repeat it test for test: it says so and stops.
ONEDNN_ON = $(PY) -c "from tf_fp16ops._platform.quiet import import_tensorflow; \
	import_tensorflow(); from tf_fp16ops._platform import stock_conv; \
	print(int(stock_conv.onednn_runs_float32_convs()))"
test-eigen: install
	@for f in $(ONEDNN_INDEPENDENT_TESTS); do \
	  test -f tests/$$f || { echo "ONEDNN_INDEPENDENT_TESTS: no file tests/$$f"; exit 2; }; \
	done
	@on="$$($(ONEDNN_ON))" || exit 1; \
	if [ "$$on" = 0 ]; then \
	  echo "test-eigen: TensorFlow's oneDNN is off here already, so make test runs every stock conv on Eigen: nothing to add"; \
	else \
	  echo "test-eigen: the suite again with TF_ENABLE_ONEDNN_OPTS=0"; \
	  TF_ENABLE_ONEDNN_OPTS=0 $(PY) -m pytest $(PYTEST_ARGS) -k "not mirrored_strategy" \
	    $(addprefix --ignore=tests/,$(ONEDNN_INDEPENDENT_TESTS)); \
	fi

system-deps:
	PYTHON=$(PYTHON) tools/install_system_deps.sh

venv: system-deps $(VENV)/.deps-installed

# CUTLASS headers too (6 MB, headers only): Bazel's cuda_configure looks for them when the
# workspace is first loaded, before any --config=cuda build.
$(VENV)/.deps-installed: requirements.txt requirements-cuda.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q -r requirements.txt
	$(VENV)/bin/pip install -q --no-deps -r requirements-cuda.txt
	touch $@

configure: venv
	$(PY) tools/configure.py --python $(PY) --bazel $(BAZEL)

# Builds //:_fp16ops.so against the virtualenv's TensorFlow and records that version.
build: configure
	$(BAZEL) build //:_fp16ops.so
	install -m 0755 bazel-bin/_fp16ops.so tf_fp16ops/_fp16ops.so
	$(PY) -c "import json; from tf_fp16ops._platform.quiet import import_tensorflow; tf = import_tensorflow(); json.dump({'tensorflow_version': tf.__version__}, open('tf_fp16ops/_build_info.json', 'w'))"

install: build
	$(VENV)/bin/pip install -q --no-deps --no-build-isolation -e .

# The TensorFlow matrix (tools/tf_matrix.txt; tools/tf_matrix.py): an op library per TensorFlow
# minor 2.16-2.21, each built by Bazel against that release's wheel (headers and
# libtensorflow_framework.so.2) in its own cached virtualenv, build/matrix/venv-<minor>. MINORS
# picks minors (default: all). The pinned minor of requirements.txt (DEV_MINOR) is `make build`'s
# own library; the others are build/matrix/lib-<minor>/.
#   make wheel                    the pinned minor only (what `make test` installs)
#   make matrix MINORS=2.16       the oldest beside the pinned one (which `make test` runs): what
#                                 .ci/run runs, all of TESTS (README "TensorFlow versions")
#   make release                  the release wheel: all six, each tested (dist/)
MINORS ?= all
DEV_MINOR := $(shell sed -n 's/^tensorflow==\([0-9]*\.[0-9]*\).*/\1/p' requirements.txt)
ALL_MINORS = $(shell $(PY) tools/tf_matrix.py list)
MATRIX_TEST_MINORS = $(if $(filter all,$(MINORS)),$(ALL_MINORS),$(MINORS))
MATRIX_LIB_MINORS = $(filter-out $(DEV_MINOR),$(MATRIX_TEST_MINORS))
# Libraries of other minors that `make wheel` adds to the pinned one (set by `make matrix`).
WHEEL_MINORS ?=
DIST ?= dist
WHEEL_LIBS = --library tf_fp16ops/_fp16ops.so --build-info tf_fp16ops/_build_info.json \
  $(foreach m,$(WHEEL_MINORS),--library build/matrix/lib-$(m)/_fp16ops.so \
  --build-info build/matrix/lib-$(m)/build_info.json)

# $(DIST)/tf_fp16ops-<version>-<python tag>-<abi>-<platform>.whl: the package and its op
# libraries, each in tf_fp16ops/_libs/tf<minor>/ with its build_info.json (tools/build_wheel.py).
# CPU build; CUDA=1 packs bazel-bin/_fp16ops.so of `make build-cuda` (the pinned minor only),
# recorded with "cuda": true.
ifeq ($(CUDA),1)
wheel: build-cuda
	mkdir -p build
	$(PY) -c "import json; from tf_fp16ops._platform.quiet import import_tensorflow; tf = import_tensorflow(); print(json.dumps({'tensorflow_version': tf.__version__}))" > build/cuda_build_info.json
	$(PY) tools/build_wheel.py --cuda --library bazel-bin/_fp16ops.so --build-info build/cuda_build_info.json --dist $(DIST)
else
wheel: build
	$(PY) tools/build_wheel.py $(WHEEL_LIBS) --dist $(DIST)
endif

# The op libraries of MINORS other than the pinned one, one Bazel build at a time (nice: the
# machine is shared); the virtualenvs download TensorFlow once, then come from pip's cache.
matrix-libs: configure
	$(if $(MATRIX_LIB_MINORS),nice $(PY) tools/tf_matrix.py build --minors $(MATRIX_LIB_MINORS),@true)

# The wheel with the libraries of MINORS, installed into each minor's virtualenv, and the
# version-sensitive tests run there from outside the source tree (tools/tf_matrix.py TESTS).
matrix: build matrix-libs
	$(MAKE) --no-print-directory wheel WHEEL_MINORS="$(MATRIX_LIB_MINORS)" DIST=build/matrix/dist
	nice $(PY) tools/tf_matrix.py test --minors $(MATRIX_TEST_MINORS) \
	  --wheel "$$(ls build/matrix/dist/tf_fp16ops-*.whl)"

release:
	$(MAKE) --no-print-directory matrix MINORS=all
	mkdir -p dist && rm -f dist/tf_fp16ops-*.whl && cp build/matrix/dist/tf_fp16ops-*.whl dist/

# Style: ruff (lint and format, pyproject.toml), clang-format (.clang-format) and buildifier, all
# at 100 columns. `lint` only checks and fails on any finding; `format` rewrites the files.
# The sources are the tracked files, so build outputs and virtualenvs are never touched.
PY_SOURCES     = $(shell git ls-files '*.py')
CC_SOURCES     = $(shell git ls-files '*.cc' '*.h')
# BUILD.tpl of third_party/cuda is not Starlark until cuda_configure substitutes %{CUDART}.
BAZEL_SOURCES  = $(filter-out third_party/cuda/BUILD.tpl,$(shell git ls-files '*BUILD' '*BUILD.tpl' '*WORKSPACE' '*.bzl'))
# Debian's Bazel 4.2.3 defines the cc rules natively and third_party/rules_cc_compat forwards to
# them, so the native-cc-* warnings (load cc rules from a rules_cc release) cannot apply here.
BUILDIFIER_WARNINGS = --warnings=-native-cc-binary,-native-cc-import,-native-cc-library,$\
-native-cc-objc-library,-native-cc-proto,-native-cc-test,-native-cc-toolchain,$\
-native-cc-toolchain-suite

$(BUILDIFIER):
	npm install --prefix build/tools --no-save --no-audit --no-fund --loglevel=error \
	  @bazel/buildifier@$(BUILDIFIER_VERSION)

# Runs every checker, then fails if any reported a finding (clang-format: one line per file).
lint: venv $(BUILDIFIER)
	@status=0; \
	$(RUFF) check --no-fix --output-format=concise $(PY_SOURCES) || status=1; \
	$(RUFF) format --check --output-format=concise $(PY_SOURCES) || status=1; \
	n=0; for f in $(CC_SOURCES); do \
	  $(CLANG_FORMAT) --dry-run --Werror "$$f" >/dev/null 2>&1 || { echo "Would reformat: $$f"; n=$$((n+1)); }; \
	done; \
	if [ $$n -gt 0 ]; then echo "clang-format: $$n files would be reformatted"; status=1; fi; \
	$(BUILDIFIER) --mode=check --lint=warn $(BUILDIFIER_WARNINGS) $(BAZEL_SOURCES) || status=1; \
	if [ $$status -ne 0 ]; then echo "make lint: findings above; \`make format\` rewrites what it can"; fi; \
	exit $$status

format: venv $(BUILDIFIER)
	$(RUFF) check --fix-only $(PY_SOURCES)
	$(RUFF) format $(PY_SOURCES)
	$(CLANG_FORMAT) -i $(CC_SOURCES)
	$(BUILDIFIER) --mode=fix --lint=fix $(BUILDIFIER_WARNINGS) $(BAZEL_SOURCES)

benchmark: install
	$(PY) tools/benchmark_cpu.py

# Release check: the seeded fuzz and the SoftFloat comparison with many more cases.
FUZZ_CASES ?= 40000
fuzz: install
	FUZZ_CASES=$(FUZZ_CASES) SOFTFLOAT_RANDOM=20000000 $(PY) -m pytest -q \
	  tests/ops/test_fuzz.py tests/ops/test_softfloat_oracle.py tests/ops/test_hostile_sizes.py

# The op library with its CUDA kernels. CUDA_COMPILER=clang (default): TensorFlow's own CUDA
# stack, as its --config=cuda_clang builds it: Debian's clang-19 (CLANG_CUDA_COMPILER_PATH
# overrides it) with the pinned CUDA 12.5 wheels of requirements-cuda.txt, libcudart.so.12 shared
# with TensorFlow's GPU wheel; SASS sm_60 ... sm_90 + compute_90 PTX, sm_90a for the Hopper
# kernels. CUDA_COMPILER=nvcc: the local CUDA 13 nvcc (NVCC / CUDA_PATH / PATH), runtime linked
# statically, sm_75 ... sm_90. CUDA_ARCHS overrides the SASS list (CI: $(CUDA_ARCHS_CI)). The
# SASS of every target and its MMA/FMA instructions are checked by tools/check_cuda_build.py.
# Not installed: a compile check here; copy bazel-bin/_fp16ops.so into tf_fp16ops/ on a GPU
# machine.
CUDA_COMPILER ?= clang
CUDA_ARCHS ?=
CUDA_ARCHS_CI := 60,70,80,90
CUDA_REPO_ENV = --repo_env=TF_FP16OPS_CUDA_COMPILER=$(CUDA_COMPILER) \
  --repo_env=TF_FP16OPS_CUDA_ARCHS=$(CUDA_ARCHS)
build-cuda: configure
	$(BAZEL) build --config=cuda $(CUDA_REPO_ENV) //:_fp16ops.so //cc/kernels/gpu:libtf_fp16ops_gpu.so
	$(PY) tools/check_cuda_build.py --compiler $(CUDA_COMPILER) bazel-bin/_fp16ops.so \
	  bazel-bin/cc/kernels/gpu/libtf_fp16ops_gpu.so

# CI's compile check: the default toolchain for the targets each implementation's own SASS
# needs (sm_60 direct, sm_70 Volta, sm_80 mma.sync, sm_90 + sm_90a Hopper); a release builds all.
build-cuda-ci:
	$(MAKE) --no-print-directory build-cuda CUDA_ARCHS=$(CUDA_ARCHS_CI)

# The C-ABI library of the same kernels, from the same Bazel objects as the op library's
# --config=cuda build (cc/kernels/gpu/BUILD), for the GPU check (PyTorch + cuDNN, no TensorFlow).
gpu-check-lib: configure
	$(BAZEL) build --config=cuda $(CUDA_REPO_ENV) //cc/kernels/gpu:libtf_fp16ops_gpu.so

# One folder for a bare GPU machine (no TensorFlow, no pip): the prebuilt check library and the
# check script; README "GPU kernels (CUDA, CUTLASS)" gives the command that runs it.
GPU_BUNDLE ?= build/gpu_bundle
gpu-bundle: gpu-check-lib
	tools/gpu_check/make_bundle.sh bazel-bin/cc/kernels/gpu/libtf_fp16ops_gpu.so $(GPU_BUNDLE) \
	  "$$($(PY) -c 'import nvidia.cuda_runtime as m, os; print(os.path.join(os.path.dirname(m.__file__), "lib", "libcudart.so.12"))')"

# On the GPU machine, from a checkout with the bundle built: runs it.
gpu-check:
	$(GPU_BUNDLE)/run.sh $(or $(OUT),$(GPU_BUNDLE)/results)

# The GPU sources compiled as host C++ (TF_FP16OPS_HOST_BUILD: kernel bodies run as loops on the
# CPU) into a ctypes library for tests/gpu/test_gpu_host.py. CUTLASS's can_implement is compiled in
# with nvcc when nvcc is found (host code only, no kernel instantiated); without nvcc the table
# tests skip and say so.
NVCC_BIN ?= $(or $(NVCC),$(shell command -v nvcc 2>/dev/null))
GPU_HOST := build/gpu_host
GPU_SRC := cc/kernels/gpu
GPU_HOST_SRCS := direct_conv.cu.cc layout_transform.cu.cc conv2d_gpu.cu.cc matmul_gpu.cu.cc c_api.cc \
  host_stubs.cc
GPU_HOST_HDRS := $(wildcard $(GPU_SRC)/*.h) cc/kernels/conv_problem.h
GPU_HOST_OBJS := $(patsubst %,$(GPU_HOST)/%.o,$(GPU_HOST_SRCS))
GPU_HOST_CXXFLAGS := -std=c++17 -O2 -fPIC -Wall -Wextra -Werror -DTF_FP16OPS_HOST_BUILD -I.
ifneq ($(NVCC_BIN),)
GPU_HOST_CXXFLAGS += -DTF_FP16OPS_HOST_CUTLASS
GPU_HOST_OBJS += $(GPU_HOST)/cutlass_can_implement.o
# The toolkit root as nvcc reports it (nvcc on PATH may be a wrapper script elsewhere).
CUDA_LIB64 := $(shell $(NVCC_BIN) --dryrun -c -x cu /dev/null -o /dev/null 2>&1 | sed -n 's/^\#\$$ TOP=//p' | tr -d '"')/lib64
GPU_HOST_LIBS := -L$(CUDA_LIB64) -lcudart_static -ldl -lpthread -lrt
endif
CUTLASS_SRC = $(shell $(PY) -c "import os, cutlass_library; print(os.path.join(os.path.dirname(cutlass_library.__file__), 'source'))")

gpu-host-lib: $(GPU_HOST)/libtf_fp16ops_gpu_host.so

$(GPU_HOST)/%.o: $(GPU_SRC)/% $(GPU_HOST_HDRS)
	@mkdir -p $(GPU_HOST)
	$(CXX) $(GPU_HOST_CXXFLAGS) -x c++ -c $< -o $@

$(GPU_HOST)/cutlass_can_implement.o: $(GPU_SRC)/cutlass_can_implement.cu.cc $(GPU_HOST_HDRS) | venv
	@mkdir -p $(GPU_HOST)
	$(NVCC_BIN) -x cu -std=c++17 --expt-relaxed-constexpr -O2 -DNDEBUG -Xcompiler -fPIC -I. \
	  -I$(CUTLASS_SRC)/include -I$(CUTLASS_SRC)/tools/util/include \
	  -gencode arch=compute_90a,code=sm_90a -c $< -o $@

$(GPU_HOST)/libtf_fp16ops_gpu_host.so: $(GPU_HOST_OBJS)
	$(CXX) -shared -Wl,--no-undefined -o $@ $^ $(GPU_HOST_LIBS)

clean:
	-$(BAZEL) clean
	rm -f tf_fp16ops/_fp16ops.so tf_fp16ops/_build_info.json .bazelrc.user
	rm -rf dist build/wheel build/wheel_test
