#!/usr/bin/env bash
# Installs the system packages the build needs on Debian 12 when they are missing:
# a C++ compiler, Python's venv module, Debian's offline Bazel 4.2.3 with its rule packages,
# Chromium with chromedriver for the dashboard's browser test, the style tools, and clang-19
# (the CUDA compiler of `make build-cuda`).
# As root it runs apt-get; otherwise it prints the exact command to run and fails.
set -euo pipefail

PYTHON="${PYTHON:-python3}"
need=()
command -v g++ >/dev/null 2>&1 || need+=(g++)
command -v bazel >/dev/null 2>&1 || need+=(bazel-bootstrap)
# Debian's Bazel needs the rule packages (tools/configure.py points Bazel at them).
if ! command -v bazel >/dev/null 2>&1 || bazel --version 2>/dev/null | grep -q no_version; then
  [ -d /usr/share/bazel/rules/java ] || need+=(bazel-rules-java)
  [ -d /usr/share/bazel/tools/platforms ] || need+=(bazel-platforms)
fi
# Headless browser test of the TensorBoard dashboard
# (tests/tensorboard_plugin/test_tb_plugin_browser.py): Debian's Chromium and its chromedriver
# (Selenium is given both paths; it downloads nothing).
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need+=(chromium-driver)
# Style tools of `make lint` / `make format`: clang-format for the C++/CUDA sources, npm to
# install the pinned buildifier (npm's @bazel/buildifier) into build/tools.
command -v clang-format >/dev/null 2>&1 || need+=(clang-format)
# The CUDA compiler of `make build-cuda` (clang, as TensorFlow builds its own CUDA kernels).
command -v clang++-19 >/dev/null 2>&1 || need+=(clang-19)
command -v npm >/dev/null 2>&1 || need+=(npm)
if ! "$PYTHON" -c "import ensurepip, venv" >/dev/null 2>&1; then
  need+=("python3-venv")
fi

if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
cmd="apt-get update && apt-get install -y ${need[*]}"
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "install_system_deps: installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
else
  echo "install_system_deps: missing ${need[*]}; run as root:" >&2
  echo "  $cmd" >&2
  exit 1
fi
