"""Errors raised by the audit for inputs it cannot read."""

from __future__ import annotations


class AuditInputError(ValueError):
    """An input path or object that the audit cannot read.

    The message names the input and says what is wrong with it (missing file,
    wrong format, truncated or malformed protobuf). The CLI prints it and exits
    with status 2, without a traceback.
    """


class MalformedModelError(AuditInputError):
    """A malformed part found inside a model (node input string, Keras config field).

    Raised by code that does not know which file it reads; the message names the part
    (node, layer, field) and the bad value. `at(source)` gives the `AuditInputError`
    that also names the input, as the loaders and `analyze` raise it.
    """

    def at(self, source: str) -> AuditInputError:
        return AuditInputError(f"{source}: {self}")
