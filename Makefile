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

.PHONY: demo test build install venv system-deps configure benchmark build-cuda gpu-check-lib gpu-check \
	gpu-bundle gpu-host-lib clean

demo: install
	$(PY) -m tf_fp16ops.demo

test: install gpu-host-lib
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

# The op library with its CUDA kernels (CUTLASS headers from the pinned wheel, nvcc on PATH or
# NVCC / CUDA_PATH); sm_75-sm_90 SASS + compute_90 PTX, sm_90a for the Hopper kernels
# (TF_FP16OPS_CUDA_ARCHS overrides the SASS list). Not installed: a compile check here; copy
# bazel-bin/_fp16ops.so into tf_fp16ops/ on a GPU machine.
build-cuda: configure
	$(BAZEL) build --config=cuda //:_fp16ops.so //cc/kernels/gpu:libtf_fp16ops_gpu.so
	$(PY) tools/check_cuda_build.py bazel-bin/_fp16ops.so

# The C-ABI library of the same kernels, from the same Bazel objects as the op library's
# --config=cuda build (cc/kernels/gpu/BUILD), for the GPU check (PyTorch + cuDNN, no TensorFlow).
gpu-check-lib: configure
	$(BAZEL) build --config=cuda //cc/kernels/gpu:libtf_fp16ops_gpu.so

# One folder for a bare GPU machine (no TensorFlow, no pip): the prebuilt check library and the
# check script; README "GPU kernels (CUDA, CUTLASS)" gives the command that runs it.
GPU_BUNDLE ?= build/gpu_bundle
gpu-bundle: gpu-check-lib
	tools/gpu_check/make_bundle.sh bazel-bin/cc/kernels/gpu/libtf_fp16ops_gpu.so $(GPU_BUNDLE)

# On the GPU machine, from a checkout with the bundle built: runs it.
gpu-check:
	$(GPU_BUNDLE)/run.sh $(or $(OUT),$(GPU_BUNDLE)/results)

# The GPU sources compiled as host C++ (TF_FP16OPS_HOST_BUILD: kernel bodies run as loops on the
# CPU) into a ctypes library for tests/test_gpu_host.py. CUTLASS's can_implement is compiled in
# with nvcc when nvcc is found (host code only, no kernel instantiated); without nvcc the table
# tests skip and say so.
NVCC_BIN ?= $(or $(NVCC),$(shell command -v nvcc 2>/dev/null))
GPU_HOST := build/gpu_host
GPU_SRC := cc/kernels/gpu
GPU_HOST_SRCS := direct_conv.cu.cc layout_transform.cu.cc conv2d_gpu.cu.cc c_api.cc host_stubs.cc
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
