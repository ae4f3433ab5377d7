"""Shared pytest set-up: quiet TensorFlow's C++ logging before it is imported."""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# tests/reference.py is imported by several suites as `reference`.
sys.path.insert(0, os.path.dirname(__file__))
