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

.PHONY: demo test fuzz build install venv system-deps configure benchmark build-cuda gpu-check-lib gpu-check clean

demo: install
	$(PY) -m tf_fp16ops.demo

test: install
	$(PY) -m pytest $(PYTEST_ARGS)

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
	$(PY) -c "import json, tensorflow as tf; json.dump({'tensorflow_version': tf.__version__}, open('tf_fp16ops/_build_info.json', 'w'))"

install: build
	$(VENV)/bin/pip install -q --no-deps --no-build-isolation -e .

benchmark: install
	$(PY) tools/benchmark_cpu.py

# Release check: the seeded fuzz and the SoftFloat comparison with many more cases.
FUZZ_CASES ?= 40000
fuzz: install
	FUZZ_CASES=$(FUZZ_CASES) SOFTFLOAT_RANDOM=20000000 $(PY) -m pytest -q \
	  tests/test_fuzz.py tests/test_softfloat_oracle.py tests/test_hostile_sizes.py

# The op library with its CUDA kernels (CUTLASS headers from the pinned wheel, nvcc on PATH or
# NVCC / CUDA_PATH); sm_75-sm_90 + PTX, sm_90a for the Hopper kernels. Not installed: a compile check
# here; copy bazel-bin/_fp16ops.so into tf_fp16ops/ on a GPU machine.
build-cuda: configure
	$(BAZEL) build --config=cuda //:_fp16ops.so
	$(PY) tools/check_cuda_build.py bazel-bin/_fp16ops.so

# Standalone C-ABI library of the same kernels and the GPU check (PyTorch + cuDNN, no TensorFlow).
gpu-check-lib: venv
	tools/gpu_check/build.sh

# On the GPU machine (no venv there): builds the library if missing, then runs the check.
gpu-check:
	tools/gpu_check/run_on_gpu.sh $(or $(OUT),build/gpu_check/results)

clean:
	-$(BAZEL) clean
	rm -f tf_fp16ops/_fp16ops.so tf_fp16ops/_build_info.json .bazelrc.user
