"""Errors raised by the audit for inputs it cannot read."""
from __future__ import annotations


class AuditInputError(ValueError):
    """An input path or object that the audit cannot read.

    The message names the input and says what is wrong with it (missing file,
    wrong format, truncated or malformed protobuf). The CLI prints it and exits
    with status 2, without a traceback.
    """
