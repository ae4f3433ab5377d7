"""Shared pytest set-up: quiet TensorFlow's C++ logging before it is imported."""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# tests/ on sys.path: the areas' test files import the shared helpers as the `support` package.
sys.path.insert(0, os.path.dirname(__file__))
